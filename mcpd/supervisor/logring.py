"""A server's recent log lines in a bounded ring: stderr lines and MCP log messages.

Bounded twice, by entries and by characters, whichever fills first, so a flood of short
lines or a few huge ones cost the same small memory; a line longer than ``MAX_LINE`` is
cut with a marker. Adding is O(1) amortised and never waits; followers wait for the ring
to grow and read what they have not seen, so a slow follower skips lines (its entries'
``seq`` shows the gap) instead of making the ring or a queue grow.
"""

from __future__ import annotations

import itertools
import time
from collections import deque

import anyio

from mcpd.model.logs import LogEntry, LogSource

MAX_ENTRIES = 1000
MAX_CHARS = 256 * 1024
"""Characters of text (and logger names) kept per server."""
MAX_LINE = 8 * 1024
"""Characters of one entry's text; the rest is cut."""


def clip_line(text: str, limit: int = MAX_LINE) -> str:
    """``text``, or its first ``limit`` characters and a marker saying how many were cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} more characters cut]"


def _cost(entry: LogEntry) -> int:
    return len(entry.text) + len(entry.logger or "")


class LogRing:
    """The latest entries of one server, oldest first; ``seq`` numbers them from 0."""

    def __init__(
        self, *, max_entries: int = MAX_ENTRIES, max_chars: int = MAX_CHARS, max_line: int = MAX_LINE
    ) -> None:
        self._entries: deque[LogEntry] = deque()
        self._max_entries = max_entries
        self._max_chars = max_chars
        self._max_line = max_line
        self._chars = 0
        self._next = 0
        self._grew: anyio.Event | None = None
        self._closed = False

    @property
    def next_seq(self) -> int:
        """The ``seq`` the next entry will have."""
        return self._next

    @property
    def chars(self) -> int:
        """Characters held now (never above ``max_chars``)."""
        return self._chars

    @property
    def closed(self) -> bool:
        """The server was removed from the config: no more entries will come."""
        return self._closed

    def __len__(self) -> int:
        return len(self._entries)

    def add(
        self, source: LogSource, text: str, *, level: str | None = None, logger: str | None = None
    ) -> None:
        """Keep one line, dropping the oldest ones past either bound, and wake the followers."""
        entry = LogEntry(
            seq=self._next,
            ts=time.time(),
            source=source,
            text=clip_line(text, self._max_line),
            level=level,
            logger=clip_line(logger, self._max_line) if logger else None,
        )
        self._next += 1
        self._entries.append(entry)
        self._chars += _cost(entry)
        while len(self._entries) > self._max_entries or self._chars > self._max_chars:
            self._chars -= _cost(self._entries.popleft())
        if self._grew is not None:
            self._grew.set()
            self._grew = None

    def last(self, limit: int | None) -> list[LogEntry]:
        """The most recent ``limit`` entries (all of them when None), oldest first."""
        count = len(self._entries) if limit is None else min(limit, len(self._entries))
        return list(itertools.islice(self._entries, len(self._entries) - count, None))

    def since(self, seq: int) -> list[LogEntry]:
        """The entries numbered ``seq`` and after that are still held, oldest first."""
        if not self._entries:
            return []
        skip = max(0, seq - self._entries[0].seq)
        return list(itertools.islice(self._entries, skip, None))

    async def wait_beyond(self, seq: int) -> None:
        """Wait until an entry numbered ``seq`` or later has been added, or the ring is closed."""
        while self._next <= seq and not self._closed:
            if self._grew is None:
                self._grew = anyio.Event()
            await self._grew.wait()

    def close(self) -> None:
        """The server is gone from the config: followers wake up and end."""
        self._closed = True
        if self._grew is not None:
            self._grew.set()
            self._grew = None
