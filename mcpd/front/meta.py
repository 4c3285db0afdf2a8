"""The meta tools every host session offers: search, connect a server, call any tool, report a gap."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from mcpd.model.mcp import Tool, with_extra
from mcpd.model.tools import ToolEntry
from mcpd.registry import reserved

SEARCH = "mcpd_search_tools"
CONNECT = "mcpd_connect_server"
CALL = "mcpd_call_tool"
OWN = frozenset({SEARCH, CONNECT, CALL})
"""The meta tools' names: what goes wrong with their calls is in their arguments."""
MAX_LIMIT = 100
"""Most tools one search returns."""

MIN_BUDGET = 50
"""The least answer a search gives: room for a few names and the count of the rest."""

TOOLS = (
    Tool(
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
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 10},
                "budget_tokens": {
                    "type": "integer",
                    "minimum": MIN_BUDGET,
                    "default": 2000,
                    "description": "Upper bound on the size of the answer, in tokens.",
                },
            },
            "required": ["query"],
        },
    ),
    Tool(
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
    Tool(
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
    Tool(name=reserved.NAME, description=reserved.DESCRIPTION, input_schema=reserved.SCHEMA),
)


def as_tool(entry: ToolEntry) -> Tool | dict[str, Any]:
    """A catalogue entry as a host lists it (hosts insist on an object schema): the server's
    definition, with no description where it gave none (the catalogue ranks it by ``""``) and the
    fields mcpd does not model (``execution``, ...) as it sent them."""
    schema = entry.input_schema if entry.input_schema.get("type") == "object" else {"type": "object"}
    tool = Tool(
        name=entry.name,
        input_schema=schema,
        description=entry.description or UNSET,
        title=entry.title,
        annotations=entry.annotations,
        output_schema=entry.output_schema,
        icons=entry.icons,
        meta=entry.meta,
    )
    return with_extra(tool, entry.extra)
