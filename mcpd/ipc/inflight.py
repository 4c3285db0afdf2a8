"""A connection's running requests: each in its own task, at most ``limit`` at once, cancellable by id.

A request's task takes itself off the books as its last step (``finished``) instead of
through done callbacks: asyncio runs those in the next event-loop iteration, which cost
every request one more iteration and two more callbacks (about a tenth of a proxied
``tools.call``'s hops, counted). Only a cancelled task gets a done callback, because one
cancelled before its first step never runs its coroutine, and so never its ``finally``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import anyio


class InFlight:
    """``await room()``, then ``start(id, coro)``; the coroutine calls ``finished()`` as it ends."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._running: dict[asyncio.Task[None], int] = {}
        self._by_id: dict[int, asyncio.Task[None]] = {}
        """The latest request with each id: what ``cancel`` stops (ids are the client's to pick)."""
        self._room = asyncio.Event()

    async def room(self) -> None:
        """Wait while ``limit`` requests run."""
        while len(self._running) >= self._limit:
            await self._room.wait()

    def start(self, request_id: int, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro``, which must call ``finished()`` in its ``finally``."""
        task = asyncio.get_running_loop().create_task(coro)
        self._running[task] = request_id
        self._by_id[request_id] = task

    def finished(self) -> None:
        """The calling request is done: its slot is free."""
        task = asyncio.current_task()
        assert task is not None
        self._end(task)

    def _end(self, task: asyncio.Task[Any]) -> None:
        request_id = self._running.pop(task, None)
        if request_id is None:
            return  # ended already (a cancelled request that ran its finally)
        if self._by_id.get(request_id) is task:
            del self._by_id[request_id]
        if len(self._running) == self._limit - 1:
            self._room.set()
            self._room = asyncio.Event()

    def cancel(self, request_id: int) -> bool:
        """Cancel a running request (the client gave up on it); False if it is not running."""
        task = self._by_id.get(request_id)
        if task is None:
            return False
        task.cancel()
        task.add_done_callback(self._end)
        return True

    async def aclose(self) -> None:
        """Cancel whatever still runs and wait for it (shielded, so it happens even when cancelled)."""
        if not self._running:
            return
        with anyio.CancelScope(shield=True):
            tasks = list(self._running)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
