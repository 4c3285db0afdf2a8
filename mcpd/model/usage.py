"""Usage: capability-request records, and the report built from the usage store."""

from __future__ import annotations

import msgspec


class CapabilityRecord(msgspec.Struct, frozen=True, kw_only=True):
    ts: float
    capability: str
    context: str | None = None
    client: str | None = None
    session: str | None = None


class ToolReport(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    """The qualified name (``server__tool``), as every registry shows it."""
    server: str
    tool: str
    calls: int
    failures: int
    failure_rate: float
    p50_ms: float
    p95_ms: float
    last_used: float
    """Unix time of the latest call."""


class CapabilityGroup(msgspec.Struct, frozen=True, kw_only=True):
    capability: str
    """The most frequent wording in the group."""
    count: int
    examples: list[str]
    last_requested: float


class ReportResult(msgspec.Struct, frozen=True, kw_only=True):
    since: float | None
    tools: list[ToolReport]
    """By server, then tool."""
    capabilities: list[CapabilityGroup]
    """Largest group first."""
