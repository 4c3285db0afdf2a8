"""IPC benchmark: mcpd's socket API next to its floor and next to a direct SDK session.

Run ``python bench/ipc.py``. Prints, side by side:

(a) a bare length-prefixed msgpack echo server on a Unix socket (same framing and
    stack as mcpd, no work): the floor;
(b) mcpd ``hello`` and ``status`` round trips;
(c) ``tools.call`` to a fixture server through mcpd, and the same call on a direct
    SDK ``ClientSession`` to another copy of the fixture.

p50/p99 latency with one client; throughput with 1, 8 and 32 concurrent clients (and for the
8-caller tools.call target, the median of alternating pairs of cells, with each side's CPU per call
by process: one pair of cells on a shared machine moves by 2x);
the daemon's own CPU time per proxied call, next to the proxy floor: a minimal asyncio proxy
(callbacks only, no checks, no records) relaying the same framed requests to a copy of the
fixture as JSON-RPC lines, so what is mcpd's own shows; the wall time of ``mcpd status``; and what mcpd's
stdio session (``mcpd.supervisor.stdio_session``) saves over the SDK's, in-process, per call.
Asserts nothing about time: the figures are for people. ``--cpu-rounds N`` measures only the
daemon's CPU per proxied call next to the proxy floor's, in N rounds alternating which goes first.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import itertools
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
from mcpd.ipc.framing import DEFAULT_MAX_FRAME, FrameBuffer, frame
from mcpd.ipc.stream import FrameStream
from mcpd.model.protocol import PROTOCOL_VERSION, HelloParams, Request, Response
from mcpd.supervisor.session import SessionHooks, handshake
from mcpd.supervisor.stdio import open_stdio_child
from mcpd.supervisor.stdio_session import open_stdio_session
from mcpd.testing import fixture_command, fixture_server, pids_with_args
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


# -- the proxy floor: frames in, JSON-RPC lines to the fixture, frames back -------------------------


async def serve_proxy(path: str) -> None:
    """Relay each framed request's params as a ``tools/call`` to the fixture, with nothing else."""
    loop = asyncio.get_running_loop()
    command, *args = fixture_command("fx", "--sdk", "--tools", "1")
    child = await asyncio.create_subprocess_exec(
        command, *args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert child.stdin is not None
    assert child.stdout is not None
    running: set[asyncio.Task[None]] = set()
    replies: dict[int, asyncio.Future[msgspec.Raw]] = {}
    ids = itertools.count(1)
    reply_decoder = msgspec.json.Decoder(_Reply)

    def send(method: str, params: object, request_id: int | None = None) -> None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        if request_id is not None:
            message["id"] = request_id
        child.stdin.write(msgspec.json.encode(message) + b"\n")  # type: ignore[union-attr]

    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "floor", "version": "0"},
    }
    send("initialize", init, 0)
    await child.stdout.readline()
    send("notifications/initialized", {})
    stdout = child.stdout

    async def route() -> None:
        while line := await stdout.readline():
            reply = reply_decoder.decode(line)
            waiter = replies.pop(reply.id, None)
            if waiter is not None:
                waiter.set_result(reply.result)

    class Connection(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            self.transport = transport
            self.frames = FrameBuffer(DEFAULT_MAX_FRAME)

        def data_received(self, data: bytes) -> None:
            for item in self.frames.feed(data, 1 << 30):
                task = loop.create_task(self.answer(request_decoder.decode(item)))
                running.add(task)
                task.add_done_callback(running.discard)

        async def answer(self, request: Request) -> None:
            request_id = next(ids)
            waiter = replies[request_id] = loop.create_future()
            send("tools/call", msgspec.msgpack.decode(request.params), request_id)
            result = msgspec.json.decode(await waiter)
            self.transport.write(
                frame(encoder.encode(Response(request.id, msgspec.Raw(encoder.encode(result)))))
            )

    routing = loop.create_task(route())
    server = await loop.create_unix_server(Connection, path)
    async with server:
        await server.serve_forever()
    routing.cancel()


class _Reply(msgspec.Struct):
    id: int
    result: msgspec.Raw = msgspec.Raw(b"null")


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


def children_with_args(parent: int, *args: str) -> list[int]:
    """Pids of ``parent``'s children whose argv holds every one of ``args`` (Linux)."""
    found = []
    for pid in pids_with_args(*args):
        with contextlib.suppress(OSError):
            if int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) == parent:
                found.append(pid)
    return found


Side = tuple[Callable[[int], Op], dict[str, list[int]]]
"""One side of a comparison: its op per caller, and the processes whose CPU it uses, by part."""


async def alternating(
    sides: dict[str, Side], callers: int, seconds: float, rounds: int = 5
) -> tuple[dict[str, list[float]], dict[str, dict[str, float]]]:
    """Calls/s of each side with ``callers`` callers, in cells that alternate side and order round by
    round (so drift on a shared machine falls on every side), and each side's CPU per call by part."""
    rates: dict[str, list[float]] = {name: [] for name in sides}
    used: dict[str, dict[str, float]] = {
        name: dict.fromkeys(parts, 0.0) for name, (_, parts) in sides.items()
    }
    calls = dict.fromkeys(sides, 0.0)
    for round_ in range(rounds):
        for name in sorted(sides, reverse=bool(round_ % 2)):
            make, parts = sides[name]
            before = {part: sum(map(cpu_seconds, pids)) for part, pids in parts.items()}
            start = time.perf_counter()
            rate = await throughput([make(i) for i in range(callers)], seconds)
            rates[name].append(rate)
            calls[name] += rate * (time.perf_counter() - start)
            for part, pids in parts.items():
                used[name][part] += sum(map(cpu_seconds, pids)) - before[part]
    per_call = {
        name: {part: cpu / calls[name] * 1e6 for part, cpu in parts.items()} for name, parts in used.items()
    }
    return rates, per_call


def print_alternating(
    label: str, rates: dict[str, list[float]], per_call: dict[str, dict[str, float]], ours: str, theirs: str
) -> None:
    """The median ratio of ``ours`` to ``theirs`` over the alternating pairs, and where the CPU went."""
    ratios = sorted(m / d for m, d in zip(rates[ours], rates[theirs], strict=True))
    print(
        f"  {label}: {statistics.median(ratios):.2f}x direct, median of {len(ratios)} alternating pairs "
        f"(range {ratios[0]:.2f}-{ratios[-1]:.2f}x)  (target >= 0.9x)"
    )
    cpu = "; ".join(
        f"{name}: {', '.join(f'{k} {v:.0f}' for k, v in parts.items())}" for name, parts in per_call.items()
    )
    print(f"    CPU per call in those cells, us ({cpu})")


def row(label: str, p50: float, p99: float) -> None:
    print(f"  {label:<34}p50 {p50:7.3f} ms   p99 {p99:7.3f} ms")


async def main(count: int, seconds: float, cpu_rounds: int = 0) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="mcpd-bench-", dir="/tmp"))
    echo_path, proxy_path = workdir / "echo.sock", workdir / "proxy.sock"
    # The floors run in processes of their own, as mcpd does, so all pay the same cross-process hops.
    floors = [
        await anyio.open_process([sys.executable, __file__, flag, str(path)])
        for flag, path in (("--serve-echo", echo_path), ("--serve-proxy", proxy_path))
    ]
    try:
        with anyio.fail_after(20):
            while not (echo_path.exists() and proxy_path.exists()):
                await anyio.sleep(0.02)
        if cpu_rounds:
            await measure_cpu(workdir, (proxy_path, floors[1].pid), cpu_rounds)
        else:
            await measure(workdir, (echo_path, floors[0].pid), (proxy_path, floors[1].pid), count, seconds)
    finally:
        for process in floors:
            process.terminate()
            with anyio.move_on_after(5):
                await process.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def fixture_config(workdir: Path) -> Path:
    """A config of one server, the fixture with one tool (what every tools.call here calls)."""
    command, *args = fixture_command("fx", "--sdk", "--tools", "1")
    config = workdir / "config.toml"
    config.write_text(f"[servers.fx]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n")
    return config


async def measure_cpu(workdir: Path, proxy: tuple[Path, int], rounds: int, calls: int = 2000) -> None:
    """Only the daemon's CPU per proxied call next to the proxy floor's, in ``rounds`` that alternate
    which goes first: on a shared machine one pair moves by tens of microseconds, so the median of
    the rounds' differences says more than any one figure."""
    proxy_path, proxy_pid = proxy
    call_params = encoder.encode({"name": "tool_0", "arguments": {"text": "x"}})
    async with running_daemon(fixture_config(workdir)) as daemon, contextlib.AsyncExitStack() as exits:
        clients = [await exits.enter_async_context(connect(daemon.socket, name=f"b{i}")) for i in range(8)]
        proxy_clients = await raw_clients(proxy_path, 8, hello=False)
        sides: dict[str, tuple[int, list[Op]]] = {
            "daemon": (
                daemon.process.pid,
                [functools.partial(c.call_tool, "fx__tool_0", {"text": "x"}) for c in clients],
            ),
            "floor": (
                proxy_pid,
                [functools.partial(c.call, "tools.call", call_params) for c in proxy_clients],
            ),
        }
        used: dict[str, list[float]] = {name: [] for name in sides}
        for round_ in range(rounds + 1):  # the first round warms up
            for name in sorted(sides, reverse=bool(round_ % 2)):
                pid, ops = sides[name]
                cpu = await cpu_per_request(pid, ops, calls)
                if round_:
                    used[name].append(cpu)
        for client in proxy_clients:
            client.stream.close()
    gaps = [d - f for d, f in zip(used["daemon"], used["floor"], strict=True)]
    print(
        f"daemon CPU per proxied call: median {statistics.median(used['daemon']):.0f} us (target <= 150 us), "
        f"proxy floor {statistics.median(used['floor']):.0f} us; daemon - floor per round: median "
        f"{statistics.median(gaps):.0f} us ({' '.join(f'{gap:+.0f}' for gap in gaps)}); {rounds} rounds of "
        f"{calls} calls by 8 callers"
    )


async def measure(
    workdir: Path, echo: tuple[Path, int], proxy: tuple[Path, int], count: int, seconds: float
) -> None:
    (echo_path, echo_pid), (proxy_path, proxy_pid) = echo, proxy
    command, *args = fixture_command("fx", "--sdk", "--tools", "1")
    config = fixture_config(workdir)
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
        proxy_clients = await raw_clients(proxy_path, 8, hello=False)
        call_params = encoder.encode({"name": "tool_0", "arguments": {"text": "x"}})
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

        def proxy_op(i: int) -> Op:
            return lambda: proxy_clients[i].call("tools.call", call_params)

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
        proxy_cpu = await cpu_per_request(proxy_pid, [proxy_op(i) for i in range(8)], 2000)

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
        rates, per_call = await alternating(
            {
                "via mcpd": (
                    call_op,
                    {
                        "client": [os.getpid()],
                        "daemon": [daemon.process.pid],
                        "server": children_with_args(daemon.process.pid, *args),
                    },
                ),
                "direct": (
                    direct_op,
                    {"client": [os.getpid()], "server": children_with_args(os.getpid(), *args)},
                ),
            },
            8,
            seconds,
        )
        print_alternating("tools.call 8-caller throughput", rates, per_call, "via mcpd", "direct")
        print(
            f"  daemon CPU per proxied call: {cpu_per_call:.0f} us  (target <= 150 us); for scale: the proxy "
            f"floor {proxy_cpu:.0f} us per call, echo floor {echo_cpu:.0f} us and mcpd status "
            f"{status_cpu:.0f} us per request"
        )
        print(
            f"  small requests/s, 8 clients: {results['(b) mcpd status'][8]:,.0f} status, "
            f"{results['(b) mcpd hello'][8]:,.0f} hello  (target >= 10,000)"
        )
        print(
            f"  `mcpd status` wall time: median {statistics.median(status_times) * 1000:.0f} ms "
            f"(bare python start {statistics.median(bare_python) * 1000:.0f} ms)  (target < 150 ms)"
        )
        for client in [*echo_clients, *raw_mcpd, *proxy_clients]:
            client.stream.close()
    await call_path_benefit(max(500, count // 2))


async def call_path_benefit(count: int) -> None:
    """CPU of this process per tools/call: mcpd's stdio session (msgspec, what the daemon runs), and
    the SDK's ``ClientSession`` on its own ``stdio_client``, each to its own copy of the fixture."""
    config = fixture_server("fx", "--sdk", "--tools", "1")
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
    parser.add_argument(
        "--cpu-rounds",
        type=int,
        default=0,
        metavar="N",
        help="only the daemon's CPU per proxied call next to the proxy floor's, in N alternating rounds",
    )
    parser.add_argument("--serve-echo", metavar="SOCKET", help=argparse.SUPPRESS)
    parser.add_argument("--serve-proxy", metavar="SOCKET", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve_echo:
        anyio.run(serve_echo, options.serve_echo)
        sys.exit(0)
    if options.serve_proxy:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_proxy(options.serve_proxy))
        sys.exit(0)
    configure_logging("warning")
    anyio.run(main, options.requests, options.seconds, options.cpu_rounds)
