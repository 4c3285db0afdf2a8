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


class RoutingReader(asyncio.StreamReader):
    """A ``StreamReader`` whose leading whole lines go to ``route`` first; the rest are read as usual."""

    route: Callable[[bytes], bool] | None = None
    """Takes a line (with its newline) and says whether it took it; None until the child's rpc exists."""

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        # ``_buffer`` is StreamReader's own: empty means every earlier line has been read.
        if self.route is not None and isinstance(data, bytes) and not self._buffer:  # type: ignore[attr-defined]
            data = self._offer(self.route, data)
            if not data:
                return
        super().feed_data(data)

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
