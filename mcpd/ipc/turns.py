"""A fixed number of turns per event-loop iteration, handed out in arrival order.

asyncio runs every ready callback in one iteration. When a thousand connections open or
close at once, each one's setup or teardown is ready together, and a client that only
wanted ``status`` waits behind all of them. Work that many connections can make ready at
the same moment takes a turn first: at most ``per_iteration`` go ahead in one iteration,
the rest wait for the next ones, in order. Established connections' requests (those after
the hello) take no turn, so they are served in every iteration whatever the churn.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Turns:
    """``await turns.take()``: at most ``per_iteration`` callers pass per loop iteration."""

    def __init__(self, per_iteration: int) -> None:
        self._per_iteration = per_iteration
        self._used = 0
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._refill_scheduled = False

    async def take(self) -> None:
        if self._used < self._per_iteration and not self._waiting:
            self._used += 1
            self._schedule_refill()
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        self._schedule_refill()
        await waiter  # a cancelled waiter is skipped by _refill

    def _schedule_refill(self) -> None:
        if not self._refill_scheduled:
            self._refill_scheduled = True
            asyncio.get_running_loop().call_soon(self._refill)

    def _refill(self) -> None:
        """Runs once in each iteration while there is demand: a new allowance, first come first served."""
        self._refill_scheduled = False
        self._used = 0
        while self._waiting and self._used < self._per_iteration:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._used += 1
        if self._used:
            self._schedule_refill()
