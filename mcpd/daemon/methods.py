"""The daemon's methods: each one declared once, with its params struct, beside its handler."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

import anyio
import msgspec
import structlog

from mcpd.config.load import load_config
from mcpd.config.model import Config
from mcpd.daemon.activity import Activity
from mcpd.daemon.notify import Notifier
from mcpd.discovery.groups import group_similar
from mcpd.discovery.prior import UsagePrior
from mcpd.discovery.render import one_line, render
from mcpd.discovery.select import Candidate, select_servers
from mcpd.discovery.text import terms
from mcpd.errors import (
    CallTimeout,
    ConfigError,
    InvalidParams,
    McpdError,
    NotApproved,
    ServerNotRunning,
    TransportError,
)
from mcpd.ipc.server import Connection, MethodTable, current_request
from mcpd.model.protocol import (
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
from mcpd.model.servers import ServerStatus
from mcpd.model.states import LIVE_STATES, ServerState
from mcpd.model.tools import ToolResult
from mcpd.model.usage import CallRecord, CapabilityGroup, CapabilityRecord, ReportResult, ToolReport
from mcpd.registry import reserved
from mcpd.registry.catalog import Catalog
from mcpd.registry.names import qualify
from mcpd.store import usage as usage_report
from mcpd.store.db import Store, StoreUnavailable
from mcpd.supervisor.actor import ServerActor
from mcpd.supervisor.rawrpc import ProgressCallback
from mcpd.supervisor.supervisor import Supervisor

S = ServerState
log = structlog.get_logger("mcpd.daemon")


@dataclass
class Daemon:
    """What handlers work on: the supervised set, its catalogue, where the config came from."""

    supervisor: Supervisor
    catalog: Catalog
    config: Config
    """The config now in force (replaced by each successful reload)."""
    config_path: Path | None
    usage: Store = field(default_factory=lambda: Store.disabled("usage recording is off"))
    prior: UsagePrior = field(default_factory=UsagePrior)
    notifier: Notifier = field(default_factory=lambda: Notifier(""))
    reload_lock: anyio.Lock = field(default_factory=anyio.Lock)
    activity: Activity = field(default_factory=Activity)

    async def reload(self) -> ReloadResult:
        """Re-read the config and apply the diff; a broken file raises ``ConfigError`` and changes nothing.

        systemd hears RELOADING=1 before and READY=1 after, whether the reload applied or not.
        """
        self.notifier.reloading()
        try:
            return await self._reload()
        finally:
            self.notifier.ready(summary(self.supervisor))

    async def _reload(self) -> ReloadResult:
        async with self.reload_lock:
            config = load_config(self.config_path)
            if config.issues:
                # At start a bad entry is skipped; on reload skipping it would stop a running
                # server over a typo. The whole new config is refused instead.
                problems = "; ".join(str(issue) for issue in config.issues)
                raise ConfigError(f"reload refused, nothing changed: {problems}")
            # Shielded: a client that hangs up mid-reload must not leave the diff half applied.
            # apply() is bounded by the servers' stop grace periods.
            with anyio.CancelScope(shield=True):
                plan = await self.supervisor.apply(config)
            self.config = config
        return ReloadResult(source=config.source, plan=plan)


def summary(supervisor: Supervisor) -> str:
    """One line for systemd's STATUS=: how many servers run, and which are in trouble."""
    statuses = supervisor.status()
    running = sum(1 for s in statuses if s.state in LIVE_STATES)
    troubled = [s.name for s in statuses if s.state in ("failed", "backoff", "degraded")]
    line = f"{running}/{len(statuses)} servers running"
    return line + (f"; trouble: {', '.join(troubled)}" if troubled else "")


methods: MethodTable[Daemon] = MethodTable()


@methods.method("status", NoParams)
async def status(daemon: Daemon, conn: Connection, params: NoParams) -> StatusResult:
    return StatusResult(servers=[_status(daemon, actor) for actor in daemon.supervisor.actors()])


def _status(daemon: Daemon, actor: ServerActor) -> ServerStatus:
    """The actor's status with the trust gate's latest verdict (never waiting for a review)."""
    status = actor.status()
    review = daemon.catalog.reviewed(actor) if status.tools else None
    if review is None:
        return status
    return msgspec.structs.replace(
        status, trust=review.summary(), blocked=review.blocked, held=sorted(review.held)
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
    with_reserved = params.include_reserved and params.servers is None
    # The reserved tool counts within the limit: `limit` is the length of the answer.
    limit = params.limit - 1 if with_reserved and params.limit is not None else params.limit
    if limit == 0:
        tools = []
    elif params.query and params.query.strip():
        tools = await daemon.catalog.search(
            params.query, params.servers, limit, prior=daemon.prior, explain=params.explain
        )
    else:
        tools = (await daemon.catalog.tools(params.servers))[:limit]
    if with_reserved:
        tools.append(reserved.ENTRY)  # in every registry that is not explicitly about other servers
    rendered = None
    if params.budget_tokens is not None:
        # The reserved tool first, so an agent always learns how to report a missing capability.
        ordered = [reserved.ENTRY, *tools[:-1]] if with_reserved else tools
        rendered = render(ordered, params.budget_tokens)
    return ToolsListResult(tools=tools, rendered=rendered)


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


@methods.method("tools.call", ToolsCallParams, max_bytes=MAX_CALL_PARAMS)
async def tools_call(daemon: Daemon, conn: Connection, params: ToolsCallParams) -> ToolResult:
    if reserved.is_reserved(params.tool, params.server):
        capability = params.arguments.get("capability")
        if not isinstance(capability, str) or not capability.strip():
            raise InvalidParams(f"{reserved.NAME} needs a non-empty string `capability`")
        context = params.arguments.get("context")
        return _request_capability(daemon, conn, capability, context if isinstance(context, str) else None)
    if params.server is None:
        server, tool = daemon.catalog.resolve(params.tool)
    else:
        server, tool = params.server, params.tool
    actor = daemon.supervisor.actor(server)
    held = await daemon.catalog.denied(actor, tool)
    if held is not None:
        raise NotApproved(
            f"{qualify(server, tool)} is held back: {held}", {"server": server, "tool": tool, "reason": held}
        )
    call = _CallRecorder(daemon, conn, server, tool, params.query)
    on_progress = _progress_relay(conn, current_request.get()) if params.progress else None
    try:
        result = await actor.call_tool(tool, params.arguments, params.timeout, on_progress)
    except McpdError as exc:
        call.done(_OUTCOMES.get(type(exc), "error"), type(exc).__name__)
        raise
    except anyio.get_cancelled_exc_class():
        call.done("cancelled")  # withdrawn by the client (`cancel`, or it hung up): not the tool's fault
        raise
    call.done("tool_error" if result.is_error else "ok")
    return result


def _progress_relay(conn: Connection, request_id: int) -> ProgressCallback:
    def relay(progress: float, total: float | None, message: str | None) -> None:
        conn.notify(
            PROGRESS_NOTIFICATION,
            Progress(request=request_id, progress=progress, total=total, message=message),
        )

    return relay


_OUTCOMES: dict[type[McpdError], str] = {CallTimeout: "timeout", TransportError: "transport_error"}


class _CallRecorder:
    """Times one call and records its outcome in the usage store and the ranking prior."""

    def __init__(self, daemon: Daemon, conn: Connection, server: str, tool: str, query: str | None) -> None:
        self.daemon, self.conn, self.server, self.tool, self.query = daemon, conn, server, tool, query
        self.started = time.perf_counter()

    def done(self, outcome: str, error_class: str | None = None) -> None:
        duration_ms = (time.perf_counter() - self.started) * 1000
        # Debug level: a call is the hot path, and a filtered-out event costs nothing.
        log.debug(
            "tool.call",
            server=self.server,
            tool=self.tool,
            client=self.conn.client,
            ms=duration_ms,
            outcome=outcome,
        )
        if error_class in ("UnknownServer", "UnknownTool", "InvalidParams"):
            return  # the call never reached a server: nothing to learn about a tool
        self.daemon.activity.record(self.server, outcome in ("ok", "cancelled"))
        now = time.time()
        query_terms = tuple(terms(self.query)) if self.query else ()
        if outcome != "cancelled":  # a withdrawn call says nothing about the tool
            self.daemon.prior.observe(self.server, self.tool, outcome == "ok", query_terms, now)
        self.daemon.usage.record_call(
            CallRecord(
                ts=now,
                client=self.conn.client,
                session=str(self.conn.id),
                server=self.server,
                tool=self.tool,
                duration_ms=round(duration_ms, 3),
                outcome=outcome,
                error_class=error_class,
                query=self.query,
                query_terms=query_terms,
            )
        )


def _request_capability(daemon: Daemon, conn: Connection, capability: str, context: str | None) -> ToolResult:
    daemon.usage.record_capability(
        CapabilityRecord(
            ts=time.time(),
            capability=capability.strip(),
            context=context,
            client=conn.client,
            session=str(conn.id),
        )
    )
    log.info("capability.requested", capability=capability.strip(), client=conn.client)
    return ToolResult(content=[{"type": "text", "text": reserved.acknowledgement(capability.strip())}])


@methods.method("capability.request", CapabilityParams)
async def capability_request(daemon: Daemon, conn: Connection, params: CapabilityParams) -> ToolResult:
    return _request_capability(daemon, conn, params.capability, params.context)


@methods.method("report", ReportParams)
async def report(daemon: Daemon, conn: Connection, params: ReportParams) -> ReportResult:
    since = time.time() - params.since_s if params.since_s else None
    try:
        tools = await daemon.usage.run(lambda db: usage_report.tool_rows(db, since))
        requests = await daemon.usage.run(lambda db: usage_report.capability_rows(db, since))
    except StoreUnavailable as exc:
        raise McpdError(f"no usage report: {exc}", {"usage": "off"}) from None
    groups = group_similar([capability for capability, _ in requests])
    last: dict[str, float] = {}
    for capability, ts in requests:
        last[capability] = ts
    return ReportResult(
        since=since,
        tools=[
            ToolReport(
                name=qualify(row.server, row.tool),
                server=row.server,
                tool=row.tool,
                calls=len(row.durations_ms),
                failures=row.failures,
                failure_rate=round(row.failures / len(row.durations_ms), 4),
                p50_ms=round(usage_report.percentile(row.durations_ms, 0.5), 3),
                p95_ms=round(usage_report.percentile(row.durations_ms, 0.95), 3),
                last_used=row.last_used,
            )
            for row in tools
        ],
        capabilities=[
            CapabilityGroup(
                capability=group.representative,
                count=len(group.members),
                examples=sorted(set(group.members), key=group.members.index)[:3],
                last_requested=max(last[m] for m in group.members),
            )
            for group in groups[: params.top]
        ],
    )


@methods.method("session.connect", ServerParams)
async def session_connect(daemon: Daemon, conn: Connection, params: ServerParams) -> ConnectResult:
    """Activate a live server's tools for this session only."""
    actor = daemon.supervisor.actor(params.name)
    if actor.state not in LIVE_STATES:
        raise ServerNotRunning(
            f"server {actor.name!r} is {actor.state}" + (f": {actor.last_error}" if actor.last_error else ""),
            {"server": actor.name, "state": str(actor.state), "last_error": actor.last_error},
        )
    review = await daemon.catalog.review(actor)
    if review.blocked:
        raise NotApproved(f"server {actor.name!r} is kept out: {review.blocked}", {"server": actor.name})
    already = params.name in conn.session.activated
    conn.session.activated.add(params.name)
    tools = await daemon.catalog.tools([params.name])
    return ConnectResult(server=params.name, already=already, tools=tools)


@methods.method("session.tools", NoParams)
async def session_tools(daemon: Daemon, conn: Connection, params: NoParams) -> SessionTools:
    """The tools this session has connected (of servers still configured)."""
    names = sorted(name for name in conn.session.activated if name in daemon.supervisor.names())
    return SessionTools(servers=names, tools=await daemon.catalog.tools(names) if names else [])


@methods.method("prompt.snippet", NoParams)
async def prompt_snippet(daemon: Daemon, conn: Connection, params: NoParams) -> SnippetResult:
    """An ``<available_mcps>`` block: each live server's id and short description, XML-escaped.

    Servers the verifier blocks are left out, and a server's own instructions are never passed on
    when the verifier found something in them.
    """
    lines = ["<available_mcps>"]
    for actor in await daemon.catalog.serving():
        description = escape(one_line(daemon.catalog.describe(actor), 200))
        lines.append(f'  <mcp id="{escape(actor.name, {chr(34): "&quot;"})}">{description}</mcp>')
    lines.append("</available_mcps>")
    return SnippetResult(text="\n".join(lines))


@methods.method("trust.approve", ApproveParams)
async def trust_approve(daemon: Daemon, conn: Connection, params: ApproveParams) -> ApproveResult:
    """Accept what holds a server's tools back (or one tool's): changed definitions, verifier findings."""
    actor = daemon.supervisor.actor(params.server)
    await daemon.catalog.review(actor)  # findings are accepted for the texts the server shows now
    definitions, findings = daemon.catalog.gate.approve(actor.config, params.tool)
    return ApproveResult(approved=definitions, findings=findings)


@methods.method("trust.show", ServerParams)
async def trust_show(daemon: Daemon, conn: Connection, params: ServerParams) -> TrustResult:
    """What the trust gate says of a server: held-back changes (as diffs) and verifier findings."""
    actor = daemon.supervisor.actor(params.name)
    review = await daemon.catalog.review(actor)
    return TrustResult(
        server=params.name,
        summary=review.summary(),
        changes=daemon.catalog.gate.changes(params.name),
        findings=daemon.catalog.gate.findings(params.name),
    )


@methods.method("subscribe", NoParams)
async def subscribe(daemon: Daemon, conn: Connection, params: NoParams) -> Ok:
    return Ok(ok=conn.subscribe())
