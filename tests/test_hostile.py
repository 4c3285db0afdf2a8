"""Hostile input against a real daemon: a fuzzed wire, bad messages, and sockets other users control."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import os
import random
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import msgspec
import pytest
import structlog
import structlog.testing

from mcpd.client import Client
from mcpd.client.aio import connect
from mcpd.errors import InvalidParams, PeerRejected, ProtocolError, TooManyRequests, UnknownMethod
from mcpd.ipc import endpoint
from mcpd.ipc.endpoint import UnsafePath
from mcpd.ipc.server import CHURN_PER_ITERATION, Connection, Limits, MethodTable, RpcServer
from mcpd.ipc.turns import Turns
from mcpd.memory import TRIM_AFTER, Reclaimer
from mcpd.model.protocol import MAX_QUERY
from mcpd.testing import fixture_toml, rss_mib
from mcpd.testing.daemon import DaemonProcess, running_daemon
from mcpd.testing.hostile import (
    INVALID_UTF8,
    bad_inputs,
    connect_close,
    deep,
    empty_maps,
    frame,
    hello,
    parallel,
    probe,
    request,
)

NOBODY = 65534
needs_root = pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another uid (nobody)")


@pytest.fixture(scope="module")
async def daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DaemonProcess]:
    """One daemon with one fixture server and the default limits."""
    path = tmp_path_factory.mktemp("hostile") / "config.toml"
    path.write_text(fixture_toml("fx", "--tools", "1"))
    async with running_daemon(path) as running:
        yield running


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def exchange(path: Path, data: bytes, answers: int) -> list[list[object]]:
    """Send ``data`` on a new connection after a hello; the ``answers`` responses other than hello's,
    in the order they came (the hello's own answer may come after an error the reader sent at once)."""
    import msgspec  # noqa: PLC0415 - only this helper decodes by hand

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(hello() + data)
        out: list[list[object]] = []
        for _ in range(answers + 1):
            size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
            out.append(msgspec.msgpack.decode(sock.recv(size, socket.MSG_WAITALL)))
    return [answer for answer in out if answer[1] != 1]


def error_code(answer: list[object]) -> int:
    error = answer[3]
    assert isinstance(error, dict), answer
    code = error["code"]
    assert isinstance(code, int)
    return code


# -- the wire --------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_fuzzed_wire_beside_a_well_behaved_client(daemon: DaemonProcess) -> None:
    """Seeded random, truncated, oversized, misshapen, non-UTF-8, deeply nested and huge inputs on
    hundreds of connections, 1,000 connect/close cycles and 200 parallel connections: a bystander's
    requests all succeed meanwhile, the daemon stays up, every decodable-but-wrong request is
    answered with a typed error, and its fds return to baseline."""
    pid = daemon.process.pid
    inputs = list(bad_inputs(random.Random(1313), 280))
    served = 0
    answered: dict[str, list[list[object]]] = {}

    async with connect(daemon.socket, name="bystander") as bystander:
        baseline = open_fds(pid)
        done = anyio.Event()

        async def behave() -> None:
            nonlocal served
            while not done.is_set():
                assert len(await bystander.status()) == 1
                result = await bystander.call_tool("fx__echo", {"text": f"t{served}"})
                assert result.content[0]["text"] == f"t{served}"
                served += 1

        async def attack(worker: int) -> None:
            for item in inputs[worker::8]:
                answers = await probe(daemon.socket, item.payload)
                # Everything but the answer to the hello (request 1).
                answered.setdefault(item.kind, []).extend(
                    a for a in answers if isinstance(a, list) and a[1] != 1
                )

        async with anyio.create_task_group() as tg:
            tg.start_soon(behave)
            async with anyio.create_task_group() as attackers:
                for worker in range(8):
                    attackers.start_soon(attack, worker)
                attackers.start_soon(anyio.to_thread.run_sync, connect_close, daemon.socket, 1000)
                attackers.start_soon(parallel, daemon.socket, 200)
            done.set()

        assert daemon.process.returncode is None
        with anyio.fail_after(10):
            while open_fds(pid) > baseline:
                await anyio.sleep(0.02)
    assert served > 0
    typed = {ProtocolError.code, InvalidParams.code, UnknownMethod.code}
    for kind in ("shape", "utf8", "deep", "huge", "oversized"):
        assert answered[kind], kind
        assert {error_code(a) for a in answered[kind] if a[3] is not None} <= typed, kind
    assert not [e for e in daemon.events if e.get("level") == "error"]


@pytest.mark.anyio
async def test_invalid_utf8_is_a_protocol_error_and_the_connection_goes_on(daemon: DaemonProcess) -> None:
    """The frame 94 00 01 a2 e4 00 c0 gets a ProtocolError, logged as a warning without a traceback;
    the same connection then serves a status request."""
    mark = len(daemon.events)
    bad, status = exchange(daemon.socket, frame(INVALID_UTF8) + request(5, "status"), 2)
    assert bad[1] is None and error_code(bad) == ProtocolError.code
    assert status[1] == 5 and status[3] is None
    logged = await daemon.wait_for("client.bad_message", after=mark)
    assert logged["level"] == "warning" and "exception" not in logged


@pytest.mark.anyio
async def test_deep_nesting_is_refused_at_every_depth(daemon: DaemonProcess) -> None:
    """Nesting past msgspec's recursion limit (small frame) or past 64 levels (large frame) is a
    typed error, and the connection keeps serving."""
    small, large, status = exchange(daemon.socket, deep(5_000) + deep(60_000) + request(9, "status"), 3)
    assert error_code(small) == ProtocolError.code and "nested too deeply" in str(small[3])
    assert error_code(large) == InvalidParams.code and "deeper than 64" in str(large[3])
    assert status[1] == 9 and status[3] is None


@pytest.mark.anyio
async def test_params_limits_name_the_limit(daemon: DaemonProcess) -> None:
    """A query over MAX_QUERY, params over a method's byte limit, and params of too many values
    are InvalidParams saying which limit they broke."""
    async with connect(daemon.socket) as client:
        with pytest.raises(InvalidParams, match=f"length <= {MAX_QUERY}"):
            await client.search("q" * (MAX_QUERY + 1))
        with pytest.raises(InvalidParams, match="over its limit of 4194304"):
            await client.call_tool("fx__echo", {"text": "x" * (5 * 1024 * 1024)})
        assert (await client.call_tool("fx__echo", {"text": "y" * 100_000})).content[0][
            "text"
        ] == "y" * 100_000
    too_many, too_big = exchange(
        daemon.socket, empty_maps(100_000) + request(4, "tools.list", {"query": "z" * 70_000}), 2
    )
    assert error_code(too_many) == InvalidParams.code and "more than 65536 values" in str(too_many[3])
    assert error_code(too_big) == InvalidParams.code and "over its limit of 65536" in str(too_big[3])


@pytest.mark.anyio
async def test_arguments_msgpack_cannot_carry_are_invalid_params_and_the_client_goes_on(
    daemon: DaemonProcess,
) -> None:
    """An object msgpack cannot encode, an integer past 64 bits and a lone surrogate in a tool's
    arguments are each ``InvalidParams``, raised by the client before anything is sent (they were a
    bare TypeError, OverflowError and UnicodeEncodeError), and the connection serves the next call."""
    async with connect(daemon.socket) as client:
        for bad, says in ((object(), "unsupported"), (2**70, "ints"), ("\ud800", "not valid UTF-8")):
            with pytest.raises(InvalidParams, match=says):
                await client.call_tool("fx__echo", {"text": bad})
        assert (await client.call_tool("fx__echo", {"text": "ok"})).content[0]["text"] == "ok"


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time ``pid`` has used so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def duplicate_keys(method: str, count: int) -> bytes:
    """A request whose params are ``protocol: 1`` and ``count`` duplicate ``mode: nil`` keys: a valid
    hello to a decoder, which builds it key by key, and megabytes on the wire."""
    params = b"\xdf" + (count + 1).to_bytes(4, "big") + b"\xa8protocol\x01" + b"\xa4mode\xc0" * count
    return frame(b"\x94\x00\x02" + msgspec.msgpack.encode(method) + params)


@pytest.mark.anyio
async def test_a_huge_hello_is_refused_by_size_before_it_is_decoded(daemon: DaemonProcess) -> None:
    """Params of 15 MB cost the daemon no more as a ``hello`` than as a ``status``: both are refused
    by their size, undecoded, and the connection goes on. (A hello decoded before its size was
    checked held up the event loop, and so every client, for 60-70 ms a frame.)"""
    pid = daemon.process.pid
    cost: dict[str, float] = {}
    for method in ("status", "hello"):
        sent = duplicate_keys(method, 2_500_000) * 5 + request(9, "status")
        before = cpu_seconds(pid)
        *refused, status = await anyio.to_thread.run_sync(exchange, daemon.socket, sent, 6)
        cost[method] = cpu_seconds(pid) - before
        for answer in refused:
            assert error_code(answer) == InvalidParams.code and "over its limit" in str(answer[3])
        assert status[1] == 9 and status[3] is None
    assert cost["hello"] < 1.5 * cost["status"] + 0.03, cost


@pytest.mark.anyio
async def test_a_huge_cancel_is_refused_by_size_before_it_is_decoded(daemon: DaemonProcess) -> None:
    """Params of 10 MB (two and a half million ``id`` keys, each a valid cancel) cost the daemon no more
    as a ``cancel`` than as a ``status``: both are refused by their size, undecoded. (``cancel`` was
    answered before any size check: decoded whole, each frame held up the event loop, and so every
    client, for 80-480 ms.)"""
    pid = daemon.process.pid
    count = 2_500_000
    params = b"\xdf" + count.to_bytes(4, "big") + b"\xa2id\x01" * count
    cost: dict[str, float] = {}
    for method in ("status", "cancel"):
        sent = frame(b"\x94\x00\x07" + msgspec.msgpack.encode(method) + params) * 3 + request(9, "status")
        before = cpu_seconds(pid)
        *refused, status = await anyio.to_thread.run_sync(exchange, daemon.socket, sent, 4)
        cost[method] = cpu_seconds(pid) - before
        for answer in refused:
            assert error_code(answer) == InvalidParams.code and "over its limit" in str(answer[3]), answer
        assert status[1] == 9 and status[3] is None
    assert cost["cancel"] < 1.5 * cost["status"] + 0.03, cost


@pytest.mark.anyio
async def test_memory_of_frames_cut_short_is_given_back(daemon: DaemonProcess) -> None:
    """Twenty clients that each send 15 MB of a 16 MB frame, wait, then leave: the daemon holds the
    300 MB while they wait (what a frame is read into) and gives it back once they are gone, as it
    does after whole large frames. (Frames cut short were never counted for a trim: the daemon kept
    the 300 MB resident after the clients had left.)"""
    pid = daemon.process.pid
    baseline = rss_mib(pid)
    part = (16 * 1024 * 1024 - 8).to_bytes(4, "big") + b"\x94\x00\x05\xaatools.call" + b"x" * (15 << 20)

    def send_parts() -> list[socket.socket]:
        socks = []
        for _ in range(20):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(10)
            sock.connect(str(daemon.socket))
            sock.sendall(hello() + part)
            socks.append(sock)
        return socks

    socks = await anyio.to_thread.run_sync(send_parts)
    try:
        with anyio.fail_after(10):
            while rss_mib(pid) < baseline + 250:
                await anyio.sleep(0.05)
    finally:
        for sock in socks:
            sock.close()
    with anyio.fail_after(15):
        while rss_mib(pid) > baseline + 100:
            await anyio.sleep(0.1)


def half_closed(path: Path, data: bytes, answers: int, *, close: bool = False) -> list[list[object]]:
    """Send a hello and ``data``, then shut down the sending side (``nc -N``), or close the socket
    entirely (``close``); the answers read until the daemon closes or ``answers`` came."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(hello() + data)
        if close:
            return []
        sock.shutdown(socket.SHUT_WR)
        out: list[list[object]] = []
        while len(out) < answers + 1 and len(header := sock.recv(4, socket.MSG_WAITALL)) == 4:
            out.append(msgspec.msgpack.decode(sock.recv(int.from_bytes(header, "big"), socket.MSG_WAITALL)))
    return [answer for answer in out if answer[1] != 1]


@pytest.mark.anyio
async def test_a_client_that_stops_sending_still_gets_its_answers(daemon: DaemonProcess) -> None:
    """A client that shuts down its sending side once its requests are written (``nc -N``, a script
    through ``socat``) gets every answer, a call still running at its EOF included; a client that
    closes the socket entirely has its running call cancelled at once (its connection is gone from
    the daemon's fds long before the call would end). Answered or not, neither leaves an fd behind.
    (The daemon cancelled both at EOF: a half-closed client got the status but never the call.)"""
    pid = daemon.process.pid
    async with connect(daemon.socket) as bystander:
        await bystander.status()
        baseline = open_fds(pid)
        call = request(5, "tools.call", {"tool": "fx__sleep", "arguments": {"seconds": 0.5}})
        answers = await anyio.to_thread.run_sync(half_closed, daemon.socket, call + request(6, "status"), 2)
        assert len(answers) == 2 and {answer[1] for answer in answers} == {5, 6}, answers
        assert all(answer[3] is None for answer in answers), answers
        slow = request(7, "tools.call", {"tool": "fx__sleep", "arguments": {"seconds": 30}})
        await anyio.to_thread.run_sync(functools.partial(half_closed, daemon.socket, slow, 1, close=True))
        with anyio.fail_after(5):
            while open_fds(pid) > baseline:
                await anyio.sleep(0.02)


def closed_after_half_close(path: Path, data: bytes, delay: float) -> None:
    """Send a hello (as ``leaver``) and ``data``, shut down the sending side, then close the socket
    ``delay`` later."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(path))
        sock.sendall(hello(client="leaver") + data)
        sock.shutdown(socket.SHUT_WR)
        time.sleep(delay)


@pytest.mark.anyio
async def test_a_half_closed_client_that_leaves_before_an_answer_is_no_connection_error(
    daemon: DaemonProcess,
) -> None:
    """Clients that shut down their sending side, then close the socket while a call of theirs runs,
    each at its own moment (some between one of the daemon's looks for a hang-up and the call's
    answer), leave quietly: their other call is cancelled, no fd is left behind, and nothing is
    logged as a connection error. (The answer written to a closed peer closed the daemon's socket,
    and the next look for a hang-up raised ValueError on it: ``ipc.connection_error`` with its
    traceback, for a client that only left.)"""
    pid = daemon.process.pid
    async with connect(daemon.socket) as bystander:
        await bystander.call_tool("fx__sleep", {"seconds": 0})  # its server started: calls take their time
        baseline = open_fds(pid)
        seen = len(daemon.events)
        calls = request(5, "tools.call", {"tool": "fx__sleep", "arguments": {"seconds": 0.4}}) + request(
            6, "tools.call", {"tool": "fx__sleep", "arguments": {"seconds": 30}}
        )
        async with anyio.create_task_group() as clients:
            for step in range(8):  # across the quarter second between two looks, before the answer
                leave = functools.partial(closed_after_half_close, daemon.socket, calls, 0.2 + 0.025 * step)
                clients.start_soon(anyio.to_thread.run_sync, leave)
        with anyio.fail_after(5):
            while open_fds(pid) > baseline:
                await anyio.sleep(0.02)
            # Its fd is closed as its answer fails, before the next look: wait for its tear-down too.
            while [event.get("client") for event in daemon.events[seen:]].count("leaver") < 2 * 8:
                await anyio.sleep(0.02)  # each connected, then disconnected
    errors = [event for event in daemon.events[seen:] if event.get("level") == "error"]
    assert not errors, errors


@pytest.mark.anyio
async def test_a_daemon_out_of_descriptors_turns_newcomers_away_and_says_so_once(tmp_path: Path) -> None:
    """With its open files all taken by idle connections, the daemon answers a new client at once with
    ``TooManyRequests`` naming the cause, logs ``ipc.accept_failed`` once for the whole spell, and
    serves again once they are gone (``ipc.accept_recovered``). (The client waited 20 s to hear that
    the daemon "stopped answering", and the daemon logged the failure ten times a second.)"""
    config = tmp_path / "config.toml"
    config.write_text(fixture_toml("fx", "--tools", "1"))
    async with running_daemon(config, wrapper=["prlimit", "--nofile=128:128", "--"]) as daemon:
        idle: list[socket.socket] = []
        try:
            with anyio.fail_after(10):
                while not [e for e in daemon.events if e.get("event") == "ipc.accept_failed"]:
                    idle.append(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
                    idle[-1].connect(str(daemon.socket))
                    await anyio.sleep(0.005)
            with anyio.fail_after(5), pytest.raises(TooManyRequests, match="out of file descriptors"):
                async with connect(daemon.socket) as refused:
                    await refused.status()
            await anyio.sleep(0.5)  # five retries of the accept
        finally:
            for sock in idle:
                sock.close()
        async with connect(daemon.socket) as client:
            assert len(await client.status()) == 1
        recovered = await daemon.wait_for("ipc.accept_recovered")
    assert [e["event"] for e in daemon.events].count("ipc.accept_failed") == 1
    assert recovered["turned_away"] >= 1


# -- the socket and its directory ------------------------------------------------------------------


def claim(socket_path: Path) -> None:
    """What ``mcpd serve`` does with its socket path before it serves (``mcpd.daemon.app.serve``)."""
    taken = endpoint.Claim(socket_path)
    try:
        taken.bind().close()
    finally:
        taken.release()


def serve(socket_path: Path) -> subprocess.CompletedProcess[str]:
    """``mcpd serve`` on ``socket_path``, expected to refuse to start."""
    return subprocess.run(
        [sys.executable, "-m", "mcpd", "serve", "--socket", str(socket_path), "--log-format", "json"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, "XDG_CONFIG_HOME": "/nonexistent"},
    )


@pytest.fixture
def private_dir(tmp_path: Path) -> Iterator[Path]:
    """A 0700 directory of this user with a short path (socket paths are limited to ~104 bytes)."""
    path = Path(f"/tmp/mcpd-h{os.getpid()}")
    path.mkdir(mode=0o700)
    try:
        yield path
    finally:
        subprocess.run(["rm", "-rf", str(path)], check=True)


def test_symlinked_lock_is_refused_and_its_target_untouched(private_dir: Path, tmp_path: Path) -> None:
    """A symlink planted at <socket>.lock stops `mcpd serve` (exit 3, one clear line); the file it
    points to keeps its content."""
    target = tmp_path / "precious"
    target.write_text("precious data\n")
    (private_dir / "mcpd.sock.lock").symlink_to(target)
    result = serve(private_dir / "mcpd.sock")
    assert result.returncode == 3
    assert "lock file is a symlink" in result.stderr and "Traceback" not in result.stderr
    assert target.read_text() == "precious data\n"


def test_symlinked_socket_path_is_refused(private_dir: Path, tmp_path: Path) -> None:
    """A symlink at the socket path is neither followed nor removed."""
    target = tmp_path / "elsewhere"
    target.write_text("keep\n")
    (private_dir / "mcpd.sock").symlink_to(target)
    with pytest.raises(UnsafePath, match="socket path is a symlink"):
        claim(private_dir / "mcpd.sock")
    assert (private_dir / "mcpd.sock").is_symlink() and target.read_text() == "keep\n"


def test_symlinked_directory_is_refused(private_dir: Path) -> None:
    """A socket directory that is a symlink (to a directory that passes every other check) is refused."""
    real = private_dir / "real"
    real.mkdir(mode=0o700)
    link = private_dir / "link"
    link.symlink_to(real)
    with pytest.raises(UnsafePath, match="directory is a symlink"):
        claim(link / "mcpd.sock")
    assert list(real.iterdir()) == []


def test_directory_writable_by_others_is_refused_not_repaired(private_dir: Path) -> None:
    """A world-writable socket directory is refused with the chmod that fixes it, and left as it was."""
    private_dir.chmod(0o777)
    with pytest.raises(UnsafePath, match=f"chmod 700 {private_dir}"):
        claim(private_dir / "mcpd.sock")
    assert private_dir.stat().st_mode & 0o777 == 0o777
    assert list(private_dir.iterdir()) == []


@needs_root
def test_directory_of_another_user_is_refused(private_dir: Path) -> None:
    """A socket directory owned by another uid (even a private one) is refused."""
    os.chown(private_dir, NOBODY, NOBODY)
    with pytest.raises(UnsafePath, match=f"belongs to uid {NOBODY}"):
        claim(private_dir / "mcpd.sock")


def impostor(directory: Path) -> tuple[int, int, Path]:
    """Fork a child that becomes ``nobody`` and listens on ``directory/mcpd.sock``.

    Returns (pid, a pipe that carries "ready" and then the number of bytes the impostor
    received from its first caller, the socket path).
    """
    path = directory / "mcpd.sock"
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read_end)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(path))
            os.chmod(path, 0o666)
            listener.listen(8)
            os.write(write_end, b"ready\n")
            listener.settimeout(20)
            conn, _ = listener.accept()
            conn.settimeout(2)
            received = b""
            try:
                while chunk := conn.recv(65536):
                    received += chunk
            except TimeoutError:
                pass
            os.write(write_end, f"{len(received)}\n".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    return pid, read_end, path


@needs_root
@pytest.mark.anyio
async def test_impostor_socket_of_another_uid_is_refused(private_dir: Path) -> None:
    """A listener run by another uid is refused by both clients (PeerRejected) before they send a byte."""
    os.chown(private_dir, NOBODY, NOBODY)
    for use_async in (False, True):
        pid, pipe, path = impostor(private_dir)
        try:
            with os.fdopen(pipe) as reports:
                assert reports.readline() == "ready\n"
                if use_async:
                    with pytest.raises(PeerRejected, match=f"served by uid {NOBODY}"):
                        async with connect(path):
                            pass
                else:
                    with pytest.raises(PeerRejected, match=f"served by uid {NOBODY}"):
                        Client(path).connect()
                # In a thread: the event loop must stay free to finish closing the async client's socket.
                assert await anyio.to_thread.run_sync(reports.readline) == "0\n"
        finally:
            await anyio.to_thread.run_sync(os.waitpid, pid, 0)
            path.unlink()


def test_a_private_directory_of_ours_is_accepted_and_a_missing_one_created_0700(private_dir: Path) -> None:
    """The checks refuse only what others could control: a 0755 directory of ours is fine, and a
    missing one is created 0700."""
    private_dir.chmod(0o755)
    claim(private_dir / "mcpd.sock")
    claim(private_dir / "new" / "mcpd.sock")
    assert (private_dir / "new").stat().st_mode & 0o777 == 0o700


@pytest.mark.anyio
async def test_turns_admit_a_fixed_number_per_loop_iteration_in_order() -> None:
    """Twenty takers of three turns per iteration pass three per iteration, first come first served."""
    turns = Turns(3)
    iteration = 0
    passed: list[tuple[int, int]] = []

    def tick() -> None:
        nonlocal iteration
        iteration += 1
        loop.call_soon(tick)

    loop = asyncio.get_running_loop()
    loop.call_soon(tick)

    async def taker(index: int) -> None:
        await turns.take()
        passed.append((index, iteration))

    async with anyio.create_task_group() as tg:
        for index in range(20):
            tg.start_soon(taker, index)
    assert [index for index, _ in passed] == list(range(20))
    per_iteration = Counter(at for _, at in passed)
    assert max(per_iteration.values()) <= 3 and len(per_iteration) >= 7


class Mark(msgspec.Struct):
    pass


class Marked(msgspec.Struct):
    iteration: int


@pytest.mark.anyio
async def test_a_crowd_of_arrivals_is_answered_a_few_per_loop_iteration(private_dir: Path) -> None:
    """300 clients connect, then all send hello and a request at once: no loop iteration
    answers the requests of more than CHURN_PER_ITERATION of them, since until its hello is
    answered a client's frames take turns with the other arrivals."""
    loop = asyncio.get_running_loop()
    iteration = 0

    def tick() -> None:
        nonlocal iteration
        iteration += 1
        if ticking:
            loop.call_soon(tick)

    ticking = True
    loop.call_soon(tick)
    table: MethodTable[None] = MethodTable()
    handled: list[int] = []

    @table.method("mark", Mark)
    async def mark(_ctx: None, _conn: Connection, _params: Mark) -> Marked:
        handled.append(iteration)
        return Marked(iteration)

    rpc = RpcServer(table, None)
    path = private_dir / "crowd.sock"
    crowd = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(rpc.serve, endpoint.open_listener(path))
        try:
            for _ in range(300):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                crowd.append(sock)
                sock.connect(str(path))  # the listen backlog takes them all at once
            while len(rpc.connections) < len(crowd):
                await asyncio.sleep(0)  # one loop iteration: the server sets them up
            for sock in crowd:
                sock.sendall(hello() + request(2, "mark"))
            while len(handled) < len(crowd):
                await asyncio.sleep(0)
        finally:
            for sock in crowd:
                sock.close()
            ticking = False
            tg.cancel_scope.cancel()
    assert max(Counter(handled).values()) <= CHURN_PER_ITERATION


def silent_clients(path: Path, count: int) -> list[tuple[float, list[object], bytes]]:
    """``count`` clients that connect and say nothing: for each, how long after connecting it was
    told something, what, and what it read after that (``b""``: the daemon closed)."""
    socks = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(count)]
    try:
        started = time.monotonic()
        for sock in socks:
            sock.settimeout(10)
            sock.connect(str(path))
        out = []
        for sock in socks:
            size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
            told = msgspec.msgpack.decode(sock.recv(size, socket.MSG_WAITALL))
            out.append((time.monotonic() - started, told, sock.recv(1)))
        return out
    finally:
        for sock in socks:
            sock.close()


@pytest.mark.anyio
async def test_a_client_that_never_says_hello_is_told_and_dropped_said_once_per_episode(
    private_dir: Path,
) -> None:
    """Clients that connect and say nothing are each sent a ``ProtocolError`` naming the deadline and
    closed once ``hello_timeout`` has passed, while a client that said hello stays served; the daemon
    says so in one line per episode (twenty at once are one), not one per connection. (Such a
    connection was kept for good: a few thousand of them took every descriptor of the daemon.)"""
    table: MethodTable[None] = MethodTable()

    @table.method("mark", Mark)
    async def mark(_ctx: None, _conn: Connection, _params: Mark) -> Marked:
        return Marked(0)

    rpc = RpcServer(table, None, Limits(hello_timeout=0.5))
    path = private_dir / "silent.sock"
    with structlog.testing.capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            tg.start_soon(rpc.serve, endpoint.open_listener(path))
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as greeted:
                greeted.settimeout(10)
                greeted.connect(str(path))
                await anyio.to_thread.run_sync(exchange_on, greeted, hello())
                for crowd in (20, 1):
                    told = await anyio.to_thread.run_sync(silent_clients, path, crowd)
                    for after, answer, then in told:
                        assert 0.5 <= after < 5 and then == b"", (after, then)
                        assert error_code(answer) == ProtocolError.code, answer
                        assert "no hello within 0.5 s" in str(answer[3]), answer
                    with anyio.fail_after(5):
                        while len(rpc.connections) > 1:
                            await anyio.sleep(0.02)
                    await anyio.sleep(0.3)  # two looks that find none: this episode is over
                answer = await anyio.to_thread.run_sync(exchange_on, greeted, request(2, "mark"))
                assert answer[1] == 2 and answer[3] is None, answer
            tg.cancel_scope.cancel()
    said = [entry for entry in logs if entry["event"] == "client.no_hello"]
    assert len(said) == 2 and said[1]["closed"] == 1, said


def exchange_on(sock: socket.socket, data: bytes) -> list[object]:
    """Send ``data`` on ``sock`` and read one message back."""
    sock.sendall(data)
    size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
    answer: list[object] = msgspec.msgpack.decode(sock.recv(size, socket.MSG_WAITALL))
    return answer


def send_unread(sock: socket.socket, data: bytes) -> None:
    """Send ``data`` on ``sock`` again and again, reading nothing, until the peer has taken none of
    it for half a second: it stopped reading, its answers to us backed up."""
    sock.settimeout(0.5)
    with contextlib.suppress(TimeoutError):
        while True:
            sock.sendall(data)


@pytest.mark.anyio
async def test_a_client_that_never_says_hello_nor_reads_is_dropped_leaving_nothing_behind(
    private_dir: Path,
) -> None:
    """A client that sends requests but never hello, and reads none of the answers, is dropped at
    ``hello_timeout``, and the clients that connect after it are served. Its drop closed the socket
    under a transport still waiting to flush those answers: the event loop kept watching the closed
    descriptor (and held the answers for good), and the next connection given that descriptor was
    closed unanswered at once."""
    table: MethodTable[None] = MethodTable()

    @table.method("mark", Mark)
    async def mark(_ctx: None, _conn: Connection, _params: Mark) -> Marked:
        return Marked(0)

    rpc = RpcServer(table, None, Limits(hello_timeout=2, write_timeout=60))
    path = private_dir / "unread.sock"
    # Made before the drop, so that the connections the daemon accepts next take the lowest free
    # descriptors, the dropped one among them (one per hole below it: a few, not 32).
    after = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(32)]
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(rpc.serve, endpoint.open_listener(path))
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as hostile:
                hostile.connect(str(path))
                await anyio.to_thread.run_sync(send_unread, hostile, request(2, "mark") * 64)
                assert rpc.connections, "dropped before its answers backed up"
                with anyio.fail_after(10):
                    while rpc.connections:
                        await anyio.sleep(0.02)
                greeted = [await anyio.to_thread.run_sync(greets, path, sock) for sock in after]
            tg.cancel_scope.cancel()
    finally:
        for sock in after:
            sock.close()
    assert all(greeted), greeted


def greets(path: Path, sock: socket.socket) -> bool:
    """Whether a hello on ``sock``, connected to ``path``, is answered with no error (the connection
    stays open)."""
    sock.settimeout(10)
    sock.connect(str(path))
    sock.sendall(hello())
    head = sock.recv(4, socket.MSG_WAITALL)
    if len(head) < 4:
        return False  # closed unanswered
    answer = msgspec.msgpack.decode(sock.recv(int.from_bytes(head, "big"), socket.MSG_WAITALL))
    return answer[3] is None


@pytest.mark.anyio
async def test_full_collections_wait_for_the_end_of_a_burst() -> None:
    """While the reclaimer runs, CPython starts no full collection of its own however much
    survives the young generations; a burst of TRIM_AFTER bytes is followed by one, once quiet;
    CPython's thresholds come back when the reclaimer stops."""
    thresholds = gc.get_threshold()
    full: list[int] = []
    collected = anyio.Event()

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == 2:
            full.append(info["collected"])
            collected.set()

    reclaimer = Reclaimer()
    gc.callbacks.append(on_gc)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(reclaimer.run)
            assert gc.get_threshold()[2] > thresholds[2]
            survivors = [[i] for i in range(20 * thresholds[0] * thresholds[1])]  # many young collections
            assert gc.get_count()[2] > thresholds[2] and not full
            reclaimer.note(TRIM_AFTER)
            with anyio.fail_after(30):
                await collected.wait()
            tg.cancel_scope.cancel()
    finally:
        gc.callbacks.remove(on_gc)
    assert len(full) == 1 and len(survivors) > 0
    assert gc.get_threshold() == thresholds
