"""Work of the daemon's that nobody waits for (unsubscribing, asking servers for a log level), in a
task group that lives as long as the daemon's own."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import anyio
from anyio.abc import TaskGroup


class Background:
    def __init__(self) -> None:
        self._tg: TaskGroup | None = None

    async def run(self) -> None:
        """Own the work started, until cancelled."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await anyio.sleep_forever()
        finally:
            self._tg = None  # clients that leave after it (at shutdown) start nothing more

    def start(self, work: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> bool:
        """Start ``work(*args)``; False, nothing started, before ``run`` or after it ended."""
        if self._tg is None:
            return False
        self._tg.start_soon(work, *args)
        return True
