"""The daemon's methods: each one declared once, with its params struct, beside its handler."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import msgspec
import structlog

from mcpd.config.load import EMBEDDED_SOURCE, load_config
from mcpd.config.model import Config, DaemonSettings
from mcpd.daemon.logfollow import Followers
from mcpd.daemon.notify import Notifier
from mcpd.discovery.groups import group_similar
from mcpd.discovery.select import Candidate, select_servers
from mcpd.errors import (
    CallTimeout,
    ConfigError,
    McpdError,
    UnknownTool,
)
from mcpd.front import calls, surface
from mcpd.front.behind import Behind
from mcpd.front.core import Caller, Core
from mcpd.ipc.server import Connection, MethodTable, current_request
from mcpd.model.logs import LogsParams, LogsResult
from mcpd.model.mcp import RESOURCE_UPDATED
from mcpd.model.protocol import (
    EVENT_NOTIFICATION,
    MAX_CALL_PARAMS,
    PROGRESS_NOTIFICATION,
    ApproveParams,
    ApproveResult,
    CapabilityParams,
    ConnectResult,
    NoParams,
    Ok,
    Progress,
    ReloadResult,
    ReportParams,
    SelectParams,
    SelectResult,
    ServerParams,
    SessionTools,
    SnippetResult,
    StatusResult,
    ToolsCallParams,
    ToolsListParams,
    ToolsListResult,
    TrustResult,
)
from mcpd.model.requests import ClientCapabilities, ServerReplyParams
from mcpd.model.resources import (
    CompleteParams,
    CompleteResult,
    PromptGetParams,
    PromptResult,
    PromptsListResult,
    ReadParams,
    ReadResult,
    ResourcesListResult,
    SurfaceListParams,
    TemplatesListResult,
)
from mcpd.model.servers import ResourceUpdated, ServerDetail, ServerStatus, ends_subscription
from mcpd.model.states import LIVE_STATES, ServerState
from mcpd.model.tools import ToolResult
from mcpd.model.uris import qualify_uri
from mcpd.model.usage import CapabilityGroup, ReportResult, ToolReport
from mcpd.registry.names import qualify
from mcpd.store import usage as usage_report
from mcpd.store.db import StoreUnavailable
from mcpd.supervisor.actor import ServerActor
from mcpd.supervisor.session import ProgressCallback
from mcpd.supervisor.supervisor import Supervisor

S = ServerState
log = structlog.get_logger("mcpd.daemon")
_json = msgspec.json.Encoder()


@dataclass(kw_only=True)
class Daemon(Core):
    """What handlers work on: the call path's core, and where the config came from."""

    config: Config
    """The config now in force (replaced by each successful reload)."""
    config_path: Path | None
    http_flag: str | None = None
    """``mcpd serve --http``, which stands over the file's ``http`` for this daemon's life."""
    notifier: Notifier = field(default_factory=lambda: Notifier(""))
    reload_lock: anyio.Lock = field(default_factory=anyio.Lock)
    log_followers: Followers = field(default_factory=Followers)

    async def reload(self) -> ReloadResult:
        """Re-read the config and apply the diff; a broken file raises ``ConfigError`` and changes nothing.

        systemd hears RELOADING=1 before and READY=1 after, whether the reload applied or not (once
        the start-up is over: a READY=1 sooner would end it before the servers' first attempts).
        """
        self.notifier.reloading()
        try:
            return await self._reload()
        except ConfigError as exc:
            # Logged here, whichever way the reload came (SIGHUP or `mcpd reload`): the journal
            # says why the running set stayed as it was, not only the client that asked.
            log.error("config.reload_rejected", error=exc.message)
            raise
        finally:
            self.notifier.reloaded(summary(self.supervisor))

    async def _reload(self) -> ReloadResult:
        async with self.reload_lock:
            try:
                config = await self._read_whole()
            except ConfigError as exc:
                # Every refusal says the same first: a file that is not TOML or a bad [daemon]
                # table said only the file's problem, as if the daemon had not been running.
                raise ConfigError(f"reload refused, nothing changed: {exc.message}") from None
            # Shielded: a client that hangs up mid-reload must not leave the diff half applied.
            # apply() is bounded by the servers' stop grace periods, each forgetter by its own wait.
            with anyio.CancelScope(shield=True):
                plan = await self.supervisor.apply(config)
                for name in plan.removed:  # a server of that name later may be another one
                    self.subscriptions.forget(name)
                if plan.removed:
                    for forget in self.forgetters:
                        await forget(plan.removed)
            waiting = self._restart_needed(config.daemon)
            # What is in force stays said as it is: the settings apply at the next start.
            self.config = msgspec.structs.replace(config, daemon=self.config.daemon)
            self.catalog.prune()
        if waiting:
            log.warning("config.restart_needed", settings=waiting)
        return ReloadResult(source=config.source, plan=plan, restart_needed=waiting)

    async def _read_whole(self) -> Config:
        """The config file, read for a reload: any problem in it is a ``ConfigError``."""
        # Off the loop: a config file on a slow or network disk must not stall every client.
        config = await anyio.to_thread.run_sync(load_config, self.config_path)
        if config.source == EMBEDDED_SOURCE != self.config.source:
            # The user's default file is gone (moved aside to edit, or an editor's delete and
            # write): the demo in place of every server it configured is never what was meant.
            raise ConfigError(
                f"{self.config.source} is not there any more; put it back (an empty file stops every server)"
            )
        if config.issues:
            # At start a bad entry is skipped; on reload skipping it would stop a running
            # server over a typo. The whole new config is refused instead.
            raise ConfigError("; ".join(str(issue) for issue in config.issues))
        return config

    def _restart_needed(self, read: DaemonSettings) -> list[str]:
        """The ``[daemon]`` settings the file now sets otherwise than they are in force: the socket
        limits, the store and the HTTP front end are set up once, at start."""
        wanted = read if self.http_flag is None else msgspec.structs.replace(read, http=self.http_flag)
        now = self.config.daemon
        return [
            name for name in DaemonSettings.__struct_fields__ if getattr(wanted, name) != getattr(now, name)
        ]


def summary(supervisor: Supervisor) -> str:
    """One line for systemd's STATUS=: how many servers run, and which are in trouble."""
    statuses = supervisor.status()
    running = sum(1 for s in statuses if s.state in LIVE_STATES)
    troubled = [s.name for s in statuses if s.state in ("failed", "backoff", "degraded")]
    line = f"{running}/{len(statuses)} servers running"
    return line + (f"; trouble: {', '.join(troubled)}" if troubled else "")


methods: MethodTable[Daemon] = MethodTable()


@methods.method("ping", NoParams, inline=True)
async def ping(daemon: Daemon, conn: Connection, params: NoParams) -> Ok:
    """Whether the daemon is there: a client whose call has heard nothing for a while asks (answered
    by the connection's reader, so a crowd of running calls does not delay it)."""
    return Ok()


@methods.method("status", NoParams)
async def status(daemon: Daemon, conn: Connection, params: NoParams) -> StatusResult:
    return StatusResult(
        servers=[_status(daemon, actor) for actor in daemon.supervisor.actors()],
        store=daemon.usage.state,
        skipped=[str(issue) for issue in daemon.config.issues],
    )


def _status(daemon: Daemon, actor: ServerActor) -> ServerStatus:
    """The actor's status with the trust gate's latest verdict (never waiting for a review)."""
    status = actor.status()
    review = daemon.catalog.reviewed(actor) if status.tools else None
    if review is None:
        return status
    return msgspec.structs.replace(
        status,
        trust=review.summary(),
        blocked=review.blocked,
        held=sorted(review.held),
        held_because=review.held_because(),
    )


@methods.method("servers.show", ServerParams)
async def show(daemon: Daemon, conn: Connection, params: ServerParams) -> ServerDetail:
    """One server in depth: its status, its recent state changes, the tails of its stderr and of
    what mcpd could not use of its stdout."""
    actor = daemon.supervisor.actor(params.name)
    return ServerDetail(
        status=_status(daemon, actor),
        history=actor.history,
        stderr=actor.stderr_tail(),
        stdout=actor.stdout_tail(),
    )


async def _settle(daemon: Daemon, name: str) -> ServerStatus:
    """Wait (bounded by the connect timeout) for a start to end one way or another."""
    actor = daemon.supervisor.actor(name)
    limit = actor.config.connect_timeout + 2 * actor.config.stop_grace + 5
    with anyio.move_on_after(limit):
        await actor.wait_state(S.RUNNING, S.DEGRADED, S.BACKOFF, S.FAILED, S.STOPPED, timeout=limit)
    return actor.status()


async def _wait_starting(actor: ServerActor, timeout: float) -> None:
    try:
        await actor.wait_state(S.STARTING, timeout=timeout)
    except TimeoutError:
        raise CallTimeout(
            f"server {actor.name!r} did not begin to start within {timeout:g}s (state {actor.state})",
            {"server": actor.name, "state": str(actor.state)},
        ) from None


@methods.method("servers.start", ServerParams)
async def start(daemon: Daemon, conn: Connection, params: ServerParams) -> ServerStatus:
    actor = daemon.supervisor.actor(params.name)
    if actor.state in (S.RUNNING, S.DEGRADED):
        return actor.status()
    actor.start()
    await _wait_starting(actor, 5)
    return await _settle(daemon, params.name)


@methods.method("servers.restart", ServerParams)
async def restart(daemon: Daemon, conn: Connection, params: ServerParams) -> ServerStatus:
    actor = daemon.supervisor.actor(params.name)
    actor.restart()
    await _wait_starting(actor, 2 * actor.config.stop_grace + 5)
    return await _settle(daemon, params.name)


@methods.method("servers.stop", ServerParams)
async def stop(daemon: Daemon, conn: Connection, params: ServerParams) -> ServerStatus:
    actor = daemon.supervisor.actor(params.name)
    await actor.stop()
    return actor.status()


@methods.method("reload", NoParams)
async def reload(daemon: Daemon, conn: Connection, params: NoParams) -> ReloadResult:
    return await daemon.reload()


@methods.method("tools.list", ToolsListParams)
async def tools_list(daemon: Daemon, conn: Connection, params: ToolsListParams) -> ToolsListResult:
    return await calls.list_tools(daemon, params)


_CANNOT_SERVE = frozenset({S.FAILED, S.DISABLED, S.STOPPED})


@methods.method("servers.select", SelectParams)
async def servers_select(daemon: Daemon, conn: Connection, params: SelectParams) -> SelectResult:
    # Only servers that can serve: not failed, disabled, stopped or blocked by the verifier.
    serving = set()
    for actor in daemon.supervisor.actors():
        if actor.state not in _CANNOT_SERVE and not (await daemon.catalog.review(actor)).blocked:
            serving.add(actor.name)
    candidates = [Candidate(s.name, s.description) for s in daemon.config.servers if s.name in serving]
    selection = select_servers(params.query, candidates, params.threshold)
    scores = {name: round(score, 4) for name, score in selection.scores.items()}
    return SelectResult(servers=selection.names, scores=scores, fallback=selection.fallback)


def _caller(conn: Connection) -> Caller:
    return Caller(conn.client, str(conn.id))


@methods.method("tools.call", ToolsCallParams, max_bytes=MAX_CALL_PARAMS)
def tools_call(daemon: Daemon, conn: Connection, params: ToolsCallParams) -> Awaitable[ToolResult]:
    # The call itself, not a coroutine around it: one level less for every resume of its await chain.
    on_progress = _progress_relay(conn, current_request.get()) if params.progress else None
    answerer = daemon.requests.clients.get(conn)
    return calls.call_tool(daemon, _caller(conn), params, on_progress, answerer)


def _progress_relay(conn: Connection, request_id: int) -> ProgressCallback:
    def relay(progress: float, total: float | None, message: str | None, meta: dict[str, Any] | None) -> None:
        update = Progress(request=request_id, progress=progress, total=total, message=message, meta=meta)
        conn.notify(PROGRESS_NOTIFICATION, update, advisory=True)

    return relay


@methods.method("capability.request", CapabilityParams)
async def capability_request(daemon: Daemon, conn: Connection, params: CapabilityParams) -> ToolResult:
    return calls.request_capability(daemon, _caller(conn), params.capability, params.context)


@methods.method("report", ReportParams)
async def report(daemon: Daemon, conn: Connection, params: ReportParams) -> ReportResult:
    """Built on the store's thread from rollups: bounded work whatever the store holds, none on the loop."""
    # A window longer than the epoch is everything (and would not fit SQLite's integers).
    since = time.time() - params.since_s if params.since_s and params.since_s < time.time() else None
    try:
        return await daemon.usage.run(lambda db: _report(db, since, params.top))
    except StoreUnavailable as exc:
        raise McpdError(f"no usage report: {exc}", {"usage": "off"}) from None
    except sqlite3.Error as exc:  # the file fails the read itself (corrupt, locked): the store is on
        raise McpdError(f"no usage report: {exc}", {"usage": "error"}) from None


def _report(db: sqlite3.Connection, since: float | None, top: int) -> ReportResult:
    requests = usage_report.capability_rows(db, since)
    groups = group_similar((capability, count) for capability, count, _ in requests)
    last = {capability: ts for capability, _, ts in requests}
    return ReportResult(
        since=since,
        tools=[
            ToolReport(
                name=qualify(row.server, row.tool),
                server=row.server,
                tool=row.tool,
                calls=row.calls,
                failures=row.failures,
                failure_rate=round(row.failures / row.calls, 4),
                p50_ms=round(row.p50_ms, 3),
                p95_ms=round(row.p95_ms, 3),
                last_used=row.last_used,
            )
            for row in usage_report.tool_rows(db, since)
        ],
        capabilities=[
            CapabilityGroup(
                capability=group.representative,
                count=group.count,
                examples=list(group.members)[:3],
                last_requested=max(last[m] for m in group.members),
            )
            for group in groups[:top]
        ],
    )


@methods.method("session.connect", ServerParams)
async def session_connect(daemon: Daemon, conn: Connection, params: ServerParams) -> ConnectResult:
    """Activate a live server's tools for this session only."""
    return await calls.connect_server(daemon, conn.session.activated, params.name)


@methods.method("session.tools", NoParams)
async def session_tools(daemon: Daemon, conn: Connection, params: NoParams) -> SessionTools:
    """The tools this session has connected (of servers still configured)."""
    names = sorted(name for name in conn.session.activated if name in daemon.supervisor.names())
    return SessionTools(servers=names, tools=await daemon.catalog.tools(names) if names else [])


@methods.method("prompt.snippet", NoParams)
async def prompt_snippet(daemon: Daemon, conn: Connection, params: NoParams) -> SnippetResult:
    """An ``<available_mcps>`` block: each configured server's id and short description, XML-escaped."""
    return SnippetResult(text=await calls.snippet(daemon))


@methods.method("trust.approve", ApproveParams)
async def trust_approve(daemon: Daemon, conn: Connection, params: ApproveParams) -> ApproveResult:
    """Accept what holds a server's tools back (or one tool's): changed definitions, verifier findings."""
    actor = daemon.supervisor.actor(params.server)
    gate = daemon.catalog.gate
    known = {tool.name for tool in actor.tools} | gate.pinned(actor.name)
    if params.tool is not None and params.tool not in known:
        raise UnknownTool(
            f"server {actor.name!r} has no tool {params.tool!r} to approve",
            {"server": actor.name, "tool": params.tool},
        )
    await daemon.catalog.review(actor)  # findings are accepted for the texts the server shows now
    already = gate.already_approved(actor.name, params.tool, {tool.name for tool in actor.tools})
    definitions, findings = gate.approve(actor.config, params.tool)
    store = daemon.usage.state
    unsaved = (definitions or findings) and store.state != "ok"
    if unsaved:
        # The decision holds for this run all the same; the person must know it may not outlive it.
        log.warning("trust.not_saved", server=actor.name, tools=definitions, reason=store.reason)
    return ApproveResult(
        approved=definitions,
        findings=findings,
        already_approved=[name for name in already if name not in definitions],
        not_saved=(store.reason or "the usage store is off") if unsaved else None,
        pending=bool(unsaved) and store.state == "retrying",
    )


@methods.method("trust.show", ServerParams)
async def trust_show(daemon: Daemon, conn: Connection, params: ServerParams) -> TrustResult:
    """What the trust gate says of a server: held-back changes (as diffs) and verifier findings."""
    actor = daemon.supervisor.actor(params.name)
    review = await daemon.catalog.review(actor)
    return TrustResult(
        server=params.name,
        summary=review.summary(),
        changes=daemon.catalog.gate.changes(
            params.name, {t.name for t in actor.tools} if actor.tools else None
        ),
        findings=daemon.catalog.gate.findings(params.name),
    )


@methods.method("resources.list", SurfaceListParams)
async def resources_list(daemon: Daemon, conn: Connection, params: SurfaceListParams) -> ResourcesListResult:
    """The live servers' resources, under ``mcpd://<server>/<uri>``."""
    return ResourcesListResult(resources=await surface.resources(daemon, params))


@methods.method("resources.templates", SurfaceListParams)
async def resources_templates(
    daemon: Daemon, conn: Connection, params: SurfaceListParams
) -> TemplatesListResult:
    return TemplatesListResult(templates=await surface.templates(daemon, params))


@methods.method("resources.read", ReadParams)
async def resources_read(daemon: Daemon, conn: Connection, params: ReadParams) -> ReadResult:
    return await surface.read(daemon, params)


@methods.method("prompts.list", SurfaceListParams)
async def prompts_list(daemon: Daemon, conn: Connection, params: SurfaceListParams) -> PromptsListResult:
    """The live servers' prompts, named ``server__prompt``."""
    return PromptsListResult(prompts=await surface.prompts(daemon, params))


@methods.method("prompts.get", PromptGetParams)
async def prompts_get(daemon: Daemon, conn: Connection, params: PromptGetParams) -> PromptResult:
    return await surface.get_prompt(daemon, params)


@methods.method("resources.subscribe", ReadParams)
async def resources_subscribe(daemon: Daemon, conn: Connection, params: ReadParams) -> Ok:
    """Updates of the resource arrive as ``ResourceUpdated`` events (qualified URI) until
    ``resources.unsubscribe`` or the end of the connection."""
    if conn.flush_held is None:
        _register(daemon, conn)
    await surface.subscribe(daemon, conn, params)
    return Ok()


def _register(daemon: Daemon, conn: Connection) -> None:
    """Make ``conn`` a subscriber, once: its updates are held while it is behind, not dropped."""
    behind: Behind[ResourceUpdated] = Behind(
        conn.room_for_advice,
        lambda event: conn.notify(EVENT_NOTIFICATION, event),
        size=_update_size,
        dropped=lambda: conn.drop_advice(RESOURCE_UPDATED),
    )

    def deliver(server: str, uri: str, meta: dict[str, Any] | None) -> None:
        updated = ResourceUpdated(server=server, uri=qualify_uri(server, uri), meta=meta)
        behind.offer(updated.uri, updated, final=ends_subscription(meta))

    daemon.subscriptions.register(conn, deliver)
    conn.flush_held = behind.flush
    conn.tasks.spawn(_drop_at_close(daemon, conn, behind))


def _update_size(event: ResourceUpdated) -> int:
    return len(event.uri) + (len(_json.encode(event.meta)) if event.meta else 0)


async def _drop_at_close(daemon: Daemon, conn: Connection, behind: Behind[ResourceUpdated]) -> None:
    # Cancelled with the connection's other tasks when it ends: its subscriptions end with it.
    try:
        await anyio.sleep_forever()
    finally:
        daemon.subscriptions.drop(conn)
        behind.close()


@methods.method("resources.unsubscribe", ReadParams)
async def resources_unsubscribe(daemon: Daemon, conn: Connection, params: ReadParams) -> Ok:
    """``ok`` is false when this connection was not subscribed to the resource."""
    return Ok(ok=await surface.unsubscribe(daemon, conn, params))


@methods.method("completion.complete", CompleteParams)
async def completion_complete(daemon: Daemon, conn: Connection, params: CompleteParams) -> CompleteResult:
    """Values for a prompt argument (``server__prompt``) or a template variable (``mcpd://server/...``)."""
    return await surface.complete(daemon, params)


@methods.method("subscribe", NoParams)
async def subscribe(daemon: Daemon, conn: Connection, params: NoParams) -> Ok:
    return Ok(ok=conn.subscribe())


# -- requests from servers (sampling, elicitation, roots; see mcpd.front.server_requests) ---------


@methods.method("session.capabilities", ClientCapabilities)
async def session_capabilities(daemon: Daemon, conn: Connection, params: ClientCapabilities) -> Ok:
    """Which server requests this connection answers (``server.request`` during its tool calls)."""
    daemon.requests.client(conn).declared = params
    return Ok()


@methods.method("server.reply", ServerReplyParams, max_bytes=MAX_CALL_PARAMS, inline=True)
async def server_reply(daemon: Daemon, conn: Connection, params: ServerReplyParams) -> Ok:
    """The answer to a ``server.request``; ``ok`` is false when it came too late (or was never asked)."""
    answerer = daemon.requests.clients.get(conn)
    return Ok(ok=answerer is not None and answerer.reply(params))


@methods.method("logs", LogsParams)
async def logs(daemon: Daemon, conn: Connection, params: LogsParams) -> LogsResult:
    """A server's latest stderr lines and log messages, oldest first (across its restarts)."""
    ring = daemon.supervisor.actor(params.server).logs
    return LogsResult(server=params.server, entries=ring.last(params.limit))


@methods.method("logs.follow", LogsParams)
async def logs_follow(daemon: Daemon, conn: Connection, params: LogsParams) -> Ok:
    """Send the latest ``limit`` entries, then each new one, as ``logs`` notifications.

    All of them, the latest included, come as notifications after this answer, so a client
    gets them in order without merging an answer with a stream.
    """
    ring = daemon.supervisor.actor(params.server).logs
    held = len(ring) if params.limit is None else min(params.limit, len(ring))
    daemon.log_followers.follow(conn, params.server, ring, ring.next_seq - held)
    return Ok()


@methods.method("logs.unfollow", ServerParams)
async def logs_unfollow(daemon: Daemon, conn: Connection, params: ServerParams) -> Ok:
    return Ok(ok=daemon.log_followers.unfollow(conn, params.name))
