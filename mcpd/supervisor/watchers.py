"""The tasks that watch a live server and end its run: exit, health pings, list refreshes
(tools; resources, templates and prompts).

Each runs beside the run's session and raises ``RunEnded`` when the run is over; what
they observe on the way (a failed ping, a new tool list) goes to the actor through
``Hooks``.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import anyio

from mcpd.config.model import ServerConfig
from mcpd.model.mcp import METHOD_NOT_FOUND
from mcpd.model.resources import Surface
from mcpd.model.tools import ToolInfo
from mcpd.supervisor.link import Link
from mcpd.supervisor.policy import Ending
from mcpd.supervisor.session import Refused, RequestFailed, Session, if_served, is_lost
from mcpd.supervisor.stdio import StdioChild
from mcpd.supervisor.wakeup import Wakeup

TOOLS_REFRESH_GAP = 0.5
"""Least time between two refreshes of one list of one server: a storm of ``list_changed`` costs at
most one refresh per gap (one in flight, one pending), however fast the notifications come."""

LIST_RETRY_MAX = 30.0
"""Longest wait before a list whose refresh failed is asked for again (the waits double from the gap):
a server whose list keeps failing is not asked every half second."""

L = TypeVar("L")

_EXIT_WAIT = 0.5
"""How long a refused request waits for the exit status, which makes the better reason."""

_DRAIN_WAIT = 0.5
"""How long an exited server's stdout may stay open, its last lines read meanwhile, before another
process is taken to hold it."""


class RunEnded(Exception):
    """Ends a server's run, saying how (for the restart decision) and why (for people)."""

    def __init__(self, reason: str, ending: Ending = Ending.CRASHED) -> None:
        super().__init__(reason)
        self.reason = reason
        self.ending = ending
        self.asked_wait = 0.0
        """Seconds the server asked to be left alone for (a remote's ``Retry-After``)."""


class Hooks(Protocol):
    def degrade(self, reason: str) -> None:
        """The protocol failed while the server is up."""

    def recover(self, reason: str) -> None:
        """The protocol answers again."""

    def tools_listed(self, tools: tuple[ToolInfo, ...]) -> None:
        """A fresh ``tools/list`` answer."""

    def surface_listed(self, surface: Surface) -> None:
        """Fresh resource, template and prompt lists."""


async def watch_exit(child: StdioChild, grace: float) -> None:
    """End the run when the process closes its stdout (it died, or will not answer any more), or
    exits: a process it started with its stdout (a helper that inherited it) may hold the pipe open
    for good, answering nothing, and the run went on until pings failed."""
    async with anyio.create_task_group() as tg:
        for event in (child.stdout_closed, child.exited):
            tg.start_soon(_cancel_when_set, event, tg.cancel_scope)
    if child.stdout_closed.is_set():
        # Closing stdout almost always means exiting; wait a moment to report the real exit status.
        with anyio.move_on_after(grace):
            await child.exited.wait()
        if child.returncode is None:
            raise RunEnded(child.stdout_cut or "closed its stdout but kept running")
    else:
        # What it wrote before it exited is read first: the pipe closes at once unless another holds it.
        with anyio.move_on_after(_DRAIN_WAIT):
            await child.stdout_closed.wait()
        if not child.stdout_closed.is_set():
            child.abandon_output()
            raise RunEnded(f"{child.exit_reason()}; a process it started holds its stdout")
    raise RunEnded(child.exit_reason())


async def _cancel_when_set(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


async def watch_refused(link: Link) -> None:
    """End the run once a call found the connection refusing requests, or the server forgot us."""
    http = link.http
    async with anyio.create_task_group() as tg:
        tg.start_soon(_cancel_when_set, link.refused, tg.cancel_scope)
        if http is not None:
            tg.start_soon(_cancel_when_set, http.session_lost, tg.cancel_scope)
    child = link.child
    if child is None:
        assert http is not None
        raise RunEnded(http.reason or "the connection refused a request", Ending.UNREACHABLE)
    with anyio.move_on_after(_EXIT_WAIT):
        await child.exited.wait()
    raise RunEnded(f"stdin refused a request; {child.exit_reason()}")


async def watch_health(link: Link, config: ServerConfig, hooks: Hooks) -> None:
    """Ping every ``ping_interval``, and at once when the HTTP layer reports trouble.

    ``unhealthy_after`` failures in a row end the run (the server is up but useless). After a failed
    ping the next waits ``ping_gap`` at least, trouble or not: a burst of trouble reports (a
    gateway's 502s, each one a report) must not count its failures within milliseconds.

    A stdio server busy with a tool call it took before the first failed ping is not ended while that
    call runs (within its deadline and ``call_timeout``): a server that runs one request at a time (a
    synchronous tool of an SDK server, Node doing work in the tool) answers no ping meanwhile, yet
    works, and ending it failed the call it worked on. Calls that came after the first failed ping do
    not count, so a server hung for good is ended once the calls it had have run ``call_timeout``.
    A call it answered starts the series again, sparing the calls it has then: it works through the
    calls queued behind one another, its pings waiting behind them.
    """
    failures = 0
    busy: set[object] = set()
    """The tool calls sent before the first failed ping of this series and still in flight."""
    answered = link.answered
    while True:
        with anyio.move_on_after(config.ping_interval):
            if failures:
                await anyio.sleep(ping_gap(config))
            if link.http is not None:
                await link.http.trouble.wait()
            else:
                await anyio.sleep_forever()
        ahead = set(link.calls) if not failures and link.child is not None else busy
        try:
            with anyio.fail_after(config.ping_timeout):
                await _ping(link.session)
        except (TimeoutError, RequestFailed) as exc:
            if link.http is not None and is_lost(exc):
                raise RunEnded(f"connection lost: {_describe(exc, 'ping')}", Ending.UNREACHABLE) from None
            if link.child is not None and link.answered != answered:
                # It answered a call since the series began: it works, its pings waiting behind its
                # calls. The series starts again, sparing the calls it has now.
                answered, failures, ahead = link.answered, 0, set(link.calls)
            failures += 1
            # Past ``call_timeout`` a call is hung with the server, however long its caller allowed
            # it (up to a day): the server is not kept for it.
            now = anyio.current_time()
            busy = {call for call in ahead if now - link.calls.get(call, -math.inf) < config.call_timeout}
            if busy and failures >= config.unhealthy_after:
                hooks.degrade(f"{_describe(exc, 'ping')} ({failures} in a row) while busy with a call")
                continue
            hooks.degrade(f"{_describe(exc, 'ping')} ({failures}/{config.unhealthy_after})")
            if failures >= config.unhealthy_after:
                reason = f"unresponsive: {failures} pings failed in a row"
                if link.child is not None:
                    link.child.ended_for = reason
                raise RunEnded(reason) from None
            continue
        failures = 0
        hooks.recover("ping answered")


async def _ping(session: Session) -> None:
    """Ping. A server that never implemented ping answers "method not found": it reads and answers,
    all a liveness probe asks (it was restarted for it every ``unhealthy_after`` pings). Any other
    error answer is a failed ping: a gateway's word for a server behind it that is gone, say."""
    try:
        await session.ping()
    except Refused as exc:
        if exc.code != METHOD_NOT_FOUND:
            raise


def ping_gap(config: ServerConfig) -> float:
    """Least seconds between a failed ping and the next (``ping_interval`` if that is shorter): as
    long as a ping may take, and a second at least."""
    return max(1.0, config.ping_timeout)


async def watch_tools(link: Link, dirty: Wakeup, config: ServerConfig, hooks: Hooks) -> None:
    """Re-list the tools after ``notifications/tools/list_changed``, coalescing storms (see the gap)."""
    await _watch_list(
        link,
        dirty,
        config,
        hooks,
        what="tools/list",
        fetch=lambda s: if_served(s.list_tools()),  # as the handshake: "method not found" is no tools
        listed=hooks.tools_listed,
    )


async def watch_surface(link: Link, dirty: Wakeup, config: ServerConfig, hooks: Hooks) -> None:
    """Re-list resources, templates and prompts after their ``list_changed``, coalesced like tools."""
    await _watch_list(
        link,
        dirty,
        config,
        hooks,
        what="resources/prompts list",
        fetch=lambda s: s.list_surface(),
        listed=hooks.surface_listed,
    )


async def _watch_list(
    link: Link,
    dirty: Wakeup,
    config: ServerConfig,
    hooks: Hooks,
    *,
    what: str,
    fetch: Callable[[Session], Awaitable[L]],
    listed: Callable[[L], None],
) -> None:
    retry = TOOLS_REFRESH_GAP
    while True:
        await dirty.wait()
        try:
            with anyio.fail_after(config.connect_timeout):
                fresh = await fetch(link.session)
        except (TimeoutError, RequestFailed) as exc:
            reason = link.stale[what] = f"{what} after list_changed failed: {_describe(exc, what)}"
            hooks.degrade(reason)
            # What we hold is still the old list (the server stays degraded while it is stale,
            # ``Link.stale``), and nothing else would ask again: ask again, later each time.
            dirty.set()
            await anyio.sleep(retry)
            retry = min(2 * retry, LIST_RETRY_MAX)
            continue
        retry = TOOLS_REFRESH_GAP
        link.stale.pop(what, None)
        listed(fresh)
        await anyio.sleep(TOOLS_REFRESH_GAP)


def _describe(exc: BaseException, what: str) -> str:
    if isinstance(exc, TimeoutError):
        return f"{what} timed out"
    return f"{what} failed: {str(exc) or type(exc).__name__}"
