"""Soak: a real daemon under a mixed load for minutes, and ``report`` over a large usage store.

Run ``python bench/soak.py`` (10 minutes; ``--minutes 60`` for the full soak). 10 fixture
servers, 8 clients in closed loops, each picking per request: ``tools.call`` with a query
(70 %), ``status`` (10 %), ``tools.list`` ranked for a query (15 %), ``report`` (5 %).
Prints, after a warm-up: the daemon's RSS trend (MB/hour, least-squares fit), fds and
threads at start and end, and per method the p99 of the second minute against the last.

Then (unless ``--report-rows 0``) a usage store is pre-filled with N synthetic calls (1M by
default: 100 tools over 90 days, log-normal durations, a few queries) and a daemon opened
on it answers ``report`` (no window, and 1 hour / 1 day / 30 days) repeatedly: p50/p99.
Asserts nothing: the figures are for people. Targets: RSS trend < 5 MB/hour; each method's
last-minute p99 within 1.5x of the second minute's; report over 1M rows <= 100 ms.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from mcpd.client.aio import connect
from mcpd.daemon.logging import configure_logging
from mcpd.errors import McpdError
from mcpd.store.db import Store
from mcpd.store.sql import transaction
from mcpd.store.usage import DAY, StoredCall, write_calls
from mcpd.testing import fixture_toml
from mcpd.testing.daemon import running_daemon

QUERIES = [
    "echo a message back",
    "add two numbers",
    "search the web for news",
    "convert a pdf document to markdown",
    "read a file from disk",
    "what time is it in tokyo",
    "send an email to the team",
    "list open pull requests",
]
MIX: list[tuple[str, float]] = [
    ("tools.call", 0.70),
    ("status", 0.10),
    ("tools.list", 0.15),
    ("report", 0.05),
]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else math.nan


def proc(pid: int) -> tuple[float, int, int]:
    """RSS in MB, open fds and threads of ``pid``."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    rss_mb = int(fields["VmRSS"].split()[0]) / 1024
    return rss_mb, len(os.listdir(f"/proc/{pid}/fd")), int(fields["Threads"])


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB) points, in MB per hour."""
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    cov = sum((t - mean_t) * (y - mean_y) for t, y in points)
    return cov / var * 3600 if var else math.nan


def servers_toml(count: int) -> str:
    return "".join(fixture_toml(f"s{i}", "--tools", "5") for i in range(count))


async def soak(minutes: float, warmup: float, clients: int, servers: int, seed: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="mcpd-soak-", dir="/tmp"))
    config = workdir / "config.toml"
    config.write_text(
        f"[daemon]\nusage_db = {json.dumps(str(workdir / 'usage.db'))}\n" + servers_toml(servers)
    )
    samples: list[tuple[float, str, float]] = []
    errors: dict[str, int] = {}
    resources: list[tuple[float, float, int, int]] = []
    try:
        async with running_daemon(config) as daemon:
            pid = daemon.process.pid
            start = time.monotonic()
            deadline = start + minutes * 60

            async def client(index: int) -> None:
                rng = random.Random(seed * 100 + index)
                methods, weights = zip(*MIX, strict=True)
                async with connect(daemon.socket, name=f"soak{index}") as c:
                    ops: dict[str, Callable[[], Awaitable[object]]] = {
                        "tools.call": lambda: c.call_tool(
                            f"s{rng.randrange(servers)}__echo", {"text": "x"}, query=rng.choice(QUERIES)
                        ),
                        "status": c.status,
                        "tools.list": lambda: c.search(rng.choice(QUERIES), limit=10),
                        "report": c.report,
                    }
                    while time.monotonic() < deadline:
                        method = rng.choices(methods, weights)[0]
                        began = time.monotonic()
                        try:
                            await ops[method]()
                        except McpdError:  # counted and printed: a soak reports its errors
                            errors[method] = errors.get(method, 0) + 1
                        samples.append((began - start, method, time.monotonic() - began))

            async def sampler() -> None:
                while time.monotonic() < deadline:
                    resources.append((time.monotonic() - start, *proc(pid)))
                    await anyio.sleep(5)

            async with anyio.create_task_group() as tg:
                tg.start_soon(sampler)
                for index in range(clients):
                    tg.start_soon(client, index)
            resources.append((time.monotonic() - start, *proc(pid)))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print_soak(minutes, warmup, samples, errors, resources)


def print_soak(
    minutes: float,
    warmup: float,
    samples: list[tuple[float, str, float]],
    errors: dict[str, int],
    resources: list[tuple[float, float, int, int]],
) -> None:
    total = len(samples)
    print(
        f"soak: {minutes:g} min, {total:,} requests ({total / (minutes * 60):,.0f}/s), errors: {errors or 0}"
    )
    after = [(t, rss) for t, rss, _, _ in resources if t >= warmup * 60]
    first, last = resources[0], resources[-1]
    trend = slope_per_hour(after) if len(after) >= 2 else math.nan
    print(
        f"  RSS {first[1]:.1f} -> {last[1]:.1f} MB; trend after {warmup:g} min warm-up: {trend:+.2f} MB/hour"
        "  (target < 5)"
    )
    print(f"  fds {first[2]} -> {last[2]}; threads {first[3]} -> {last[3]}")
    end = minutes * 60
    print(f"  {'method':<12}{'requests':>10}{'p50 ms':>9}{'p99 2nd min':>13}{'p99 last min':>14}{'ratio':>7}")
    for method, _ in MIX:
        all_ms = [d * 1000 for _, m, d in samples if m == method]
        second = [d * 1000 for t, m, d in samples if m == method and 60 <= t < 120]
        final = [d * 1000 for t, m, d in samples if m == method and end - 60 <= t]
        p_second, p_final = percentile(second, 0.99), percentile(final, 0.99)
        print(
            f"  {method:<12}{len(all_ms):>10,}{percentile(all_ms, 0.5):>9.2f}{p_second:>13.2f}"
            f"{p_final:>14.2f}{p_final / p_second:>7.2f}"
        )
    print("  (target: ratio <= 1.5 for every method)")


def synthetic_calls(count: int, seed: int) -> list[StoredCall]:
    """``count`` calls of 100 tools over the last 90 days (a few hot tools, most rarely used)."""
    rng = random.Random(seed)
    now = time.time()
    tools = [(f"server{s}", f"tool_{t}") for s in range(10) for t in range(10)]
    weights = [1 / (rank + 1) for rank in range(len(tools))]
    picks = rng.choices(tools, weights, k=count)
    calls: list[StoredCall] = []
    for server, tool in picks:
        outcome = "ok" if rng.random() < 0.93 else rng.choice(["tool_error", "timeout", "transport_error"])
        duration = round(rng.lognormvariate(math.log(25), 1.0), 3)
        query = rng.choice(QUERIES) if rng.random() < 0.3 else None
        calls.append(
            (now - rng.random() * 90 * DAY, "agent", "1", server, tool, duration, outcome, None, query)
        )
    calls.sort()
    return calls


async def report_at_scale(rows: int, repeats: int, seed: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="mcpd-report-", dir="/tmp"))
    db = workdir / "usage.db"
    try:
        began = time.perf_counter()
        calls = synthetic_calls(rows, seed)
        store = Store.open(db)

        def fill(conn: sqlite3.Connection) -> None:
            for start in range(0, len(calls), 50_000):
                with transaction(conn):
                    write_calls(conn, calls[start : start + 50_000])

        await store.run(fill)
        store.close()
        size_mb = db.stat().st_size / 1e6
        print(
            f"\nreport over {rows:,} calls (100 tools, 90 days; store {size_mb:.0f} MB, filled in "
            f"{time.perf_counter() - began:.0f} s)"
        )
        config = workdir / "config.toml"
        config.write_text(f"[daemon]\nusage_db = {json.dumps(str(db))}\n" + servers_toml(1))
        async with running_daemon(config) as daemon, connect(daemon.socket) as client:
            await client.report()
            for label, since in (
                ("no window", None),
                ("30 days", 30 * DAY),
                ("1 day", DAY),
                ("1 hour", 3600),
            ):
                times = []
                for _ in range(repeats):
                    t = time.perf_counter()
                    result = await client.report(since_s=since)
                    times.append((time.perf_counter() - t) * 1000)
                calls_seen = sum(tool.calls for tool in result.tools)
                p50, p99 = percentile(times, 0.5), percentile(times, 0.99)
                print(
                    f"  {label:<10} p50 {p50:7.1f} ms   p99 {p99:7.1f} ms"
                    f"   ({len(result.tools)} tools, {calls_seen:,} calls)"
                )
        print("  (target: <= 100 ms over 1M rows)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def main(options: argparse.Namespace) -> None:
    if options.minutes > 0:
        await soak(options.minutes, options.warmup, options.clients, options.servers, options.seed)
    if options.report_rows > 0:
        await report_at_scale(options.report_rows, options.repeats, options.seed)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="soak duration (0: no soak)")
    parser.add_argument("--warmup", type=float, default=2.0, help="minutes left out of the RSS trend")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--servers", type=int, default=10)
    parser.add_argument("--report-rows", type=int, default=1_000_000, help="calls pre-filled (0: skip)")
    parser.add_argument("--repeats", type=int, default=50, help="report requests per window")
    parser.add_argument("--seed", type=int, default=1)
    configure_logging("warning")
    anyio.run(main, parser.parse_args())
