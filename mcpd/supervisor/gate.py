"""How many servers are in their handshake at once: all of them, unless the machine cannot keep up.

Fifty servers that start at once on two cores compete for CPU, and each handshake can
take longer than its own connect timeout though nothing is wrong; the timed-out ones are
killed and started again, which costs more CPU still. The gate lets up to ``slots``
handshakes run at once (8 per core, at least 16: the usual setups start entirely at once,
at the parallel floor), and narrows when the machine shows it cannot keep up: each
handshake that times out halves the window (down to 2), each that succeeds widens it by
one again, as TCP's congestion window does. A server holds its place until it is ready,
or for ``hold`` seconds at most, so a hung server delays the queue by ``hold``, never by
its timeout. The connect timeout starts once a server is through the gate.

Measured by ``bench/startup.py`` on 2 cores loaded by other work (all running; first
handshakes timed out): 10 servers: this gate 10.3 s, a fixed 4 slots 17.3 s, no gate
12.7 s; 50 servers: 34.3 s (0), 70.2 s (0), 71.5 s (33 of 50); the healthy 8 of 10 beside
2 hung: 0.82x, 1.63x and 1.02x the parallel floor. At 200 servers on that machine a fixed
16 slots kept timing out and restarting, which the narrowing window is there to prevent.
Again (load average 6-24 on 2 cores): 10 servers 7.0 s gated, 7.6 s wide open; 50 servers 31.3 s
(0 first tries failed) against 64.9 s (46 of 50); 200 servers with 3 retries each: 188 running,
12 failed after 296 s (288 handshake timeouts).
"""

from __future__ import annotations

import os

import anyio
import structlog

log = structlog.get_logger("mcpd.supervisor")

MIN_WINDOW = 2


class Slot:
    """One place in the gate; released once, by whichever comes first."""

    def __init__(self, gate: StartGate, hold: float) -> None:
        self._gate = gate
        self._hold = hold
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._gate._leave()

    async def expire(self) -> None:
        """Release after ``hold`` seconds (run as a task beside the handshake)."""
        try:
            await anyio.sleep(self._hold)
        finally:
            self.release()


class StartGate:
    """At most ``window`` handshakes at once; ``enter()`` waits for a place."""

    def __init__(self, slots: int | None = None, hold: float = 5.0) -> None:
        self.slots = slots or max(16, 8 * (os.cpu_count() or 2))
        self.window = self.slots
        """Places open now: ``slots`` while handshakes succeed, fewer after timeouts."""
        self._in_flight = 0
        self._freed = anyio.Event()
        self._hold = hold

    async def enter(self) -> Slot:
        while self._in_flight >= self.window:
            await self._freed.wait()
        self._in_flight += 1
        return Slot(self, self._hold)

    def succeeded(self) -> None:
        """A handshake finished in time: the machine keeps up, widen by one."""
        self._resize(self.window + 1)

    def timed_out(self) -> None:
        """A handshake ran out of time: perhaps the machine cannot keep up, halve the window."""
        self._resize(self.window // 2)

    def _resize(self, window: int) -> None:
        window = max(MIN_WINDOW, min(self.slots, window))
        if window != self.window:
            log.debug("start_gate.window", old=self.window, new=window)
            self.window = window
            self._wake()

    def _leave(self) -> None:
        self._in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        freed, self._freed = self._freed, anyio.Event()
        freed.set()
