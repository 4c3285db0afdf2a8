"""Chaos benchmark: the supervisor's faults, reproduced against a real daemon, with figures printed.

Run ``python bench/chaos.py`` (all cases), or pick with ``--case storm|remote|shutdown|bridges|http``.

storm     10 fixture servers, 8 callers through the async client, a random child ``kill -9``'d every
          0.5 s for ``--duration`` seconds (default 60): calls that outlived their deadline (hung),
          outcomes by kind, daemon crashes, fds and zombies before vs after, fixture processes left
          over, and the time until every server is ``running`` again after the storm, with no command.
remote    a fixture server on streamable HTTP, down for 10 s and 60 s (and 5 min with ``--long``):
          seconds from its return until ``running``; a call made during the outage with a deadline
          past the return: its outcome and how long it waited.
shutdown  a server whose process group ignores SIGTERM and stdin EOF, with the largest stop_grace
          allowed: the daemon's exit time after SIGTERM, next to the documented bound.
bridges   3 hosts (the MCP SDK client) on ``mcpd bridge``, the daemon ``kill -9``'d under them and a new
          one started on the same socket: for each host, the time from the new daemon's readiness until
          its next call succeeded; hosts restarted (none may be); bridge processes left after the hosts
          closed.
http      3 hosts (the MCP SDK's streamable HTTP client) on the daemon's HTTP front end, each with a
          server connected; the daemon ``kill -9``'d and a new one started on the same port and store:
          for each host, the time from the new daemon's listening until its next call of the connected
          server's tool succeeded on the same session (none may initialize again).

A benchmark, not a test: it asserts nothing, tests keep their own exact checks of each behaviour.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import logging
import os
import random
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from mcpd.client.aio import AsyncClient, connect
from mcpd.config.model import MAX_STOP_GRACE
from mcpd.daemon.logging import configure_logging
from mcpd.errors import McpdError
from mcpd.supervisor.supervisor import STOP_BOUND
from mcpd.testing import fixture_command, fixture_toml, pids_with_args, process_gone
from mcpd.testing.daemon import DaemonProcess, running_daemon
from mcpd.testing.remote import free_port, running_http_fixture

CASES = ["storm", "remote", "shutdown", "bridges", "http"]
CALL_TIMEOUT = 10.0
HUNG_SLACK = 5.0
"""A call that has not ended this long after its deadline counts as hung."""
POLL = 0.05
CALL_DELAY = 1.0
CALL_DURING_OUTAGE_SLACK = 120.0
"""The deadline of the call made during an outage, past the outage: room for the fixture's start-up."""


def toml_server(name: str, **fields: object) -> str:
    """A server section that is not a fixture (those come from ``fixture_toml``)."""
    lines = [f"[servers.{name}]"] + [f"{key} = {json.dumps(value)}" for key, value in fields.items()]
    return "\n".join(lines) + "\n"


@contextlib.asynccontextmanager
async def daemon_with(config_text: str) -> AsyncIterator[tuple[DaemonProcess, AsyncClient]]:
    with tempfile.TemporaryDirectory(prefix="mcpd-chaos-") as workdir:
        config = Path(workdir) / "config.toml"
        config.write_text(config_text)
        async with running_daemon(config) as daemon, connect(daemon.socket, name="chaos") as client:
            yield daemon, client


async def wait_all_running(client: AsyncClient, names: set[str], limit: float) -> float | None:
    """Seconds until every server in ``names`` is running, or None after ``limit``."""
    started = time.perf_counter()
    with anyio.move_on_after(limit):
        while True:
            states = {s.name: s.state for s in await client.status()}
            if all(states.get(name) == "running" for name in names):
                return time.perf_counter() - started
            await anyio.sleep(POLL)
    return None


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def processes() -> Iterator[tuple[str, int, list[bytes]]]:
    """Every process: (state letter, parent pid, argv)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")
        except OSError:
            continue
        yield fields[0], int(fields[1]), argv


def zombies_of(pid: int) -> int:
    return sum(1 for state, parent, _ in processes() if state == "Z" and parent == pid)


def fixture_processes(marker: str) -> int:
    """Live processes whose command line names a fixture server of this run."""
    prefix = marker.encode()
    return sum(
        1
        for state, _, argv in processes()
        if state != "Z" and b"mcpd.testing.fixture" in argv and any(arg.startswith(prefix) for arg in argv)
    )


# -- storm -------------------------------------------------------------------------------------------


async def storm(duration: float) -> None:
    marker = f"chaos{os.getpid()}"
    names = [f"{marker}s{i}" for i in range(10)]
    config = "".join(fixture_toml(name) for name in names)
    outcomes: collections.Counter[str] = collections.Counter()
    hung = 0
    kills = 0
    async with daemon_with(config) as (daemon, client):
        pid = daemon.process.pid
        settled = await wait_all_running(client, set(names), 300)
        print(
            f"storm: 10 servers running {settled:.1f}s after daemon.ready"
            if settled
            else "storm: not all ran"
        )
        fds_before, zombies_before = fd_count(pid), zombies_of(pid)
        stop_at = anyio.current_time() + duration

        async def caller(index: int, caller_client: AsyncClient) -> None:
            nonlocal hung
            rng = random.Random(index)
            while anyio.current_time() < stop_at:
                server = rng.choice(names)
                with anyio.move_on_after(CALL_TIMEOUT + HUNG_SLACK) as scope:
                    try:
                        await caller_client.call_tool(
                            "echo", {"text": "x"}, server=server, timeout=CALL_TIMEOUT
                        )
                        outcomes["ok"] += 1
                    except McpdError as exc:
                        outcomes[type(exc).__name__] += 1
                if scope.cancelled_caught:
                    hung += 1

        async def killer() -> None:
            nonlocal kills
            rng = random.Random(0)
            while anyio.current_time() < stop_at:
                await anyio.sleep(0.5)
                pids = [s.pid for s in await client.status() if s.pid is not None]
                if pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(rng.choice(pids), signal.SIGKILL)
                        kills += 1

        async with contextlib.AsyncExitStack() as stack, anyio.create_task_group() as tg:
            for index in range(8):
                caller_client = await stack.enter_async_context(connect(daemon.socket, name=f"caller{index}"))
                tg.start_soon(caller, index, caller_client)
            tg.start_soon(killer)
        storm_end = time.perf_counter()
        statuses = await client.status()
        worst = max(statuses, key=lambda s: s.attempt)
        recovered = await wait_all_running(client, set(names), 600)
        since_end = time.perf_counter() - storm_end
        crashed = daemon.process.returncode is not None
        fds_after, zombies_after = fd_count(pid), zombies_of(pid)
        fixtures = fixture_processes(marker)
        states = collections.Counter(str(s.state) for s in await client.status())
    print(f"storm: {duration:g}s, {kills} kill -9, 8 callers, call deadline {CALL_TIMEOUT:g}s")
    print(f"  calls: {sum(outcomes.values())} ended, {hung} hung; outcomes {dict(outcomes)}")
    print(f"  at the storm's end: worst server {worst.name} in {worst.state}, attempt {worst.attempt}")
    if recovered is None:
        print(f"  NOT all running 600s after the storm: {dict(states)}")
    else:
        print(f"  every server running again {since_end:.1f}s after the storm ended, no command given")
    print(f"  daemon crashed: {'yes' if crashed else 'no'}")
    print(f"  daemon fds {fds_before} before, {fds_after} after")
    print(f"  zombie children of the daemon: {zombies_before} before, {zombies_after} after")
    print(f"  fixture processes alive after recovery: {fixtures} (one per server: 10)")


# -- remote ------------------------------------------------------------------------------------------


async def remote(outages: list[float]) -> None:
    port = free_port()
    name = "chaosremote"
    config = toml_server(name, url=f"http://127.0.0.1:{port}/mcp")
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(contextlib.AsyncExitStack())
        await server.enter_async_context(running_http_fixture(name, port))
        daemon, client = await stack.enter_async_context(daemon_with(config))
        await wait_all_running(client, {name}, 120)
        for outage in outages:
            await server.aclose()
            down_at = time.perf_counter()
            noticed = None
            with anyio.move_on_after(outage):
                while True:
                    states = {s.name: s.state for s in await client.status()}
                    if states[name] != "running":
                        noticed = time.perf_counter() - down_at
                        break
                    await anyio.sleep(POLL)
            outcome: list[tuple[str, float]] = []
            async with anyio.create_task_group() as tg:
                # The deadline leaves room for the fixture's own start-up after the outage.
                tg.start_soon(call_and_tell, client, name, outage + CALL_DURING_OUTAGE_SLACK, outcome)
                await anyio.sleep(max(0.0, outage - (time.perf_counter() - down_at)))
                server = await stack.enter_async_context(contextlib.AsyncExitStack())
                await server.enter_async_context(running_http_fixture(name, port))
                back_at = time.perf_counter()
                to_running = await wait_all_running(client, {name}, 120)
            seen = f"noticed after {noticed:.2f}s" if noticed is not None else "never noticed"
            back = f"running {to_running:.2f}s after its return" if to_running is not None else "NOT running"
            result, done_at = outcome[0]
            print(f"remote down {outage:g}s: {seen}; {back}")
            deadline = outage + CALL_DURING_OUTAGE_SLACK
            print(
                f"  a call made {CALL_DELAY:g}s into the outage (deadline {deadline:g}s): "
                f"{result}, {done_at - back_at:.2f}s after the server's return"
            )
        crashed = daemon.process.returncode is not None
        statuses = {s.name: s for s in await client.status()}
    final = statuses[name]
    print(f"  daemon crashed: {'yes' if crashed else 'no'}; state {final.state}, restarts {final.restarts}")


async def call_and_tell(
    client: AsyncClient, server: str, timeout: float, outcome: list[tuple[str, float]]
) -> None:
    await anyio.sleep(CALL_DELAY)
    try:
        await client.call_tool("echo", {"text": "x"}, server=server, timeout=timeout)
        outcome.append(("succeeded", time.perf_counter()))
    except McpdError as exc:
        outcome.append((f"{type(exc).__name__}: {exc}", time.perf_counter()))


# -- shutdown ----------------------------------------------------------------------------------------


async def shutdown() -> None:
    command, *args = fixture_command("stubborn", "--ignore-sigterm")
    # The server ignores SIGTERM; when stdin closes it exits, and its shell (also deaf to SIGTERM)
    # stays: only SIGKILL ends the group.
    script = "trap '' TERM; " + " ".join(_quote(a) for a in (command, *args)) + "; exec sleep 3600"
    config = toml_server("stubborn", command="/bin/sh", args=["-c", script], stop_grace=MAX_STOP_GRACE)
    async with daemon_with(config) as (daemon, client):
        await wait_all_running(client, {"stubborn"}, 120)
        started = time.perf_counter()
        daemon.signal(signal.SIGTERM)
        await daemon.wait_exit(timeout=STOP_BOUND + 60)
        elapsed = time.perf_counter() - started
    expected = 2 * MAX_STOP_GRACE
    print(
        f"shutdown with a child deaf to SIGTERM and stdin EOF, stop_grace {MAX_STOP_GRACE:g}s: daemon exited "
        f"{elapsed:.1f}s after SIGTERM (2 x stop_grace = {expected:g}s, then SIGKILL; documented bound "
        f"{STOP_BOUND:g}s for any config)"
    )


# -- bridges ----------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def host_on(socket: Path) -> AsyncIterator[ClientSession]:
    """An MCP host (the SDK's client) with ``mcpd bridge --connect tools`` as its one server.

    ``--no-autostart``: the daemon that comes back is the one this script starts (as a service
    manager would); a bridge would otherwise start its own when that one is slow to bind.
    """
    bridge = ["-m", "mcpd", "bridge", "--socket", str(socket), "--connect", "tools", "--no-autostart"]
    params = StdioServerParameters(command=sys.executable, args=bridge)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(120):
            await session.initialize()
        yield session


async def bridges(count: int = 3) -> None:
    with tempfile.TemporaryDirectory(prefix="mcpd-chaos-") as workdir:
        config = Path(workdir) / "config.toml"
        config.write_text(fixture_toml("tools"))
        async with running_daemon(config) as first:
            async with contextlib.AsyncExitStack() as stack:
                hosts = [await stack.enter_async_context(host_on(first.socket)) for _ in range(count)]
                for host in hosts:
                    with anyio.fail_after(120):
                        await host.call_tool(
                            "mcpd_call_tool", {"tool": "tools__echo", "arguments": {"text": "x"}}
                        )
                relays = pids_with_args("bridge", str(first.socket))
                first.signal(signal.SIGKILL)
                await first.wait_exit()
                async with running_daemon(config, socket=first.socket):
                    back = time.perf_counter()
                    waits: list[float] = []

                    async def next_call(host: ClientSession) -> None:
                        arguments = {"tool": "tools__echo", "arguments": {"text": "after"}}
                        with anyio.fail_after(120):
                            result = await host.call_tool("mcpd_call_tool", arguments)
                        if not result.is_error:
                            waits.append(time.perf_counter() - back)

                    async with anyio.create_task_group() as tg:
                        for host in hosts:
                            tg.start_soon(next_call, host)
            left = [pid for pid in relays if not process_gone(pid)]
    print(
        f"daemon kill -9'd under {count} live bridges, a new one started on the socket: "
        f"{len(waits)}/{count} hosts' next call succeeded, slowest {max(waits, default=float('nan')):.2f}s "
        f"after the new daemon was ready; hosts restarted: 0; bridge processes left after the hosts "
        f"closed: {len(left)}"
    )


# -- http ---------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def http_host(url: str, token: str) -> AsyncIterator[ClientSession]:
    """An MCP host (the SDK's streamable HTTP client) on the daemon's HTTP front end."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        with anyio.fail_after(120):
            await session.initialize()
        yield session


async def http_hosts(count: int = 3) -> None:
    # The hosts close after the second daemon stopped: their last DELETE finds nobody, as it should.
    logging.getLogger("mcp.client.streamable_http").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="mcpd-chaos-") as workdir:
        folder = Path(workdir)
        config = folder / "config.toml"
        config.write_text(
            f'[daemon]\nhttp = "127.0.0.1:{free_port()}"\nhttp_token_file = "{folder / "token"}"\n'
            f'usage_db = "{folder / "usage.db"}"\n' + fixture_toml("tools")
        )
        waits: list[float] = []
        async with running_daemon(config) as first:
            url = (await first.wait_for("http.listening"))["url"]
            token = (folder / "token").read_text().strip()
            async with contextlib.AsyncExitStack() as stack:
                hosts = [await stack.enter_async_context(http_host(url, token)) for _ in range(count)]
                for host in hosts:
                    with anyio.fail_after(120):
                        await host.call_tool("mcpd_connect_server", {"server": "tools"})
                        await host.call_tool("tools__echo", {"text": "before"})
                first.signal(signal.SIGKILL)
                await first.wait_exit()
                async with running_daemon(config) as second:
                    await second.wait_for("http.listening")
                    back = time.perf_counter()

                    async def next_call(host: ClientSession) -> None:
                        with anyio.fail_after(120):
                            result = await host.call_tool("tools__echo", {"text": "after"})
                        if not result.is_error:
                            waits.append(time.perf_counter() - back)

                    async with anyio.create_task_group() as tg:
                        for host in hosts:
                            tg.start_soon(next_call, host)
                    events = collections.Counter(e.get("event") for e in second.events)
    resumed = events["http.session_resumed"]
    print(
        f"daemon kill -9'd under {count} HTTP hosts, a new one started on the port: {len(waits)}/{count} "
        f"hosts' next call succeeded on the same session ({resumed} resumed), slowest "
        f"{max(waits, default=float('nan')):.2f}s after the new daemon listened; sessions initialized "
        f"anew: {events['http.session'] - resumed}"
    )


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


async def main(cases: list[str], duration: float, long: bool) -> None:
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}\n")
    if "storm" in cases:
        await storm(duration)
    if "remote" in cases:
        await remote([10.0, 60.0, 300.0] if long else [10.0, 60.0])
    if "shutdown" in cases:
        await shutdown()
    if "bridges" in cases:
        await bridges()
    if "http" in cases:
        await http_hosts()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", action="append", choices=CASES)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of the kill storm")
    parser.add_argument("--long", action="store_true", help="add the 5-minute remote outage")
    options = parser.parse_args()
    configure_logging("warning")
    anyio.run(main, options.case or CASES, options.duration, options.long)
