"""Usage: capability-request records, and the report built from the usage store."""

from __future__ import annotations

from typing import Literal

import msgspec

StoreCondition = Literal["ok", "read_only", "retrying", "off"]
"""The usage store: ``ok`` read and written; ``read_only`` read (pins, report) but not written;
``retrying`` a passing problem (a lock held by another process, a full disk): opening or writing is
tried again with backoff, what can wait is kept; ``off`` not used (corrupt, a newer schema, unusable
location, or turned off in the config)."""


class StoreState(msgspec.Struct, frozen=True, kw_only=True):
    """What ``status`` says of the usage store (pins and approvals live there too)."""

    state: StoreCondition
    reason: str | None = None
    """Why it is not ``ok``."""
    path: str | None = None
    dropped: int = 0
    """Calls and capability requests not recorded this run (the store could not take them)."""


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
