"""uvicorn's HTTP/1.1 protocol with the limits it lacks, all checked before any token is.

- At most ``max_connections`` are open: uvicorn's own limit answers 503 to requests beyond it,
  but keeps every connection that has sent none, each an open file of the daemon's.
- A connection must send a whole request head within ``timeout`` of opening, and of each
  answer's end: uvicorn waits for ever on a connection that sends nothing, or a byte now
  and then, and a thousand such connections (no token needed to open them) took every slot.
- A connection whose pending output has not shrunk for ``timeout`` is aborted: asyncio takes a
  whole answer into memory at once, so a host that never reads held each answer (megabytes)
  for as long as it kept the connection, and a close would wait for it to read.
"""

from __future__ import annotations

import asyncio

import structlog
from uvicorn.protocols.http.h11_impl import H11Protocol

log = structlog.get_logger("mcpd.front")

CHECKS = 4
"""Looks at the pending output per ``timeout``."""


def limited_protocol(timeout: float, max_connections: int) -> type[H11Protocol]:
    """The protocol class for uvicorn's ``http`` setting."""

    class Limited(H11Protocol):
        _head_due: asyncio.TimerHandle | None = None
        _watch: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.abort()
                return
            self._await_head()
            self._stuck_since: float | None = None
            self._pending_before = 0
            self._watch = self.loop.call_later(timeout / CHECKS, self._check_output)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            for timer in (self._head_due, self._watch):
                if timer is not None:
                    timer.cancel()
            super().connection_lost(exc)

        def _await_head(self) -> None:
            if self._head_due is not None:
                self._head_due.cancel()
            self._head_due = self.loop.call_later(timeout, self._head_overdue)

        def _head_overdue(self) -> None:
            if self.cycle is None or self.cycle.response_complete:  # no request is being served
                self.transport.abort()

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
