"""Report queries: per-tool call statistics and capability requests within a time window."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field


@dataclass
class ToolRow:
    server: str
    tool: str
    durations_ms: list[float] = field(default_factory=list)
    failures: int = 0
    last_used: float = 0.0


def tool_rows(conn: sqlite3.Connection, since: float | None) -> list[ToolRow]:
    """Every tool called in the window, with each call's duration (for percentiles)."""
    rows: dict[tuple[str, str], ToolRow] = {}
    for server, tool, duration, outcome, ts in conn.execute(
        "SELECT server, tool, duration_ms, outcome, ts FROM calls WHERE ts >= ? ORDER BY server, tool",
        (since or 0.0,),
    ):
        row = rows.setdefault((server, tool), ToolRow(server, tool))
        row.durations_ms.append(duration)
        row.failures += outcome != "ok"
        row.last_used = max(row.last_used, ts)
    return list(rows.values())


def capability_rows(conn: sqlite3.Connection, since: float | None) -> list[tuple[str, float]]:
    """(capability, time) of every request in the window, oldest first."""
    return [
        (str(capability), float(ts))
        for capability, ts in conn.execute(
            "SELECT capability, ts FROM capability_requests WHERE ts >= ? ORDER BY ts", (since or 0.0,)
        )
    ]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
