"""The HTTP listener's gate: connections are accepted here, a few per turn of the loop, and only those
whose first request head carries the token are handed to uvicorn.

asyncio's own server accepted up to its backlog (2048) connections per turn of the loop, each as a
task, a transport and an h11 protocol: a local process opening ~17,000 tokenless connections a
second (each sending a request and closing) held every host's kept-alive call for 5 s and let 0 of
10 new ones through. Here a connection costs a few system calls until its head is whole: the head
is peeked at (left in the socket for uvicorn to read), one without the token is answered 401 on the
spot and closed, and one whose head has not all come waits in a bounded pool (``PENDING``: a
newcomer past it drops the oldest) for at most ``HEAD_TIMEOUT``. ``ACCEPTS_PER_TURN`` bounds the
work one turn of the loop does for newcomers, so an established connection's request waits behind
that much at most.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import re
import socket
from collections.abc import Callable

import structlog

from mcpd.front.http.token import bearer_matches

log = structlog.get_logger("mcpd.front")

ACCEPTS_PER_TURN = 64
"""Connections accepted per turn of the loop (what waits stays in the kernel's queue)."""
PENDING = 256
"""Connections at once whose request head has not all come: a newcomer past it drops the oldest,
so a process without the token can never keep a host's new connection out."""
HEAD_TIMEOUT = 2.0
"""Seconds a connection has to send its first request head (a host sends it at once)."""
MAX_HEAD = 16 * 1024
"""Largest first request head (h11's own limit): a longer one is refused."""
DROPS_LOGGED_EVERY = 60.0
"""Seconds between warnings about pending connections dropped (one per drop would flood the log)."""
PAUSE_ON_EXHAUSTION = 1.0
"""Seconds accepting stops when the process is out of file descriptors or memory."""

_UNAUTHORIZED = (
    b"HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
)
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def head_carries(data: bytes, token: bytes) -> bool | None:
    """Whether the first request head in ``data`` carries the token: None while it is not whole.
    Lenient where h11 is strict (it parses the head again, and ``Guard`` checks the token again)."""
    end = _HEAD_END.search(data)
    if end is None:
        return False if len(data) >= MAX_HEAD else None
    for line in data[: end.start()].split(b"\n")[1:]:
        name, colon, value = line.partition(b":")
        if colon and name.strip().lower() == b"authorization":
            return bearer_matches(value.strip().decode("latin-1"), token)
    return False


class Gate:
    """Accepts from ``listener`` and gives ``admit`` each connection whose first head carries ``token``."""

    def __init__(
        self,
        listener: socket.socket,
        token: str,
        admit: Callable[[socket.socket], None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._listener = listener
        self._token = token.encode()
        self._admit = admit
        self._loop = loop
        # Oldest first (dicts keep their order); each with the loop time its head is due by.
        self._pending: dict[socket.socket, float] = {}
        self._sweep: asyncio.TimerHandle | None = None
        self._resume: asyncio.TimerHandle | None = None
        self._drops = 0
        self._logged_at = -DROPS_LOGGED_EVERY

    def open(self) -> None:
        self._loop.add_reader(self._listener.fileno(), self._accept)

    def close(self) -> None:
        """Stop accepting, close the listener and every connection still pending."""
        for timer in (self._sweep, self._resume):
            if timer is not None:
                timer.cancel()
        with contextlib.suppress(ValueError, OSError):  # closed already
            self._loop.remove_reader(self._listener.fileno())
        self._listener.close()
        for conn in list(self._pending):
            self._forget(conn)
            conn.close()

    def _accept(self) -> None:
        for _ in range(ACCEPTS_PER_TURN):
            try:
                conn, _address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _EXHAUSTED:
                    # As asyncio does: stop for a while rather than spin on a listener we cannot serve.
                    log.warning("http.accept_paused", error=str(exc), seconds=PAUSE_ON_EXHAUSTION)
                    self._loop.remove_reader(self._listener.fileno())
                    self._resume = self._loop.call_later(PAUSE_ON_EXHAUSTION, self.open)
                    return
                continue  # that one connection failed (ECONNABORTED and the like)
            conn.setblocking(False)
            self._look(conn)

    def _look(self, conn: socket.socket) -> None:
        """Decide on ``conn`` from what has come of its head: admit, refuse, or wait for more."""
        try:
            data = conn.recv(MAX_HEAD, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            data = None
        except OSError:
            self._drop(conn)
            return
        if data == b"":
            self._drop(conn)
            return
        verdict = None if data is None else head_carries(data, self._token)
        if verdict is None:
            self._wait(conn)
        elif verdict:
            self._forget(conn)
            self._admit(conn)
        else:
            self._forget(conn)
            self._refuse(conn)

    def _wait(self, conn: socket.socket) -> None:
        if conn in self._pending:
            return
        if len(self._pending) >= PENDING:
            oldest = next(iter(self._pending))
            self._drop(oldest)
            self._dropped()
        self._pending[conn] = self._loop.time() + HEAD_TIMEOUT
        self._loop.add_reader(conn.fileno(), self._look, conn)
        if self._sweep is None:
            self._sweep = self._loop.call_later(HEAD_TIMEOUT, self._expire)

    def _expire(self) -> None:
        """Drop the pending connections whose head is overdue (the oldest come first)."""
        self._sweep = None
        now = self._loop.time()
        for conn, due in list(self._pending.items()):
            if due > now:
                self._sweep = self._loop.call_at(due, self._expire)
                return
            self._drop(conn)

    def _forget(self, conn: socket.socket) -> None:
        if self._pending.pop(conn, None) is not None:
            self._loop.remove_reader(conn.fileno())

    def _drop(self, conn: socket.socket) -> None:
        self._forget(conn)
        conn.close()

    def _refuse(self, conn: socket.socket) -> None:
        """Answer 401 as ``Guard`` would, and close: the request is read first (what has come of it),
        as a close with unread input resets the connection and the answer can be lost."""
        with contextlib.suppress(OSError):
            conn.recv(MAX_HEAD)
            conn.send(_UNAUTHORIZED)
        conn.close()

    def _dropped(self) -> None:
        self._drops += 1
        now = self._loop.time()
        if now - self._logged_at >= DROPS_LOGGED_EVERY:
            log.warning(
                "http.anonymous_connections_dropped",
                dropped=self._drops,
                limit=PENDING,
                why="connections without a whole request head, oldest first",
            )
            self._drops = 0
            self._logged_at = now
