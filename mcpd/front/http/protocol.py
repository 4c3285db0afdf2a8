"""uvicorn's HTTP/1.1 protocol with the limits it lacks, all checked before any token is.

- A connection reaches the protocol only once ``gate.Gate`` has seen the token in its first
  request head (h11 parses it again here). One whose parsed head has the token after all is
  *trusted*, counted against ``max_connections``; one without it is answered 401 by ``Guard``
  and closed after that one answer. uvicorn's ``limit_concurrency`` is not used: it answered
  503 even on hosts' established connections once connections without the token filled it.
- A trusted connection must send a whole request head within ``timeout`` of each answer's
  end: uvicorn waits for ever on a connection that sends nothing, or a byte now and then.
- A connection reads at most ``HELD_INPUT`` bytes ahead of the request being served: uvicorn
  stops reading for a pipelined request, but starts again whenever the app reads its body (and
  h11 keeps all it is given), so a host that pipelined megabytes of requests and read no answer
  had them all taken into memory (4 connections x 43 MB: +163 MB of RSS). What is not read
  waits in the kernel, and the host's writes block.
- Neither wait (nor uvicorn's keep-alive) closes a connection whose next request has come and not
  been read yet: after a SIGSTOP of the daemon past them, every host's request on a kept-alive
  connection was dropped unanswered (the MCP SDK's host lost its session to the ReadError).
- A connection whose pending output has not shrunk for ``timeout`` is aborted: asyncio takes a
  whole answer into memory at once, so a host that never reads held each answer (megabytes)
  for as long as it kept the connection, and a close would wait for it to read.
"""

from __future__ import annotations

import array
import asyncio
import fcntl
import functools
import termios

import structlog
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from mcpd.front.http.token import bearer_matches

log = structlog.get_logger("mcpd.front")

ABORT = "mcpd.abort"
"""The ASGI scope extension whose ``abort`` drops the connection mid-answer (a host that stopped
reading), quietly: an app that just returned left uvicorn to log an error."""
CHECKS = 4
"""Looks at the pending output per ``timeout``."""
HELD_INPUT = 64 * 1024
"""Bytes of a connection's input read ahead of the request being served (pipelined requests, at
most one read of the socket more): a body is read as the app takes it, so this bounds the rest."""


def _unread(transport: asyncio.BaseTransport) -> bool:
    """Whether bytes have come on the connection that the loop has not read yet."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    waiting = array.array("i", [0])
    try:
        fcntl.ioctl(sock.fileno(), termios.FIONREAD, waiting)
    except OSError:
        return False
    return waiting[0] > 0


class _Flow(FlowControl):
    """uvicorn's flow control, that resumes reading only while little input is held."""

    def __init__(self, transport: asyncio.Transport, protocol: _Holding) -> None:
        super().__init__(transport)
        self._protocol = protocol

    def resume_reading(self) -> None:
        if self._protocol.input_held():
            self._protocol.holding = True
            return
        super().resume_reading()


class _Holding(H11Protocol):
    """What ``_Flow`` asks of the protocol."""

    holding = False
    """Reading was paused (or kept paused) because ``HELD_INPUT`` bytes are held."""

    def held_bytes(self) -> int:
        # h11 keeps what it has not parsed in its receive buffer; its public ``trailing_data``
        # copies it on every look, so the buffer is measured where it is there to measure.
        buffer = getattr(self.conn, "_receive_buffer", None)
        return len(buffer) if buffer is not None else len(self.conn.trailing_data[0])

    def input_held(self) -> bool:
        return self.held_bytes() > HELD_INPUT


def limited_protocol(timeout: float, max_connections: int, token: str) -> type[H11Protocol]:
    """The protocol class for uvicorn's ``http`` setting: ``max_connections`` trusted ones at once."""
    secret = token.encode()
    trusted: set[Limited] = set()  # shared by every connection of this server

    class Limited(_Holding):
        _head_due: asyncio.TimerHandle | None = None
        _watch: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.flow = _Flow(transport, self)
            self._await_head()
            self._stuck_since: float | None = None
            self._pending_before = 0
            self._watch = self.loop.call_later(timeout / CHECKS, self._check_output)

        def _next_waiting(self) -> bool:
            """The next request has come, none of it read yet: it came as a wait for it ran out, or
            while the daemon was stopped (SIGSTOP) past it, and the loop reads it next."""
            return not self.held_bytes() and _unread(self.transport)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.input_held() and not self.transport.is_closing():
                self.holding = True
                # uvicorn resumes the transport itself in one place, leaving its flag set.
                self.flow.read_paused = False
                self.flow.pause_reading()

        def handle_events(self) -> None:
            cycle = self.cycle
            super().handle_events()
            if self.cycle is not cycle and self.cycle is not None:
                extensions = self.scope.setdefault("extensions", {})
                extensions[ABORT] = {"abort": functools.partial(self._abort, self.cycle)}
            if self.holding and not self.input_held():
                # h11 took requests off what it held: read on (uvicorn pauses again if it must).
                self.holding = False
                self.flow.resume_reading()
            if self not in trusted and self.cycle is not cycle and self.cycle is not None:
                self._present(dict(self.scope["headers"]).get(b"authorization"))

        def _present(self, authorization: bytes | None) -> None:
            """The first request head came: with the token, the connection becomes trusted."""
            if authorization is None or not bearer_matches(authorization.decode("latin-1"), secret):
                return  # Guard answers 401, and the connection closes after it
            if len(trusted) >= max_connections:
                log.warning("http.connections_full", limit=max_connections)
                self.transport.abort()
                return
            trusted.add(self)

        def _abort(self, cycle: RequestResponseCycle) -> None:
            # Marked gone first: uvicorn would log an app that returns mid-answer as an error.
            cycle.disconnected = True
            self.transport.abort()

        def on_response_complete(self) -> None:
            if self not in trusted:
                # One answer per connection without the token: asking again must not keep its slot.
                self.server_state.total_requests += 1
                self.transport.close()
                return
            super().on_response_complete()
            self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            trusted.discard(self)
            for timer in (self._head_due, self._watch):
                if timer is not None:
                    timer.cancel()
            super().connection_lost(exc)

        def _await_head(self) -> None:
            if self._head_due is not None:
                self._head_due.cancel()
            self._head_due = self.loop.call_later(timeout, self._head_overdue)

        def _head_overdue(self) -> None:
            if self._next_waiting():
                # Closed now, it would be a request sent and never answered (the host's ReadError).
                # Its head gets the same time again: a connection trickling one has read some by then.
                self._await_head()
            elif self.cycle is None or self.cycle.response_complete:  # no request is being served
                self.transport.abort()

        def timeout_keep_alive_handler(self) -> None:
            # uvicorn's close of a connection idle past its keep-alive wait, but for a request waiting.
            if not self._next_waiting():
                super().timeout_keep_alive_handler()

        def _check_output(self) -> None:
            pending = self.transport.get_write_buffer_size()
            now = self.loop.time()
            if pending == 0 or pending < self._pending_before:
                self._stuck_since = None
            elif self._stuck_since is None:
                self._stuck_since = now
            elif now - self._stuck_since >= timeout:
                log.warning("http.host_not_reading", pending=pending, timeout_s=timeout)
                self.transport.abort()
                return
            self._pending_before = pending
            self._watch = self.loop.call_later(timeout / CHECKS, self._check_output)

    return Limited
