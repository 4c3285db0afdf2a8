"""Limits how many servers are in their handshake at once, without letting a hung one block the rest.

Fifty servers that start at once on two cores compete for CPU, and each handshake
can take longer than its own connect timeout though nothing is wrong. The gate lets
many start at a time; a server holds its slot until it is ready or for ``hold``
seconds at most, so hung servers delay the queue by ``hold``, never by their timeout.
The connect timeout starts once a server is through the gate.

What it buys, measured by ``bench/startup.py`` on 2 busy cores: 4 slots made every size
slower than no gate (10 servers 16.8 s vs 12.0 s, 200 servers 269 s vs 130 s, the healthy
8 of 10 with 2 hung at 1.89x the parallel floor vs 1.28x); no gate let 30 of 50 first
handshakes time out. 16 slots keeps the usual setups (up to 16 servers) entirely
ungated, at the floor, and still spares large ones the timeouts (50 servers: 33 s, none).
"""

from __future__ import annotations

import os

import anyio


class Slot:
    """One place in the gate; released once, by whichever comes first."""

    def __init__(self, semaphore: anyio.Semaphore, hold: float) -> None:
        self._semaphore = semaphore
        self._hold = hold
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._semaphore.release()

    async def expire(self) -> None:
        """Release after ``hold`` seconds (run as a task beside the handshake)."""
        try:
            await anyio.sleep(self._hold)
        finally:
            self.release()


class StartGate:
    """A semaphore of start slots; ``enter()`` waits for one."""

    def __init__(self, slots: int | None = None, hold: float = 5.0) -> None:
        self.slots = slots or max(16, 8 * (os.cpu_count() or 2))
        self._semaphore = anyio.Semaphore(self.slots)
        self._hold = hold

    async def enter(self) -> Slot:
        await self._semaphore.acquire()
        return Slot(self._semaphore, self._hold)
