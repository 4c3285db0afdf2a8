"""Tool calls and capability requests: batched writes, totals for the ranking prior, retention, reports."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from mcpd.model.usage import CallRecord, CapabilityRecord

_NOT_FAILED = ("ok", "cancelled")
"""Outcomes that are no failure of the tool: a cancelled call was withdrawn by its caller."""


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
        row.failures += outcome not in _NOT_FAILED
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


def write_usage(
    conn: sqlite3.Connection, calls: Sequence[CallRecord], requests: Sequence[CapabilityRecord]
) -> None:
    """A batch of records in a few ``executemany`` statements."""
    if requests:
        conn.executemany(
            "INSERT INTO capability_requests (ts, client, session, capability, context)"
            " VALUES (?, ?, ?, ?, ?)",
            [(r.ts, r.client, r.session, r.capability, r.context) for r in requests],
        )
    if calls:
        conn.executemany(
            "INSERT INTO calls (ts, client, session, server, tool, duration_ms, outcome, error_class, query)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    r.ts,
                    r.client,
                    r.session,
                    r.server,
                    r.tool,
                    r.duration_ms,
                    r.outcome,
                    r.error_class,
                    r.query,
                )
                for r in calls
            ],
        )
    term_rows = [
        (term, r.server, r.tool, int(r.outcome == "ok"), int(r.outcome not in _NOT_FAILED), r.ts)
        for r in calls
        for term in set(r.query_terms)
    ]
    if term_rows:
        conn.executemany(
            "INSERT INTO term_tool (term, server, tool, successes, failures, last_ts)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (term, server, tool) DO UPDATE SET"
            " successes = successes + excluded.successes, failures = failures + excluded.failures,"
            " last_ts = excluded.last_ts",
            term_rows,
        )


def prior_rows(
    conn: sqlite3.Connection,
) -> tuple[list[tuple[str, str, int, int, float]], list[tuple[str, str, str, int]]]:
    """Totals per tool and per (term, tool), for ``UsagePrior.load``."""
    tools = [
        (server, tool, int(ok), int(failed), float(last or 0.0))
        for server, tool, ok, failed, last in conn.execute(
            "SELECT server, tool, SUM(outcome = 'ok'), SUM(outcome NOT IN ('ok', 'cancelled')),"
            " MAX(CASE WHEN outcome = 'ok' THEN ts END) FROM calls GROUP BY server, tool"
        )
    ]
    terms = [
        (term, server, tool, int(successes))
        for term, server, tool, successes in conn.execute(
            "SELECT term, server, tool, successes FROM term_tool WHERE successes > 0"
        )
    ]
    return tools, terms


def prune(conn: sqlite3.Connection, retention_days: float) -> int:
    """Delete what is older than the retention; returns the number of calls removed."""
    cutoff = time.time() - retention_days * 86400
    conn.execute("BEGIN IMMEDIATE")
    removed = conn.execute("DELETE FROM calls WHERE ts < ?", (cutoff,)).rowcount
    conn.execute("DELETE FROM capability_requests WHERE ts < ?", (cutoff,))
    conn.execute("DELETE FROM term_tool WHERE last_ts < ?", (cutoff,))
    conn.execute("COMMIT")
    return int(removed)
