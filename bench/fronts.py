"""Front-end benchmark: one tool call through each way into the daemon, in one run, one daemon.

Run ``python bench/fronts.py``. Against one daemon serving one fixture server (``fx``, one
``echo`` tool), with 8 sessions of each kind open at once:

- socket: the client library (``mcpd.client``), the daemon's own protocol;
- bridge: the MCP SDK client as a host, on stdio through an ``mcpd bridge`` process each;
- HTTP: the MCP SDK's streamable HTTP client, with the bearer token, on ``/mcp``.

Prints, per front end: ``fx__echo`` p50/p99 with one session calling alone; calls/s with
8 sessions calling at once, and the p50/p99 of those calls; the daemon's CPU per call
under that load (plus the bridges' own for the bridge). Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import httpx2
from ipc import cpu_seconds, latency, percentile
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from mcpd.client.aio import connect
from mcpd.daemon.logging import configure_logging
from mcpd.testing import fixture_toml, pids_with_args
from mcpd.testing.daemon import running_daemon

SESSIONS = 8
TOOL = "fx__echo"
Call = Callable[[], Awaitable[object]]


async def socket_session(stack: AsyncExitStack, socket: Path) -> Call:
    client = await stack.enter_async_context(connect(socket, name="bench-fronts"))
    return lambda: client.call_tool(TOOL, {"text": "x"})


async def sdk_call(session: ClientSession) -> Call:
    """The SDK session initialized, ``fx`` connected (its tool listed), and a call of it."""
    await session.initialize()
    await session.call_tool("mcpd_connect_server", {"server": "fx"})
    assert TOOL in {tool.name for tool in (await session.list_tools()).tools}
    return lambda: session.call_tool(TOOL, {"text": "x"})


async def bridge_session(stack: AsyncExitStack, socket: Path) -> Call:
    args = ["-m", "mcpd", "bridge", "--no-autostart", "--socket", str(socket)]
    read, write = await stack.enter_async_context(
        stdio_client(StdioServerParameters(command=sys.executable, args=args))
    )
    return await sdk_call(await stack.enter_async_context(ClientSession(read, write)))


async def http_session(stack: AsyncExitStack, url: str, token: str) -> Call:
    auth = {"Authorization": f"Bearer {token}"}
    http = await stack.enter_async_context(httpx2.AsyncClient(headers=auth, timeout=httpx2.Timeout(120.0)))
    read, write = await stack.enter_async_context(streamable_http_client(url, http_client=http))
    return await sdk_call(await stack.enter_async_context(ClientSession(read, write)))


async def loaded(calls: list[Call], seconds: float) -> tuple[int, float, float, float]:
    """Calls made, calls/s, p50 and p99 (ms), one task per session calling in a loop for ``seconds``."""
    samples: list[float] = []
    deadline = time.perf_counter() + seconds

    async def worker(call: Call) -> None:
        while (start := time.perf_counter()) < deadline:
            await call()
            samples.append(time.perf_counter() - start)

    began = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for call in calls:
            tg.start_soon(worker, call)
    rate = len(samples) / (time.perf_counter() - began)
    return len(samples), rate, percentile(samples, 0.5) * 1000, percentile(samples, 0.99) * 1000


@contextlib.asynccontextmanager
async def workdir() -> AsyncIterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="mcpd-fronts-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def main(count: int, seconds: float) -> None:
    load_before = os.getloadavg()
    async with workdir() as work:
        token_file = work / "http.token"
        config = work / "config.toml"
        daemon_table = f'[daemon]\nhttp = "127.0.0.1:0"\nhttp_token_file = "{token_file}"\n'
        config.write_text(daemon_table + fixture_toml("fx", "--tools", "1"))
        async with running_daemon(config) as daemon, AsyncExitStack() as stack:
            url = (await daemon.wait_for("http.listening"))["url"]
            token = token_file.read_text().strip()
            fronts: dict[str, list[Call]] = {"socket": [], "bridge": [], "HTTP": []}
            for _ in range(SESSIONS):
                fronts["socket"].append(await socket_session(stack, daemon.socket))
                fronts["bridge"].append(await bridge_session(stack, daemon.socket))
                fronts["HTTP"].append(await http_session(stack, url, token))
            bridges = pids_with_args("bridge", str(daemon.socket))

            print(f"fx__echo through each front end; {SESSIONS} sessions of each open on one daemon")
            print(f"machine: {os.cpu_count()} CPUs, load average {load_before[0]:.1f} before the run")
            print(f"\n  {'':<8}{'1 session':^26}{f'{SESSIONS} sessions calling at once':^44}")
            print(
                f"  {'':<8}{'p50 ms':>12}{'p99 ms':>12}  {'calls/s':>10}{'p50 ms':>10}{'p99 ms':>10}"
                f"{'daemon CPU/call':>17}"
            )
            for label, calls in fronts.items():
                p50, p99 = await latency(calls[0], count)
                pids = [daemon.process.pid, *(bridges if label == "bridge" else [])]
                before = [cpu_seconds(pid) for pid in pids]
                calls_made, rate, loaded_p50, loaded_p99 = await loaded(calls, seconds)
                used = [cpu_seconds(pid) - was for pid, was in zip(pids, before, strict=True)]
                cpu = f"{used[0] / calls_made * 1e6:.0f} us"
                if label == "bridge":
                    cpu += f" (+{sum(used[1:]) / calls_made * 1e6:.0f} bridges)"
                alone = f"{p50:>12.3f}{p99:>12.3f}"
                print(f"  {label:<8}{alone}  {rate:>10,.0f}{loaded_p50:>10.3f}{loaded_p99:>10.3f}  {cpu}")
            print(f"\nload average after the run: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=1000, help="sequential calls of the 1-session rows")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each 8-session load")
    options = parser.parse_args()
    configure_logging("warning")
    anyio.run(main, options.requests, options.seconds)
