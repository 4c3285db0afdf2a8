"""A stdio child's stdout with the raw path's replies taken off it as the bytes arrive.

asyncio hands a subprocess pipe's data to its protocol through one more ``call_soon``, and
the stream reader then wakes the task that reads lines, which hands a reply to its waiting
call: three event-loop iterations between the pipe and the call. Here the pipe's data goes
straight to the reader, and the reader offers each whole line to ``route``
(``RawRpc.route``) while nothing is buffered ahead of it; the first line ``route`` leaves,
and everything after it, is buffered for the line-reading task as before, so lines are
still taken in the order the server wrote them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import SupportsIndex

PAUSE_BYTES = 1024 * 1024
"""Unread bytes past which the pipe is paused, so that a server writing faster than its lines are
taken waits in its own write. StreamReader pauses only past twice its limit, and the limit must
fit a whole message (32 MiB): a server flooding notifications cost the daemon 64 MiB, and a reply
behind them waited for all of it. A line longer than this is still read whole: a reader waiting
for the rest of a line resumes the pipe (``StreamReader._wait_for_data``)."""


class RoutingReader(asyncio.StreamReader):
    """A ``StreamReader`` whose leading whole lines go to ``route`` first; the rest are read as
    usual, the pipe paused while more than ``PAUSE_BYTES`` of them wait."""

    route: Callable[[bytes], bool] | None = None
    """Takes a line (with its newline) and says whether it took it; None until the child's rpc exists."""

    # StreamReader's own, which typeshed leaves out.
    _buffer: bytearray
    _paused: bool
    _transport: asyncio.ReadTransport | None

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        # An empty buffer means every earlier line has been read.
        if self.route is not None and isinstance(data, bytes) and not self._buffer:
            data = self._offer(self.route, data)
            if not data:
                return
        super().feed_data(data)
        if not self._paused and self._transport is not None and len(self._buffer) > PAUSE_BYTES:
            self._transport.pause_reading()
            self._paused = True

    def _maybe_resume_transport(self) -> None:
        # Called by StreamReader as lines are taken: resume only once most of the backlog is gone.
        if self._paused and self._transport is not None and len(self._buffer) <= PAUSE_BYTES // 2:
            self._paused = False
            self._transport.resume_reading()

    @staticmethod
    def _offer(route: Callable[[bytes], bool], data: bytes) -> bytes:
        """Hand ``route`` the whole lines at the front of ``data``; returns what it did not take."""
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            line = data[start : end + 1]
            if line.strip() and not route(line):
                break
            start = end + 1
        return data[start:] if start else data


class DirectPipe(asyncio.Protocol):
    """A read pipe's protocol that feeds ``feed`` in the read callback itself; the pipe's end
    still goes the usual way (``inner``, asyncio's own protocol for the pipe)."""

    def __init__(self, inner: asyncio.BaseProtocol, feed: Callable[[bytes], None]) -> None:
        self._inner = inner
        self._feed = feed

    def data_received(self, data: bytes) -> None:
        self._feed(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._inner.connection_lost(exc)
