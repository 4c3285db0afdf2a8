"""Usage at scale: rollups equal the rows they count, the latency sketch keeps its error bound,
a version-3 store is backfilled, windows and pruning keep every figure exact, the prior learns
per batch exactly what the store holds, and stored queries are analysed by today's analyser."""

from __future__ import annotations

import math
import random
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from mcpd.discovery.prior import UsagePrior
from mcpd.discovery.text import terms
from mcpd.store import db as db_module
from mcpd.store.db import MIGRATIONS, Store
from mcpd.store.sketch import ERROR_BOUND, MIN_MS, Sketch, SketchAggregate, merge_blobs
from mcpd.store.sql import transaction
from mcpd.store.usage import (
    DAY,
    HOUR,
    PERIODS,
    WEEK,
    StoredCall,
    failed,
    prior_rows,
    prune,
    tool_rows,
    write_calls,
)

pytestmark = pytest.mark.anyio

NOW = 1_790_000_000.0  # a fixed "now", so windows and retention cut where the test says
TOOLS = [("alpha", "echo"), ("alpha", "fail"), ("beta", "search"), ("beta", "fetch"), ("gamma", "run")]
OUTCOMES = ["ok", "ok", "ok", "tool_error", "timeout", "transport_error"]
QUERIES = [None, "find the weather", "convert a pdf to markdown", "search files"]


def synthetic_calls(count: int, days: float, seed: int) -> list[StoredCall]:
    """Calls spread over ``days`` before NOW, log-normal durations, mixed outcomes and queries."""
    rng = random.Random(seed)
    calls: list[StoredCall] = []
    for _ in range(count):
        server, tool = rng.choice(TOOLS)
        ts = NOW - rng.random() * days * DAY
        duration = round(rng.lognormvariate(math.log(20), 1.2), 3)
        calls.append(
            (ts, "agent", "1", server, tool, duration, rng.choice(OUTCOMES), None, rng.choice(QUERIES))
        )
    return calls


def old_store(path: Path, version: int, calls: Sequence[StoredCall]) -> sqlite3.Connection:
    """A store at schema ``version`` holding ``calls`` (rows only), left open."""
    old = sqlite3.connect(path, isolation_level=None)
    old.create_function("sketch_merge", 2, merge_blobs)  # migration 4 builds rollups with these
    old.create_aggregate("latency_sketch", 1, SketchAggregate)  # type: ignore[arg-type]
    for number, script in enumerate(MIGRATIONS[:version]):
        old.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number + 1};\nCOMMIT;")
    with transaction(old):
        old.executemany(
            "INSERT INTO calls (ts, client, session, server, tool, duration_ms, outcome, error_class, query)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            calls,
        )
    return old


def write_batches(db: sqlite3.Connection, calls: Sequence[StoredCall], size: int) -> None:
    for start in range(0, len(calls), size):
        with transaction(db):
            write_calls(db, calls[start : start + size], terms)


def exact_rollups(db: sqlite3.Connection) -> dict[tuple[int, int, str, str], tuple[int, int, int, float]]:
    """(period, start, server, tool) -> (calls, failures, ok, last use), counted from the rows in Python."""
    out: dict[tuple[int, int, str, str], tuple[int, int, int, float]] = {}
    for ts, server, tool, outcome in db.execute("SELECT ts, server, tool, outcome FROM calls"):
        for period in PERIODS:
            key = (period, int(ts / period) * period, server, tool)
            calls, failures, ok, last = out.get(key, (0, 0, 0, 0.0))
            out[key] = (calls + 1, failures + failed(outcome), ok + (outcome == "ok"), max(last, ts))
    return out


def stored_rollups(db: sqlite3.Connection) -> dict[tuple[int, int, str, str], tuple[int, int, int, float]]:
    return {
        (period, start, server, tool): (calls, failures, ok, last_ts)
        for period, start, server, tool, calls, failures, ok, last_ts in db.execute(
            "SELECT period, start, server, tool, calls, failures, ok, last_ts FROM call_rollups"
        )
    }


def exact_percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def assert_report_matches_rows(db: sqlite3.Connection, since: float | None) -> None:
    """``tool_rows`` for the window: counts, failures and last use exact; p50/p95 within the bound."""
    raw: dict[tuple[str, str], list[tuple[float, float, str]]] = {}
    for ts, server, tool, duration, outcome in db.execute(
        "SELECT ts, server, tool, duration_ms, outcome FROM calls WHERE ts >= ?", (since or 0.0,)
    ):
        raw.setdefault((server, tool), []).append((ts, duration, outcome))
    rows = tool_rows(db, since)
    assert [(r.server, r.tool) for r in rows] == sorted(raw)
    for row in rows:
        calls = raw[row.server, row.tool]
        assert row.calls == len(calls)
        assert row.failures == sum(failed(outcome) for _, _, outcome in calls)
        assert row.last_used == max(ts for ts, _, _ in calls)
        durations = [duration for _, duration, _ in calls]
        for q, estimate in ((0.5, row.p50_ms), (0.95, row.p95_ms)):
            exact = exact_percentile(durations, q)
            assert abs(estimate - exact) <= ERROR_BOUND * exact + 1e-9


# -- the sketch, as logic --------------------------------------------------------------------------


@pytest.mark.parametrize("distribution", ["lognormal", "uniform", "bimodal", "tiny"])
def test_sketch_percentiles_stay_within_the_stated_bound(distribution: str) -> None:
    """On random data, every percentile is within ERROR_BOUND (relative) of the exact value of its rank."""
    rng = random.Random(distribution)
    draws: dict[str, Callable[[], float]] = {
        "lognormal": lambda: rng.lognormvariate(math.log(5), 2.0),
        "uniform": lambda: rng.uniform(0.01, 60_000),
        "bimodal": lambda: rng.choice([rng.gauss(2, 0.1), rng.gauss(900, 50)]),
        "tiny": lambda: rng.uniform(MIN_MS, 0.05),
    }
    draw = draws[distribution]
    values = [abs(draw()) + MIN_MS for _ in range(20_000)]
    sketch = Sketch()
    for value in values:
        sketch.add(value)
    qs = [0.0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0]
    for q, estimate in zip(qs, sketch.percentiles(qs), strict=True):
        exact = exact_percentile(values, q)
        assert abs(estimate - exact) <= ERROR_BOUND * exact + 1e-12, (q, estimate, exact)
    assert ERROR_BOUND < 0.045


def test_merged_sketches_equal_one_sketch_of_everything() -> None:
    """Merging stored sketches is exact: the same counts as one sketch fed every value."""
    rng = random.Random(7)
    parts = [[rng.expovariate(0.1) for _ in range(500)] for _ in range(6)]
    merged, whole = Sketch(), Sketch()
    for part in parts:
        piece = Sketch()
        for value in part:
            piece.add(value)
            whole.add(value)
        merged.merge(piece.blob())
    assert merged.counts == whole.counts


# -- the store: rollups, windows, migration, pruning --------------------------------------------------


async def test_rollups_agree_with_raw_rows(tmp_path: Path) -> None:
    """After many batches spanning hour, day and week boundaries, every rollup equals the aggregate
    of its rows (calls, failures, successes, last use, latency sketch)."""
    store = Store.open(tmp_path / "usage.db")
    calls = synthetic_calls(6_000, days=16, seed=1)
    await store.run(lambda db: write_batches(db, calls, 97))

    def check(db: sqlite3.Connection) -> None:
        assert stored_rollups(db) == exact_rollups(db)
        for period, start, server, tool, blob in db.execute(
            "SELECT period, start, server, tool, sketch FROM call_rollups"
        ):
            expected = Sketch()
            for (duration,) in db.execute(
                "SELECT duration_ms FROM calls WHERE server = ? AND tool = ? AND ts >= ? AND ts < ?",
                (server, tool, start, start + period),
            ):
                expected.add(duration)
            stored = Sketch()
            stored.merge(blob)
            assert stored.counts == expected.counts

    await store.run(check)
    store.close()


@pytest.mark.parametrize("window_hours", [None, 0.5, 1, 5.25, 24, 30.7, 24 * 3 + 0.1, 24 * 9.5, 24 * 20])
async def test_report_over_a_window_matches_the_rows(tmp_path: Path, window_hours: float | None) -> None:
    """A window read from rows, hour and day rollups gives the figures of the rows in the window."""
    store = Store.open(tmp_path / "usage.db")
    calls = synthetic_calls(4_000, days=25, seed=2)
    await store.run(lambda db: write_batches(db, calls, 500))
    since = None if window_hours is None else NOW - window_hours * HOUR
    await store.run(lambda db: assert_report_matches_rows(db, since))
    store.close()


async def test_migration_from_version_3_backfills_rollups(tmp_path: Path) -> None:
    """A version-3 store with calls in it opens as version 4 with rollups equal to those calls."""
    path = tmp_path / "usage.db"
    old_store(path, 3, synthetic_calls(3_000, days=15, seed=3)).close()
    store = Store.open(path)
    assert store.writable

    def check(db: sqlite3.Connection) -> None:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) >= 4
        assert stored_rollups(db) == exact_rollups(db)
        assert_report_matches_rows(db, None)
        assert_report_matches_rows(db, NOW - 50 * HOUR)
        tools, _ = prior_rows(db)
        exact = {
            (server, tool): (int(ok), int(bad))
            for server, tool, ok, bad in db.execute(
                "SELECT server, tool, SUM(outcome = 'ok'), SUM(outcome != 'ok') FROM calls GROUP BY 1, 2"
            )
        }
        assert {(s, t): (ok, bad) for s, t, ok, bad, _ in tools} == exact

    await store.run(check)
    store.close()


async def test_queries_stored_before_a_new_stemmer_meet_todays_queries(tmp_path: Path) -> None:
    """A version-4 store held query terms made by an older stemmer ("news" -> "new"); once
    opened, its calls' raw queries are analysed by today's analyser, so a query "news" finds
    the tool that "latest news headlines" led to."""
    path = tmp_path / "usage.db"
    calls = [
        (NOW - i, "agent", "1", "feeds", "top", 5.0, "ok", None, "latest news headlines") for i in range(3)
    ]
    old = old_store(path, 4, calls)
    with transaction(old):
        old.executemany(
            "INSERT INTO term_tool VALUES (?, 'feeds', 'top', 3, 0, ?)",
            [(term, NOW) for term in ("latest", "new", "headlin")],
        )
    old.close()
    store = Store.open(path, analyse=terms)
    prior = UsagePrior()
    prior.load(*await store.follow(prior.load, prior.reload))
    store.close()
    assert "new" not in prior.associations
    assert prior.association(terms("news")) == {("feeds", "top"): pytest.approx(3 / 5)}


async def test_stored_terms_are_rebuilt_only_when_the_analyser_changes(tmp_path: Path) -> None:
    """Queries are stored as typed and their terms as a cache: a load by the same analyser reads
    the cache (a row planted in it survives), a load by another analyser rebuilds the terms
    from the queries (the planted row goes, the new analyser's terms come)."""
    path = tmp_path / "usage.db"
    first = Store.open(path, analyse=str.split)
    first.record_call((time.perf_counter(), 0.01, None, None, "img", "resize", "ok", None, "Resize images"))
    await first.flush()
    _, learned = await first.run(lambda db: prior_rows(db, str.split))
    assert sorted(learned) == [("Resize", "img", "resize", 1), ("images", "img", "resize", 1)]

    def plant(db: sqlite3.Connection) -> None:
        db.execute("INSERT INTO term_tool VALUES ('planted', 'img', 'resize', 1, 0, 0)")

    await first.run(plant)
    _, again = await first.run(lambda db: prior_rows(db, str.split))
    first.close()
    assert ("planted", "img", "resize", 1) in again
    second = Store.open(path, analyse=terms)
    _, rebuilt = await second.run(lambda db: prior_rows(db, terms))
    second.close()
    assert sorted(rebuilt) == sorted((term, "img", "resize", 1) for term in terms("Resize images"))


async def test_pruning_removes_whole_days_and_keeps_rollups_equal_to_rows(tmp_path: Path) -> None:
    """Pruning to 3 days cuts at a day start: nothing younger than 3 days goes, nothing of the cut
    days stays, the week holding the cut keeps only its remaining days, and rollups and the
    report still equal the remaining rows."""
    store = Store.open(tmp_path / "usage.db")
    calls = synthetic_calls(5_000, days=20, seed=4)
    await store.run(lambda db: write_batches(db, calls, 250))
    removed = await store.run(lambda db: prune(db, 3, now=NOW))

    def check(db: sqlite3.Connection) -> None:
        oldest = db.execute("SELECT MIN(ts) FROM calls").fetchone()[0]
        cut = int((NOW - 3 * DAY) / DAY) * DAY
        assert removed == sum(1 for call in calls if call[0] < cut) > 0
        assert (
            oldest >= cut and db.execute("SELECT COUNT(*) FROM calls").fetchone()[0] == len(calls) - removed
        )
        assert (
            db.execute("SELECT MIN(start) FROM call_rollups WHERE period < ?", (WEEK,)).fetchone()[0] >= cut
        )
        assert db.execute("SELECT MIN(start) FROM call_rollups").fetchone()[0] == int(cut / WEEK) * WEEK
        assert stored_rollups(db) == exact_rollups(db)
        assert_report_matches_rows(db, None)

    await store.run(check)
    store.close()


async def test_prior_learns_each_batch_exactly_what_the_store_holds(tmp_path: Path) -> None:
    """Calls queued the way the daemon queues them reach the prior through ``follow``, batch by batch;
    the prior then equals one loaded from the store from scratch."""
    store = Store.open(tmp_path / "usage.db", analyse=terms)
    learned = UsagePrior()
    learned.load(*await store.follow(learned.load, learned.reload))
    rng = random.Random(5)
    for _ in range(300):
        server, tool = rng.choice(TOOLS)
        outcome, query = rng.choice(OUTCOMES), rng.choice(QUERIES)
        store.record_call((time.perf_counter(), 0.01, "agent", "1", server, tool, outcome, None, query))
    await store.flush()  # the batches' callbacks are queued on the loop before the flush returns
    fresh = UsagePrior()
    fresh.load(*await store.run(lambda db: prior_rows(db, terms)))
    store.close()
    assert learned.tools == fresh.tools
    assert learned.associations == fresh.associations
    assert sum(v.successes + v.failures for v in learned.tools.values()) == 300
    assert learned.association(terms("weather")) and learned.association(terms("pdf"))


async def test_the_prior_forgets_calls_the_retention_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calls older than the retention leave the store at the next prune, and the daemon's prior
    with them: it equals one loaded from the store afresh, so a query word met only in calls
    that are gone no longer leads to their tool (the prior used to keep them until a restart)."""
    monkeypatch.setattr(db_module, "_PRUNE_EVERY", 0.0)  # prune before every batch, not hourly
    store = Store.open(tmp_path / "usage.db", analyse=terms, retention_days=1)
    prior = UsagePrior()
    prior.load(*await store.follow(prior.load, prior.reload))
    three_days_ago = time.perf_counter() - 3 * DAY
    store.record_call((three_days_ago, 0.01, "agent", "1", "feeds", "top", "ok", None, "latest headlines"))
    await store.flush()
    assert prior.association(terms("headlines")) == {("feeds", "top"): pytest.approx(1 / 3)}
    store.record_call((time.perf_counter(), 0.01, "agent", "1", "img", "resize", "ok", None, "resize photos"))
    await store.flush()
    fresh = UsagePrior()
    fresh.load(*await store.run(lambda db: prior_rows(db, terms)))
    store.close()
    assert prior.association(terms("headlines")) == {}
    assert ("feeds", "top") not in prior.tools
    assert prior.tools == fresh.tools and prior.associations == fresh.associations
    assert prior.association(terms("photos")) == {("img", "resize"): pytest.approx(1 / 3)}
