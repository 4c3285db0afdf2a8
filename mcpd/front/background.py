"""Work of the daemon's that nobody waits for (unsubscribing, asking servers for a log level), in a
task group that lives as long as the daemon's own."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

log = structlog.get_logger("mcpd.front")


async def _contained(work: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
    try:
        await work(*args)
    except Exception:
        # Nobody waits for this work to hear of its failure, and the task group it would end is
        # the daemon's: a bug or an OSError in one unsubscription must not take the daemon down.
        log.exception("background.failed", work=getattr(work, "__qualname__", repr(work)))


class Background:
    def __init__(self) -> None:
        self._tg: TaskGroup | None = None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Own the work started, until cancelled; started (``TaskGroup.start``) once it takes work."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                await anyio.sleep_forever()
        finally:
            self._tg = None  # clients that leave after it (at shutdown) start nothing more

    def start(self, work: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> bool:
        """Start ``work(*args)``; False, nothing started, before ``run`` or after it ended. What it
        raises (but cancellation) is logged, and ends only itself."""
        if self._tg is None:
            return False
        self._tg.start_soon(_contained, work, *args)
        return True
