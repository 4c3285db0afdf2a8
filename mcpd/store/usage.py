"""Tool calls and capability requests: batched writes, rollups, totals for the ranking prior, retention,
and the report's per-tool figures.

Every call is a row of ``calls`` (kept for the retention period) and counts in three
rollups of ``call_rollups``: its tool's hour, UTC day and week, each with calls, successes,
failures, last use and a latency sketch (``mcpd.store.sketch``). Rollups are written in the
same transaction as the rows they count and pruned on day boundaries with them (the week
holding the cut is rebuilt from its remaining days), so they always equal an aggregate of
the rows. A report reads whole weeks, days and hours from rollups and only the part of its
window before the first whole hour from rows: at most ~45 rollups per tool over 90 days,
whatever the store holds.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mcpd.model.usage import CapabilityRecord
from mcpd.store.sketch import Sketch
from mcpd.store.sql import transaction

HOUR = 3600
DAY = 24 * HOUR
WEEK = 7 * DAY
PERIODS = (HOUR, DAY, WEEK)
"""Rollup periods, each a whole number of the one before; weeks start on the epoch's weekday."""

PendingCall = tuple[float, float, str | None, str | None, str, str, str, str | None, str | None]
"""A call as the event loop queues it, built without any work: (``time.perf_counter()`` at the
end, seconds taken, client, session, server, tool, outcome, error class, query)."""

StoredCall = tuple[float, str | None, str | None, str, str, float, str, str | None, str | None]
"""A row of ``calls``: (unix time, client, session, server, tool, duration ms, outcome
(ok | tool_error | transport_error | timeout | error), error class, query)."""

ToolTotals = tuple[str, str, int, int, float]
"""(server, tool, successes, failures, last success): what the prior knows of a tool."""

TermTotals = tuple[str, str, str, int]
"""(term, server, tool, successes): how often a query word led to a successful call of a tool.

The store keeps each query as typed, per tool (``query_tool``), and its terms (``term_tool``) as
a cache made by the analyser whose fingerprint ``analysis`` holds. A load by another analyser
(a new stemmer) rebuilds the terms from the queries, so associations learnt before still meet
the queries of today; an unchanged analyser reads the cache and analyses nothing."""

ANALYSIS_PROBE = (
    "News images PDFs APIs IDs creates searching services; mind map MindMap getHTTPResponse"
    " snake_case I'm the company's 搜索关键词"
)
"""Text that exercises each rule of the analysis: the analyser's terms for it are its fingerprint."""

Analyse = Callable[[str], Iterable[str]]


def failed(outcome: str) -> bool:
    """Whether an outcome counts against the tool (the one definition, mirrored in MIGRATIONS[3]).

    A cancelled call was withdrawn by its caller: it says nothing about the tool either way.
    """
    return outcome not in ("ok", "cancelled")


def period_start(ts: float, period: int) -> int:
    """The start of the rollup period holding ``ts``: ``CAST(ts / period AS INTEGER) * period`` in SQL."""
    return int(ts / period) * period


def stored(call: PendingCall, offset: float) -> StoredCall:
    """A queued call as a row; ``offset`` turns its ``perf_counter`` time into unix time."""
    ended, seconds, client, session, server, tool, outcome, error_class, query = call
    return (
        ended + offset,
        client,
        session,
        server,
        tool,
        round(seconds * 1000, 3),
        outcome,
        error_class,
        query,
    )


# -- writes -------------------------------------------------------------------------------------


class _Rollup:
    __slots__ = ("calls", "failures", "last_ok", "last_ts", "ok", "sketch")

    def __init__(self) -> None:
        self.calls = self.ok = self.failures = 0
        self.last_ts = self.last_ok = 0.0
        self.sketch = Sketch()

    def add(self, other: _Rollup) -> None:
        self.calls += other.calls
        self.ok += other.ok
        self.failures += other.failures
        self.last_ts = max(self.last_ts, other.last_ts)
        self.last_ok = max(self.last_ok, other.last_ok)
        counts = self.sketch.counts
        for index, count in other.sketch.counts.items():
            counts[index] = counts.get(index, 0) + count


_INSERT_CALLS = (
    "INSERT INTO calls (ts, client, session, server, tool, duration_ms, outcome, error_class, query)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPSERT_ROLLUP = (
    "INSERT INTO call_rollups (period, start, server, tool, calls, ok, failures, last_ts, last_ok, sketch)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (period, start, server, tool) DO UPDATE SET"
    " calls = calls + excluded.calls, ok = ok + excluded.ok, failures = failures + excluded.failures,"
    " last_ts = max(last_ts, excluded.last_ts), last_ok = max(last_ok, excluded.last_ok),"
    " sketch = sketch_merge(sketch, excluded.sketch)"
)
_UPSERT_TERM = (
    "INSERT INTO term_tool (term, server, tool, successes, failures, last_ts)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (term, server, tool) DO UPDATE SET"
    " successes = successes + excluded.successes, failures = failures + excluded.failures,"
    " last_ts = max(last_ts, excluded.last_ts)"
)
_UPSERT_QUERY = (
    "INSERT INTO query_tool (query, server, tool, successes, failures, last_ts)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (query, server, tool) DO UPDATE SET"
    " successes = successes + excluded.successes, failures = failures + excluded.failures,"
    " last_ts = max(last_ts, excluded.last_ts)"
)


def write_calls(
    conn: sqlite3.Connection, calls: Sequence[StoredCall], analyse: Analyse | None = None
) -> tuple[list[ToolTotals], list[TermTotals]]:
    """Insert a batch of calls with their rollups, their queries per tool and, given ``analyse``,
    their query terms.

    Runs inside the caller's transaction. Returns what the batch adds to the ranking prior.
    """
    if not calls:
        return [], []
    conn.executemany(_INSERT_CALLS, calls)
    hours: dict[tuple[int, str, str], _Rollup] = {}
    query_counts: dict[tuple[str, str, str], list[float]] = {}
    for ts, _, _, server, tool, duration_ms, outcome, _, query in calls:
        rollup = hours.get((period_start(ts, HOUR), server, tool))
        if rollup is None:
            rollup = hours[period_start(ts, HOUR), server, tool] = _Rollup()
        rollup.calls += 1
        rollup.last_ts = max(rollup.last_ts, ts)
        ok, bad = outcome == "ok", failed(outcome)
        rollup.failures += bad
        if ok:
            rollup.ok += 1
            rollup.last_ok = max(rollup.last_ok, ts)
        rollup.sketch.add(duration_ms)
        if query:
            entry = query_counts.setdefault((query, server, tool), [0, 0, 0.0])
            entry[0] += ok
            entry[1] += bad
            entry[2] = max(entry[2], ts)
    levels = [hours]
    for period in PERIODS[1:]:
        coarser: dict[tuple[int, str, str], _Rollup] = {}
        for (start, server, tool), rollup in levels[-1].items():
            coarser.setdefault((period_start(start, period), server, tool), _Rollup()).add(rollup)
        levels.append(coarser)
    _upsert_rollups(conn, zip(PERIODS, levels, strict=True))
    tools = [(server, tool, r.ok, r.failures, r.last_ok) for (_, server, tool), r in levels[-1].items()]
    if not query_counts:
        return tools, []
    conn.executemany(
        _UPSERT_QUERY,
        [
            (query, server, tool, int(ok), int(bad), last)
            for (query, server, tool), (ok, bad, last) in query_counts.items()
        ],
    )
    if analyse is None:
        # The cached terms now miss these queries: the next load rebuilds them.
        conn.execute("DELETE FROM analysis")
        return tools, []
    rows = _analysed(((*key, ok, bad, last) for key, (ok, bad, last) in query_counts.items()), analyse)
    conn.executemany(_UPSERT_TERM, rows)
    return tools, [(term, server, tool, ok) for term, server, tool, ok, _, _ in rows if ok]


QueryRow = tuple[str, str, str, int, int, float]
"""(query or term, server, tool, successes, failures, last call)"""


def _analysed(queries: Iterable[tuple[Any, ...]], analyse: Analyse) -> list[QueryRow]:
    """Query rows -> term rows: each query's counts go to each of its terms once."""
    totals: dict[tuple[str, str, str], list[Any]] = {}
    for query, server, tool, ok, bad, last in queries:
        for term in frozenset(analyse(query)):
            entry = totals.get((term, server, tool))
            if entry is None:
                totals[term, server, tool] = [int(ok), int(bad), float(last)]
            else:
                entry[0] += ok
                entry[1] += bad
                entry[2] = max(entry[2], last)
    return [(term, server, tool, ok, bad, last) for (term, server, tool), (ok, bad, last) in totals.items()]


def analysis_fingerprint(analyse: Analyse) -> str:
    return hashlib.sha256("\x1f".join(analyse(ANALYSIS_PROBE)).encode()).hexdigest()[:16]


def _reanalyse_if_changed(conn: sqlite3.Connection, analyse: Analyse) -> None:
    """Rebuild ``term_tool`` from the stored queries unless ``analyse`` made it."""
    fingerprint = analysis_fingerprint(analyse)
    stored = conn.execute("SELECT fingerprint FROM analysis").fetchone()
    if stored is not None and stored[0] == fingerprint:
        return
    with transaction(conn):
        queries = conn.execute("SELECT query, server, tool, successes, failures, last_ts FROM query_tool")
        rows = _analysed(queries.fetchall(), analyse)
        conn.execute("DELETE FROM term_tool")
        conn.executemany("INSERT INTO term_tool VALUES (?, ?, ?, ?, ?, ?)", rows)
        conn.execute("DELETE FROM analysis")
        conn.execute("INSERT INTO analysis VALUES (?)", (fingerprint,))


def _upsert_rollups(
    conn: sqlite3.Connection, levels: Iterable[tuple[int, dict[tuple[int, str, str], _Rollup]]]
) -> None:
    conn.executemany(
        _UPSERT_ROLLUP,
        [
            (period, start, server, tool, r.calls, r.ok, r.failures, r.last_ts, r.last_ok, r.sketch.blob())
            for period, level in levels
            for (start, server, tool), r in level.items()
        ],
    )


def write_capabilities(conn: sqlite3.Connection, requests: Sequence[CapabilityRecord]) -> None:
    if requests:
        conn.executemany(
            "INSERT INTO capability_requests (ts, client, session, capability, context)"
            " VALUES (?, ?, ?, ?, ?)",
            [(r.ts, r.client, r.session, r.capability, r.context) for r in requests],
        )


# -- reads --------------------------------------------------------------------------------------


@dataclass
class ToolRow:
    server: str
    tool: str
    calls: int
    failures: int
    last_used: float
    p50_ms: float
    p95_ms: float


class _Totals:
    __slots__ = ("calls", "failures", "last_used", "sketch")

    def __init__(self) -> None:
        self.calls = self.failures = 0
        self.last_used = 0.0
        self.sketch = Sketch()


def _ceil(ts: float, period: int) -> int:
    start = period_start(ts, period)
    return start if start >= ts else start + period


def tool_rows(conn: sqlite3.Connection, since: float | None) -> list[ToolRow]:
    """Every tool called at or after ``since`` (ever, if None), by server then tool.

    The window is read as: rows before its first whole hour, hour rollups before its
    first whole day, day rollups before its first whole week, week rollups after that.
    """
    totals: dict[tuple[str, str], _Totals] = {}
    if since is None:
        _add_rollups(conn, totals, WEEK, 0, None)
    else:
        first_hour = _ceil(since, HOUR)
        for server, tool, duration_ms, outcome, ts in conn.execute(
            "SELECT server, tool, duration_ms, outcome, ts FROM calls WHERE ts >= ? AND ts < ?",
            (since, first_hour),
        ):
            entry = totals.get((server, tool)) or totals.setdefault((server, tool), _Totals())
            entry.calls += 1
            entry.failures += failed(outcome)
            entry.last_used = max(entry.last_used, ts)
            entry.sketch.add(duration_ms)
        first = first_hour
        for period, coarser in zip(PERIODS, [*PERIODS[1:], None], strict=True):
            end = _ceil(first, coarser) if coarser is not None else None
            _add_rollups(conn, totals, period, first, end)
            first = end or 0
    return [
        ToolRow(server, tool, t.calls, t.failures, t.last_used, *t.sketch.percentiles((0.5, 0.95)))
        for (server, tool), t in sorted(totals.items())
    ]


def _add_rollups(
    conn: sqlite3.Connection, totals: dict[tuple[str, str], _Totals], period: int, first: int, end: int | None
) -> None:
    for server, tool, calls, failures, last_ts, blob in conn.execute(
        "SELECT server, tool, calls, failures, last_ts, sketch FROM call_rollups"
        " WHERE period = ? AND start >= ? AND start < ?",
        (period, first, end if end is not None else 2**62),
    ):
        entry = totals.get((server, tool)) or totals.setdefault((server, tool), _Totals())
        entry.calls += calls
        entry.failures += failures
        entry.last_used = max(entry.last_used, last_ts)
        entry.sketch.merge(blob)


CAPABILITY_TEXTS = 10_000
"""Distinct wordings a report groups at most: the most asked for (a report is bounded work)."""


def capability_rows(conn: sqlite3.Connection, since: float | None) -> list[tuple[str, int, float]]:
    """(capability, times asked, last asked) of each wording asked for in the window, the most
    asked first, at most ``CAPABILITY_TEXTS``."""
    return [
        (str(capability), int(count), float(last))
        for capability, count, last in conn.execute(
            "SELECT capability, COUNT(*), MAX(ts) FROM capability_requests WHERE ts >= ?"
            " GROUP BY capability ORDER BY COUNT(*) DESC, MIN(ts) LIMIT ?",
            (since or 0.0, CAPABILITY_TEXTS),
        )
    ]


def prior_rows(
    conn: sqlite3.Connection, analyse: Analyse | None = None
) -> tuple[list[ToolTotals], list[TermTotals]]:
    """Totals per tool (from the week rollups) and, given ``analyse``, per (term, tool), for
    ``UsagePrior.load``; the terms are first rebuilt from the stored queries if another analyser
    made them."""
    tools = [
        (server, tool, int(ok), int(failures), float(last_ok))
        for server, tool, ok, failures, last_ok in conn.execute(
            "SELECT server, tool, SUM(ok), SUM(failures), MAX(last_ok) FROM call_rollups"
            " WHERE period = ? GROUP BY server, tool",
            (WEEK,),
        )
    ]
    if analyse is None:
        return tools, []
    _reanalyse_if_changed(conn, analyse)
    terms = [
        (term, server, tool, int(successes))
        for term, server, tool, successes in conn.execute(
            "SELECT term, server, tool, successes FROM term_tool WHERE successes > 0"
        )
    ]
    return tools, terms


def prune(conn: sqlite3.Connection, retention_days: float, now: float | None = None) -> int:
    """Delete whole days older than the retention; returns the number of calls removed.

    The cut is at the start of a UTC day, so calls go with their hour and day rollups, and
    the week holding the cut is rebuilt from its remaining days: the rollups stay equal to
    the rows. At least ``retention_days`` are kept.
    """
    cutoff = period_start((time.time() if now is None else now) - retention_days * DAY, DAY)
    week = period_start(cutoff, WEEK)
    with transaction(conn):
        removed = conn.execute("DELETE FROM calls WHERE ts < ?", (cutoff,)).rowcount
        conn.execute("DELETE FROM call_rollups WHERE period IN (?, ?) AND start < ?", (HOUR, DAY, cutoff))
        if week < cutoff:
            remaining: dict[tuple[int, str, str], _Rollup] = {}
            for server, tool, calls, ok, failures, last_ts, last_ok, blob in conn.execute(
                "SELECT server, tool, calls, ok, failures, last_ts, last_ok, sketch FROM call_rollups"
                " WHERE period = ? AND start >= ? AND start < ?",
                (DAY, cutoff, week + WEEK),
            ):
                day = _Rollup()
                day.calls, day.ok, day.failures, day.last_ts, day.last_ok = (
                    calls,
                    ok,
                    failures,
                    last_ts,
                    last_ok,
                )
                day.sketch.merge(blob)
                remaining.setdefault((week, server, tool), _Rollup()).add(day)
            conn.execute("DELETE FROM call_rollups WHERE period = ? AND start = ?", (WEEK, week))
            _upsert_rollups(conn, [(WEEK, remaining)])
        conn.execute("DELETE FROM call_rollups WHERE period = ? AND start < ?", (WEEK, week))
        conn.execute("DELETE FROM capability_requests WHERE ts < ?", (cutoff,))
        conn.execute("DELETE FROM query_tool WHERE last_ts < ?", (cutoff,))
        conn.execute("DELETE FROM term_tool WHERE last_ts < ?", (cutoff,))
    return int(removed)
