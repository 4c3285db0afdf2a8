"""IPC benchmark: mcpd's socket API next to its floor and next to a direct SDK session.

Run ``python bench/ipc.py``. Prints, side by side:

(a) a bare length-prefixed msgpack echo server on a Unix socket (same framing and
    stack as mcpd, no work): the floor;
(b) mcpd ``hello`` and ``status`` round trips;
(c) ``tools.call`` to a fixture server through mcpd, and the same call on a direct
    SDK ``ClientSession`` to another copy of the fixture.

p50/p99 latency with one client; throughput with 1, 8 and 32 concurrent clients;
the daemon's own CPU time per proxied call; the wall time of ``mcpd status``; and what mcpd's
stdio session (``mcpd.supervisor.stdio_session``) saves over the SDK's, in-process, per call.
Asserts nothing about time: the figures are for people.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import msgspec
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpd.client.aio import AsyncClient, connect
from mcpd.daemon.logging import configure_logging
from mcpd.ipc.framing import frame
from mcpd.ipc.stream import FrameStream
from mcpd.model.protocol import PROTOCOL_VERSION, HelloParams, Request, Response
from mcpd.supervisor.session import SessionHooks, handshake
from mcpd.supervisor.stdio import open_stdio_child
from mcpd.supervisor.stdio_session import open_stdio_session
from mcpd.testing import fixture_command, fixture_server
from mcpd.testing.daemon import running_daemon

Op = Callable[[], Awaitable[object]]

encoder = msgspec.msgpack.Encoder()
request_decoder = msgspec.msgpack.Decoder(Request)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def statuses(
    client: AsyncClient, seconds: float = math.inf, done: anyio.Event | None = None
) -> list[float]:
    """Milliseconds of each ``status`` called back to back, for ``seconds`` or until ``done`` is set."""
    samples = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end and not (done is not None and done.is_set()):
        start = time.perf_counter()
        await client.status()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def latency(op: Op, count: int) -> tuple[float, float]:
    """p50 and p99 in milliseconds of ``count`` sequential calls (after a warm-up)."""
    for _ in range(min(50, count)):
        await op()
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        await op()
        samples.append(time.perf_counter() - start)
    return percentile(samples, 0.5) * 1000, percentile(samples, 0.99) * 1000


async def throughput(ops: list[Op], seconds: float) -> float:
    """Requests per second with one task per op, each calling in a loop for ``seconds``."""
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker(op: Op) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await op()
            done += 1

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for op in ops:
            tg.start_soon(worker, op)
    return done / (time.perf_counter() - start)


# -- (a) the floor: an echo server with the same framing ----------------------------------------


async def echo_server(listener: socket.socket) -> None:
    """Accept loop and per-connection loop exactly as mcpd's, answering without any work."""
    loop = asyncio.get_running_loop()

    async def handle(sock: socket.socket) -> None:
        stream = await FrameStream.adopt(sock)
        try:
            async for item in stream.frames():
                request = request_decoder.decode(item)
                payload = encoder.encode(Response(request.id, request.params))
                await stream.send(frame(payload))
        except ConnectionError:
            pass
        finally:
            stream.close()

    async with anyio.create_task_group() as tg:
        while True:
            sock, _ = await loop.sock_accept(listener)
            tg.start_soon(handle, sock)


class RawClient:
    """The minimal client: one frame out, one frame back. Used for (a) and (b) alike, so the
    two rows differ only by the server."""

    def __init__(self, stream: FrameStream) -> None:
        self.stream = stream
        self.ids = 0

    async def call(self, method: str, params: bytes = b"\x80") -> bytes:
        self.ids += 1
        payload = encoder.encode(Request(self.ids, method, msgspec.Raw(params)))
        await self.stream.send(frame(payload))
        async for item in self.stream.frames():
            return item
        raise ConnectionError("closed")


async def raw_clients(path: Path, count: int, hello: bool) -> list[RawClient]:
    out = []
    for _ in range(count):
        client = RawClient(await FrameStream.connect(str(path)))
        if hello:
            await client.call("hello", encoder.encode(HelloParams(protocol=PROTOCOL_VERSION, client="bench")))
        out.append(client)
    return out


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


async def cpu_per_request(pid: int, ops: list[Op], total: int) -> float:
    """CPU microseconds process ``pid`` spends per request while ``ops`` make ``total`` requests."""
    done = 0

    async def worker(op: Op) -> None:
        nonlocal done
        while done < total:
            done += 1
            await op()

    before = cpu_seconds(pid)
    async with anyio.create_task_group() as tg:
        for op in ops:
            tg.start_soon(worker, op)
    return (cpu_seconds(pid) - before) / done * 1e6


def row(label: str, p50: float, p99: float) -> None:
    print(f"  {label:<34}p50 {p50:7.3f} ms   p99 {p99:7.3f} ms")


async def main(count: int, seconds: float) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="mcpd-bench-", dir="/tmp"))
    echo_path = workdir / "echo.sock"
    # The floor runs in its own process, as mcpd does, so both pay the same cross-process hops.
    echo_process = await anyio.open_process([sys.executable, __file__, "--serve-echo", str(echo_path)])
    try:
        with anyio.fail_after(20):
            while not echo_path.exists():
                await anyio.sleep(0.02)
        await measure(workdir, echo_path, echo_process.pid, count, seconds)
    finally:
        echo_process.terminate()
        with anyio.move_on_after(5):
            await echo_process.wait()
        shutil.rmtree(workdir, ignore_errors=True)


async def measure(workdir: Path, echo_path: Path, echo_pid: int, count: int, seconds: float) -> None:
    command, *args = fixture_command("fx", "--tools", "1")
    config = workdir / "config.toml"
    config.write_text(f"[servers.fx]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n")
    results: dict[str, dict[int, float]] = {}

    async with (
        running_daemon(config) as daemon,
        stdio_client(StdioServerParameters(command=command, args=args)) as (read, write),
        ClientSession(read, write) as direct,
        contextlib.AsyncExitStack() as exits,  # innermost: the clients close first
    ):
        await direct.initialize()
        await direct.list_tools()
        echo_clients = await raw_clients(echo_path, 32, hello=False)
        raw_mcpd = await raw_clients(daemon.socket, 32, hello=True)
        mcpd_clients = [
            await exits.enter_async_context(connect(daemon.socket, name=f"bench{i}")) for i in range(32)
        ]
        hello = encoder.encode(HelloParams(protocol=PROTOCOL_VERSION, client="bench"))

        def echo_op(i: int) -> Op:
            return lambda: echo_clients[i].call("echo")

        def hello_op(i: int) -> Op:
            return lambda: raw_mcpd[i].call("hello", hello)

        def status_op(i: int) -> Op:
            return lambda: raw_mcpd[i].call("status")

        def lib_status_op(i: int) -> Op:
            return mcpd_clients[i].status

        def call_op(i: int) -> Op:
            return lambda: mcpd_clients[i].call_tool("fx__tool_0", {"text": "x"})

        async def direct_call() -> object:
            return await direct.call_tool("tool_0", {"text": "x"})

        def direct_op(i: int) -> Op:
            return direct_call

        cases: list[tuple[str, Callable[[int], Op]]] = [
            ("(a) bare msgpack echo (floor)", echo_op),
            ("(b) mcpd hello", hello_op),
            ("(b) mcpd status", status_op),
            ("(b) mcpd status, aio client lib", lib_status_op),
            ("(c) tools.call via mcpd", call_op),
            ("(c) tools.call direct SDK session", direct_op),
        ]
        print(f"latency, 1 client, {count} sequential requests")
        p50s: dict[str, float] = {}
        for label, make in cases:
            n = count if "tools.call" not in label else max(200, count // 5)
            p50, p99 = await latency(make(0), n)
            p50s[label] = p50
            row(label, p50, p99)

        print(f"\nthroughput, requests/s over {seconds:g} s per cell")
        print(f"  {'':<34}{'1 client':>12}{'8 clients':>12}{'32 clients':>12}")
        for label, make in cases:
            results[label] = {}
            for n in (1, 8, 32):
                results[label][n] = await throughput([make(i) for i in range(n)], seconds)
            cells = "".join(f"{results[label][n]:>12,.0f}" for n in (1, 8, 32))
            print(f"  {label:<34}{cells}")

        echo_cpu = await cpu_per_request(echo_pid, [echo_op(i) for i in range(8)], 5000)
        status_cpu = await cpu_per_request(daemon.process.pid, [status_op(i) for i in range(8)], 5000)
        cpu_per_call = await cpu_per_request(daemon.process.pid, [call_op(i) for i in range(8)], 2000)

        status_times = []
        for _ in range(15):
            t = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "mcpd", "status", "--socket", str(daemon.socket)],
                capture_output=True,
                check=True,
            )
            status_times.append(time.perf_counter() - t)
        bare_python = []
        for _ in range(15):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            bare_python.append(time.perf_counter() - t)

        floor = p50s["(a) bare msgpack echo (floor)"]
        direct_p50 = p50s["(c) tools.call direct SDK session"]
        via = p50s["(c) tools.call via mcpd"]
        print("\ntargets")
        for label in ("(b) mcpd hello", "(b) mcpd status"):
            print(f"  {label} p50 / floor p50: {p50s[label] / floor:.2f}x  (target <= 2x)")
        print(
            f"  tools.call overhead p50: {(via - direct_p50) * 1000:+.0f} us over direct  (target <= +250 us)"
        )
        ratio = results["(c) tools.call via mcpd"][8] / results["(c) tools.call direct SDK session"][8]
        print(f"  tools.call 8-caller throughput: {ratio:.2f}x direct  (target >= 0.9x)")
        print(
            f"  daemon CPU per proxied call: {cpu_per_call:.0f} us  (target <= 150 us); for scale, per "
            f"request: echo floor {echo_cpu:.0f} us, mcpd status {status_cpu:.0f} us"
        )
        print(
            f"  small requests/s, 8 clients: {results['(b) mcpd status'][8]:,.0f} status, "
            f"{results['(b) mcpd hello'][8]:,.0f} hello  (target >= 10,000)"
        )
        print(
            f"  `mcpd status` wall time: median {statistics.median(status_times) * 1000:.0f} ms "
            f"(bare python start {statistics.median(bare_python) * 1000:.0f} ms)  (target < 150 ms)"
        )
        for client in [*echo_clients, *raw_mcpd]:
            client.stream.close()
    await call_path_benefit(max(500, count // 2))


async def call_path_benefit(count: int) -> None:
    """CPU of this process per tools/call: mcpd's stdio session (msgspec, what the daemon runs), and
    the SDK's ``ClientSession`` on its own ``stdio_client``, each to its own copy of the fixture."""
    config = fixture_server("fx", "--tools", "1")
    assert config.command is not None
    params = StdioServerParameters(command=config.command, args=list(config.args))
    async with (
        open_stdio_child(config) as (child, lines),
        open_stdio_session(child, lines, SessionHooks(lambda: None, lambda: None)) as ours,
        stdio_client(params) as (read, write),
        ClientSession(read, write) as theirs,
    ):
        await handshake(ours)
        await theirs.initialize()

        async def through_mcpd() -> None:
            await ours.call_tool("tool_0", {"text": "x"}, anyio.current_time() + 30, None)

        async def through_sdk() -> None:
            await theirs.call_tool("tool_0", {"text": "x"})

        paths = {"mcpd": through_mcpd, "sdk": through_sdk}
        cpu: dict[str, float] = {}
        for label, call in (*paths.items(), *paths.items()):  # each twice: the first round warms up
            before = time.process_time()
            for _ in range(count):
                await call()
            cpu[label] = (time.process_time() - before) / count * 1e6
    ours_us, theirs_us = cpu["mcpd"], cpu["sdk"]
    print(
        f"  stdio session: {ours_us:.0f} us of CPU per tools/call in mcpd's session vs {theirs_us:.0f} us in "
        f"the SDK's (in-process, own fixture each): saves {theirs_us - ours_us:.0f} us per call "
        f"({theirs_us / ours_us:.1f}x)"
    )


async def serve_echo(path: str) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(128)
    listener.setblocking(False)
    await echo_server(listener)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=2000, help="sequential requests per latency row")
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of each throughput cell")
    parser.add_argument("--serve-echo", metavar="SOCKET", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve_echo:
        anyio.run(serve_echo, options.serve_echo)
        sys.exit(0)
    configure_logging("warning")
    anyio.run(main, options.requests, options.seconds)
