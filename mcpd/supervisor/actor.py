"""One supervised server: a task that owns its transport and MCP session for their whole life.

A session's context managers must be entered and left in one task, so everything that
touches them (spawn, handshake, watchers, teardown) runs inside ``ServerActor.run``.
Other tasks use the handle: ``status()``, ``history``, ``call_tool()``, ``on_live()`` (what
``surface_requests`` sends resource, prompt and completion requests with), ``start()``,
``stop()``, ``restart()``, which set a wish and poke the actor.

The seams: what to do after a run ends is ``policy.decide``; a call is ``calls.send_call``;
the watchers of a live run are in ``watchers``; the session is ``stdio_session`` for a child
and ``sdk`` (the MCP SDK, loaded only then) for a remote server. This module
keeps the state, walks the transitions and connects the pieces.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import anyio
import structlog
from anyio.abc import TaskGroup

from mcpd.config.model import ServerConfig
from mcpd.errors import (
    CallTimeout,
    ServerNotRunning,
    TransportError,
    UnknownTool,
)
from mcpd.model.logs import LogMessage
from mcpd.model.requests import NOT_AVAILABLE, ReplyError, ServerReply, ServerRequest
from mcpd.model.resources import (
    Surface,
)
from mcpd.model.servers import (
    ResourceUpdated,
    ServerEvent,
    ServerInfo,
    ServerStatus,
    StateChange,
    StateChanged,
    SurfaceChanged,
    ToolsChanged,
)
from mcpd.model.states import LIVE_STATES, ServerState, can_transition, check_transition
from mcpd.model.tools import ToolInfo, ToolResult
from mcpd.supervisor import watchers
from mcpd.supervisor.calls import send_call
from mcpd.supervisor.gate import StartGate
from mcpd.supervisor.link import Link
from mcpd.supervisor.logring import LogRing
from mcpd.supervisor.orphans import GroupLedger
from mcpd.supervisor.policy import Decision, Ending, GiveUp, Retry, decide
from mcpd.supervisor.sdkload import SDK, sdk
from mcpd.supervisor.session import (
    ListCuts,
    NotDelivered,
    ProgressCallback,
    RequestFailed,
    Session,
    SessionHooks,
    StatusRefused,
    handshake,
    is_lost,
)
from mcpd.supervisor.stdio import KILL_WAIT, SpawnError, StderrLog, StdioChild, can_spawn, open_stdio_child
from mcpd.supervisor.stdio_session import open_stdio_session
from mcpd.supervisor.wakeup import Wakeup
from mcpd.supervisor.watchers import RunEnded

log = structlog.get_logger("mcpd.supervisor")

S = ServerState
HISTORY = 32
"""State changes kept per server for ``ServerDetail``."""
_DOWN_STATES = (S.STOPPED, S.FAILED, S.DISABLED)
_WAITING = {
    S.STOPPED: "stopped",
    S.STARTING: "starting",
    S.RUNNING: "reconnecting",  # running, but its link was lost and the next is not up yet
    S.DEGRADED: "degraded",
    S.BACKOFF: "waiting to restart (backoff)",
    S.FAILED: "failed",
    S.DISABLED: "disabled",
}
"""What a call that timed out waiting for the server was waiting through, in a person's words."""
T = TypeVar("T")
COMMAND_RECHECK = 30.0
"""Seconds between looks for the command of a server that failed because it could not be executed
(not found, not executable, no such working directory): once it is there (installed since), the
server starts, with no command given."""
RESEND_GAP = 0.5
"""Seconds before a request refused by an HTTP status (``StatusRefused``) is sent again, once."""


def _first_leaf(exc: BaseException) -> BaseException:
    """The exception that started it all: the first leaf of nested exception groups.

    Our own ``RunEnded`` wins over the teardown noise it causes around it.
    """
    if isinstance(exc, BaseExceptionGroup):
        ended, _ = exc.split(RunEnded)
        return _first_leaf((ended or exc).exceptions[0])
    return exc


def describe_error(exc: BaseException) -> str:
    """A one-line reason from an exception, digging the first leaf out of exception groups."""
    exc = _first_leaf(exc)
    # The SDK's error out of a remote session's transport tasks; never imports the SDK to find out.
    if SDK.loaded() and isinstance(exc, sdk.MCPError):
        return sdk.describe_mcp_error(exc)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


Router = Callable[[ServerRequest], Awaitable[ServerReply]]
"""Answers a request a server sent (sampling, elicitation, roots): the daemon finds who to ask."""


async def refuse_server_requests(request: ServerRequest) -> ServerReply:
    """The router of a supervisor that has no hosts to ask."""
    message = f"mcpd has no host to pass {request.method} to"
    return ServerReply(error=ReplyError(NOT_AVAILABLE, message))


def stop_bound(stop_grace: float) -> float:
    """Seconds a stop may take at most: ``stop_grace`` after stdin EOF, again after SIGTERM, then
    SIGKILL, and a margin."""
    return 2 * stop_grace + KILL_WAIT + 3.0


class _Replaced(Exception):
    """This actor was replaced by a reload; requests waiting on it go on with ``by``."""

    def __init__(self, by: ServerActor) -> None:
        super().__init__(by.name)
        self.by = by


class _Lineage:
    """The actors one server has had across reloads, by the one that runs now: a retired actor
    hands what waits on it to ``current``. Shared by them all rather than a link from each actor to
    its successor: such a chain kept every actor of the server alive since the daemon started
    (its first actor outlives everything, frozen by ``gc.freeze``), ~10 KB more at each reload
    that changed the server."""

    __slots__ = ("current",)

    def __init__(self, current: ServerActor) -> None:
        self.current = current


STDOUT_TAIL = 20
"""Lines of its stdout that mcpd could not use shown by ``mcpd status SERVER``, at most."""

LogListener = Callable[[str, LogMessage], None]
"""Told each MCP log message a server sends: (server, the message as it sent it)."""


class ServerActor:
    """Supervises one server. ``run()`` is its task; everything else is safe from other tasks."""

    def __init__(
        self,
        config: ServerConfig,
        emit: Callable[[ServerEvent], None],
        *,
        start_gate: StartGate | None = None,
        unit_random: Callable[[], float] = random.random,
        router: Router = refuse_server_requests,
        logs: LogRing | None = None,
        on_log: LogListener | None = None,
        groups: GroupLedger | None = None,
    ) -> None:
        self.config = config
        self._groups = groups
        self._router = router
        self._on_log = on_log
        self.logs = logs or LogRing()
        """Its stderr lines and MCP log messages, across its runs (pass the old actor's on a change)."""
        self._start_gate = start_gate or StartGate()
        self._emit = emit
        self._random = unit_random
        self._state = S.STOPPED if config.enabled else S.DISABLED
        self._changed = anyio.Event()
        self._replacing = False
        self._lineage = _Lineage(self)
        self._wake = Wakeup()
        self._want_running = config.enabled
        self._restart_wanted = False
        self._child: StdioChild | None = None
        """The process of the current run, from spawn to its stop (handshake included)."""
        self._link: Link | None = None
        """The live connection, from a successful handshake to the end of the run."""
        self._stderr = StderrLog(config.name, on_line=self._stderr_line)
        self._tools: tuple[ToolInfo, ...] = ()
        self._tool_names: frozenset[str] = frozenset()
        self._tools_dirty = Wakeup()
        self._surface = Surface()
        self._surface_dirty = Wakeup()
        self._server_info: ServerInfo | None = None
        self._live_since: float | None = None
        self._attempt = 0
        self._last_ending: Ending | None = None
        """How the previous run ended (None before the first, or after a start asked for)."""
        self._seek_command = False
        """Failed because its command could not be executed, and no wish since: look for it again."""
        self._next_retry_at: float | None = None
        """When the backoff's try comes, on the wall clock (as status shows it)."""
        self._retry_due: float | None = None
        """The same on the event loop's clock, which the wait itself keeps: a call told that the try
        comes past its deadline is told so by the clock that will time it, not one a step moved."""
        self._history: deque[StateChange] = deque(maxlen=HISTORY)
        self.first_attempt_done = anyio.Event()
        """Set when the first start attempt has ended, whichever way: what readiness waits for."""
        self.restarts = 0
        self.last_error: str | None = None
        """What is wrong now; cleared when a start succeeds."""
        self.last_exit: str | None = None
        """How the previous run ended; kept after ``last_error`` is cleared."""
        self._stop_why = "stop requested"
        """Why the last stop or restart was wished (``stop``'s ``why``), for the history and calls."""
        self._early: tuple[RunEnded, Decision] | None = None
        """How the live run ended and what was decided, before its teardown (``_ending``)."""
        self._cuts = ListCuts()  # status says them of a live server when nothing else is wrong

    # -- the handle -------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def state(self) -> ServerState:
        return self._state

    @property
    def tools(self) -> tuple[ToolInfo, ...]:
        return self._tools

    @property
    def link(self) -> Link | None:
        """The current run's connection (None between runs)."""
        return self._link

    @property
    def surface(self) -> Surface:
        """Resources, templates and prompts of the current run (empty when not live)."""
        return self._surface if self._state in LIVE_STATES else Surface()

    @property
    def server_info(self) -> ServerInfo | None:
        return self._server_info

    @property
    def alive(self) -> bool:
        """The process is up (stdio) or the session is connected (HTTP)."""
        if self._child is not None:
            return self._child.returncode is None
        return self._link is not None

    def status(self) -> ServerStatus:
        live = self._state in LIVE_STATES
        alive = self.alive
        return ServerStatus(
            name=self.name,
            state=self._state,
            transport=self.config.transport,
            alive=alive,
            degraded=self._state is S.DEGRADED,
            pid=self._child.pid if self._child is not None and alive else None,
            restarts=self.restarts,
            uptime_s=round(time.monotonic() - self._live_since, 3) if live and self._live_since else None,
            last_error=self.last_error or (self._cuts.said() if live else None),
            tools=len(self._tools),
            description=self.config.description,
            server_info=self._server_info,
            attempt=self._failed_in_a_row(),
            next_retry_at=self._next_retry_at if self._state is S.BACKOFF else None,
            last_exit=self.last_exit,
        )

    def _failed_in_a_row(self) -> int:
        """The unstable runs in a row, as status tells them: none once the current run has lasted
        ``stable_after`` (the count itself is reset only when the run ends, ``policy.next_attempt``);
        a server up for days was still shown with the crashes that came before."""
        live = self._live_since
        if live is not None and time.monotonic() - live >= self.config.restart.stable_after:
            return 0
        return self._attempt

    @property
    def history(self) -> list[StateChange]:
        """The latest state changes, oldest first (at most ``HISTORY``)."""
        return list(self._history)

    def stderr_tail(self) -> list[str]:
        """The last lines the server's processes wrote to stderr, oldest first."""
        return list(self._stderr.tail)

    def stdout_tail(self) -> list[str]:
        """The last lines of its stdout that mcpd could not use, as its log still holds them, oldest first."""
        said = [entry.text for entry in self.logs.last(None) if entry.source == "stdout"]
        return said[-STDOUT_TAIL:]

    def start(self) -> None:
        """Wish the server running; a ``failed`` or ``disabled`` server is given a fresh start,
        and one in ``backoff`` is tried now."""
        if not self._want_running:
            self._attempt = 0
        self._want_running = True
        self._seek_command = False
        self._try_now()

    def restart(self) -> None:
        """Stop the current process (if any) and start again, resetting the retry count."""
        self._stop_why = "restart requested"
        self._attempt = 0
        self._want_running = True
        self._restart_wanted = True
        self._seek_command = False
        self._try_now()

    def _try_now(self) -> None:
        """Wake the task; a backoff's try is due now: a call that comes before the task has woken
        waits for it, not told of the try it replaces (``_check_retry_in_time``)."""
        self._next_retry_at = self._retry_due = None
        self._wake.set()

    async def stop(self, timeout: float | None = None, *, why: str = "stop requested") -> None:
        """Wish the server stopped and wait (at most ``stop_bound``) until it is; ``why`` is said in
        its history and to the calls the stop fails."""
        self._want_running = False
        self._stop_why = why
        self._seek_command = False
        self._wake.set()
        with anyio.move_on_after(timeout if timeout is not None else stop_bound(self.config.stop_grace)):
            while self._state not in _DOWN_STATES or self.alive:
                await self._changed.wait()

    async def wait_state(self, *states: ServerState, timeout: float) -> ServerState:
        """Wait until the state is one of ``states``; raise ``TimeoutError`` after ``timeout``."""
        with anyio.fail_after(timeout):
            while self._state not in states:
                await self._changed.wait()
        return self._state

    def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any],
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Awaitable[ToolResult]:
        """Call ``tool``; waits for a (re)starting server, all within ``timeout`` seconds.

        ``on_progress`` receives the server's progress notifications for this call (stdio servers).
        A call the server never received (its connection was already gone) waits for the
        next one and runs there; only a call in flight when the server died fails.

        Raises ``ServerNotRunning``, ``UnknownTool``, ``CallTimeout`` or ``TransportError``.
        A tool that ran and failed is a result with ``is_error`` set, not an exception.
        """

        def known(actor: ServerActor) -> None:
            if tool not in actor._tool_names:
                raise UnknownTool(
                    f"server {actor.name!r} has no tool {tool!r}", {"server": actor.name, "tool": tool}
                )

        # Not a coroutine of its own: one level less for every resume of the call's await chain.
        def send(link: Link, deadline: float, limit: float) -> Awaitable[ToolResult]:
            return send_call(
                link,
                server=self.name,
                tool=tool,
                arguments=arguments,
                deadline=deadline,
                limit=limit,
                on_progress=on_progress,
                meta=meta,
                hung_after=self.config.call_timeout,
                watch=self,
            )

        return self.on_live(timeout, known, send)

    def on_live(
        self,
        timeout: float | None,
        known: Callable[[ServerActor], None],
        send: Callable[[Link, float, float], Awaitable[T]],
    ) -> Awaitable[T]:
        """Run ``send`` on a live link within ``timeout`` (default ``call_timeout``), waiting for a
        (re)start; a request the server never received goes again on the next link. ``known`` checks
        the target against the live lists before each attempt (``surface_requests`` builds on this).
        A reload that changes the server hands what waits here over to its successor."""
        limit = timeout if timeout is not None else self.config.call_timeout
        # The loop's clock, as ``anyio.current_time`` reads it, without its four calls to find the backend.
        # Not a coroutine itself (the deadline starts when it is called, as the caller awaits it):
        # one level less for every resume of a call's await chain.
        return self._on_live(asyncio.get_running_loop().time() + limit, limit, known, send)

    async def _on_live(
        self,
        deadline: float,
        limit: float,
        known: Callable[[ServerActor], None],
        send: Callable[[Link, float, float], Awaitable[T]],
    ) -> T:
        stale: Link | None = None
        refused = False
        while True:
            try:
                link = await self._wait_live(deadline, limit, stale)
            except _Replaced as replaced:
                return await replaced.by._on_live(deadline, limit, known, send)
            known(self)
            try:
                return await send(link, deadline, limit)
            except StatusRefused as exc:
                # One request refused (a 403 for this tool, a gateway's 503): once more, then say so.
                data = {"server": self.name, "status": exc.status}
                if refused:
                    raise TransportError(f"{self.name} refused {exc.what}: {exc}", data) from None
                refused = True
                await anyio.sleep(max(0.0, min(RESEND_GAP, deadline - anyio.current_time())))
                stale = None
            except NotDelivered:
                stale = link

    def replacing(self) -> None:
        """A reload is replacing this server (its config changed): what waits for it to be live
        waits for the successor instead of failing when this one stops."""
        self._replacing = True

    def hand_over(self, successor: ServerActor) -> None:
        """The successor runs: what waits here goes on there."""
        successor._lineage = self._lineage
        self._lineage.current = successor
        self._wake_waiters()

    async def _wait_live(self, deadline: float, limit: float, stale: Link | None) -> Link:
        while True:
            link = self._link
            if link is not None and link is not stale and self._state in LIVE_STATES and link.usable():
                return link
            if self._lineage.current is not self:
                raise _Replaced(self._lineage.current)
            # Down and wished running is on its way up: a fresh actor, or one started again,
            # before its task's first step. Only down and not wished running has nothing to wait for.
            if self._state in _DOWN_STATES and not self._want_running and not self._replacing:
                why = f": {self.last_error}" if self.last_error else ""
                raise ServerNotRunning(
                    f"server {self.name!r} is {self._state}{why}",
                    {"server": self.name, "state": str(self._state), "last_error": self.last_error},
                )
            self._check_retry_in_time(deadline)
            with anyio.move_on_after(deadline - anyio.current_time()):
                await self._changed.wait()
                continue
            # Why it is not up, as ``ServerNotRunning`` says: a host shows the message alone.
            why = f": {self.last_error}" if self.last_error else ""
            raise CallTimeout(
                f"server {self.name!r} was still {_WAITING[self._state]} after {limit:g}s{why}",
                {"server": self.name, "state": str(self._state), "last_error": self.last_error},
            )

    def _check_retry_in_time(self, deadline: float) -> None:
        """Raise ``ServerNotRunning`` if the server waits out a backoff past ``deadline``: a call to a
        server in a crash loop (a key missing from its env) would wait its whole deadline for a
        try that comes after it. (``start`` and ``restart`` clear the due time: the try comes now.)"""
        retry_at = self._retry_due
        if self._state is not S.BACKOFF or retry_at is None or self._replacing or retry_at <= deadline:
            return
        retry_in = retry_at - anyio.current_time()
        why = f": {self.last_error}" if self.last_error else ""
        raise ServerNotRunning(
            f"server {self.name!r} is waiting to restart (backoff), its next try in {retry_in:.1f}s, "
            f"after this call's deadline{why}",
            {
                "server": self.name,
                "state": str(self._state),
                "last_error": self.last_error,
                "retry_in": retry_in,
            },
        )

    # -- the task ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Supervise until cancelled: start when wished, restart as the policy says, stop when wished."""
        try:
            await self._supervise()
        finally:
            # Cancelled with the server up or on its way (a check given up at a signal cancels its
            # supervisor whole): the run's way out stopped the child. Said, or ``stop()`` waits out
            # its whole bound (9 s by default) for a state no task will change any more.
            if self._state not in _DOWN_STATES:
                self._set(S.STOPPED, "supervisor stopped")

    async def _supervise(self) -> None:
        while True:
            if not self._want_running:
                if self._seek_command:
                    await self._seek()
                else:
                    await self._wake.wait()
                continue
            self._begin_start()
            try:
                ended = await self._run_once()
                if ended is None:  # stopped or restarted on purpose
                    if self._stop_wanted():
                        self._set(S.STOPPED, self._stop_why)
                    continue
                await self._after(ended)
            except Exception as exc:
                # A bug here must not take the other servers down with this one.
                log.exception("server.internal_error", server=self.name)
                self._give_up(self._decide(RunEnded(describe_error(exc), Ending.INTERNAL)))

    async def _seek(self) -> None:
        """Wait for a wish, or ``COMMAND_RECHECK`` seconds; then wish the server running if its
        command can be executed now."""
        with anyio.move_on_after(COMMAND_RECHECK):
            await self._wake.wait()
            return
        # Left to itself if cancelled: a stat on a hung mount must not hold up the daemon's stop.
        found = await anyio.to_thread.run_sync(can_spawn, self.config, abandon_on_cancel=True)
        # A stop (or a start) that came while the thread looked was a wish of its own: it holds.
        if found and self._seek_command:
            log.info("server.command_found", server=self.name, command=self.config.command)
            self._seek_command = False
            self._want_running = True

    def _begin_start(self) -> None:
        self._restart_wanted = False
        if self._state is S.STARTING:  # a restart asked for during the handshake
            return
        if self._state in LIVE_STATES:
            reason = "restart requested"
        elif self._state is S.BACKOFF:
            reason = f"retry after backoff (attempt {self._attempt})"
        else:
            reason = "start"
        if self._state in (*LIVE_STATES, S.BACKOFF):
            self.restarts += 1
        self._set(S.STARTING, reason)

    def _stop_wanted(self) -> bool:
        # A method, not the attribute, so type checkers do not assume it unchanged across awaits.
        return not self._want_running

    def _decide(self, ended: RunEnded) -> Decision:
        ran_for = time.monotonic() - self._live_since if self._live_since else 0.0
        self._live_since = None
        self.last_exit = ended.reason
        after_outage, self._last_ending = self._last_ending is Ending.UNREACHABLE, ended.ending
        return decide(
            ended.ending,
            ended.reason,
            attempt=self._attempt,
            ran_for=ran_for,
            policy=self.config.restart,
            wanted=self._want_running,
            unit_random=self._random(),
            after_outage=after_outage,
            asked_wait=ended.asked_wait,
        )

    def _give_up(self, decision: Decision) -> None:
        """Apply a ``GiveUp`` (``failed``) or a ``Stop`` (``stopped``): no more runs until wished."""
        self._want_running = False
        self._seek_command = isinstance(decision, GiveUp) and self._last_ending is Ending.UNSPAWNABLE
        if isinstance(decision, GiveUp):
            self._attempt = decision.attempt
            self.last_error = decision.reason
        if self._state in _DOWN_STATES:
            return
        if isinstance(decision, GiveUp) and can_transition(self._state, S.FAILED):
            self._set(S.FAILED, decision.reason)
        else:
            self._set(S.STOPPED, decision.reason if isinstance(decision, GiveUp) else self._stop_why)

    async def _after(self, ended: RunEnded) -> None:
        """Apply the policy's decision about a run that ended on its own (made already, before the
        teardown, when the run was live: ``_ending``)."""
        early, self._early = self._early, None
        decision = early[1] if early is not None else self._decide(ended)
        if not isinstance(decision, Retry):
            self._give_up(decision)
            return
        if self._state is not S.BACKOFF:
            self._back_off(ended, decision)
        due = self._retry_due
        if not self._restart_wanted and due is not None:
            with anyio.move_on_after(due - anyio.current_time()):
                await self._wake.wait()  # a stop, start or restart cuts the wait short
        self._next_retry_at = self._retry_due = None
        if self._stop_wanted():
            self._set(S.STOPPED, self._stop_why)

    def _back_off(self, ended: RunEnded, decision: Retry) -> None:
        self._attempt = decision.attempt
        self.last_error = ended.reason
        self._next_retry_at = time.time() + decision.delay
        self._retry_due = anyio.current_time() + decision.delay
        self._wake.clear()  # wishes from before this moment were for the run that ended
        self._set(S.BACKOFF, f"retry {decision.attempt} in {decision.delay:.2f}s: {ended.reason}")

    async def _run_once(self) -> RunEnded | None:
        """One run of the server: connect, serve until it ends or we are told to stop."""
        self._early = None
        self._cuts.clear()  # this run's lists are listed anew
        self._tools_dirty.clear()  # a list_changed of the previous run is answered by the handshake
        self._surface_dirty.clear()
        if self.config.url is not None:
            await SDK.wait_loaded()  # a remote server has no child to start while the SDK loads
        http = sdk.HttpWatch() if self.config.url is not None else None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch_wishes, tg)
                # Only children pass the start gate: it shares out this machine's CPU among the
                # processes starting at once, which a remote handshake does not use.
                slot = await self._start_gate.enter() if http is None else None
                if slot is not None:
                    tg.start_soon(slot.expire)
                async with self._connect(tg, http) as session:
                    try:
                        link = await self._handshake(session, http)
                    except RunEnded:
                        # A child is stopped on the way out: its exit (``killed by SIGTERM``) is our
                        # doing, and must not replace the handshake's reason in last_error.
                        if http is None:
                            tg.cancel_scope.cancel()
                        raise
                    if slot is not None:
                        slot.release()
                    tg.start_soon(self._watch, watchers.watch_refused, link)
                    tg.start_soon(self._watch, watchers.watch_health, link, self.config, self)
                    tg.start_soon(watchers.watch_tools, link, self._tools_dirty, self.config, self)
                    tg.start_soon(watchers.watch_surface, link, self._surface_dirty, self.config, self)
                    await anyio.sleep_forever()
        except Exception as exc:  # an ExceptionGroup from the task group, or a spawn error
            ended = self._ended_by(exc, http)
            if http is not None and http.back_at is not None:
                ended.asked_wait = max(0.0, http.back_at - time.monotonic())
            return ended
        finally:
            self._link = None
            self._child = None
        return None

    def _ended_by(self, exc: BaseException, http: sdk.HttpWatch | None) -> RunEnded:
        if self._early is not None:
            return self._early[0]  # what was decided on, whatever else the teardown raised
        leaf = _first_leaf(exc)
        if isinstance(leaf, RunEnded):
            return leaf
        if isinstance(leaf, SpawnError):
            return RunEnded(str(leaf), Ending.CRASHED if leaf.transient else Ending.UNSPAWNABLE)
        reason = describe_error(leaf)
        if http is not None and (sdk.is_connection_error(leaf) or http.reason is not None):
            return RunEnded(http.reason or reason, Ending.UNREACHABLE)
        return RunEnded(reason)

    @contextlib.asynccontextmanager
    async def _connect(self, tg: TaskGroup, http: sdk.HttpWatch | None) -> AsyncIterator[Session]:
        config = self.config
        if http is not None:
            async with sdk.open_http_session(config, http, self._hooks()) as remote:
                yield remote
            return
        async with open_stdio_child(config, self._stderr, self._groups) as (child, lines):
            self._child = child
            log.debug("server.spawned", server=self.name, pid=child.pid)
            tg.start_soon(self._watch, watchers.watch_exit, child, config.stop_grace)
            async with open_stdio_session(child, lines, self._hooks()) as local:
                yield local

    def _hooks(self) -> SessionHooks:
        return SessionHooks(
            self._tools_dirty.set,
            self._surface_dirty.set,
            self._ask,
            self._log_message,
            resource_updated=self._resource_updated,
            stdout=self._stdout_line,
            paged=self._cuts.paged,
        )

    async def _ask(self, method: str, params: dict[str, Any]) -> ServerReply:
        """A request from the server (sampling, elicitation, roots), for the router to answer."""
        return await self._router(ServerRequest(server=self.name, method=method, params=params))

    async def _handshake(self, session: Session, http: sdk.HttpWatch | None) -> Link:
        timeout = self.config.connect_timeout
        try:
            with anyio.fail_after(timeout):
                info, tools, surface = await handshake(session)
        except TimeoutError:
            if http is None:  # a remote server's slowness says nothing of this machine's load
                self._start_gate.timed_out()
            reason = f"no answer to initialize and its lists within {timeout:g}s"
            raise await self._handshake_failed(reason) from None
        except RequestFailed as exc:
            reason = str(exc) or "the connection closed"
            if http is not None and http.auth_refused:
                # Not an outage to reconnect to every few seconds: the credentials must change
                # (or the server's mind); retried with the backoff of a crash, saying why.
                raise RunEnded(http.reason or reason) from None
            # A refused connection, or a gateway's 502-504 (the HTTP layer has said so): not there yet.
            if http is not None and (is_lost(exc) or http.reason is not None):
                raise RunEnded(http.reason or reason, Ending.UNREACHABLE) from None
            raise await self._handshake_failed(reason) from None
        if http is None:
            self._start_gate.succeeded()
        self._server_info = info
        self._set_tools(tools)
        self._surface = surface
        link = Link(session=session, child=self._child, http=http)
        self._link = link
        self._live_since = time.monotonic()
        self.last_error = None  # a successful start: nothing is wrong now (last_exit keeps the past)
        pid = f" (pid {self._child.pid})" if self._child else ""
        self._set(S.RUNNING, f"ready with {len(tools)} tools{pid}")
        return link

    async def _handshake_failed(self, reason: str) -> RunEnded:
        child = self._child
        if child is None:
            return RunEnded(reason)
        # A closed connection usually means the process is exiting; let the exit be seen.
        with anyio.move_on_after(0.5):
            await child.exited.wait()
        if child.returncode is not None:
            return RunEnded(f"{child.exit_reason()} during initialize")
        # Alive but not speaking MCP: say so before the process is stopped and retried.
        self.last_error = reason
        self._set(S.DEGRADED, f"{reason}; process {child.pid} alive")
        return RunEnded(reason)

    async def _watch(self, watcher: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Run a watcher of the live run; the end it finds is acted on at once (``_ending``)."""
        try:
            await watcher(*args)
        except RunEnded as ended:
            self._ending(ended)
            raise

    def _ending(self, ended: RunEnded) -> None:
        """The live run ended on its own: decide now, and wait out a backoff from now, before the
        run's teardown, which can take ``stop_bound`` (a process the server started holds its
        stdout and ignores SIGTERM). Meanwhile status said ``running`` of a process gone, with no
        ``last_error``. A give-up or a stop is applied after the teardown as before: ``stop()`` and
        a reload wait for what the server left to be gone."""
        if self._early is not None or self._state not in LIVE_STATES or self._stop_wanted():
            return
        # A remote run's end waits for its ``Retry-After`` (read once the session is closed), and
        # its teardown is no process group's.
        if self._restart_wanted or self._child is None:
            return
        decision = self._decide(ended)
        self._early = (ended, decision)
        if isinstance(decision, Retry):
            self._back_off(ended, decision)

    async def _watch_wishes(self, tg: TaskGroup) -> None:
        while self._want_running and not self._restart_wanted:
            await self._wake.wait()
        # What the calls the stop fails are told (the server did not fail them: mcpd was asked to).
        child = self._child
        if child is not None and child.ended_for is None:
            child.ended_for = self._stop_why
        tg.cancel_scope.cancel()

    # -- its log ----------------------------------------------------------------------------

    def _stderr_line(self, text: str) -> None:
        self.logs.add("stderr", text)

    def _stdout_line(self, text: str) -> None:
        self.logs.add("stdout", text)

    def _log_message(self, message: LogMessage) -> None:
        # The log keeps the data as text, cut (``LogRing``); hosts are given it as it came, within
        # the size of the line or HTTP body it came in.
        self.logs.add("mcp", message.text(), level=message.level, logger=message.logger)
        if self._on_log is not None:
            self._on_log(self.name, message)

    # -- watchers.Hooks -----------------------------------------------------------------------

    def degrade(self, reason: str) -> None:
        self.last_error = reason
        if self._state is S.RUNNING:
            self._set(S.DEGRADED, reason)

    def recover(self, reason: str) -> None:
        link = self._link
        still = self._still_degraded(link) if link is not None else None
        if still is not None:
            # What degraded it last may have passed (a ping answered, a list listed again): say
            # what keeps it so, not that.
            self.last_error = still
            return
        if self._state is S.DEGRADED:
            self.last_error = None
            self._set(S.RUNNING, reason)

    def _still_degraded(self, link: Link) -> str | None:
        """Why the server stays degraded whatever answers: a list it holds is old (an answered ping
        does not make it fresh), or its tools hang (an answered ping does not make them answer)."""
        if link.stale:
            return next(iter(link.stale.values()))
        if link.hung >= self._hung_limit():
            return link.hung_said
        return None

    # -- calls.CallWatch ----------------------------------------------------------------------

    def _hung_limit(self) -> int:
        return max(1, self.config.unhealthy_after)

    def calls_hung(self, link: Link, what: str) -> None:
        """Said in ``last_error`` from the first; ``degraded`` once ``unhealthy_after`` in a row
        hung, as for pings, but never restarted for it: a slow tool is no dead server, and a
        restart would fail the calls the others are running."""
        if link is not self._link:
            return  # a call of a run that has ended
        reason = f"{link.hung} tool call{'s' if link.hung > 1 else ''} in a row timed out (last: {what})"
        self.last_error = link.hung_said = reason
        if link.hung >= self._hung_limit() and self._state is S.RUNNING:
            self._set(S.DEGRADED, reason)

    def calls_answered(self, link: Link) -> None:
        if link is not self._link:
            return
        if self._state is S.DEGRADED:
            self.recover("a tool call was answered")
        elif self.last_error is link.hung_said:
            self.last_error = None

    def tools_listed(self, tools: tuple[ToolInfo, ...]) -> None:
        self.recover("tools/list answered")
        if tools == self._tools:
            return  # a list_changed that changed nothing: no event, no log line
        self._set_tools(tools)
        log.info("server.tools_changed", server=self.name, tools=len(tools))
        self._emit(ToolsChanged(server=self.name, tools=len(tools)))

    def surface_listed(self, surface: Surface) -> None:
        self.recover("resources/prompts listed")
        if surface != self._surface:
            old, self._surface = self._surface, surface
            log.info(
                "server.surface_changed",
                server=self.name,
                resources=len(surface.resources),
                templates=len(surface.templates),
                prompts=len(surface.prompts),
            )
            resources = (old.resources, old.templates) != (surface.resources, surface.templates)
            prompts = old.prompts != surface.prompts
            self._emit(SurfaceChanged(server=self.name, resources=resources, prompts=prompts))

    def _resource_updated(self, uri: str, meta: dict[str, Any] | None) -> None:
        self._emit(ResourceUpdated(server=self.name, uri=uri, meta=meta))

    # -- state --------------------------------------------------------------------------------

    def _wake_waiters(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def _set_tools(self, tools: tuple[ToolInfo, ...]) -> None:
        self._tools = tools
        self._tool_names = frozenset(t.name for t in tools)

    def _set(self, new: ServerState, reason: str) -> None:
        old = self._state
        self._state = check_transition(old, new)
        self._history.append(StateChange(ts=time.time(), old=old, new=new, reason=reason))
        self._wake_waiters()
        if old is S.STARTING:
            self.first_attempt_done.set()
        pid = self._child.pid if self._child is not None else None
        log.info("server.state", server=self.name, old=str(old), new=str(new), reason=reason, pid=pid)
        self._emit(StateChanged(server=self.name, old=old, new=new, reason=reason))
