"""Peers benchmark: mcpd next to mcp-hub and the MCP SDK talking straight to each server.

Run ``python bench/peers.py`` (``--quick`` for a 1-2 minute run, ``--skip-hub`` without
npm, ``--json`` for machine output). In one run, on the same fixture servers
(``python -m mcpd.testing.fixture``), each gateway of ``bench/peer_gateways.py`` gets:

- cold start: seconds from launch until an ``echo`` succeeded on all 10 servers, and the CPU the
  gateway's own processes spent until then (taken from the servers booting on the same cores);
- start with 2 of 10 hung (``--hang-initialize``): until the 8 healthy ones answer;
  both starts are measured ``--starts`` times (3, or 1 with ``--quick``) and the median is
  shown, with each run in a note: one start moves by about a second between runs on 5;
- ``echo`` p50/p99 with one session; calls/s with 8 sessions (session i calls server i);
- gateway CPU per call over that load (utime+stime from /proc of the gateway's own
  processes: the daemon plus its bridges for ``mcpd bridge``, node for mcp-hub), and the CPU
  per call of the host (this process) and of the servers beside it;
- gateway RSS idle and loaded, and per host (each host runs its own ``mcpd bridge``);
- ``kill -9`` of a server under load (8 sessions calling it): time until a call made after
  the kill succeeds, and the failed calls split into those issued after the server was seen
  dead (it never received them) and those issued before (in flight at the death, or queued).

Load and latency are measured with every gateway running at once, in cells that alternate
gateway and order round by round (``--rounds``): on a shared machine one cell moves by 2x from
one minute to the next, and cells taken one gateway after the other gave that drift to whichever
ran in a bad minute. calls/s is the median of a gateway's cells, its ratio the median of the
ratios to the direct SDK's cell of the same round; p50/p99 pool blocks of calls taken in turns.
With 8 sessions on two cores the machine is saturated, so calls/s follows the total CPU per call
(host + gateway + servers), which the table gives by part.

mcp-hub 4.2.1 is installed by ``npm install --prefix`` into a temporary directory. Prints
one table with ratios to the direct SDK, then the targets of issue 17 with the figures
they compare (some against mcp-hub). Asserts nothing: compare ratios, not absolute times.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import math
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from peer_gateways import (
    CallFailed,
    Gateway,
    Launcher,
    ServerSpec,
    Session,
    child_pids,
    compile_mcpd,
    install_hub,
    launch_bridge,
    launch_direct,
    launch_hub_mcp,
    launch_hub_rest,
    launch_mcpd,
    launch_mcpd_http,
    proc_stat,
)

from mcpd.daemon.logging import configure_logging
from mcpd.testing import process_gone

SESSIONS = 8
PROBE_INTERVAL = 0.02
"""Seconds between ``echo`` attempts while a gateway starts (the same for every gateway)."""
RETRY_PAUSE = 0.05
"""Seconds a load worker waits after a failed call, so that a failing gateway is not spun on."""
HEALTHY = [ServerSpec(f"s{i}") for i in range(10)]
WITH_HUNG = [*HEALTHY[:8], *(ServerSpec(f"h{i}", ("--hang-initialize",)) for i in range(2))]
VICTIM = "s0"
DIRECT = "direct SDK"


@dataclass(frozen=True)
class Settings:
    calls: int
    """Sequential calls of the latency measurement."""
    seconds: float
    """Length of one cell of the 8-session load."""
    rounds: int
    """Cells of load per gateway, alternating with the other gateways' (and latency blocks)."""
    deadline: float
    """Longest wait for a start; past it the gateway counts as never usable."""
    outage: float
    """Longest wait for a killed server to be usable again."""
    starts: int
    """Launches per start case (cold, 2 of 10 hung); the median is reported."""


QUICK = Settings(calls=200, seconds=1.5, rounds=5, deadline=30.0, outage=15.0, starts=1)
# 90 s: long enough for mcp-hub to give up on a hung server (its SDK times initialize out at 60 s).
FULL = Settings(calls=1000, seconds=4.0, rounds=7, deadline=90.0, outage=30.0, starts=3)


@dataclass(frozen=True)
class Latency:
    p50_ms: float
    p99_ms: float


@dataclass(frozen=True)
class Load:
    calls_per_s: float
    """The median of the cells."""
    cells: list[float]
    """calls/s of each cell, round by round."""
    ratios: list[float]
    """calls/s of each cell over the direct SDK's of the same round."""
    failed: int
    cpu_us_per_call: float | None
    """CPU of the gateway's own processes per successful call; None without a gateway."""
    host_cpu_us_per_call: float
    """CPU of this process (the hosts' SDK clients, or the HTTP and socket clients) per call."""
    servers_cpu_us_per_call: float
    rss_idle_mib: float | None
    rss_loaded_mib: float | None
    host_rss_idle_mib: float | None
    """Mean RSS of one per-host process (``mcpd bridge``), None when hosts start none."""
    host_rss_loaded_mib: float | None


@dataclass(frozen=True)
class Outage:
    usable_after_s: float | None
    """Seconds from the kill until a call made after it succeeded; None: not within the limit."""
    failed_unseen: int
    """Failed calls issued after the kill: the dead server never received them."""
    failed_in_flight: int
    """Failed calls issued before the kill (in flight at the death, or still queued)."""
    unanswered: int
    """Calls still waiting when the measurement ended."""
    errors: dict[str, int]


def _median(runs: list[float | None]) -> float | None:
    """The median start; None (never usable) when half of the runs or more never were."""
    if not runs:
        return None
    ordered = sorted(runs, key=lambda run: math.inf if run is None else run)
    return ordered[(len(ordered) - 1) // 2]


@dataclass
class Column:
    """Every figure of one gateway; None where it does not apply or was not reached."""

    label: str
    cold_runs: list[float | None] = field(default_factory=list)
    """Seconds of each cold start (None: not usable within the deadline)."""
    hung_runs: list[float | None] = field(default_factory=list)

    @property
    def cold_s(self) -> float | None:
        return _median(self.cold_runs)

    @property
    def hung_s(self) -> float | None:
        return _median(self.hung_runs)

    @property
    def rate_ratio(self) -> float | None:
        """The median of the paired ratios of calls/s to the direct SDK (None without them)."""
        if self.load is None or not self.load.ratios:
            return None
        return statistics.median(self.load.ratios)

    start_cpu_s: float | None = None
    """CPU seconds of the gateway's shared processes from launch until the first cold start was usable:
    what it took from the servers starting beside it on the same cores."""
    session_open_ms: float | None = None
    """Median time to connect one more client (for mcpd bridge: spawn a bridge, initialize)."""
    latency: Latency | None = None
    load: Load | None = None
    outage: Outage | None = None
    notes: list[str] = field(default_factory=list)


# -- /proc readings ------------------------------------------------------------------------------


def cpu_seconds(pids: Sequence[int]) -> float:
    """utime + stime of ``pids`` themselves (their children not included)."""
    total = 0
    for pid in pids:
        fields = proc_stat(pid)
        if fields is not None:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def total_rss(pids: Sequence[int]) -> float | None:
    return sum(rss_mib(pid) for pid in pids) if pids else None


def mean_rss(pids: Sequence[int]) -> float | None:
    return statistics.mean(rss_mib(pid) for pid in pids) if pids else None


def peak(previous: float | None, current: float | None) -> float | None:
    return current if previous is None or current is None else max(previous, current)


def core_pids(gateway: Gateway) -> list[int]:
    """The gateway's shared processes: its own minus the per-host ones."""
    hosts = set(gateway.host_pids())
    return [pid for pid in gateway.gateway_pids() if pid not in hosts]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- measurements --------------------------------------------------------------------------------


async def echo(session: Session, server: str) -> None:
    await session.call(server, "echo", {"text": "ping"})


async def until_echo(session: Session, server: str) -> None:
    """Call ``echo`` on ``server`` until it succeeds (the caller bounds the time)."""
    while True:
        try:
            await echo(session, server)
        except CallFailed:
            await anyio.sleep(PROBE_INTERVAL)
        else:
            return


async def wait_usable(gateway: Gateway, servers: list[str], started: float, deadline: float) -> float | None:
    """Seconds from ``started`` until every server answered through ``gateway``; None past the deadline."""
    with anyio.move_on_after(deadline - (time.perf_counter() - started)):
        session = await gateway.open_session()
        async with anyio.create_task_group() as tg:
            for server in servers:
                tg.start_soon(until_echo, session, server)
        return time.perf_counter() - started
    return None


async def open_sessions(gateway: Gateway) -> tuple[list[Session], float]:
    """SESSIONS new sessions, one after the other, and the median time each took to open."""
    sessions, times = [], []
    for _ in range(SESSIONS):
        start = time.perf_counter()
        sessions.append(await gateway.open_session())
        times.append(time.perf_counter() - start)
    return sessions, statistics.median(times) * 1000


def server_pids(gateway: Gateway) -> list[int]:
    """The fixture servers the gateway runs (the direct SDK's are this process's children)."""
    parents = core_pids(gateway) or [os.getpid()]
    found = []
    for parent in parents:
        for pid in child_pids(parent):
            with contextlib.suppress(OSError):
                if b"mcpd.testing.fixture" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(pid)
    return found


@dataclass
class Running:
    """A gateway kept running for the load, latency and outage measurements, with its sessions."""

    column: Column
    gateway: Gateway
    sessions: list[Session]
    rates: list[float] = field(default_factory=list)
    done: int = 0
    failed: int = 0
    cpu: dict[str, float] = field(default_factory=lambda: dict.fromkeys(("host", "gateway", "servers"), 0.0))
    idle: tuple[float | None, float | None] = (None, None)
    loaded: tuple[float | None, float | None] = (None, None)


async def load_cell(running: Running, seconds: float) -> float:
    """Session i calls server i for ``seconds``; adds the CPU and RSS of the cell to ``running``."""
    gateway = running.gateway
    core, hosts, servers = core_pids(gateway), gateway.host_pids(), server_pids(gateway)
    if running.idle == (None, None):
        running.idle = running.loaded = (total_rss(core), mean_rss(hosts))
    done = failed = 0
    before = (time.process_time(), cpu_seconds(gateway.gateway_pids()), cpu_seconds(servers))
    started = time.perf_counter()
    end = started + seconds

    async def worker(session: Session, server: str) -> None:
        nonlocal done, failed
        while time.perf_counter() < end:
            try:
                await echo(session, server)
                done += 1
            except CallFailed:
                failed += 1
                await anyio.sleep(RETRY_PAUSE)

    async def sample() -> None:
        while time.perf_counter() < end:
            await anyio.sleep(0.2)
            loaded, host_loaded = running.loaded
            running.loaded = (peak(loaded, total_rss(core)), peak(host_loaded, mean_rss(hosts)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        for index, session in enumerate(running.sessions):
            tg.start_soon(worker, session, HEALTHY[index % len(HEALTHY)].name)
    elapsed = time.perf_counter() - started
    after = (time.process_time(), cpu_seconds(gateway.gateway_pids()), cpu_seconds(servers))
    for part, used in zip(running.cpu, (b - a for a, b in zip(before, after, strict=True)), strict=True):
        running.cpu[part] += used
    running.done += done
    running.failed += failed
    return done / elapsed


async def measure_loads(running: list[Running], settings: Settings) -> None:
    """``settings.rounds`` cells of load per gateway, the gateways in turn, forward then backward."""
    for round_ in range(settings.rounds):
        for each in running if round_ % 2 == 0 else running[::-1]:
            each.rates.append(await load_cell(each, settings.seconds))
    direct = next((each for each in running if each.column.label == DIRECT), None)
    for each in running:
        per_call = {
            part: used / each.done * 1e6 if each.done else math.nan for part, used in each.cpu.items()
        }
        each.column.load = Load(
            calls_per_s=statistics.median(each.rates),
            cells=each.rates,
            ratios=[rate / base for rate, base in zip(each.rates, direct.rates, strict=True)]
            if direct
            else [],
            failed=each.failed,
            cpu_us_per_call=per_call["gateway"] if each.gateway.gateway_pids() else None,
            host_cpu_us_per_call=per_call["host"],
            servers_cpu_us_per_call=per_call["servers"],
            rss_idle_mib=each.idle[0],
            rss_loaded_mib=each.loaded[0],
            host_rss_idle_mib=each.idle[1],
            host_rss_loaded_mib=each.loaded[1],
        )


async def measure_latencies(running: list[Running], settings: Settings) -> None:
    """``settings.calls`` sequential calls on one session per gateway, in ``settings.rounds`` blocks
    taken in turns."""
    for each in running:
        for _ in range(min(20, settings.calls)):
            await echo(each.sessions[0], VICTIM)
    samples: dict[str, list[float]] = {each.column.label: [] for each in running}
    for block in range(settings.rounds):
        for each in running if block % 2 == 0 else running[::-1]:
            for _ in range(settings.calls // settings.rounds):
                start = time.perf_counter()
                await echo(each.sessions[0], VICTIM)
                samples[each.column.label].append(time.perf_counter() - start)
    for each in running:
        taken = samples[each.column.label]
        each.column.latency = Latency(percentile(taken, 0.5) * 1000, percentile(taken, 0.99) * 1000)


@dataclass(frozen=True)
class CallRecord:
    issued: float
    finished: float
    error: str | None


async def measure_outage(sessions: list[Session], limit: float) -> Outage:
    """Every session calls VICTIM in a loop; kill -9 it; watch until a later call succeeds."""
    pid = int(await sessions[0].call(VICTIM, "pid", {}))
    records: list[CallRecord] = []
    pending = 0
    killed_at = float("inf")
    recovered: list[float] = []
    stop = time.perf_counter() + limit + 1.0

    async def worker(session: Session) -> None:
        nonlocal pending
        while time.perf_counter() < stop:
            issued, error = time.perf_counter(), None
            pending += 1
            try:
                await echo(session, VICTIM)
            except CallFailed as exc:
                error = exc.kind
            pending -= 1
            records.append(CallRecord(issued, time.perf_counter(), error))
            if error is None and issued > killed_at and not recovered:
                recovered.append(records[-1].finished - killed_at)
            if error is not None:
                await anyio.sleep(RETRY_PAUSE)

    async def kill_then_watch() -> None:
        nonlocal killed_at, stop
        await anyio.sleep(0.5)  # the load runs before the kill
        os.kill(pid, signal.SIGKILL)
        # SIGKILL takes effect a little later: a call issued in between may still have reached the
        # server, so "after the kill" starts once the process is seen dead.
        while not process_gone(pid):
            await anyio.sleep(0.001)
        killed_at = time.perf_counter()
        stop = killed_at + limit
        while not recovered and time.perf_counter() < stop:
            await anyio.sleep(0.02)
        stop = min(stop, time.perf_counter() + 0.5)  # a little load after the recovery

    with anyio.move_on_after(limit + 3.0):  # a call that never returns must not hold the run
        async with anyio.create_task_group() as tg:
            tg.start_soon(kill_then_watch)
            for session in sessions:
                tg.start_soon(worker, session)
    failed = [r for r in records if r.error is not None]
    return Outage(
        usable_after_s=recovered[0] if recovered else None,
        failed_unseen=sum(1 for r in failed if r.issued >= killed_at),
        failed_in_flight=sum(1 for r in failed if r.issued < killed_at),
        unanswered=pending,
        errors=dict(collections.Counter(r.error for r in failed if r.error is not None).most_common()),
    )


async def start_running(
    column: Column, launcher: Launcher, settings: Settings, workdir: Path, stack: contextlib.AsyncExitStack
) -> Running | None:
    """Cold start, then the sessions; the gateway stays running in ``stack`` (None if never usable)."""
    started = time.perf_counter()
    async with contextlib.AsyncExitStack() as attempt:
        gateway = await attempt.enter_async_context(launcher(HEALTHY, workdir))
        column.cold_runs.append(
            await wait_usable(gateway, [s.name for s in HEALTHY], started, settings.deadline)
        )
        if column.cold_runs[-1] is None:
            column.notes.append(f"not usable within {settings.deadline:g}s")
            return None
        pids = core_pids(gateway)
        column.start_cpu_s = cpu_seconds(pids) if pids else None
        sessions, column.session_open_ms = await open_sessions(gateway)
        stack.push_async_exit(attempt.pop_all())
    return Running(column, gateway, sessions)


async def measure_start(
    launcher: Launcher, specs: list[ServerSpec], settings: Settings, workdir: Path
) -> float | None:
    """Seconds from launch until the healthy servers of ``specs`` answer through a new gateway."""
    started = time.perf_counter()
    async with launcher(specs, workdir) as gateway:
        healthy = [s.name for s in specs if not s.flags]
        return await wait_usable(gateway, healthy, started, settings.deadline)


async def measure_starts(column: Column, launcher: Launcher, settings: Settings, workdir: Path) -> None:
    """The start cases' other runs (the first cold start was the running gateway's)."""
    try:
        for _ in range(settings.starts - 1):
            column.cold_runs.append(await measure_start(launcher, HEALTHY, settings, workdir))
        for _ in range(settings.starts):
            column.hung_runs.append(await measure_start(launcher, WITH_HUNG, settings, workdir))
    except Exception as exc:  # one gateway's failure must not cost the other columns
        column.notes.append(f"stopped by {type(exc).__name__}: {exc}")
    if column.hung_s is None and column.cold_s is not None:
        column.notes.append(f"2 of 10 hung: the 8 healthy not usable within {settings.deadline:g}s")


async def measure_all(
    gateways: list[tuple[str, Launcher]], settings: Settings, workroot: Path
) -> list[Column]:
    """Every gateway started and kept running, so that load and latency alternate between them;
    then a kill -9 on each, and the other start runs one gateway at a time."""
    columns = [Column(label) for label, _ in gateways]
    workdirs = [Path(tempfile.mkdtemp(prefix="gw-", dir=workroot)) for _ in gateways]
    async with contextlib.AsyncExitStack() as stack:
        running = []
        for column, (_, launcher), workdir in zip(columns, gateways, workdirs, strict=True):
            progress(f"starting {column.label} ...")
            try:
                started = await start_running(column, launcher, settings, workdir, stack)
            except Exception as exc:  # one gateway's failure must not cost the other columns
                column.notes.append(f"stopped by {type(exc).__name__}: {exc}")
                started = None
            if started is not None:
                running.append(started)
        await anyio.sleep(1.0)  # let start-up garbage settle before the idle RSS
        progress(
            f"load and latency, {settings.rounds} rounds alternating between {len(running)} gateways ..."
        )
        await measure_loads(running, settings)
        await measure_latencies(running, settings)
        for each in running:
            if each.column.label == DIRECT:
                each.column.notes.append("kill -9: nothing restarts a server for a direct client")
            else:
                progress(f"kill -9 under {each.column.label} ...")
                each.column.outage = await measure_outage(each.sessions, settings.outage)
    for column, (_, launcher), workdir in zip(columns, gateways, workdirs, strict=True):
        progress(f"starts of {column.label} ...")
        await measure_starts(column, launcher, settings, workdir)
    return columns


# -- report --------------------------------------------------------------------------------------

Getter = Callable[[Column | None], float | None]


def cold(column: Column | None) -> float | None:
    return column.cold_s if column else None


def hung(column: Column | None) -> float | None:
    return column.hung_s if column else None


def start_cpu(column: Column | None) -> float | None:
    return column.start_cpu_s if column else None


def session_open(column: Column | None) -> float | None:
    return column.session_open_ms if column else None


def p50(column: Column | None) -> float | None:
    return column.latency.p50_ms if column and column.latency else None


def p99(column: Column | None) -> float | None:
    return column.latency.p99_ms if column and column.latency else None


def cpu(column: Column | None) -> float | None:
    return column.load.cpu_us_per_call if column and column.load else None


def rate_cell(column: Column) -> str:
    """calls/s with the median of its paired ratios to the direct SDK and their range."""
    if column.load is None:
        return "-"
    ratios = column.load.ratios
    if not ratios or column.label == DIRECT:
        return f"{column.load.calls_per_s:,.0f}"
    spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
    return f"{column.load.calls_per_s:,.0f} ({statistics.median(ratios):.2f}x, {spread})"


def cpu_parts(column: Column) -> str:
    """CPU per call of the host, the gateway and the servers, and their sum."""
    load = column.load
    if load is None:
        return "-"
    parts = [load.host_cpu_us_per_call, load.cpu_us_per_call or 0.0, load.servers_cpu_us_per_call]
    return " + ".join(f"{part:.0f}" for part in parts) + f" = {sum(parts):,.0f}"


def host_rss(column: Column | None) -> float | None:
    return column.load.host_rss_loaded_mib if column and column.load else None


def unseen(column: Column | None) -> float | None:
    return column.outage.failed_unseen if column and column.outage else None


def fixed(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def with_ratio(value: float | None, base: float | None, digits: int, missing: str) -> str:
    if value is None:
        return missing
    return f"{value:,.{digits}f} ({value / base:.2f}x)" if base else f"{value:,.{digits}f}"


def pair(first: float | None, second: float | None, sign: str = "") -> str:
    return "-" if first is None or second is None else f"{sign}{first:.0f} / {sign}{second:.0f}"


def outage_cells(column: Column) -> tuple[str, str, str]:
    """Recovery time, failed counts (unseen / in flight) and what the failed calls got."""
    outage = column.outage
    if outage is None:
        return "-", "-", ""
    after = "never" if outage.usable_after_s is None else f"{outage.usable_after_s:.2f}"
    counts = f"{outage.failed_unseen} / {outage.failed_in_flight}"
    if outage.unanswered:
        counts += f" +{outage.unanswered} unanswered"
    errors = ", ".join(f"{kind} x{n}" for kind, n in outage.errors.items()) or "no call failed"
    return after, counts, errors


def table(columns: list[Column]) -> list[str]:
    direct = next((c for c in columns if c.label == DIRECT), None)

    def ratio_row(name: str, get: Getter, digits: int = 2, missing: str = "-") -> list[str]:
        return [name, *(with_ratio(get(c), get(direct), digits, missing) for c in columns)]

    loads = [c.load for c in columns]
    outages = [outage_cells(c) for c in columns]
    rows = [
        ["", *(c.label for c in columns)],
        ratio_row("cold start: 10 usable (s)", cold, missing="never"),
        ratio_row("2 of 10 hung: 8 usable (s)", hung, missing="never"),
        ["gateway CPU until usable (s)", *(fixed(start_cpu(c)) for c in columns)],
        # No ratio: a direct client's sessions are the servers' own, opened at the start.
        ["open one more session (ms)", *(fixed(session_open(c), 1) for c in columns)],
        ratio_row("echo p50 (ms)", p50),
        ratio_row("echo p99 (ms)", p99),
        [f"calls/s, {SESSIONS} sessions", *(rate_cell(c) for c in columns)],
        ["gateway CPU per call (us)", *(fixed(cpu(c), 0) for c in columns)],
        ["CPU/call host+gateway+servers (us)", *(cpu_parts(c) for c in columns)],
        [
            "gateway RSS idle / loaded (MiB)",
            *(pair(x.rss_idle_mib, x.rss_loaded_mib) if x else "-" for x in loads),
        ],
        [
            "RSS per host idle / loaded (MiB)",
            *(pair(x.host_rss_idle_mib, x.host_rss_loaded_mib, "+") if x else "-" for x in loads),
        ],
        ["kill -9: usable again after (s)", *(o[0] for o in outages)],
        ["kill -9: failed unseen / in flight", *(o[1] for o in outages)],
    ]
    width = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.append("kill -9, what the failed calls got:")
    lines += [f"  {c.label}: {o[2]}" for c, o in zip(columns, outages, strict=True) if c.outage]
    lines += [f"note, {c.label}: {note}" for c in columns for note in c.notes]
    lines += [
        f"starts, {c.label}: {runs(c)}" for c in columns if len(c.cold_runs) > 1 or len(c.hung_runs) > 1
    ]
    return lines


def runs(column: Column) -> str:
    def listed(values: list[float | None]) -> str:
        return ", ".join("never" if value is None else f"{value:.2f}" for value in values)

    return f"cold {listed(column.cold_runs)} s; 2 of 10 hung {listed(column.hung_runs)} s"


@dataclass(frozen=True)
class Target:
    what: str
    value: float | None
    limit: float | None
    unit: str = ""

    @property
    def met(self) -> bool | None:
        return None if self.value is None or self.limit is None else self.value <= self.limit


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def plus(base: float | None, extra: float) -> float | None:
    return None if base is None else base + extra


def inverse(column: Column | None) -> float | None:
    """The direct SDK's calls/s over the column's, as the median of the alternating pairs."""
    paired = column.rate_ratio if column else None
    return 1 / paired if paired else None


def targets(columns: list[Column]) -> list[Target]:
    """Issue 17's "Figures to reach", each as value <= limit (ratios inverted where higher is better)."""
    by = {c.label: c for c in columns}
    direct, socket, bridge = by.get(DIRECT), by.get("mcpd socket"), by.get("mcpd bridge")
    hub_rest, hub_mcp = by.get("mcp-hub REST"), by.get("mcp-hub /mcp")
    found = [
        Target("bridge RSS per host, loaded", host_rss(bridge), 15.0, " MiB"),
        Target("bridge CPU per call / mcp-hub /mcp", ratio(cpu(bridge), cpu(hub_mcp)), 0.5, "x"),
        Target("bridge p50", p50(bridge), plus(p50(direct), 0.5), " ms = direct + 0.5"),
        Target("direct calls/s / bridge calls/s", inverse(bridge), 1 / 0.9, "x"),
        Target("socket daemon CPU per call", cpu(socket), 150.0, " us"),
        Target("socket CPU per call / mcp-hub REST", ratio(cpu(socket), cpu(hub_rest)), 0.2, "x"),
        Target("socket p50", p50(socket), plus(p50(direct), 0.1), " ms = direct + 0.1"),
        Target("direct calls/s / socket calls/s", inverse(socket), 1 / 0.9, "x"),
    ]
    for column in (socket, bridge):
        label = column.label if column else "?"
        found += [
            Target(f"{label}: 2 of 10 hung / direct", ratio(hung(column), hung(direct)), 1.1, "x"),
            Target(f"{label}: cold 10 / direct", ratio(cold(column), cold(direct)), 1.1, "x"),
            Target(f"{label}: kill -9, failed calls never received", unseen(column), 0),
        ]
    return found


def target_lines(found: list[Target]) -> list[str]:
    lines = ["targets (issue 17, figures to reach)"]
    for target in found:
        verdict = {True: "met", False: "MISSED", None: "not measured"}[target.met]
        limit = f"{fixed(target.limit)}{target.unit}"
        lines.append(f"  {target.what}: {fixed(target.value)} (target <= {limit})  {verdict}")
    return lines


# -- the run -------------------------------------------------------------------------------------


def plan(hub_cli: Path | None) -> list[tuple[str, Launcher]]:
    gateways: list[tuple[str, Launcher]] = [
        (DIRECT, launch_direct),
        ("mcpd socket", launch_mcpd),
        ("mcpd bridge", launch_bridge),
        ("mcpd HTTP", launch_mcpd_http),
    ]
    if hub_cli is not None:
        gateways += [("mcp-hub REST", launch_hub_rest(hub_cli)), ("mcp-hub /mcp", launch_hub_mcp(hub_cli))]
    return gateways


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def run(settings: Settings, skip_hub: bool, workroot: Path) -> tuple[list[Column], list[str]]:
    """Measure every gateway; SIGTERM stops the run the way Ctrl-C does (everything started is stopped)."""
    outcome: list[tuple[list[Column], list[str]]] = []

    async def measure_all() -> None:
        outcome.append(await measure_gateways(settings, skip_hub, workroot))
        tg.cancel_scope.cancel()

    async def stop_on_sigterm() -> None:
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            async for _ in signals:
                tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop_on_sigterm)
        tg.start_soon(measure_all)
    if not outcome:
        raise KeyboardInterrupt
    return outcome[0]


async def measure_gateways(
    settings: Settings, skip_hub: bool, workroot: Path
) -> tuple[list[Column], list[str]]:
    notes = []
    hub_cli = None
    if skip_hub:
        notes.append("mcp-hub: skipped (--skip-hub)")
    else:
        progress("installing mcp-hub with npm ...")
        hub_cli = await install_hub(workroot / "npm")
        if hub_cli is None:
            notes.append("mcp-hub: not measured (no npm/node, or the install failed)")
    return await measure_all(plan(hub_cli), settings, workroot), notes


def header(settings: Settings, load_before: tuple[float, float, float]) -> list[str]:
    load_after = os.getloadavg()
    return [
        f"peers: {len(HEALTHY)} fixture servers, {SESSIONS} sessions, {settings.calls} latency calls, "
        f"{settings.seconds:g}s load, start deadline {settings.deadline:g}s",
        f"machine: {os.cpu_count()} CPUs, load average {load_before[0]:.1f} before the run, "
        f"{load_after[0]:.1f} after",
        "(x) = ratio to the direct SDK; kill -9 failed counts: issued after the kill / before it",
        f"load and latency: {settings.rounds} rounds, every gateway running, cells of {settings.seconds:g}s "
        "in turns; calls/s = median cell (median paired ratio, range)",
        "",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer iterations, for a ~1-2 minute run")
    parser.add_argument("--skip-hub", action="store_true", help="leave mcp-hub out (no npm)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--deadline", type=float, help="seconds a start may take (default 30 quick, 90)")
    parser.add_argument("--starts", type=int, help="launches per start case (default 1 quick, 3)")
    parser.add_argument(
        "--rounds", type=int, help="alternating cells of load per gateway (default 5 quick, 7)"
    )
    options = parser.parse_args()
    settings = QUICK if options.quick else FULL
    if options.deadline:
        settings = dataclasses.replace(settings, deadline=options.deadline)
    if options.starts:
        settings = dataclasses.replace(settings, starts=options.starts)
    if options.rounds:
        settings = dataclasses.replace(settings, rounds=options.rounds)
    configure_logging("warning")
    compile_mcpd()
    load_before = os.getloadavg()
    workroot = Path(tempfile.mkdtemp(prefix="mcpd-peers-", dir="/tmp"))
    try:
        columns, notes = anyio.run(run, settings, options.skip_hub, workroot)
    except KeyboardInterrupt:
        progress("interrupted; everything started has been stopped")
        return 130
    finally:
        shutil.rmtree(workroot, ignore_errors=True)
    found = targets(columns)
    if options.json:
        document = {
            "settings": dataclasses.asdict(settings),
            "load_average": [load_before[0], os.getloadavg()[0]],
            "columns": [{**dataclasses.asdict(c), "cold_s": c.cold_s, "hung_s": c.hung_s} for c in columns],
            "targets": [{**dataclasses.asdict(t), "met": t.met} for t in found],
            "notes": notes,
        }
        print(json.dumps(document, indent=2))
        return 0
    print("\n".join([*header(settings, load_before), *table(columns), *notes, "", *target_lines(found)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
