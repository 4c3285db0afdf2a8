"""A wake-up call that a burst of callers can ring and one waiter consumes."""

from __future__ import annotations

import anyio


class Wakeup:
    """Level-triggered: ``set()`` any number of times, then ``wait()`` returns once and re-arms.

    A burst of sets while nobody waits is one wake-up, which is what coalesces a storm of
    notifications into one refresh, or several wishes into one look at them.
    """

    def __init__(self) -> None:
        self._event = anyio.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        """Forget a wake-up rung before now."""
        self._event = anyio.Event()

    async def wait(self) -> None:
        await self._event.wait()
        self._event = anyio.Event()
