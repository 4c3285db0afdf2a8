"""Catalogue entries as they cross the socket."""

from __future__ import annotations

from typing import Any

import msgspec


class ToolEntry(msgspec.Struct, frozen=True, kw_only=True):
    """A tool under its qualified name (unique across servers, safe for any MCP host)."""

    name: str
    server: str
    tool: str
    description: str = ""
    input_schema: dict[str, Any] = msgspec.field(default_factory=dict)
    title: str | None = None
    score: float | None = None
    """Relevance to the query that listed it; None in an unranked listing."""
    score_parts: dict[str, float] | None = None
    """With ``explain``: text relevance, usage factor and query association behind ``score``."""
