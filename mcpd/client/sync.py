"""The blocking client: a plain socket, one request at a time, no event loop and no threads.

It starts fast (the CLI uses it) and suits scripts. Its methods are the ones declared in
``mcpd.client.api``, shared with ``AsyncClient``; for concurrent requests use that one.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self, TypeVar

from mcpd.client import _wire
from mcpd.client.answers import Answers, SyncAskHandler, answer_sync
from mcpd.client.api import Api
from mcpd.errors import CallTimeout, McpdError, ProtocolError, TransportError
from mcpd.ipc.endpoint import peer_pid
from mcpd.ipc.framing import MAX_CLIENT_FRAME, FrameBuffer
from mcpd.model.logs import LOGS_NOTIFICATION, LogEntry
from mcpd.model.protocol import (
    EVENT_NOTIFICATION,
    PROGRESS_NOTIFICATION,
    HelloResult,
    Message,
    Notification,
    Response,
)
from mcpd.model.requests import SERVER_REQUEST_NOTIFICATION
from mcpd.model.servers import Event
from mcpd.readsize import READ_SIZE

T = TypeVar("T")
R = TypeVar("R")

KEPT = 1024
"""Events and log lines kept at most while requests wait (the async client's default backlog)."""


class _Patience:
    """How long a request waits for the daemon's next bytes: until its timeout, looking whether the
    daemon's process is stopped after ``LOOK_AFTER`` of silence (``look`` raises ``DaemonStopped``
    then), asking the daemon whether it is there after ``PROBE_AFTER`` (``ping``); no answer to that
    either fails the request (the daemon is frozen, and the request would wait out its whole timeout)."""

    def __init__(self, timeout: float, ping: Callable[[], None], look: Callable[[], None]) -> None:
        self._deadline = time.monotonic() + timeout
        self._ping = ping
        self._look = look
        self._looked = False
        self._pinged = False

    def wait(self) -> float:
        """Seconds to wait for the next bytes; ``TimeoutError`` once the request's time is up."""
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if not self._looked:
            return min(left, _wire.LOOK_AFTER)
        return min(left, _wire.PROBE_WAIT if self._pinged else _wire.PROBE_AFTER - _wire.LOOK_AFTER)

    def heard(self) -> None:
        self._looked = self._pinged = False

    def send(self, sock: socket.socket, data: bytes) -> None:
        """Send ``data`` while the daemon takes some of it every ``PROBE_AFTER + PROBE_WAIT`` (no ping
        could be sent behind a request sent in part: a daemon that takes nothing that long is frozen)."""
        stalled = _wire.PROBE_AFTER + _wire.PROBE_WAIT
        with memoryview(data) as view:
            sent = 0
            while sent < len(view):
                left = self._deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                sock.settimeout(min(left, stalled))
                try:
                    sent += sock.send(view[sent:])
                except TimeoutError:
                    if left <= stalled:
                        raise
                    self._look()
                    raise _wire.frozen(f"it took none of a request for {stalled:g}s") from None

    def silent(self) -> None:
        """Nothing came within ``wait()``: look, then ask, or give up if the daemon was asked already."""
        self._look()
        if self._pinged:
            raise _wire.frozen()
        if not self._looked:
            self._looked = True
            if _wire.PROBE_AFTER > _wire.LOOK_AFTER:
                return  # the rest of PROBE_AFTER is waited before the ping
        if self._deadline > time.monotonic():
            self._ping()
            self._pinged = True


class Client(Api):
    """``with Client() as mcpd: mcpd.status()``. Raises the daemon's errors as mcpd exceptions.

    ``on_sampling``, ``on_elicitation`` and ``roots`` answer what a server asks during this
    client's tool calls (see ``mcpd.client.answers``); the callbacks run while the call waits.
    """

    def __init__(
        self,
        socket_path: str | Path | None = None,
        *,
        name: str = "mcpd-client",
        on_sampling: SyncAskHandler | None = None,
        on_elicitation: SyncAskHandler | None = None,
        roots: Sequence[str | Mapping[str, str]] | None = None,
    ) -> None:
        self.path = _wire.resolve_socket(socket_path)
        self.name = name
        self.answers: Answers[SyncAskHandler] = Answers(on_sampling, on_elicitation, roots)
        self.hello_result: HelloResult | None = None
        self._sock: socket.socket | None = None
        self._frames = FrameBuffer(MAX_CLIENT_FRAME)
        self._pending: deque[bytes] = deque()
        self._kept: deque[Notification] = deque()
        """Events and log lines that arrived while a request waited: ``events()``, ``follow_logs()``'s."""
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._owner = threading.Lock()
        """Held while the connection changes hands: who closes a socket is decided under it."""
        self._daemon_pid: int | None = None
        """The daemon's process, whose state a request that hears nothing looks at (``_look``)."""
        self._reading: socket.socket | None = None
        """The socket a follow (``events()``, ``follow_logs()``) is reading: close() only shuts it
        down, and the follow closes it. Closed under it, its number could be the next connection's
        by the time the follow waits on it again (it did, for 10 s, after close() then connect())."""

    def connect(self, timeout: float = _wire.DEFAULT_TIMEOUT) -> Self:
        self.close()  # connected already: that connection ends
        self._sock = _wire.connect_blocking(self.path, timeout)
        self._daemon_pid = peer_pid(self._sock)
        try:
            self.hello_result = self.request(_wire.hello(self.name, timeout))
            # Its own word: a listener systemd made (socket activation) has systemd's pid.
            self._daemon_pid = self.hello_result.pid
            capabilities = self.answers.capabilities()
            if capabilities.names():
                self.request(_wire.declare_capabilities(capabilities))
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Close the connection; a thread blocked in ``events()`` or ``follow_logs()`` then ends with
        ``TransportError``."""
        with self._owner:
            sock, self._sock = self._sock, None
            followed = sock is not None and sock is self._reading
        if sock is not None:
            # Shut down first: a close alone leaves another thread's recv() blocked for good.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            if not followed:
                sock.close()
        self._forget()

    def _forget(self) -> None:
        # What was read of that connection (half a frame perhaps) would garble the next one's.
        self._frames = FrameBuffer(MAX_CLIENT_FRAME)
        self._pending.clear()
        self._kept.clear()

    def __enter__(self) -> Self:
        return self.connect()

    def __exit__(self, *exc: tuple[type[BaseException], BaseException, TracebackType] | None) -> None:
        self.close()

    def _run(self, call: _wire.Call[R], pick: Callable[[R], T]) -> T:
        return pick(self.request(call))

    def request(self, call: _wire.Call[T]) -> T:
        """Send one call and wait for its answer; progress for it goes to ``call.on_progress``."""
        with self._lock:
            # The socket is taken under the lock: another thread's request may have closed it.
            sock = self._socket()
            request_id = next(self._ids)
            try:
                ping = _wire.ping()
                patience = _Patience(
                    call.timeout, lambda: sock.sendall(ping.request(next(self._ids))), self._look
                )
                patience.send(sock, call.request(request_id))
                response = self._receive(sock, request_id, call, patience)
            except TimeoutError:
                self.close()
                raise CallTimeout(f"no answer to {call.method} within {call.timeout:g}s") from None
            except TransportError:  # the daemon went or stopped answering: its connection is no use
                self.close()
                raise
            except OSError as exc:
                self.close()
                raise TransportError(f"lost the daemon connection: {exc}") from None
        return _wire.result_of(response, call)

    def events(self, *, everything: bool = True) -> Iterator[Event]:
        """Yield events as they come (blocking): with ``everything``, subscribe to state, tool-list and
        call-activity events first; without, only what was asked for otherwise (``subscribe_resource``)."""
        if everything:
            self.request(_wire.subscribe())
        sock = self._socket()
        while True:
            message = self._next_kept(sock)
            if isinstance(message, Notification) and message.method == EVENT_NOTIFICATION:
                yield _wire.decode_event(message.params)

    def follow_logs(self, server: str, limit: int | None = None) -> Generator[LogEntry, None, None]:
        """``server``'s latest ``limit`` log entries (all it keeps when None), then each new one as
        it comes (blocking). Ends when the server leaves the config; leaving the loop stops the follow."""
        self.request(_wire.logs_follow(server, limit))
        sock = self._socket()
        try:
            while True:
                message = self._next_kept(sock)
                if isinstance(message, Notification) and message.method == LOGS_NOTIFICATION:
                    lines = _wire.decode_log_lines(message.params)
                    if lines.server == server:
                        yield from lines.entries
                        if lines.ended:
                            return
        except GeneratorExit:
            # The caller broke out of the loop: its connection goes on, this follow need not.
            with contextlib.suppress(McpdError):
                self.request(_wire.logs_unfollow(server))
            raise

    def _socket(self) -> socket.socket:
        if self._sock is None:
            raise TransportError("the client is not connected")
        return self._sock

    def _receive(
        self, sock: socket.socket, request_id: int, call: _wire.Call[T], patience: _Patience
    ) -> Response:
        """The answer to ``request_id``; the ping's answer, like any other id's, is skipped."""
        while True:
            message = self._next_message(sock, patience)
            if isinstance(message, Response) and message.id in (request_id, None):
                return message
            if isinstance(message, Notification) and message.method in (
                EVENT_NOTIFICATION,
                LOGS_NOTIFICATION,
            ):
                if len(self._kept) < KEPT:  # beyond, the reader is far behind: dropped, as in AsyncClient
                    self._kept.append(message)
                continue
            if isinstance(message, Notification) and message.method == SERVER_REQUEST_NOTIFICATION:
                # Answered at once; the daemon's acknowledgement is skipped like any other id's.
                reply = answer_sync(self.answers, _wire.decode_ask(message.params))
                sock.sendall(_wire.server_reply(reply).request(next(self._ids)))
                continue
            if (
                call.on_progress is not None
                and isinstance(message, Notification)
                and message.method == PROGRESS_NOTIFICATION
            ):
                update = _wire.decode_progress(message.params)
                if update.request == request_id:
                    call.on_progress(update)

    def _next_kept(self, sock: socket.socket) -> Message:
        """The next message for ``events()`` or ``follow_logs()``: first those a request set aside.

        Waited for without a deadline (the next event may be hours away), but the daemon is asked
        whether it is there after ``PROBE_AFTER`` of silence, as a request asks: a frozen daemon
        (SIGSTOP, a hung loop) ends the follow with ``TransportError`` instead of blocking it for ever."""
        if self._kept:
            return self._kept.popleft()
        patience = _Patience(math.inf, lambda: self._ping(sock), self._look)
        with self._owner:
            if self._sock is not sock:  # closed by another thread since the follow began
                raise TransportError("lost the daemon connection: the client was closed")
            self._reading = sock
        try:
            return self._next_message(sock, patience)
        except TransportError:  # frozen or gone: its connection is no use, as after a request's probe
            self._drop(sock)
            raise
        except OSError as exc:  # the daemon went, or another thread closed the client
            self._drop(sock)
            raise TransportError(f"lost the daemon connection: {exc}") from None
        finally:
            with self._owner:
                self._reading = None
                if self._sock is not sock:  # close() left it to this follow
                    sock.close()

    def _drop(self, sock: socket.socket) -> None:
        """Disconnect the client if ``sock`` is still its connection, not one connect() made since;
        the follow closes ``sock`` on its way out."""
        with self._owner:
            if self._sock is not sock:
                return
            self._sock = None
            self._forget()

    def _look(self) -> None:
        """Raise ``DaemonStopped`` if the daemon's process is stopped."""
        error = _wire.stopped(self._daemon_pid)
        if error is not None:
            raise error

    def _ping(self, sock: socket.socket) -> None:
        """Ask whether the daemon is there; under the lock, so its bytes never land inside those of
        another thread's request. The answer is skipped like any other id's."""
        with self._lock:
            sock.sendall(_wire.ping().request(next(self._ids)))

    def _next_message(self, sock: socket.socket, patience: _Patience | None = None) -> Message:
        while not self._pending:
            data = self._recv(sock, patience)
            if not data:
                raise TransportError("the daemon closed the connection")
            try:
                self._pending.extend(self._frames.feed(data))
            except ProtocolError:
                raise TransportError("the daemon sent a malformed frame") from None
        return _wire.decode_message(self._pending.popleft())

    @staticmethod
    def _recv(sock: socket.socket, patience: _Patience | None) -> bytes:
        """The next bytes; with ``patience``, within its bounds (else the socket's own timeout)."""
        if patience is None:
            return sock.recv(READ_SIZE)
        while True:
            sock.settimeout(patience.wait())
            try:
                data = sock.recv(READ_SIZE)
            except TimeoutError:
                patience.silent()
                continue
            patience.heard()
            return data
