"""Tools: as a server lists them, as the catalogue names them, their results, rendered registries."""

from __future__ import annotations

from typing import Any

import msgspec

SEPARATOR = "__"
"""Between server and tool in a qualified name (``server__tool``); server names may not contain it
nor end with ``_``, so the first separator in a qualified name always ends the server's name."""

OWN_SERVER = "mcpd"
"""The server name of the tools the daemon answers itself; no configured server may take it."""


class ToolInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One tool as its server lists it."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = msgspec.field(default_factory=dict)
    title: str | None = None
    annotations: dict[str, Any] | None = None
    """Hints about the tool's behaviour (readOnlyHint, title, ...), as the server sent them."""
    output_schema: dict[str, Any] | None = None
    """The JSON Schema of the tool's ``structuredContent``, which hosts validate results against."""
    icons: list[dict[str, Any]] | None = None
    meta: dict[str, Any] | None = None
    """The tool's ``_meta``, as the server sent it (hosts and UI kits keep their keys there)."""
    extra: dict[str, Any] | None = None
    """The fields mcpd does not model (``execution``, fields of later protocol revisions), by their
    wire names, as the server sent them. Like ``_meta`` and ``icons`` they are read by the verifier
    and pinned (``trust.gate``)."""


class ToolEntry(msgspec.Struct, frozen=True, kw_only=True):
    """A tool under its qualified name (unique across servers, safe for any MCP host)."""

    name: str
    server: str
    tool: str
    description: str = ""
    input_schema: dict[str, Any] = msgspec.field(default_factory=dict)
    title: str | None = None
    annotations: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    icons: list[dict[str, Any]] | None = None
    meta: dict[str, Any] | None = None
    """``_meta`` of the tool's definition (see ``ToolInfo``)."""
    extra: dict[str, Any] | None = None
    """The definition's fields mcpd does not model (see ``ToolInfo``)."""
    score: float | None = None
    """Relevance to the query that listed it; None in an unranked listing."""
    score_parts: dict[str, float] | None = None
    """With ``explain``: the parts behind ``score`` (text, usage_factor, association, association_lift)."""


class Refusal(msgspec.Struct, frozen=True):
    """The JSON-RPC error a server answered a tool call with: it took the call and refused it."""

    code: int
    message: str
    data: Any = None


class ToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """A ``tools/call`` result; ``is_error`` means the tool ran and reported failure."""

    content: list[dict[str, Any]]
    structured_content: Any = None
    is_error: bool | None = None
    """None: the server left ``isError`` out (no failure, as with ``False``; hosts get it left out)."""
    meta: dict[str, Any] | None = None
    """The result's ``_meta``, as the server sent it."""
    extra: dict[str, Any] | None = None
    """The result's fields mcpd does not model (fields of later protocol revisions), by their wire
    names, as the server sent them (None: none)."""
    refusal: Refusal | None = None
    """The server's JSON-RPC error, relayed as such to hosts; ``content`` then holds its message
    (and ``is_error`` is set) for callers that read results alone."""

    @classmethod
    def refused(cls, code: int, message: str, data: Any = None) -> ToolResult:
        return cls(
            content=[{"type": "text", "text": message}], is_error=True, refusal=Refusal(code, message, data)
        )


class BriefTool(msgspec.Struct, frozen=True):
    name: str
    summary: str


class Rendered(msgspec.Struct, frozen=True, kw_only=True):
    """What fit: ``full`` with schemas, ``brief`` with a line each, ``names``; ``omitted`` is the rest."""

    full: list[ToolEntry]
    brief: list[BriefTool]
    names: list[str]
    omitted: int
    tokens: int
    """Estimated tokens of ``text``; never above the budget."""
    text: str
