"""Giving memory back once large messages and crowds of clients are gone, without a pause in the crowd.

Process-wide, as the collector and the C heap are: the socket server runs the ``Reclaimer`` and
notes its clients' large frames, and whatever else handles large messages (a server's stdout
lines, in the supervisor, which must not import the socket server) tells it with ``freed``.

Full garbage collections. ``gc.freeze()`` at serve leaves the start-up heap out of them, but
what they still walk grows with the clients connected: ~45 tracked objects and ~30 us of
collection per connection, a 37 ms pause in one loop turn with 1,000 connected (measured).
CPython starts one whenever enough objects have outlived the young generations, which is in
the middle of a crowd arriving, when the heap is largest. So ``Reclaimer`` turns automatic
full collections off and runs them itself once a burst is over, when the heap is back to
its usual size; and, bursts or not, at most every ``COLLECT_PERIOD`` when CPython would have
wanted one, so that cyclic garbage is never kept long. Young collections stay automatic:
their cost is bounded by their thresholds (1-3 ms measured).

``malloc_trim``. CPython frees a large frame as soon as it is handled, but glibc keeps what
was freed for later reuse (heap tops, per-thread arenas), so the daemon's RSS stayed where
the largest burst had put it: 73 MB grew to ~200 MB and stayed. ``malloc_trim(0)`` hands
the free pages back, after the collection, so that what it freed goes back too. It runs in
a worker thread (ctypes releases the GIL, so the event loop runs on meanwhile), after a
burst of at least ``TRIM_AFTER`` bytes of large frames or closed connections. Where the C
library has no ``malloc_trim`` (macOS, musl) there is no trim.

A burst is over ``QUIET`` seconds after its last ``note``, or ``MAX_DEFER`` after its first
(a steady trickle of clients must not put collections off for ever).
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable

import anyio
from anyio.abc import TaskStatus

TRIM_AFTER = 8 * 1024 * 1024
"""Bytes of large frames and closed connections that call for a collection and a trim."""
CONNECTION_BYTES = 64 * 1024
"""What a closed connection counts for."""
QUIET = 1.0
MAX_DEFER = 10.0
COLLECT_PERIOD = 30.0
"""Least time between two full collections that no burst called for."""
_NEVER = 2**31 - 1
"""A gen-2 threshold (gen-1 collections between two full ones) that is never reached."""


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_FULL_THRESHOLD = gc.get_threshold()[2]
"""CPython's own rule for full collections, as at import: restored when the last server stops."""
_running: list[Reclaimer] = []
"""Reclaimers running in this process (two servers may overlap, in tests)."""


def freed(amount: int) -> None:
    """A large message of ``amount`` bytes was handled: the running reclaimers count it in the burst."""
    for reclaimer in _running:
        reclaimer.note(amount)


class Reclaimer:
    """``note(n)`` on an arrival (0) or after freeing ``n`` bytes' worth; ``run()`` does the rest."""

    def __init__(self) -> None:
        self._trim = _malloc_trim()
        self._noted = 0
        self._first: float | None = None
        self._last = 0.0

    def note(self, amount: int) -> None:
        now = anyio.current_time()
        if self._first is None:
            self._first = now
        self._last = now
        self._noted += amount

    def _bursting(self, now: float) -> bool:
        return self._first is not None and now - self._last < QUIET and now - self._first < MAX_DEFER

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Collect and trim after bursts, and collect now and then, until cancelled."""
        young, middle, _ = gc.get_threshold()
        full = _FULL_THRESHOLD
        _running.append(self)
        gc.set_threshold(young, middle, _NEVER)
        last_collection = anyio.current_time()
        try:
            task_status.started()
            while True:
                await anyio.sleep(QUIET)
                now = anyio.current_time()
                if self._bursting(now):
                    continue
                burst, self._first, self._noted = self._noted >= TRIM_AFTER, None, 0
                # What CPython's own rule would have asked for, by now: ``full`` young collections.
                due = gc.get_count()[2] >= full and now - last_collection >= COLLECT_PERIOD
                if burst or due:
                    gc.collect()
                    last_collection = anyio.current_time()
                if burst and self._trim is not None:
                    await anyio.to_thread.run_sync(self._trim, 0)
        finally:
            _running.remove(self)
            if not _running:
                young, middle, _ = gc.get_threshold()
                gc.set_threshold(young, middle, full)
