"""The demo MCP server that the embedded default config runs (``python -m mcpd.demo``)."""

from __future__ import annotations

import datetime as dt

from mcp.server.mcpserver import MCPServer

server: MCPServer = MCPServer(
    "demo",
    instructions="A demo server shipped with mcpd: the current time, echo, and arithmetic.",
    log_level="WARNING",
)


@server.tool(description="The current date and time in UTC, as ISO 8601.")
def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@server.tool(description="Return the given text unchanged.")
def echo(text: str) -> str:
    return text


@server.tool(description="Add two numbers.")
def add(a: float, b: float) -> float:
    return a + b


if __name__ == "__main__":
    server.run("stdio")
