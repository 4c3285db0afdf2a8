"""The daemon's methods: each one declared once, with its params struct, beside its handler."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import structlog

from mcpd.config.load import load_config
from mcpd.config.model import Config
from mcpd.discovery.render import render
from mcpd.discovery.select import Candidate, select_servers
from mcpd.errors import CallTimeout, McpdError
from mcpd.ipc.protocol import (
    NoParams,
    Ok,
    ReloadResult,
    SelectParams,
    SelectResult,
    ServerParams,
    StatusResult,
    ToolResult,
    ToolsCallParams,
    ToolsListParams,
    ToolsListResult,
)
from mcpd.ipc.server import Connection, MethodTable
from mcpd.registry.catalog import Catalog
from mcpd.supervisor.actor import ServerActor
from mcpd.supervisor.model import ServerStatus
from mcpd.supervisor.states import ServerState
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
    reload_lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def reload(self) -> ReloadResult:
        """Re-read the config and apply the diff; a broken file raises ``ConfigError`` and changes nothing."""
        async with self.reload_lock:
            config = load_config(self.config_path)
            # Shielded: a client that hangs up mid-reload must not leave the diff half applied.
            # apply() is bounded by the servers' stop grace periods.
            with anyio.CancelScope(shield=True):
                plan = await self.supervisor.apply(config)
            self.config = config
        return ReloadResult(source=config.source, plan=plan, issues=list(config.issues))


methods: MethodTable[Daemon] = MethodTable()


@methods.method("status", NoParams)
async def status(daemon: Daemon, conn: Connection, params: NoParams) -> StatusResult:
    return StatusResult(servers=daemon.supervisor.status())


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
    if params.query and params.query.strip():
        tools = await daemon.catalog.search(params.query, params.servers, params.limit)
    else:
        tools = daemon.catalog.tools(params.servers)[: params.limit]
    rendered = render(tools, params.budget_tokens) if params.budget_tokens is not None else None
    return ToolsListResult(tools=tools, rendered=rendered)


@methods.method("servers.select", SelectParams)
async def servers_select(daemon: Daemon, conn: Connection, params: SelectParams) -> SelectResult:
    candidates = [Candidate(s.name, s.description) for s in daemon.config.servers]
    selection = select_servers(params.query, candidates, params.threshold)
    scores = {name: round(score, 4) for name, score in selection.scores.items()}
    return SelectResult(servers=selection.names, scores=scores, fallback=selection.fallback)


@methods.method("tools.call", ToolsCallParams)
async def tools_call(daemon: Daemon, conn: Connection, params: ToolsCallParams) -> ToolResult:
    if params.server is None:
        server, tool = daemon.catalog.resolve(params.tool)
    else:
        server, tool = params.server, params.tool
    actor = daemon.supervisor.actor(server)
    started = time.perf_counter()
    outcome = "error"
    try:
        result = await actor.call_tool(tool, params.arguments, params.timeout)
    except McpdError as exc:
        outcome = type(exc).__name__
        raise
    else:
        outcome = "tool_error" if result.is_error else "ok"
        return result
    finally:
        # Debug level: a call is the hot path, and a filtered-out event costs nothing.
        log.debug(
            "tool.call",
            server=server,
            tool=tool,
            client=conn.client,
            ms=round((time.perf_counter() - started) * 1000, 3),
            outcome=outcome,
        )


@methods.method("subscribe", NoParams)
async def subscribe(daemon: Daemon, conn: Connection, params: NoParams) -> Ok:
    return Ok(ok=conn.subscribe())
