"""Scale: ``status`` with many configured servers, and the index at 200 servers / 20k tools.

Run ``python bench/scale.py``. Two parts, each against a real daemon:

1. ``--configured`` servers (1,000) of which ``--live`` (5) run and the rest are
   ``enabled = false``: the wall time of ``status`` over the socket (p50/p99), and of
   ``prompt.snippet`` and ``tools.list`` without a query for scale.
2. ``--servers`` fixture servers (200) with ``--tools`` tools each (100): time until all
   are running, the first ranked query (answered at once from what is indexed; the
   rest joins in the background), the time until the index holds every tool, steady-state
   query p50/p99, and the daemon's RSS before and after.

Asserts nothing; targets: ``status`` over 1,000 servers <= 50 ms; no query waits for
the index.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from mcpd.client.aio import AsyncClient, connect
from mcpd.daemon.logging import configure_logging
from mcpd.model.states import LIVE_STATES
from mcpd.testing import fixture_toml
from mcpd.testing.daemon import running_daemon


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def timed(op: Callable[[], Awaitable[object]], repeats: int) -> tuple[float, float]:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        await op()
        times.append((time.perf_counter() - began) * 1000)
    return percentile(times, 0.5), percentile(times, 0.99)


async def many_configured(configured: int, live: int, repeats: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="mcpd-scale-", dir="/tmp"))
    config = workdir / "config.toml"
    config.write_text(
        "[daemon]\nusage = false\n"
        + "".join(fixture_toml(f"live{i:02d}") for i in range(live))
        + "".join(fixture_toml(f"off{i:04d}", enabled=False) for i in range(configured - live))
    )
    try:
        async with running_daemon(config) as daemon, connect(daemon.socket) as client:
            statuses = await client.status()
            while sum(s.state in LIVE_STATES for s in statuses) < live:
                await anyio.sleep(0.2)
                statuses = await client.status()
            print(
                f"{configured:,} configured servers ({live} live), "
                f"daemon RSS {rss_mb(daemon.process.pid):.0f} MB"
            )
            for label, op in (
                ("status", client.status),
                ("prompt.snippet", client.snippet),
                ("tools.list (no query)", client.tools),
            ):
                p50, p99 = await timed(op, repeats)
                print(f"  {label:<24}p50 {p50:7.2f} ms   p99 {p99:7.2f} ms")
        print("  (target: status <= 50 ms)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def many_tools(servers: int, tools: int, repeats: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="mcpd-scale-", dir="/tmp"))
    config = workdir / "config.toml"
    config.write_text(
        "[daemon]\nusage = false\n"
        + "".join(
            fixture_toml(f"s{i:03d}", "--tools", str(tools), "--no-control", connect_timeout=300)
            for i in range(servers)
        )
    )
    try:
        began = time.perf_counter()
        # Readiness waits up to a minute for first starts; 200 starts on a small machine take longer.
        async with running_daemon(config, wait_ready=False) as daemon:
            await daemon.wait_for("daemon.ready", timeout=900)
            async with connect(daemon.socket) as client:
                await report_many_tools(
                    daemon.process.pid, client, servers, tools, began=began, repeats=repeats
                )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def report_many_tools(
    pid: int, client: AsyncClient, servers: int, tools: int, *, began: float, repeats: int
) -> None:
    total = servers * tools
    statuses = await client.status()
    while sum(s.state in LIVE_STATES for s in statuses) < servers:
        await anyio.sleep(0.5)
        statuses = await client.status()
    started = time.perf_counter() - began
    before = rss_mb(pid)
    print(f"\n{servers} servers x {tools} tools = {total:,} tools: all running after {started:.1f} s,")
    print(f"  daemon RSS {before:.0f} MB before any query")
    t = time.perf_counter()
    first = await client.search("tool", limit=5)
    first_ms = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    found = 0
    while found < total:
        found = len((await client.search("tool", limit=total)).tools)
        if found < total:
            await anyio.sleep(0.05)
    indexed_s = time.perf_counter() - t
    print(f"  first ranked query: {first_ms:.1f} ms ({len(first.tools)} hits from what was indexed)")
    print(f"  every tool ranked {indexed_s:.2f} s later (indexed in the background)")
    p50, p99 = await timed(lambda: client.search("tool 7 echo", limit=20), repeats)
    print(f"  ranked query over {total:,} tools: p50 {p50:.2f} ms   p99 {p99:.2f} ms")
    p50, p99 = await timed(client.status, repeats)
    print(f"  status: p50 {p50:.2f} ms   p99 {p99:.2f} ms")
    print(f"  daemon RSS {rss_mb(pid):.0f} MB after indexing")


async def main(options: argparse.Namespace) -> None:
    if options.configured:
        await many_configured(options.configured, options.live, options.repeats)
    if options.servers:
        await many_tools(options.servers, options.tools, options.repeats)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--configured", type=int, default=1000, help="servers configured in part 1 (0: skip)")
    parser.add_argument("--live", type=int, default=5, help="of which running")
    parser.add_argument("--servers", type=int, default=200, help="fixture servers in part 2 (0: skip)")
    parser.add_argument("--tools", type=int, default=100, help="tools per server in part 2")
    parser.add_argument("--repeats", type=int, default=50)
    configure_logging("warning")
    anyio.run(main, parser.parse_args())
