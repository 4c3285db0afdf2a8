"""Calls per server, told to subscribers once a second (what ``mcpd top`` shows as calls per second)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import anyio

from mcpd.model.servers import CallActivity, Event

INTERVAL = 1.0


class Activity:
    """Counts finished calls; ``publish`` sends the counts of each interval that had any."""

    def __init__(self) -> None:
        self._calls: Counter[str] = Counter()
        self._errors: Counter[str] = Counter()

    def record(self, server: str, ok: bool) -> None:
        self._calls[server] += 1
        if not ok:
            self._errors[server] += 1

    def take(self, interval: float) -> CallActivity | None:
        """The counts since the last take (None if there were no calls), and a fresh start."""
        if not self._calls:
            return None
        activity = CallActivity(interval_s=interval, calls=dict(self._calls), errors=dict(self._errors))
        self._calls, self._errors = Counter(), Counter()
        return activity

    async def publish(self, send: Callable[[Event], None], interval: float = INTERVAL) -> None:
        """Every ``interval`` seconds, ``send`` what happened (until cancelled)."""
        while True:
            await anyio.sleep(interval)
            activity = self.take(interval)
            if activity is not None:
                send(activity)
