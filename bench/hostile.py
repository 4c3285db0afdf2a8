"""Hostile-client benchmark: what one misbehaving client costs everybody else.

Run ``python bench/hostile.py``. A daemon serves one fixture server; a well-behaved
client calls ``status`` and ``tools.call`` back to back for the whole run, and for each
attack phase the script prints that client's p50/p99 during the phase beside a quiet
baseline of the same run (target: p99 <= 50 ms), then daemon crashes (target 0), the
daemon's open fds before and after, and its RSS at baseline, at peak and after the
attacks (target: after within 20% of baseline).

Each attack runs in its own process (this script with ``--attack``), so the measuring
client's event loop is never the one under load, and at the lowest CPU priority (nice
19), so that what is measured is how the daemon shares its time, not how the machine
shares its cores. The machine's load average is printed too: on a busy machine every
figure rises. Asserts nothing: the figures are for people.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from mcpd.client.aio import AsyncClient, connect
from mcpd.daemon.logging import configure_logging
from mcpd.errors import McpdError
from mcpd.testing import fixture_command, rss_mib
from mcpd.testing.daemon import running_daemon
from mcpd.testing.hostile import (
    INVALID_UTF8,
    connect_close,
    deep,
    empty_maps,
    frame,
    parallel,
    probe,
    request,
    send_and_wait,
)

MIB = 1024 * 1024
QUIET_SECONDS = 3.0


# -- the attacks (each runs in its own process) -----------------------------------------------------


async def random_bytes(path: Path) -> None:
    """2,000 connections sending 1 B-4 KiB of seeded random bytes, 16 at a time."""
    rng = random.Random(7)
    payloads = [rng.randbytes(rng.randint(1, 4096)) for _ in range(2000)]

    async def worker(index: int) -> None:
        for payload in payloads[index::16]:
            await probe(path, payload)

    async with anyio.create_task_group() as tg:
        for index in range(16):
            tg.start_soon(worker, index)


async def connect_close_5000(path: Path) -> None:
    connect_close(path, 5000)


async def query_16mib(path: Path) -> None:
    """A tools.list query just under the 16 MiB frame limit, three times."""
    data = request(2, "tools.list", {"query": "q" * (16 * MIB - 1024)})
    for _ in range(3):
        send_and_wait(path, data, 1)


async def parallel_1000(path: Path) -> None:
    await parallel(path, 1000)


async def large_frames(path: Path) -> None:
    """Accepted and refused large frames: 3 MiB echoed through another server, 15 MiB over the
    tools.call limit, 3 million empty maps over the values limit; three rounds."""
    echo = request(2, "tools.call", {"tool": "big__echo", "arguments": {"text": "e" * (3 * MIB)}})
    over = request(3, "tools.call", {"tool": "big__echo", "arguments": {"text": "o" * (15 * MIB)}})
    for _ in range(3):
        send_and_wait(path, echo, 1)
        send_and_wait(path, over, 1)
        send_and_wait(path, empty_maps(3_000_000), 1)


async def floods(path: Path) -> None:
    """Pipelined floods on one connection each: 20,000 frames of invalid UTF-8, 2,000 nested
    past the recursion limit, 200 nested 60,000 deep in large frames."""
    send_and_wait(path, frame(INVALID_UTF8) * 20_000, 20_000)
    send_and_wait(path, deep(5_000) * 2_000, 2_000)
    send_and_wait(path, deep(60_000) * 200, 200)


ATTACKS = {
    "random bytes": random_bytes,
    "5,000 connect/close": connect_close_5000,
    "16 MiB tools.list query": query_16mib,
    "1,000 parallel connections": parallel_1000,
    "large frames": large_frames,
    "invalid UTF-8 / deep floods": floods,
}


# -- the measurement ---------------------------------------------------------------------------


@dataclass
class Samples:
    """(end time, operation, milliseconds) of every request of the well-behaved client."""

    rows: list[tuple[float, str, float]] = field(default_factory=list)
    failures: int = 0

    def window(self, op: str, start: float, end: float) -> list[float]:
        return [ms for t, o, ms in self.rows if o == op and start <= t <= end]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def sched(pid: int) -> tuple[float, float]:
    """Milliseconds ``pid`` has run on a CPU, and waited runnable for one (``/proc/PID/schedstat``)."""
    with open(f"/proc/{pid}/schedstat") as stat:
        ran, waited, _slices = stat.read().split()
    return int(ran) / 1e6, int(waited) / 1e6


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def behave(client: AsyncClient, samples: Samples, stop: anyio.Event) -> None:
    while not stop.is_set():
        for op in ("status", "tools.call"):
            start = time.perf_counter()
            try:
                if op == "status":
                    await client.status()
                else:
                    await client.call_tool("fx__tool_0", {"text": "x"})
            except McpdError:  # a failure is a figure here, not the end of the bench
                samples.failures += 1
            end = time.perf_counter()
            samples.rows.append((end, op, (end - start) * 1000))


async def watch_rss(pid: int, peak: list[float], stop: anyio.Event) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], rss_mib(pid))
        await anyio.sleep(0.02)


@dataclass
class Phase:
    name: str
    start: float
    end: float
    daemon_cpu: float
    """Milliseconds the daemon ran during the phase."""
    daemon_waited: float
    """Milliseconds the daemon was ready to run but had no CPU: the machine's share, not the daemon's."""


async def measure(name: str, pid: int, run: Callable[[], Awaitable[tuple[float, float]]]) -> Phase:
    ran, waited = sched(pid)
    start, end = await run()
    ran_after, waited_after = sched(pid)
    return Phase(name, start, end, ran_after - ran, waited_after - waited)


async def quiet() -> tuple[float, float]:
    start = time.perf_counter()
    await anyio.sleep(QUIET_SECONDS)
    return start, time.perf_counter()


async def run_attack(name: str, socket: Path) -> tuple[float, float]:
    """Run one attack in its own process; the phase is from its "go" to its exit."""
    process = await anyio.open_process(
        [sys.executable, __file__, "--attack", name, "--socket", str(socket)], stderr=None
    )
    assert process.stdout is not None
    async with process.stdout:
        await process.stdout.receive()  # "go": imports done, the attack starts now
        start = time.perf_counter()
        await process.wait()
    return start, time.perf_counter()


def row(phase: Phase, samples: Samples) -> str:
    cells = []
    for op in ("status", "tools.call"):
        values = samples.window(op, phase.start, phase.end)
        cells.append(f"{percentile(values, 0.5):7.2f} {percentile(values, 0.99):8.2f} {len(values):6d}")
    sched_cells = f"{phase.daemon_cpu:8.0f} {phase.daemon_waited:8.0f}"
    return f"  {phase.name:<28}{phase.end - phase.start:6.1f} s " + "   ".join(cells) + sched_cells


async def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="mcpd-hostile-", dir="/tmp"))
    # The well-behaved client calls fx; the attacks' accepted calls go to big, so that a busy
    # server is not mistaken for a busy daemon.
    config = workdir / "config.toml"
    entries = []
    for name in ("fx", "big"):
        command, *args = fixture_command(name, "--tools", "1")
        entries.append(f"[servers.{name}]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n")
    config.write_text("".join(entries))
    load = os.getloadavg()
    samples = Samples()
    phases: list[Phase] = []
    try:
        async with running_daemon(config) as daemon, connect(daemon.socket, name="well-behaved") as client:
            pid = daemon.process.pid
            stop = anyio.Event()
            peak = [0.0]
            async with anyio.create_task_group() as tg:
                tg.start_soon(behave, client, samples, stop)
                phases.append(await measure("quiet baseline", pid, quiet))
                rss_baseline, fds_before = rss_mib(pid), open_fds(pid)
                tg.start_soon(watch_rss, pid, peak, stop)
                for name in ATTACKS:
                    attack = functools.partial(run_attack, name, daemon.socket)
                    phases.append(await measure(name, pid, attack))
                phases.append(await measure("quiet after", pid, quiet))
                stop.set()
            rss_after, fds_after = rss_mib(pid), open_fds(pid)
            crashes = 0 if daemon.process.returncode is None else 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"machine load average (1 min) at start {load[0]:.1f}, at end {os.getloadavg()[0]:.1f}")
    print("well-behaved client during each phase, ms (target p99 <= 50)")
    status, call = "status p50   p99      n", "tools.call p50   p99      n"
    print(f"  {'phase':<28}{'length':>8} {status:>24}   {call:>27}  daemon ms: ran, waited for a CPU")
    for phase in phases:
        print(row(phase, samples))
    print(f"\nwell-behaved requests that failed: {samples.failures}")
    print(f"daemon crashes: {crashes}  (target 0)")
    print(f"daemon fds: before {fds_before}, after {fds_after}")
    change = (rss_after - rss_baseline) / rss_baseline * 100
    print(
        f"daemon RSS: baseline {rss_baseline:.1f} MiB, peak {peak[0]:.1f} MiB, after {rss_after:.1f} MiB "
        f"({change:+.0f}% of baseline; target within 20%)"
    )


def attack(name: str, socket: str) -> None:
    os.nice(19)
    print("go", flush=True)
    asyncio.run(ATTACKS[name](Path(socket)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--attack", choices=sorted(ATTACKS), help=argparse.SUPPRESS)
    parser.add_argument("--socket", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.attack:
        attack(options.attack, options.socket)
        sys.exit(0)
    configure_logging("warning")
    anyio.run(main)
