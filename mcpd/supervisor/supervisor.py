"""The set of supervised servers: start them all at once, apply a reload diff, stop them all."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable

import anyio
import structlog
from anyio.abc import TaskGroup

from mcpd.config.model import MAX_STOP_GRACE, Config, ServerConfig
from mcpd.errors import UnknownServer
from mcpd.model.logs import LogMessage
from mcpd.model.servers import ReloadPlan, ServerEvent, ServerStatus
from mcpd.model.states import LIVE_STATES, ServerState
from mcpd.supervisor.actor import LogListener, Router, ServerActor, refuse_server_requests, stop_bound
from mcpd.supervisor.gate import StartGate
from mcpd.supervisor.link import Link
from mcpd.supervisor.logring import LogRing
from mcpd.supervisor.orphans import GroupLedger
from mcpd.supervisor.session import RequestFailed

log = structlog.get_logger("mcpd.supervisor")

ROOTS_NOTICE_WAIT = 5.0
"""Seconds a remote server gets to take a roots notice (a stdio one takes it at once)."""


async def _tell_roots_changed(server: str, link: Link) -> None:
    with anyio.move_on_after(ROOTS_NOTICE_WAIT):
        try:
            await link.session.roots_changed()
        except RequestFailed as exc:
            log.debug("server.roots_notice_failed", server=server, error=str(exc))


S = ServerState

STOP_BOUND = stop_bound(MAX_STOP_GRACE)
"""The longest any stop, reload or shutdown of the supervisor waits: servers stop in parallel, and
the config bounds keep each one's own stop (``stop_grace`` twice, then SIGKILL) below it."""

Listener = Callable[[ServerEvent], None]
"""Told of every state and tool-list change; must not block (it runs in the actor's task)."""


def plan_reload(old: dict[str, ServerConfig], new: Config) -> ReloadPlan:
    """Diff the running configs against a new config, by server name and full equality."""
    new_by_name = {s.name: s for s in new.servers}
    return ReloadPlan(
        added=tuple(sorted(new_by_name.keys() - old.keys())),
        removed=tuple(sorted(old.keys() - new_by_name.keys())),
        changed=tuple(sorted(n for n in old.keys() & new_by_name.keys() if old[n] != new_by_name[n])),
        unchanged=tuple(sorted(n for n in old.keys() & new_by_name.keys() if old[n] == new_by_name[n])),
    )


class Supervisor:
    """Owns one ``ServerActor`` task per configured server, all in one task group."""

    def __init__(
        self,
        tg: TaskGroup,
        *,
        listeners: list[Listener] | None = None,
        start_gate: StartGate | None = None,
        router: Router = refuse_server_requests,
        groups: GroupLedger | None = None,
    ) -> None:
        self._tg = tg
        self._router = router
        self._groups = groups
        self._actors: dict[str, ServerActor] = {}
        self._scopes: dict[str, anyio.CancelScope] = {}
        self._listeners = list(listeners or [])
        self._log_listeners: list[LogListener] = []
        self._start_gate = start_gate or StartGate()

    # -- queries ----------------------------------------------------------------------------

    def names(self) -> list[str]:
        return sorted(self._actors)

    def actor(self, name: str) -> ServerActor:
        try:
            return self._actors[name]
        except KeyError:
            raise UnknownServer(f"no server named {name!r} is configured", {"server": name}) from None

    def actors(self) -> list[ServerActor]:
        """All actors, sorted by server name: the one stable order everything lists in."""
        return [self._actors[name] for name in sorted(self._actors)]

    def status(self) -> list[ServerStatus]:
        return [actor.status() for actor in self.actors()]

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def roots_changed(self) -> None:
        """A host's roots changed: every live server hears so (``notifications/roots/list_changed``),
        and one that kept the roots it asked for asks again. Best effort, each within a few seconds."""
        async with anyio.create_task_group() as tg:
            for actor in self.actors():
                link = actor.link
                if link is not None and link.usable():
                    tg.start_soon(_tell_roots_changed, actor.name, link)

    # -- changes ----------------------------------------------------------------------------

    def add_log_listener(self, listener: LogListener) -> None:
        """Tell ``listener`` each MCP log message of every server (apart from events: they can flood)."""
        self._log_listeners.append(listener)

    def _emit_log(self, server: str, message: LogMessage) -> None:
        for listener in self._log_listeners:
            try:
                listener(server, message)
            except Exception:
                log.exception("supervisor.log_listener_failed")

    def _emit(self, event: ServerEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                # A listener's bug must not break the actor that emitted, nor the listeners after it.
                log.exception("supervisor.listener_failed", listener=getattr(listener, "__qualname__", None))

    def add(self, config: ServerConfig, logs: LogRing | None = None) -> ServerActor:
        """Start supervising ``config`` (it starts at once unless disabled); ``logs`` carries on a
        log from before (a changed config is the same server)."""
        actor = ServerActor(
            config,
            self._emit,
            start_gate=self._start_gate,
            router=self._router,
            logs=logs,
            on_log=self._emit_log,
            groups=self._groups,
        )
        scope = anyio.CancelScope()
        self._actors[config.name] = actor
        self._scopes[config.name] = scope

        async def supervise() -> None:
            with scope:
                await actor.run()

        self._tg.start_soon(supervise, name=f"mcpd.server.{config.name}")
        return actor

    async def remove(self, name: str) -> None:
        """Stop a server (within ``STOP_BOUND``) and forget it, its log too (its followers end)."""
        logs = self.actor(name).logs
        await self._retire(name, "removed from the config by a reload")
        del self._actors[name]
        logs.close()

    async def _retire(self, name: str, why: str) -> None:
        await self.actor(name).stop(why=why)
        self._scopes.pop(name).cancel()

    async def _replace(self, config: ServerConfig) -> None:
        """A changed server: the old run stops, then the new one starts under the same name, its
        restart count one higher if the old one was running (or on its way to) and its log carried
        on. The old one stays listed until then, and what waited for it goes on with the new one."""
        old = self.actor(config.name)
        was_running = old.state in (*LIVE_STATES, ServerState.STARTING, ServerState.BACKOFF)
        old.replacing()
        await self._retire(config.name, "its config changed (reload)")
        self.add(config, old.logs).restarts = old.restarts + was_running
        old.hand_over(self._actors[config.name])

    async def apply(self, config: Config) -> ReloadPlan:
        """Bring the running set in line with ``config``; untouched servers keep running as they are."""
        plan = plan_reload({n: a.config for n, a in self._actors.items()}, config)
        new = {s.name: s for s in config.servers}
        async with anyio.create_task_group() as tg:
            for name in plan.removed:
                tg.start_soon(self.remove, name)
            for name in plan.changed:
                tg.start_soon(self._replace, new[name])
        # After the removed ones are gone: a server renamed must not run twice at once (a port, a lock).
        for name in plan.added:
            self.add(new[name])
        log.info(
            "config.reloaded",
            source=config.source,
            added=list(plan.added),
            removed=list(plan.removed),
            changed=list(plan.changed),
            unchanged=len(plan.unchanged),
        )
        return plan

    async def wait_started(self, timeout: float) -> None:
        """Wait until every enabled server has finished its first start attempt, or ``timeout``."""
        with anyio.move_on_after(timeout):
            for actor in self.actors():
                if actor.config.enabled:
                    await actor.first_attempt_done.wait()

    async def stop_all(self) -> None:
        """Stop every server in parallel, within ``STOP_BOUND`` whatever the configs say."""
        with anyio.move_on_after(STOP_BOUND):
            async with anyio.create_task_group() as tg:
                for actor in self.actors():
                    tg.start_soon(functools.partial(actor.stop, why="mcpd is stopping"))
        for scope in self._scopes.values():
            scope.cancel()


@contextlib.asynccontextmanager
async def open_supervisor(
    config: Config,
    *,
    listeners: list[Listener] | None = None,
    start_gate: StartGate | None = None,
    router: Router = refuse_server_requests,
    groups: GroupLedger | None = None,
) -> AsyncIterator[Supervisor]:
    """Start every server of ``config`` concurrently; on exit stop them all. ``router`` answers the
    servers' requests to their client (sampling, elicitation, roots); ``groups`` records their
    children's sessions for the next daemon (see ``orphans``)."""
    async with anyio.create_task_group() as tg:
        supervisor = Supervisor(tg, listeners=listeners, start_gate=start_gate, router=router, groups=groups)
        for server in config.servers:
            supervisor.add(server)
        try:
            yield supervisor
        finally:
            with anyio.CancelScope(shield=True):
                await supervisor.stop_all()
