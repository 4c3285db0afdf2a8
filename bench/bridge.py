"""Bridge benchmark: a host (the MCP SDK client) through ``mcpd bridge`` next to the same host
talking straight to the server, in one run.

Run ``python bench/bridge.py``. Prints:

- echo p50/p99 through a bridge vs a direct SDK session to another copy of the fixture server;
- calls/s with 8 host sessions: 8 bridges sharing the daemon's one server, vs 8 direct
  sessions each to its own server (what 8 hosts do without mcpd); the ratio is the median of
  alternating pairs of cells, with each side's CPU per call by process (where the time goes).
  The machine is saturated, and one server busy with 8 sessions spends less CPU per call than 8
  servers each with one: that saving is in this ratio, not only the bridge's cost (for that, see
  ``bench/peers.py``, where each session calls a server of its own on both sides);
- CPU per call of the daemon plus the bridges (8 sessions calling);
- each bridge's memory: RSS, PSS (its share of pages it shares with the other bridges) and
  USS (its own pages), and whether the bridge process imports the SDK, pydantic or anyio.

Asserts nothing about time: the figures are for people.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
from ipc import Op, alternating, children_with_args, cpu_seconds, latency, print_alternating, throughput
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpd.daemon.logging import configure_logging
from mcpd.testing import fixture_command, pids_with_args
from mcpd.testing.daemon import running_daemon

SESSIONS = 8


@contextlib.asynccontextmanager
async def session(command: str, args: list[str]) -> AsyncIterator[ClientSession]:
    async with (
        stdio_client(StdioServerParameters(command=command, args=args)) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        await client.list_tools()
        yield client


def memory_kb(pid: int) -> tuple[int, int, int]:
    """RSS, PSS and USS (private pages) of a process, in kB."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value = line.split(":", 1)
        fields[name] = int(value.split()[0])
    return fields["Rss"], fields["Pss"], fields["Private_Clean"] + fields["Private_Dirty"]


def bridge_imports() -> list[str]:
    """Heavy packages a bridge process loads (it runs ``mcpd.cli`` and ``mcpd.bridge``)."""
    probe = (
        "import sys, mcpd.cli, mcpd.bridge; "
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'mcp', 'mcp_types', 'pydantic', 'anyio', 'structlog', 'httpx'})))"
    )
    return subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()


def row(label: str, p50: float, p99: float) -> None:
    print(f"  {label:<36}p50 {p50:7.3f} ms   p99 {p99:7.3f} ms")


async def main(count: int, seconds: float, calls: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="mcpd-bench-", dir="/tmp"))
    command, *args = fixture_command("fx", "--sdk", "--tools", "1")
    config = workdir / "config.toml"
    config.write_text(f"[servers.fx]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n")
    bridge_args = ["-m", "mcpd", "bridge", "--no-autostart", "--connect", "fx"]
    try:
        async with running_daemon(config) as daemon, contextlib.AsyncExitStack() as stack:
            via = [
                await stack.enter_async_context(
                    session(sys.executable, [*bridge_args, "--socket", str(daemon.socket)])
                )
                for _ in range(SESSIONS)
            ]
            direct = [await stack.enter_async_context(session(command, args)) for _ in range(SESSIONS)]

            def via_op(i: int) -> Op:
                return lambda: via[i].call_tool("fx__echo", {"text": "x"})

            def direct_op(i: int) -> Op:
                return lambda: direct[i].call_tool("echo", {"text": "x"})

            print(f"echo latency, 1 session, {count} sequential calls")
            direct_p50, direct_p99 = await latency(direct_op(0), count)
            via_p50, via_p99 = await latency(via_op(0), count)
            row("direct SDK session", direct_p50, direct_p99)
            row("through mcpd bridge", via_p50, via_p99)

            print(f"\ncalls/s over {seconds:g} s")
            print(f"  {'':<36}{'1 session':>12}{f'{SESSIONS} sessions':>12}")
            rates: dict[str, dict[int, float]] = {}
            for label, make in (("direct SDK session", direct_op), ("through mcpd bridge", via_op)):
                rates[label] = {
                    n: await throughput([make(i) for i in range(n)], seconds) for n in (1, SESSIONS)
                }
                print(f"  {label:<36}{rates[label][1]:>12,.0f}{rates[label][SESSIONS]:>12,.0f}")

            bridges = pids_with_args("bridge", str(daemon.socket))
            pids = [daemon.process.pid, *bridges]
            before = {pid: cpu_seconds(pid) for pid in pids}
            per_session = calls // SESSIONS

            async def caller(i: int) -> None:
                for _ in range(per_session):
                    await via[i].call_tool("fx__echo", {"text": "x"})

            async with anyio.create_task_group() as tg:
                for i in range(SESSIONS):
                    tg.start_soon(caller, i)
            total = per_session * SESSIONS
            daemon_us = (cpu_seconds(daemon.process.pid) - before[daemon.process.pid]) / total * 1e6
            bridge_us = sum(cpu_seconds(pid) - before[pid] for pid in bridges) / total * 1e6
            memory = [memory_kb(pid) for pid in bridges]

            print(f"\nCPU per call, {SESSIONS} sessions, {total} calls")
            print(f"  daemon {daemon_us:.0f} us + bridge {bridge_us:.0f} us = {daemon_us + bridge_us:.0f} us")
            print(f"\nmemory per bridge ({len(memory)} bridges, after the calls), MB")
            for name, index in (("RSS", 0), ("PSS", 1), ("USS", 2)):
                values = [m[index] / 1024 for m in memory]
                print(f"  {name}  median {statistics.median(values):5.1f}   max {max(values):5.1f}")
            heavy = bridge_imports()
            print(f"  heavy packages in the bridge process: {', '.join(heavy) or 'none'}")

            print("\ntargets")
            rss = statistics.median(m[0] for m in memory) / 1024
            print(f"  bridge RSS per host: {rss:.1f} MB  (target <= 15 MB)")
            print(f"  CPU per call, daemon + bridge: {daemon_us + bridge_us:.0f} us  (target <= ~500 us)")
            print(f"  echo p50 over direct: {(via_p50 - direct_p50) * 1000:+.0f} us  (target <= +500 us)")
            alternated, per_call = await alternating(
                {
                    "via mcpd": (
                        via_op,
                        {
                            "hosts": [os.getpid()],
                            "daemon": [daemon.process.pid],
                            "bridges": bridges,
                            "server": children_with_args(daemon.process.pid, *args),
                        },
                    ),
                    "direct": (
                        direct_op,
                        {"hosts": [os.getpid()], "servers": children_with_args(os.getpid(), *args)},
                    ),
                },
                SESSIONS,
                seconds,
            )
            print_alternating(f"calls/s with {SESSIONS} sessions", alternated, per_call, "via mcpd", "direct")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=1000, help="sequential calls per latency row")
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each throughput cell")
    parser.add_argument("--calls", type=int, default=4000, help="calls for the CPU figure")
    options = parser.parse_args()
    configure_logging("warning")
    anyio.run(main, options.requests, options.seconds, options.calls)
