"""Data that discovery reads once, at its first use, and keeps: the query lexicons.

The English words (``spelling``) and the thesaurus (``synonyms``) are read in a worker thread at the
first ranked query; until then, and for good if reading failed, ranking goes on without them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

import structlog

log = structlog.get_logger("mcpd.discovery")

T = TypeVar("T")


class ReadOnce(Generic[T]):
    """``read()``'s value, read at the first ``load`` and kept; None, logged as ``event``, when it
    raised one of ``errors`` (a file missing or damaged), so that it is not read again each query."""

    __slots__ = ("_errors", "_event", "_lock", "_read", "_value")

    def __init__(self, read: Callable[[], T], errors: tuple[type[Exception], ...], event: str) -> None:
        self._read = read
        self._errors = errors
        self._event = event
        self._lock = threading.Lock()
        self._value: list[T | None] = []
        """[value] once ``load`` ran, [None] when it could not read it."""

    def load(self) -> T | None:
        """The value, read at the first call (call it in a worker thread); None without it."""
        with self._lock:
            if not self._value:
                try:
                    self._value.append(self._read())
                except self._errors as exc:
                    log.warning(self._event, error=str(exc))
                    self._value.append(None)
            return self._value[0]

    def tried(self) -> bool:
        """Whether ``load`` has run (whatever it found)."""
        return bool(self._value)

    def loaded(self) -> T | None:
        """The value if ``load`` has read it, else None; never waits."""
        return self._value[0] if self._value else None
