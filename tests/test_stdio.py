"""Spawning a stdio server: what exec would refuse is refused at spawn, with exec's reason, also
when the child is started through ``setpriv`` (which would otherwise turn it into an exit status).
Its stdin: what a dead child never read is told apart from what it read."""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
import structlog

from mcpd.config.model import ServerConfig
from mcpd.supervisor import stdin, stdio
from mcpd.supervisor.orphans import leftovers, signal_all
from mcpd.supervisor.rawrpc import RawRpc
from mcpd.supervisor.replies import PAUSE_BYTES
from mcpd.supervisor.session import ConnectionLost, NotDelivered
from mcpd.supervisor.stdin import StdinPipe
from mcpd.supervisor.stdio import SpawnError, open_stdio_child
from mcpd.testing import process_gone

pytestmark = pytest.mark.anyio


async def test_a_missing_command_is_a_spawn_error(tmp_path: Path) -> None:
    """A path that does not exist and a bare name on no PATH entry: ENOENT, named."""
    for command in (str(tmp_path / "absent"), "mcpd-no-such-command"):
        with pytest.raises(SpawnError, match=r"No such file or directory .*absent|no-such-command"):
            async with open_stdio_child(ServerConfig(name="x", command=command)):
                pass


async def test_a_file_that_cannot_be_run_is_a_spawn_error(tmp_path: Path) -> None:
    """A file without the execute bit: EACCES, and no process."""
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    with pytest.raises(SpawnError, match="Permission denied"):
        async with open_stdio_child(ServerConfig(name="x", command=str(script))):
            pass


@pytest.mark.parametrize("on_path", [False, True])
async def test_a_script_whose_interpreter_is_gone_is_a_spawn_error(tmp_path: Path, on_path: bool) -> None:
    """A script whose `#!` names an interpreter that no longer exists (a deleted venv): ENOENT at
    spawn, naming the interpreter, so the server ends `failed` instead of restarting for ever;
    whether the script is named by its path or found on PATH."""
    script = tmp_path / "server"
    script.write_text("#!/old/venv/bin/python -u\nprint('never')\n")
    script.chmod(0o755)
    config = (
        ServerConfig(name="x", command="server", env={"PATH": str(tmp_path)})
        if on_path
        else ServerConfig(name="x", command=str(script))
    )
    with pytest.raises(
        SpawnError, match="No such file or directory: its #! interpreter /old/venv/bin/python"
    ):
        async with open_stdio_child(config):
            pass


async def test_a_crlf_script_is_a_spawn_error_naming_the_carriage_return(tmp_path: Path) -> None:
    """A script saved with CRLF line ends: the kernel takes `\\r` as part of the interpreter's name
    (`/bin/sh\\r`, not there), so exec would fail and the server restart for ever; refused at spawn,
    the name shown with its `\\r`. Leading spaces and a tab before the argument are read as exec does."""
    script = tmp_path / "server"
    script.write_bytes(b"#!/bin/sh\r\necho hi\r\n")
    script.chmod(0o755)
    with pytest.raises(SpawnError, match=re.escape("its #! interpreter '/bin/sh\\r'")):
        async with open_stdio_child(ServerConfig(name="x", command=str(script))):
            pass
    script.write_bytes(b"#! \t/bin/sh\t-e\nexec cat\n")
    async with open_stdio_child(ServerConfig(name="x", command=str(script), stop_grace=1.0)) as (child, _):
        assert child.pid > 0


async def test_a_relative_command_runs_from_its_cwd(tmp_path: Path) -> None:
    """``./server`` with ``cwd`` is looked up in that directory, as exec with that cwd does."""
    script = tmp_path / "server"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write(sys.stdin.readline())\n")
    script.chmod(0o755)
    config = ServerConfig(name="x", command="./server", cwd=str(tmp_path), stop_grace=1.0)
    async with open_stdio_child(config) as (child, _lines):
        assert child.pid > 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="takes back through /proc")
async def test_stdin_pipe_takes_back_what_the_reader_never_read() -> None:
    """Until the write end is closed the count is unknown (a process may read more). Closing it
    takes back what the pipe and our buffer still hold: the count is what the reader took, and a
    reader still there reads EOF, not the rest."""
    reader, writer = os.pipe()
    fcntl.fcntl(writer, fcntl.F_SETPIPE_SZ, 4096)  # a small pipe, so that our buffer fills too
    pipe = StdinPipe(writer)
    try:
        for _ in range(3):
            pipe.write(b"x" * 3000)
        assert pipe.backlog() > 0 and pipe.written == 9000
        taken = len(os.read(reader, 2500))
        assert pipe.read() is None
        pipe.close()
        assert pipe.read() == taken and pipe.written == 9000
        assert os.read(reader, 9000) == b""
    finally:
        os.close(reader)
    with pytest.raises(BrokenPipeError):
        pipe.write(b"y")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="takes back through /proc")
async def test_stdin_pipe_counts_after_the_reader_is_gone() -> None:
    """A reader gone with bytes left in the pipe: they are still taken back at close. Once the
    pipe has refused bytes, a write is refused whole."""
    reader, writer = os.pipe()
    fcntl.fcntl(writer, fcntl.F_SETPIPE_SZ, 4096)
    pipe = StdinPipe(writer)
    for _ in range(3):
        pipe.write(b"x" * 3000)
    taken = len(os.read(reader, 2500))
    os.close(reader)
    await pipe.drain()  # the buffer's next write into the pipe finds no reader
    with pytest.raises(BrokenPipeError):
        pipe.write(b"y")
    pipe.close()
    assert pipe.read() == taken and pipe.written == 9000


_SYS_EXIT = {"x86_64": 60, "aarch64": 93}.get(os.uname().machine)
_LEADER_GOES = """
import ctypes, os, sys, threading
def echo():
    while line := sys.stdin.buffer.readline():
        os.write(1, line)
threading.Thread(target=echo).start()
os.write(1, b"ready\\n")
ctypes.CDLL(None).syscall(int(sys.argv[1]), 0)  # SYS_exit: this thread only, not the process
"""


def _zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "Z"


@pytest.mark.skipif(_SYS_EXIT is None or not sys.platform.startswith("linux"), reason="a raw exit, /proc")
async def test_a_process_whose_leader_is_a_zombie_is_not_gone_while_a_thread_reads() -> None:
    """The leader of a process turns zombie before its other threads have exited (a SIGKILL's
    way out, for a moment; here for good: the leader alone exits). While a thread is left, the
    process still reads its stdin, so ``process_gone`` (what the kill -9 benches call the death,
    after which no request may be lost) waits for the last thread; it took the zombie leader for
    the process, and a call that a dying thread of an SDK server took off its stdin counted as
    one it never received."""
    async with await anyio.open_process([sys.executable, "-c", _LEADER_GOES, str(_SYS_EXIT)]) as process:
        assert process.stdin is not None and process.stdout is not None
        with anyio.fail_after(30):
            assert await process.stdout.receive() == b"ready\n"
            while not _zombie(process.pid):
                await anyio.sleep(0.01)
            assert not process_gone(process.pid)
            await process.stdin.send(b"still here\n")
            assert await process.stdout.receive() == b"still here\n"
            await process.stdin.aclose()
            while not process_gone(process.pid):
                await anyio.sleep(0.01)
            assert await process.wait() == 0


async def test_a_request_the_dead_child_never_read_is_not_sent(tmp_path: Path) -> None:
    """A child that reads exactly one request and is killed: that request was in flight
    (ConnectionLost), the one written after it was never read whole (NotDelivered), whether it
    still sat in the pipe or the pipe refused it."""
    script = tmp_path / "server"
    script.write_text(
        f"#!{sys.executable}\nimport os, signal\n"
        "while os.read(0, 1) != b'\\n':\n    pass\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    script.chmod(0o755)
    outcomes: dict[str, BaseException] = {}

    async def request(key: str, rpc: RawRpc) -> None:
        try:
            await rpc.request("tools/call", {"name": key}, anyio.current_time() + 60)
        except (ConnectionLost, NotDelivered) as exc:
            outcomes[key] = exc

    config = ServerConfig(name="x", command=str(script))
    async with open_stdio_child(config) as (child, _lines), anyio.create_task_group() as tg:
        tg.start_soon(request, "read", child.rpc)
        tg.start_soon(request, "unread", child.rpc)
    assert isinstance(outcomes["read"], ConnectionLost)
    assert isinstance(outcomes["unread"], NotDelivered)


async def test_a_stopped_child_is_ended_by_sigterm() -> None:
    """A child stopped by SIGSTOP, which does not read its stdin's end: it is continued after SIGTERM,
    so SIGTERM ends it (and a handler of it would run); it was left to SIGKILL."""
    config = ServerConfig(
        name="x", command=sys.executable, args=("-c", "import time; time.sleep(60)"), stop_grace=0.5
    )
    async with open_stdio_child(config) as (child, _lines):
        os.kill(child.pid, signal.SIGSTOP)
    assert child.returncode == -signal.SIGTERM


async def test_a_child_that_takes_its_input_slowly_is_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    """More than MAX_BACKLOG queued for a child that keeps taking bytes is a burst (a hundred large
    calls at once failed as "not reading its stdin"), not a child that stopped reading; one that
    takes none for STALLED_AFTER (0.3 s here) has, and so has one with MAX_QUEUED queued however it
    reads."""
    monkeypatch.setattr(stdin, "STALLED_AFTER", 0.3)
    monkeypatch.setattr(stdin, "MAX_QUEUED", 2 * stdin.MAX_BACKLOG)
    reader, writer = os.pipe()
    pipe = StdinPipe(writer)
    try:
        pipe.write(b"x" * (stdin.MAX_BACKLOG + 1_000_000))
        for _ in range(8):  # takes a pipe's worth every 0.1 s
            await anyio.sleep(0.1)
            os.read(reader, 65536)
            await anyio.sleep(0.01)  # the pipe's writer refills it
            assert pipe.backlog() > stdin.MAX_BACKLOG and not pipe.not_reading()
        await anyio.sleep(0.5)  # takes nothing more
        assert pipe.not_reading()
        os.read(reader, 65536)
        await anyio.sleep(0.01)
        assert not pipe.not_reading()
        pipe.write(b"x" * stdin.MAX_BACKLOG)
        assert pipe.not_reading()
    finally:
        pipe.close()
        os.close(reader)


async def test_a_server_writing_faster_than_its_lines_are_taken_waits_in_its_write(tmp_path: Path) -> None:
    """A server writes 16 MiB of notifications that nobody takes (its session is busy): the pipe is
    paused once ~PAUSE_BYTES of lines wait, so the server blocks in its write and the daemon holds
    little of it. StreamReader paused only past twice its limit (64 MiB): the daemon took it all
    (a flooding server cost it 64 MiB, and a reply behind the flood waited for all of it)."""
    script = tmp_path / "server"
    script.write_text(
        f"#!{sys.executable}\nimport sys\n"
        'line = b\'{"jsonrpc":"2.0","method":"notifications/message","params":{}}\\n\'\n'
        "for _ in range(16 * 1024 * 1024 // len(line)):\n    sys.stdout.buffer.write(line)\n"
        "sys.stdout.flush()\nsys.stderr.write('all written\\n')\nsys.stderr.flush()\nsys.stdin.read()\n"
    )
    script.chmod(0o755)
    async with open_stdio_child(ServerConfig(name="x", command=str(script), stop_grace=1.0)) as (child, _):
        await anyio.sleep(2)  # the whole 16 MiB goes through a pipe in well under a second
        written = "all written" in child.stderr.tail
        held = len(child.process.stdout._buffer)  # type: ignore[union-attr]
    assert not written
    assert held <= 2 * PAUSE_BYTES


async def test_a_server_gets_the_session_and_network_variables_and_not_the_daemons_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A browser server needs the display, git over ssh the agent, a company network its CA; a token
    the daemon was started with is for no server (its ``env`` passes what it needs)."""
    wanted = {
        "DISPLAY": ":1",
        "WAYLAND_DISPLAY": "wayland-1",
        "SSH_AUTH_SOCK": str(tmp_path / "agent"),
        "NODE_EXTRA_CA_CERTS": str(tmp_path / "ca.pem"),
        "ALL_PROXY": "socks5://127.0.0.1:1080",
    }
    for key, value in {**wanted, "GITHUB_TOKEN": "daemon-secret"}.items():
        monkeypatch.setenv(key, value)
    script = tmp_path / "server"
    script.write_text(f"#!{sys.executable}\nimport json, os\nprint(json.dumps(dict(os.environ)))\n")
    script.chmod(0o755)
    config = ServerConfig(name="x", command=str(script), env={"TZ": "UTC"}, stop_grace=1.0)
    async with open_stdio_child(config) as (_child, lines):
        with anyio.fail_after(10):
            seen = json.loads(await lines.receive())
    assert {key: seen.get(key) for key in wanted} == wanted
    assert seen["TZ"] == "UTC"
    assert "GITHUB_TOKEN" not in seen


_REUSED_LEADER = """
import subprocess, sys, anyio
from mcpd.config.model import ServerConfig
from mcpd.supervisor.stdio import open_stdio_child

async def main() -> None:
    # The server leaves a process in a session of its own (a browser) and exits.
    detach = "setsid sleep 300 </dev/null >/dev/null 2>&1 & exec sleep 0.2"
    config = ServerConfig(name="x", command="/bin/sh", args=("-c", detach), stop_grace=1.0)
    async with open_stdio_child(config) as (child, _lines):
        await child.exited.wait()
        with open("/proc/sys/kernel/ns_last_pid", "w") as file:
            file.write(str(child.pid - 1))
        other = subprocess.Popen(["sleep", "300"], start_new_session=True)
        assert other.pid == child.pid, (other.pid, child.pid)
    print(child.started is not None, other.poll(), flush=True)
    other.kill()

anyio.run(main)
"""


def test_a_leaders_number_given_again_is_not_signalled_at_the_stop(tmp_path: Path) -> None:
    """A server that exited leaving a process in a session of its own: its number, free once it was
    collected, given to another process leading a group of its own (forced here through a pid
    namespace's ``ns_last_pid``; 32768 numbers go round in seconds on a busy machine): the stop
    sends that group nothing (before: SIGTERM to it, then SIGCONT, and SIGKILL after the grace)."""
    unshare = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"]
    if subprocess.run([*unshare, "true"], check=False, capture_output=True).returncode != 0:
        pytest.skip("no user and pid namespaces here")
    script = tmp_path / "reuse.py"
    script.write_text(_REUSED_LEADER)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    argv = [*unshare, sys.executable, str(script)]
    done = subprocess.run(argv, check=False, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["True", "None"]  # still running: no signal reached it


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="leftovers are found in /proc")
async def test_what_a_child_gone_at_once_left_in_a_session_of_its_own_is_ended_at_the_stop() -> None:
    """A child that starts a process in a session of its own and exits at once, often before its
    start time could be read: the stop still ends that process, found by the child's mark (before:
    a child with no start time had no leftovers looked for, and about half of ten such runs left
    their process running)."""
    detach = "setsid sleep 300 </dev/null >/dev/null 2>&1 & exit 0"
    config = ServerConfig(name="x", command="/bin/sh", args=("-c", detach), stop_grace=0.2)
    marks: list[str] = []
    try:
        for _ in range(10):
            async with open_stdio_child(config) as (child, _lines):
                marks.append(child.mark)
            assert leftovers(child.mark) == []
    finally:
        for mark in marks:
            signal_all(leftovers(mark), signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="leftovers are found in /proc")
async def test_a_stop_whose_look_at_proc_stalls_still_ends_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stop is bounded when its look at ``/proc`` for what the child left stalls (a read of the
    environment of one of the user's processes waits on its memory map's lock, held through a page
    fault on a hung network filesystem): the look is given up, the group is ended as ever. Before,
    the shielded stop waited for the look without a bound. The stalled read is stood in for by a
    look that blocks until the test ends (no hung filesystem can be made without root)."""
    release = threading.Event()

    def stalled(mark: str, moved: Callable[[], None]) -> list[tuple[int, int]]:
        release.wait(30)
        return []

    monkeypatch.setattr(stdio, "leftovers", stalled)
    config = ServerConfig(name="x", command="sh", args=("-c", "trap '' TERM; exec sleep 300"), stop_grace=0.2)
    try:
        async with open_stdio_child(config) as (child, _lines):
            with anyio.fail_after(10):  # 2 * 0.2 s of grace, 2 s after SIGKILL, three looks given up
                assert await child.stop(0.2)
            assert child.returncode == -signal.SIGKILL
    finally:
        release.set()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="leftovers are found in /proc")
async def test_a_look_at_proc_that_is_slow_but_moves_is_not_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """A look at ``/proc`` that takes longer than ``SCAN_WAIT`` while it goes on reading processes (200
    servers stopped at once on a loaded machine: the look's thread waits its turns) is waited for,
    and what the child left in a session of its own is ended. Before, any look past ``SCAN_WAIT`` was
    given up as stalled, logged as such, and the process left running."""

    def slow(mark: str, moved: Callable[[], None] = lambda: None) -> list[tuple[int, int]]:
        for _ in range(int(3 * stdio.SCAN_WAIT / 0.1)):
            moved()
            time.sleep(0.1)
        return leftovers(mark, moved)

    monkeypatch.setattr(stdio, "leftovers", slow)
    detach = "setsid sleep 300 </dev/null >/dev/null 2>&1 & exec sleep 300"
    config = ServerConfig(name="x", command="/bin/sh", args=("-c", detach), stop_grace=0.2)
    mark = ""
    try:
        with structlog.testing.capture_logs() as logs:
            async with open_stdio_child(config) as (child, _lines):
                mark = child.mark
                with anyio.fail_after(10):
                    while not leftovers(mark):
                        await anyio.sleep(0.05)
        assert leftovers(mark) == []
        assert not [entry for entry in logs if entry["event"] == "server.leftovers_scan_stalled"]
    finally:
        signal_all(leftovers(mark), signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="leftovers are found in /proc")
async def test_stops_start_no_look_while_one_at_proc_stays_stalled(monkeypatch: pytest.MonkeyPatch) -> None:
    """While a look at ``/proc`` that was given up is still stalled, later stops start no look of
    their own: each would stall on the same process's memory map (a look reads every environment)
    and leave one more thread stuck for as long as the filesystem hangs. Before, each look of each
    stop (three of a stop that reached SIGKILL) left a thread, without bound for a server restarting
    in a loop, and waited its ``SCAN_WAIT``. Once the stalled look is back, stops look again."""
    release = threading.Event()
    entered: list[str] = []

    def stalled(mark: str, moved: Callable[[], None]) -> list[tuple[int, int]]:
        entered.append(mark)
        release.wait(30)
        return []

    monkeypatch.setattr(stdio, "leftovers", stalled)
    config = ServerConfig(name="x", command="sh", args=("-c", "trap '' TERM; exec sleep 300"), stop_grace=0.2)
    try:
        for _ in range(3):
            async with open_stdio_child(config) as (child, _lines):
                with anyio.fail_after(10):
                    assert await child.stop(0.2)
                assert child.returncode == -signal.SIGKILL
        assert len(entered) == 1
    finally:
        release.set()
    # The stalled look is back (its thread ends): a stop looks again, within a few.
    with anyio.fail_after(10):
        while len(entered) == 1:
            async with open_stdio_child(config) as (child, _lines):
                pass
