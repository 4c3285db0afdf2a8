"""``mcpd bridge``: an MCP stdio server that any MCP host launches as if it were one server.

A thin client of the daemon: every bridge shares the daemon's one set of servers. It
offers meta tools (search, connect a server, call any tool, report a missing capability)
plus the tools of the servers this bridge's session has connected; connecting a server
or a change in a connected server's tools sends ``notifications/tools/list_changed``.
``--all`` exposes every tool for hosts that ignore list_changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import structlog
from anyio.abc import TaskGroup
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server

from mcpd.client.aio import AsyncClient, connect
from mcpd.client.autostart import ensure_daemon
from mcpd.errors import McpdError
from mcpd.model.protocol import Progress
from mcpd.model.servers import CallActivity, Event, ToolsChanged
from mcpd.model.tools import ToolEntry, ToolResult
from mcpd.registry import reserved

log = structlog.get_logger("mcpd.bridge")

SEARCH = "mcpd_search_tools"
CONNECT = "mcpd_connect_server"
CALL = "mcpd_call_tool"

_META_TOOLS = [
    types.Tool(
        name=SEARCH,
        description=(
            "Find the tools that fit a task among every MCP server mcpd runs. Returns the best "
            "matches, ranked, with their input schemas; connect a server to get its tools directly, "
            f"or call any of them with {CALL}."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you want to do, in plain words."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
                "budget_tokens": {
                    "type": "integer",
                    "minimum": 50,
                    "default": 2000,
                    "description": "Upper bound on the size of the answer, in tokens.",
                },
            },
            "required": ["query"],
        },
    ),
    types.Tool(
        name=CONNECT,
        description="Connect an MCP server: its tools join this tool list (the list is then re-sent).",
        input_schema={
            "type": "object",
            "properties": {
                "server": {"type": "string", "description": "Server id, as in the search results."}
            },
            "required": ["server"],
        },
    ),
    types.Tool(
        name=CALL,
        description=f"Call any tool by its qualified name (server__tool), as returned by {SEARCH}.",
        input_schema={
            "type": "object",
            "properties": {
                "tool": {"type": "string", "description": "Qualified tool name, server__tool."},
                "arguments": {"type": "object", "description": "The tool's arguments."},
            },
            "required": ["tool"],
        },
    ),
    types.Tool(name=reserved.NAME, description=reserved.DESCRIPTION, input_schema=reserved.SCHEMA),
]


def _text(text: str, *, error: bool = False, structured: Any = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=text)], is_error=error, structured_content=structured
    )


def _relay(result: ToolResult) -> types.CallToolResult:
    """A daemon result as the host's SDK expects it: content blocks, structured content, error flag."""
    return types.CallToolResult.model_validate(
        {
            "content": result.content,
            "structuredContent": result.structured_content,
            "isError": result.is_error,
        }
    )


def _as_tool(entry: ToolEntry) -> types.Tool:
    schema = entry.input_schema if entry.input_schema.get("type") == "object" else {"type": "object"}
    return types.Tool(name=entry.name, title=entry.title, description=entry.description, input_schema=schema)


class Bridge:
    """The handlers of one bridge process, over one daemon connection."""

    def __init__(self, client: AsyncClient, expose_all: bool) -> None:
        self.client = client
        self.expose_all = expose_all
        self.host: ServerSession | None = None
        self.connected: set[str] = set()
        self.tasks: TaskGroup | None = None

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self.host = ctx.session
        if self.expose_all:
            entries = [e for e in await self.client.tools() if e.name != reserved.NAME]
        else:
            entries = (await self.client.session_tools()).tools
        return types.ListToolsResult(tools=[*_META_TOOLS, *(_as_tool(e) for e in entries)])

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        self.host = ctx.session
        arguments = dict(params.arguments or {})
        try:
            if params.name == SEARCH:
                return await self._search(arguments)
            if params.name == CONNECT:
                return await self._connect(str(arguments.get("server", "")))
            if params.name == CALL:
                tool = arguments.get("tool")
                inner = arguments.get("arguments") or {}
                if not isinstance(tool, str) or not isinstance(inner, dict):
                    return _text("`tool` must be a string and `arguments` an object", error=True)
                return _relay(await self.client.call_tool(tool, inner, on_progress=self._relay_progress(ctx)))
            return _relay(
                await self.client.call_tool(params.name, arguments, on_progress=self._relay_progress(ctx))
            )
        except McpdError as exc:
            # The host's model sees why, and can try something else.
            return _text(f"{type(exc).__name__}: {exc.message}", error=True)

    def _relay_progress(self, ctx: ServerRequestContext[Any]) -> Callable[[Progress], None] | None:
        """Forward the daemon's progress updates to the host, if the host asked for progress."""
        meta: dict[str, Any] = dict(ctx.meta or {})
        token = meta.get("progress_token", meta.get("progressToken"))
        if token is None or self.tasks is None:
            return None
        tasks, session = self.tasks, ctx.session

        def relay(update: Progress) -> None:
            tasks.start_soon(
                partial(
                    session.send_progress_notification,
                    token,
                    update.progress,
                    update.total,
                    update.message,
                    related_request_id=str(ctx.request_id) if ctx.request_id is not None else None,
                )
            )

        return relay

    async def _search(self, arguments: dict[str, Any]) -> types.CallToolResult:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return _text("`query` must be a non-empty string", error=True)
        limit = int(arguments.get("limit") or 10)
        budget = int(arguments.get("budget_tokens") or 2000)
        result = await self.client.search(query, limit=limit, budget_tokens=budget, include_reserved=False)
        found = [
            {"name": t.name, "server": t.server, "description": t.description, "score": t.score}
            for t in result.tools
        ]
        text = result.rendered.text if result.rendered is not None else json.dumps(found)
        return _text(
            text or "No tool matches; consider mcpd_request_capability.", structured={"tools": found}
        )

    async def _connect(self, server: str) -> types.CallToolResult:
        connected = await self.client.connect_server(server)
        self.connected.add(server)
        names = ", ".join(t.name for t in connected.tools) or "(no tools)"
        if connected.already:
            return _text(f"{server} was already connected: {names}")
        await self.list_changed()
        return _text(f"Connected {server}; its tools are now in your tool list: {names}")

    async def list_changed(self) -> None:
        if self.host is not None:
            await self.host.send_tool_list_changed()

    async def follow_daemon(self) -> None:
        """Re-send the tool list when a connected server's tools (or liveness) change."""
        events = await self.client.subscribe()
        async for event in events:
            if self._concerns_us(event):
                await self.list_changed()

    def _concerns_us(self, event: Event) -> bool:
        if isinstance(event, CallActivity) or not (self.expose_all or event.server in self.connected):
            return False
        if isinstance(event, ToolsChanged):
            return True
        live = ("running", "degraded")
        return (event.old in live) != (event.new in live)


async def run_bridge(
    socket_path: Path | None, *, config: Path | None, preconnect: list[str], expose_all: bool, autostart: bool
) -> int:
    """Serve MCP on stdin/stdout until the host closes it."""
    if autostart:
        await anyio.to_thread.run_sync(lambda: ensure_daemon(socket_path, config=config))
    async with connect(socket_path, name="mcpd-bridge") as client:
        bridge = Bridge(client, expose_all)
        for name in preconnect:
            try:
                await bridge._connect(name)
            except McpdError as exc:
                log.warning("bridge.preconnect_failed", server=name, error=exc.message)
        instructions = await client.snippet()
        server: Server[Any] = Server(
            "mcpd",
            instructions=f"MCP servers available through mcpd:\n{instructions}",
            on_list_tools=bridge.list_tools,
            on_call_tool=bridge.call_tool,
        )
        options = server.create_initialization_options(NotificationOptions(tools_changed=True))
        async with stdio_server() as (read, write), anyio.create_task_group() as tg:
            bridge.tasks = tg
            tg.start_soon(bridge.follow_daemon)
            await server.run(read, write, options)
            tg.cancel_scope.cancel()
    return 0
