"""A connection's requests: each in its own task, at most ``limit`` at once, as many more waiting
their turn, cancellable by id.

The connection's reader never waits here: it must go on reading while every slot is taken, for
the frames that free a slot or that the running requests wait for (``cancel``, ``server.reply``).
A request that finds every slot taken waits in a queue, and is started as a slot frees; one that
finds the queue full too is refused (``full``): what one client has running or queued stays bounded.

A request's task takes itself off the books as its last step (``finished``) instead of
through done callbacks: asyncio runs those in the next event-loop iteration, which cost
every request one more iteration and two more callbacks (about a tenth of a proxied
``tools.call``'s hops, counted). Only a cancelled task gets a done callback, because one
cancelled before its first step never runs its coroutine, and so never its ``finally``.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Coroutine
from typing import Any

import anyio


class InFlight:
    """``start(id, coro)`` unless ``full()``; the coroutine calls ``finished()`` as it ends."""

    def __init__(self, limit: int) -> None:
        """Made by the connection's task, on the loop its requests run on."""
        self._limit = limit
        self._loop = asyncio.get_running_loop()
        """Looked up once: on Python 3.11 each ``get_running_loop()`` is a ``getpid`` system call,
        and ``current_task()`` without a loop makes one, twice per request here."""
        self._running: dict[asyncio.Task[None], int] = {}
        """Each running request's task, and its id (the client's to pick: two may share one)."""
        self._waiting: deque[tuple[int, Coroutine[Any, Any, None], contextvars.Context]] = deque()
        """Requests read while every slot was taken, oldest first, unstarted, each with the reader's
        context as it was read (not that of the request whose end starts it)."""
        self._idle: asyncio.Future[None] | None = None
        """Resolved once no request runs or waits (``wait_idle``)."""

    def full(self) -> bool:
        """True while ``limit`` requests run and ``limit`` more wait: the next one is to be refused."""
        return len(self._waiting) >= self._limit

    def start(self, request_id: int, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` now, or once a slot frees; it must call ``finished()`` in its ``finally``."""
        if len(self._running) < self._limit:
            self._run(request_id, coro)
        else:
            self._waiting.append((request_id, coro, contextvars.copy_context()))

    def _run(
        self, request_id: int, coro: Coroutine[Any, Any, None], context: contextvars.Context | None = None
    ) -> None:
        task = self._loop.create_task(coro, context=context)
        self._running[task] = request_id

    def finished(self) -> None:
        """The calling request is done: its slot is free."""
        task = asyncio.current_task(self._loop)
        assert task is not None
        self._end(task)

    def _end(self, task: asyncio.Task[Any]) -> None:
        request_id = self._running.pop(task, None)
        if request_id is None:
            return  # ended already (a cancelled request that ran its finally)
        if self._waiting:
            self._run(*self._waiting.popleft())
        elif not self._running and self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    def busy(self) -> bool:
        return bool(self._running or self._waiting)

    async def wait_idle(self, timeout: float) -> None:
        """Return once no request runs or waits, or once ``timeout`` has passed."""
        if not self.busy():
            return
        self._idle = idle = self._loop.create_future()
        try:
            await asyncio.wait([idle], timeout=timeout)
        finally:
            self._idle = None

    def cancel(self, request_id: int) -> bool:
        """Cancel every request with this id, running or waiting (the client gave up on it); False if
        there is none. A client that reused an id cannot tell their answers apart: it gives up on all.

        A waiting one is dropped unstarted. The running ones are looked for among at most ``limit``
        (a scan, but only on a cancel: nothing is kept per request for it).
        """
        found = False
        for index in range(len(self._waiting) - 1, -1, -1):
            if self._waiting[index][0] == request_id:
                coro = self._waiting[index][1]
                del self._waiting[index]
                coro.close()
                found = True
        for task in [task for task, running_id in self._running.items() if running_id == request_id]:
            task.cancel()
            task.add_done_callback(self._end)
            found = True
        return found

    async def aclose(self) -> None:
        """Drop the waiting requests, cancel the running ones and wait for them (shielded, so it
        happens even when cancelled)."""
        # First, or a running request's end would start a waiting one.
        while self._waiting:
            self._waiting.popleft()[1].close()
        if not self._running:
            return
        with anyio.CancelScope(shield=True):
            tasks = list(self._running)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
