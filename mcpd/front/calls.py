"""The one call path of the daemon, used by the socket methods and by hosts' MCP sessions alike.

A tool call: the reserved tool is answered here; otherwise the name is resolved, the
trust gate asked, the call made through the server's actor and its outcome recorded in
the usage store and the ranking prior. Beside it: ranked search, connecting a server to
a session, and the ``<available_mcps>`` snippet.
"""

from __future__ import annotations

import functools
import time

import anyio
import structlog

from mcpd.discovery.render import one_line, render
from mcpd.errors import (
    CallTimeout,
    InvalidParams,
    McpdError,
    NotApproved,
    ServerNotRunning,
    TransportError,
)
from mcpd.front.core import Caller, Core
from mcpd.front.server_requests import Answerer
from mcpd.model import mcp
from mcpd.model.protocol import ConnectResult, ToolsCallParams, ToolsListParams, ToolsListResult
from mcpd.model.states import LIVE_STATES, ServerState
from mcpd.model.tools import ToolResult
from mcpd.model.usage import CapabilityRecord
from mcpd.registry import reserved
from mcpd.registry.names import qualify
from mcpd.supervisor.session import ProgressCallback

log = structlog.get_logger("mcpd.daemon")

_OUTCOMES: dict[type[McpdError], str] = {CallTimeout: "timeout", TransportError: "transport_error"}


async def call_tool(
    core: Core,
    caller: Caller,
    params: ToolsCallParams,
    on_progress: ProgressCallback | None = None,
    answerer: Answerer | None = None,
) -> ToolResult:
    """Run one tool call (or answer the reserved tool); raises the call's ``McpdError``.

    ``answerer`` is asked what the server asks during the call (sampling, elicitation, roots).
    """
    if reserved.is_reserved(params.tool, params.server):
        capability = params.arguments.get("capability")
        if not isinstance(capability, str):
            raise InvalidParams(f"{reserved.NAME} needs a non-empty string `capability`")
        context = params.arguments.get("context")
        return request_capability(core, caller, capability, context if isinstance(context, str) else None)
    if _nested_deeper(params.arguments, MAX_ARGUMENT_DEPTH):
        # Servers choke on it silently (the MCP SDK's drop the request): the call would wait out
        # its whole deadline for nothing.
        raise InvalidParams(f"arguments nested deeper than {MAX_ARGUMENT_DEPTH} levels")
    if params.server is None:
        server, tool = core.catalog.resolve(params.tool)
    else:
        server, tool = params.server, params.tool
    actor = core.supervisor.actor(server)
    held = await core.catalog.denied(actor, tool)
    if held is not None:
        raise NotApproved(
            f"{qualify(server, tool)} is held back: {held}", {"server": server, "tool": tool, "reason": held}
        )
    call = _CallRecorder(core, caller, server, tool, params.query)
    running, token = core.requests.begin(server, answerer, caller.client, caller.session)
    try:
        # A caller's own progress token would route the server's progress by a name that may be
        # another call's: mcpd sets its own when it relays progress.
        meta = mcp.passed_meta(params.meta)
        result = await actor.call_tool(tool, params.arguments, params.timeout, on_progress, meta)
    except McpdError as exc:
        call.done(_OUTCOMES.get(type(exc), "error"), type(exc).__name__)
        raise
    except anyio.get_cancelled_exc_class():
        call.done("cancelled")  # withdrawn by the client (`cancel`, or it hung up): not the tool's fault
        raise
    finally:
        core.requests.end(running, token)
    call.done("tool_error" if result.is_error else "ok")
    return result


MAX_ARGUMENT_DEPTH = 64
"""Levels of nesting a tool's arguments may have (real ones have a handful)."""


_CONTAINERS = (dict, list)
"""A tuple, not ``dict | list``: the union is built anew each time the expression runs."""


def _nested_deeper(value: object, limit: int) -> bool:
    """Whether ``value`` nests lists and objects deeper than ``limit`` (walked without recursion).

    Each level keeps only the containers: the usual flat arguments are done after one pass."""
    level = [value] if isinstance(value, _CONTAINERS) else []
    for _ in range(limit):
        if not level:
            return False
        level = [
            item
            for container in level
            for item in (container.values() if isinstance(container, dict) else container)
            if isinstance(item, _CONTAINERS)
        ]
    return bool(level)


@functools.cache
def _call_log() -> structlog.typing.FilteringBoundLogger:
    """The configured logger itself: the module's lazy proxy costs a bind per event (~1.5 us)."""
    bound: structlog.typing.FilteringBoundLogger = log.bind()
    return bound


class _CallRecorder:
    """Times one call and queues its outcome for the usage store, which also teaches the prior."""

    __slots__ = ("caller", "core", "query", "server", "started", "tool")

    def __init__(self, core: Core, caller: Caller, server: str, tool: str, query: str | None) -> None:
        self.core, self.caller, self.server, self.tool, self.query = core, caller, server, tool, query
        self.started = time.perf_counter()

    def done(self, outcome: str, error_class: str | None = None) -> None:
        ended = time.perf_counter()
        # Debug level: a call is the hot path, and a filtered-out event costs nothing.
        _call_log().debug(
            "tool.call",
            server=self.server,
            tool=self.tool,
            client=self.caller.client,
            ms=(ended - self.started) * 1000,
            outcome=outcome,
        )
        if error_class in ("UnknownServer", "UnknownTool", "InvalidParams"):
            return  # the call never reached a server: nothing to learn about a tool
        self.core.activity.record(self.server, outcome in ("ok", "cancelled"))
        # A plain tuple and one clock: the store's thread makes it a row with a unix time,
        # analyses the query and passes what it learned to the prior, a batch at a time.
        self.core.usage.record_call(
            (
                ended,
                ended - self.started,
                self.caller.client,
                self.caller.session,
                self.server,
                self.tool,
                outcome,
                error_class,
                self.query,
            )
        )


def request_capability(core: Core, caller: Caller, capability: str, context: str | None) -> ToolResult:
    """Record a missing capability and tell the agent to carry on; ``InvalidParams`` for a blank one."""
    capability = capability.strip()
    if not capability:
        raise InvalidParams(f"{reserved.NAME} needs a non-empty `capability`")
    core.usage.record_capability(
        CapabilityRecord(
            ts=time.time(),
            capability=capability,
            context=context,
            client=caller.client,
            session=caller.session,
        )
    )
    log.info("capability.requested", capability=capability, client=caller.client)
    return ToolResult(content=[{"type": "text", "text": reserved.acknowledgement(capability)}])


async def list_tools(core: Core, params: ToolsListParams) -> ToolsListResult:
    """Tools of the live servers, ranked for ``params.query`` if given, rendered within a budget if asked."""
    with_reserved = params.include_reserved and params.servers is None
    # The reserved tool counts within the limit: `limit` is the length of the answer.
    limit = params.limit - 1 if with_reserved and params.limit is not None else params.limit
    if limit == 0:
        tools = []
    elif params.query and params.query.strip():
        if params.explain and core.usage.readable:
            # A person checking what calls taught the ranking sees every call made before the
            # question, not only those the store has committed (it gathers them for 250 ms).
            await core.usage.flush()
        tools = await core.catalog.search(
            params.query, params.servers, limit, prior=core.prior, explain=params.explain
        )
    else:
        tools = (await core.catalog.tools(params.servers))[:limit]
    if with_reserved:
        tools.append(reserved.ENTRY)  # in every registry that is not explicitly about other servers
    rendered = None
    if params.budget_tokens is not None:
        # The reserved tool first, so an agent always learns how to report a missing capability.
        ordered = [reserved.ENTRY, *tools[:-1]] if with_reserved else tools
        rendered = render(ordered, params.budget_tokens)
    return ToolsListResult(tools=tools, rendered=rendered)


async def connect_server(core: Core, activated: set[str], name: str) -> ConnectResult:
    """Activate a live server's tools in a session's ``activated`` set."""
    actor = core.supervisor.actor(name)
    if actor.state not in LIVE_STATES:
        raise ServerNotRunning(
            f"server {actor.name!r} is {actor.state}" + (f": {actor.last_error}" if actor.last_error else ""),
            {"server": actor.name, "state": str(actor.state), "last_error": actor.last_error},
        )
    review = await core.catalog.review(actor)
    if review.blocked:
        raise NotApproved(f"server {actor.name!r} is kept out: {review.blocked}", {"server": actor.name})
    already = name in activated
    activated.add(name)
    return ConnectResult(server=name, already=already, tools=await core.catalog.tools([name]))


def _xml(text: str) -> str:
    """``text`` escaped for XML (xml.sax.saxutils' escape loads urllib.request and http.client)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


async def snippet(core: Core) -> str:
    """An ``<available_mcps>`` block: each configured server's id and short description, XML-escaped.

    Servers the verifier blocks are left out (and a server's own instructions are not passed
    on when the verifier found something in them). A server that is not running (yet), or
    degraded, carries its state, so a prompt built during a cold start still names every
    server; disabled servers are left out.
    """
    serving = {actor.name for actor in await core.catalog.serving()}
    lines = ["<available_mcps>"]
    for actor in core.supervisor.actors():
        if actor.state is ServerState.DISABLED or (actor.state in LIVE_STATES and actor.name not in serving):
            continue
        # A server never yet started has nothing to describe it but its config.
        known = actor.config.description or actor.server_info or actor.tools
        description = _xml(one_line(core.catalog.describe(actor), 200)) if known else ""
        state = "" if actor.state is ServerState.RUNNING else f' state="{actor.state}"'
        lines.append(f'  <mcp id="{_xml(actor.name).replace(chr(34), "&quot;")}"{state}>{description}</mcp>')
    lines.append("</available_mcps>")
    return "\n".join(lines)
