"""Giving memory back to the system once large frames and crowds of clients are gone.

CPython frees a large frame as soon as it is handled, but glibc keeps what was freed for
later reuse (heap tops, per-thread arenas), so the daemon's RSS stayed where the largest
burst had put it: 73 MB grew to ~200 MB and stayed. ``malloc_trim(0)`` hands the free
pages back. ``Trimmer`` calls it once a burst is over: after ``TRIM_AFTER`` bytes of large
frames or closed connections, ``TRIM_DELAY`` seconds after the last of them, in a worker
thread (ctypes releases the GIL, so the event loop runs on meanwhile). Where the C
library has no ``malloc_trim`` (macOS, musl) this does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
from collections.abc import Callable

import anyio

TRIM_AFTER = 8 * 1024 * 1024
"""Bytes of large frames and closed connections that call for a trim."""
CONNECTION_BYTES = 64 * 1024
"""What a closed connection counts for."""
TRIM_DELAY = 1.0


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


class Trimmer:
    """``note(n)`` after freeing ``n`` bytes' worth; a trim follows once a burst has passed."""

    def __init__(self) -> None:
        self._trim = _malloc_trim()
        self._noted = 0
        self._timer: asyncio.TimerHandle | None = None
        self._running: asyncio.Task[None] | None = None

    def note(self, amount: int) -> None:
        if self._trim is None:
            return
        self._noted += amount
        if self._noted < TRIM_AFTER:
            return
        # Each new note pushes the trim back: trimming in the middle of a burst is wasted.
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(TRIM_DELAY, self._start)

    def _start(self) -> None:
        self._timer = None
        if self._running is None or self._running.done():
            self._noted = 0
            self._running = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        trim = self._trim
        assert trim is not None
        await anyio.to_thread.run_sync(trim, 0)

    async def aclose(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._running is not None:
            await self._running
