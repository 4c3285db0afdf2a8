"""The ledger of the daemon's children's sessions (``mcpd.supervisor.orphans``), on real files and
processes; the reaping itself is end to end, here and in ``test_daemon`` (it needs a daemon that
started after the processes it ends)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import NamedTuple

import anyio
import pytest
from anyio.abc import Process
from structlog.testing import capture_logs

from mcpd.client.aio import connect
from mcpd.config.model import ServerConfig
from mcpd.ipc.endpoint import prepare_directory
from mcpd.supervisor import orphans
from mcpd.supervisor.orphans import MARK, SUFFIX, open_ledger, open_run_ledger, start_of
from mcpd.supervisor.stdio import open_stdio_child
from mcpd.testing import fixture_toml, fullserver_toml, open_quiet, process_gone, rss_mib, run_cli
from mcpd.testing.daemon import running_daemon

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the ledger reads /proc (Linux only)"),
]


async def until(condition: Callable[[], bool], timeout: float = 10) -> None:
    """Wait for ``condition`` (what the ledger's task writes, in a thread, at its own pace)."""
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.01)


async def test_an_unreadable_ledger_is_said_and_replaced(tmp_path: Path) -> None:
    """A ledger cut short (a full disk, a hand) does not keep the daemon from starting: it is said
    (`supervisor.ledger_unreadable`), removed, and ignored; the new daemon's names its child's
    session once `add` is back, and is removed once the child is stopped."""
    socket = tmp_path / "mcpd.sock"
    path = tmp_path / "mcpd.sock.groups"
    path.write_bytes(b'{"boot": "x", "daemon": ')
    child = await open_quiet(["sleep", "300"], start_new_session=True)
    try:
        with capture_logs() as logs:
            async with open_ledger(socket, interval=10) as ledger:
                assert ledger is not None
                assert [(e["event"], e["path"]) for e in logs] == [
                    ("supervisor.ledger_unreadable", str(path))
                ]
                start = start_of(child.pid)
                assert start is not None and not path.exists()
                await ledger.add(child.pid, start)
                record = json.loads(path.read_text())
                assert (record["daemon"], record["groups"]) == (os.getpid(), [[child.pid, start]])
                ledger.discard(child.pid, start)
                await until(lambda: not path.exists())
    finally:
        child.send_signal(signal.SIGKILL)
        with anyio.move_on_after(5):
            await child.wait()


@contextlib.asynccontextmanager
async def sleeping_sessions(count: int) -> AsyncIterator[list[tuple[int, int]]]:
    """``count`` processes of their own sessions, as (pid, start time) for a ledger; killed at the end."""
    children = [await open_quiet(["sleep", "300"], start_new_session=True) for _ in range(count)]
    try:
        starts = [start_of(child.pid) for child in children]
        assert None not in starts
        yield [(child.pid, start) for child, start in zip(children, starts, strict=True) if start is not None]
    finally:
        for child in children:
            child.send_signal(signal.SIGKILL)
            with anyio.move_on_after(5):
                await child.wait()


async def test_a_write_that_failed_is_made_at_the_next_look(tmp_path: Path) -> None:
    """A write of the ledger that fails (a full runtime directory; here a directory where its
    temporary file goes) is said, and made at the next look once it can be: the file then names the
    child spawned meanwhile, and is removed at the end. Before, the failed write left the daemon
    without the identity of the file it had written before, which it then took for another
    daemon's: never written again (a kill -9 left that child's leftovers running) nor removed."""
    socket = tmp_path / "mcpd.sock"
    path = tmp_path / "mcpd.sock.groups"
    temp = tmp_path / "mcpd.sock.groups.tmp"
    async with sleeping_sessions(2) as (first, second):
        with capture_logs() as logs:
            async with open_ledger(socket, interval=0.05) as ledger:
                assert ledger is not None
                await ledger.add(*first)
                assert json.loads(path.read_text())["groups"] == [list(first)]
                temp.mkdir()
                await ledger.add(*second)
                assert [e["event"] for e in logs] == ["supervisor.ledger_unwritable"]
                temp.rmdir()
                wanted = [list(first), list(second)]
                await until(lambda: json.loads(path.read_text())["groups"] == wanted)
                ledger.discard(*first)
                ledger.discard(*second)
            assert not path.exists()


async def test_another_daemons_ledger_given_our_files_inode_number_is_left_alone(tmp_path: Path) -> None:
    """A daemon that took over the socket path removes this one's ledger and writes its own, which
    ext4 can give the inode number just freed: the same (device, inode) as the file this daemon
    wrote. Its next change must leave that file alone all the same (it names the other daemon), or
    the other daemon's children would be unknown after a kill -9 of it, and that daemon, finding a
    file it did not write, would never write its own again. (The file is written in place here: the
    same identity on any filesystem.)"""
    socket = tmp_path / "mcpd.sock"
    path = tmp_path / "mcpd.sock.groups"
    async with sleeping_sessions(2) as (first, second):
        async with open_ledger(socket, interval=0.05) as ledger:
            assert ledger is not None
            await ledger.add(*first)
            inode = path.stat().st_ino
            theirs = {**json.loads(path.read_text()), "daemon": second[0], "daemon_start": second[1]}
            path.write_text(json.dumps(theirs))
            assert path.stat().st_ino == inode
            await ledger.add(*second)  # back once its write was made (or not)
            assert json.loads(path.read_text()) == theirs
            ledger.discard(*first)
            ledger.discard(*second)
        assert json.loads(path.read_text()) == theirs


@pytest.mark.parametrize("name", ["mcpd.sock.groups", "mcpd.sock.groups.tmp"])
async def test_a_fifo_in_place_of_the_ledger_does_not_hold_the_daemon_up(tmp_path: Path, name: str) -> None:
    """A FIFO where the ledger or its temporary file goes (as for the lock file): the daemon starts
    and runs its server. Before, opening the ledger waited for a writer for ever (the daemon never
    started), and writing the temporary file for a reader, on the event loop at the first spawn."""
    path = tmp_path / "config.toml"
    path.write_text(fixture_toml("echo"))
    socket = Path(tempfile.mkdtemp(prefix="mcpd-", dir="/tmp")) / "mcpd.sock"
    os.mkfifo(socket.with_name(name))
    try:
        async with running_daemon(path, socket=socket, wait_ready=False) as daemon:
            ready = await daemon.wait_for("daemon.ready", timeout=20)
            assert ready["running"] == 1
    finally:
        shutil.rmtree(socket.parent, ignore_errors=True)


def session_of(sid: int) -> list[int]:
    """The processes running (zombies aside) in session ``sid``."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{entry.name}/stat").read_text().rpartition(")")[2].split()
                if int(fields[3]) == sid and fields[0] not in ("Z", "X"):
                    found.append(int(entry.name))
    return found


async def test_a_job_in_a_group_of_its_own_is_ended_at_the_stop(tmp_path: Path) -> None:
    """A background job of a shell with job control (`set -m`) leaves the server's process group but
    not its session: the stop ends it too, with the group's steps (stdin closed, grace, SIGTERM),
    and only then forgets the session in the ledger. Before, the signals went to the group only,
    the job ran on, and the ledger dropped its session all the same."""
    job = tmp_path / "job.pid"
    script = f"set -m; sleep 300 & echo $! > {job}; exec sleep 200"
    config = ServerConfig(name="jobs", command="bash", args=("-c", script), stop_grace=0.2)
    socket = tmp_path / "mcpd.sock"
    async with open_ledger(socket, interval=10) as ledger:
        assert ledger is not None
        async with open_stdio_child(config, groups=ledger) as (child, _lines):
            await until(lambda: job.is_file() and job.read_text().endswith("\n"))
            pid = int(job.read_text())
            pidfd = os.pidfd_open(pid)
            assert os.getpgid(pid) != child.pid and os.getsid(pid) == child.pid
        try:
            assert session_of(child.pid) == []
            await until(lambda: not socket.with_name(socket.name + SUFFIX).exists())
        finally:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.close(pidfd)


async def test_a_process_in_a_session_of_its_own_is_ended_at_the_stop(tmp_path: Path) -> None:
    """What the server started in a session of its own (`setsid`: a browser that Puppeteer or
    Playwright launched, detached) is ended by the stop too, by the mark it inherited; a process of
    another child's (another server's helper, detached alike) is left alone. Before, the stop looked
    into the child's own session only, and the helper ran on after every stop or restart."""
    helpers = {name: tmp_path / f"{name}.pid" for name in ("a", "b")}

    def detaching(name: str) -> ServerConfig:
        script = f"setsid sleep 300 & echo $! > {helpers[name]}; exec sleep 200"
        return ServerConfig(name=name, command="sh", args=("-c", script), stop_grace=0.2)

    async with (
        open_stdio_child(detaching("b")) as (other, _),
        open_stdio_child(detaching("a")) as (child, _),
    ):
        await until(lambda: all(p.is_file() and p.read_text().endswith("\n") for p in helpers.values()))
        pids = {name: int(p.read_text()) for name, p in helpers.items()}
        pidfds = [os.pidfd_open(pid) for pid in pids.values()]
        try:
            await until(lambda: all(os.getsid(pid) == pid for pid in pids.values()))  # once setsid ran
            await child.stop(0.2)
            assert process_gone(pids["a"]) and not process_gone(pids["b"])
            await other.stop(0.2)
            assert process_gone(pids["b"])
        finally:
            for pidfd in pidfds:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                os.close(pidfd)


def dead_daemons_ledger(socket: Path, leader: int, mark: str) -> None:
    """The ledger a killed daemon would have left at ``socket``, naming ``leader``'s session."""
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    start = start_of(leader)
    assert start is not None
    # The daemon: a number no process has with that start time (1 tick after boot).
    record = {"boot": boot, "daemon": leader, "daemon_start": 1, "mark": mark, "groups": [[leader, start]]}
    socket.with_name(socket.name + SUFFIX).write_text(json.dumps(record))


@contextlib.asynccontextmanager
async def left_session(argv: list[str], mark: str) -> AsyncIterator[Process]:
    """``argv`` leading a session of its own, marked as a killed daemon's child; all of it is
    killed at the end (its group, led by a process of ours, whatever the reaping left)."""
    leader = await open_quiet(argv, start_new_session=True, env={**os.environ, MARK: mark})
    try:
        yield leader
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(leader.pid, signal.SIGKILL)
        with anyio.move_on_after(5):
            await leader.wait()


async def test_the_next_daemon_waits_for_what_it_killed_to_be_gone(tmp_path: Path) -> None:
    """What a killed daemon left is gone (its memory, its ports given back) by the time the next
    daemon says it reaped it and goes on to spawn its servers: 256 MiB take ~50 ms to exit after
    the SIGKILL. Before, the new server could start while a port was still held, fail, back off."""
    mark = "1" * 32
    # Every page touched, so that each is given back at the exit.
    script = (
        "import time\nb = bytearray(256 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\ntime.sleep(300)"
    )
    socket = Path(tempfile.mkdtemp(prefix="mcpd-", dir="/tmp")) / "mcpd.sock"
    config = tmp_path / "config.toml"
    config.write_text(fixture_toml("echo"))
    try:
        async with left_session([sys.executable, "-c", script], mark) as leftover:
            await until(lambda: (rss_mib(leftover.pid) if not process_gone(leftover.pid) else 0) > 250)
            dead_daemons_ledger(socket, leftover.pid, mark)
            async with running_daemon(config, socket=socket, wait_ready=False) as daemon:
                reaped = await daemon.wait_for("supervisor.reaped")
                assert process_gone(leftover.pid)
                assert reaped["processes"] == 1
    finally:
        shutil.rmtree(socket.parent, ignore_errors=True)


async def test_what_forks_while_the_next_daemon_starts_is_reaped_too(tmp_path: Path) -> None:
    """A killed daemon's leftover that goes on starting processes (a shell loop) while the next
    daemon starts up: the reaping leaves nothing of its session running. Before, what it started
    after the new daemon did was spared (a process started after the daemon could not be a killed
    one's, the reasoning went), and ran on for good."""
    mark = "2" * 32
    socket = Path(tempfile.mkdtemp(prefix="mcpd-", dir="/tmp")) / "mcpd.sock"
    config = tmp_path / "config.toml"
    config.write_text(fixture_toml("echo"))
    try:
        async with left_session(["sh", "-c", "while :; do sleep 300 & sleep 0.02; done"], mark) as loop:
            dead_daemons_ledger(socket, loop.pid, mark)
            async with running_daemon(config, socket=socket, wait_ready=False) as daemon:
                await daemon.wait_for("supervisor.reaped")
                assert session_of(loop.pid) == []
    finally:
        shutil.rmtree(socket.parent, ignore_errors=True)


async def test_the_next_daemon_spares_its_own_ancestors(tmp_path: Path) -> None:
    """A daemon started from a killed daemon's server through a wrapper that stays (``sh -c`` with
    more to do, ``uv run``) carries on in that server's session: its reap ends the rest of the
    session, never the wrapper it runs under (before: the shell was SIGKILLed under it)."""
    mark = "3" * 32
    socket = Path(tempfile.mkdtemp(prefix="mcpd-", dir="/tmp")) / "mcpd.sock"
    config = tmp_path / "config.toml"
    config.write_text(fixture_toml("echo"))
    serve = f"{sys.executable} -m mcpd serve --config {config} --socket {socket}"
    try:
        async with left_session(["sh", "-c", f"sleep 300 & {serve}; sleep 300"], mark) as shell:
            dead_daemons_ledger(socket, shell.pid, mark)
            await until(socket.exists, timeout=30)
            async with connect(socket, name="test") as client:
                await client.status()  # served: the reap is over
            assert not process_gone(shell.pid)
            assert len(session_of(shell.pid)) == 2  # the shell and the daemon: the sleep was reaped
    finally:
        shutil.rmtree(socket.parent, ignore_errors=True)


async def test_the_ledger_names_what_runs_after_restarts_at_once(tmp_path: Path) -> None:
    """Servers restarted all at once, again and again: each spawn and stop changes the ledger while
    earlier writes may still be under way in their thread; the file ends up naming exactly the
    sessions that run (no earlier state written over a later one), and none once they are stopped."""
    config = tmp_path / "config.toml"
    config.write_text("".join(fullserver_toml(f"s{i}") for i in range(3)))
    socket = Path(tempfile.mkdtemp(prefix="mcpd-", dir="/tmp")) / "mcpd.sock"
    ledger = socket.with_name(socket.name + SUFFIX)
    try:
        async with running_daemon(config, socket=socket) as daemon, connect(daemon.socket) as client:

            async def restart(name: str) -> None:
                await client.restart(name)

            async def stop(name: str) -> None:
                await client.stop(name)

            for _ in range(3):
                async with anyio.create_task_group() as tg:
                    for i in range(3):
                        tg.start_soon(restart, f"s{i}")
            pids = {s.pid for s in await client.status()}
            assert None not in pids and len(pids) == 3
            await until(lambda: {sid for sid, _ in json.loads(ledger.read_text())["groups"]} == pids)
            async with anyio.create_task_group() as tg:
                for i in range(3):
                    tg.start_soon(stop, f"s{i}")
            await until(lambda: not ledger.exists())
    finally:
        shutil.rmtree(socket.parent, ignore_errors=True)


class HungCheck(NamedTuple):
    process: Process
    job: int
    """The pid of the background child of the check's server (a ``sleep`` that never reads stdin)."""
    env: dict[str, str]
    """The environment of a check, whose runtime directory is ``ledgers``' parent's."""
    ledgers: Path


@contextlib.asynccontextmanager
async def hung_check(tmp_path: Path, launcher: tuple[str, ...] = ()) -> AsyncIterator[HungCheck]:
    """`mcpd check` (started through ``launcher``) waiting for a server that never answers, once the
    check's ledger names it; whatever is left of the check and the server's job is killed at the end."""
    leftover = tmp_path / "sleep.pid"
    script = f"sleep 300 & echo $! > {leftover}; exec sleep 300"
    hung = tmp_path / "hung.toml"
    hung.write_text(
        f'[servers.hung]\ncommand = "sh"\nargs = ["-c", {json.dumps(script)}]\nconnect_timeout = 60\n'
    )
    # As a session's runtime directory is: platformdirs passes over one that others may read.
    (tmp_path / "run").mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    ledgers = tmp_path / "run" / "mcpd" / "checks"
    argv = [*launcher, sys.executable, "-m", "mcpd", "check", "--config", str(hung)]
    check = await open_quiet(argv, env=env)
    pidfds: list[int] = []
    try:
        await until(lambda: leftover.is_file() and leftover.read_text().endswith("\n"))
        job = int(leftover.read_text())
        pidfds.append(os.pidfd_open(job))
        await until(lambda: ledgers.is_dir() and any(ledgers.glob(f"*{SUFFIX}")))
        yield HungCheck(check, job, env, ledgers)
    finally:
        for pidfd in pidfds:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.close(pidfd)
        with contextlib.suppress(ProcessLookupError):
            check.kill()
        with anyio.move_on_after(5):
            await check.wait()


async def test_a_killed_check_leaves_nothing_once_the_next_check_ran(tmp_path: Path) -> None:
    """kill -9 of `mcpd check` while it waits for a server: the server's background child outlives
    it (the parent-death signal reaches the server only), and the next `mcpd check` ends it before
    it starts its own servers, and removes the killed one's ledger. Before, a check kept no ledger
    and the child ran on for good."""
    quick = tmp_path / "quick.toml"
    quick.write_text(fullserver_toml("quick"))
    async with hung_check(tmp_path) as check:
        check.process.kill()
        await check.process.wait()
        assert not process_gone(check.job)
        run = functools.partial(run_cli, "check", "--config", str(quick), env=check.env)
        done = await anyio.to_thread.run_sync(run)
        assert "quick:" in done.stdout, done.stderr
        assert process_gone(check.job)
        assert list(check.ledgers.glob("*")) == []


async def test_the_next_check_removes_the_temporary_ledger_of_a_check_gone(tmp_path: Path) -> None:
    """A check killed while it wrote its ledger (or whose last write failed) leaves
    ``<pid>.groups.tmp``: the next check removes it, and leaves a running check's alone. Before,
    they stayed for good (only ``*.groups`` files were looked at)."""
    ledgers = tmp_path / "checks"
    ledgers.mkdir(mode=0o700)
    gone = await open_quiet(["true"])
    await gone.wait()
    running = await open_quiet(["sleep", "300"])
    try:
        (ledgers / f"{gone.pid}{SUFFIX}.tmp").write_bytes(b'{"boot": ')
        (ledgers / f"{running.pid}{SUFFIX}.tmp").write_bytes(b'{"boot": ')
        async with open_run_ledger(ledgers, interval=10) as ledger:
            assert ledger is not None
        assert [p.name for p in ledgers.iterdir()] == [f"{running.pid}{SUFFIX}.tmp"]
    finally:
        running.send_signal(signal.SIGKILL)
        with anyio.move_on_after(5):
            await running.wait()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
async def test_a_check_ended_by_a_signal_stops_what_its_servers_started(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """SIGTERM or SIGHUP (a closed terminal) of `mcpd check` while it waits for a server: it stops
    its servers as at its end, their background children included, removes its ledger, and exits
    with 128 + the signal's number. Before, Python's default ending left the child running until
    the next check."""
    async with hung_check(tmp_path) as check:
        check.process.send_signal(signum)
        with anyio.fail_after(20):
            assert await check.process.wait() == 128 + signum
        assert process_gone(check.job)
        assert list(check.ledgers.glob("*")) == []


async def test_a_check_signalled_again_while_it_stops_still_stops_what_its_servers_started(
    tmp_path: Path,
) -> None:
    """A closed terminal sends SIGHUP more than once (the tty's hangup to the foreground group, then
    the shell's to its jobs): one that comes while the check stops its servers (the hung one takes
    its grace, 2 s, to end) does not end the check before it has. Before, the first signal closed the
    check's receiver, the second took Python's default action (exit status -1), the job ran on."""
    async with hung_check(tmp_path) as check:
        check.process.send_signal(signal.SIGHUP)
        await anyio.sleep(0.5)
        check.process.send_signal(signal.SIGHUP)
        with anyio.fail_after(20):
            assert await check.process.wait() == 128 + signal.SIGHUP
        assert process_gone(check.job)
        assert list(check.ledgers.glob("*")) == []


@pytest.mark.parametrize("unsafe", ["a symlink", "another user's", "writable by others"])
async def test_a_checks_directory_not_privately_ours_is_not_used(tmp_path: Path, unsafe: str) -> None:
    """The checks' ledgers name what a check kills: in a directory that is a link elsewhere, another
    user's, or one others may write to, a ledger may be anyone's. The check keeps none there (said)
    and reaps nothing from it. Before, it followed the link and killed what a planted ledger named."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    checks = tmp_path / "checks"
    if unsafe == "a symlink":
        checks.symlink_to(real)
    else:
        checks = real
        if unsafe == "another user's":
            if os.getuid() != 0:
                pytest.skip("giving a directory to another user takes root")
            os.chown(real, os.getuid() + 1, -1)
        else:
            real.chmod(0o777)
    mark = "3" * 32
    async with left_session(["sleep", "300"], mark) as leftover:
        dead_daemons_ledger(real / "4242", leftover.pid, mark)
        with capture_logs() as logs:
            async with open_run_ledger(checks, interval=10) as ledger:
                assert ledger is None
        assert [e["event"] for e in logs] == ["supervisor.ledger_unwritable"]
        assert not process_gone(leftover.pid)
        assert (real / f"4242{SUFFIX}").is_file()


async def test_a_check_run_first_leaves_the_daemons_directory_fit_for_its_socket(tmp_path: Path) -> None:
    """`mcpd check` run before any daemon, under a umask that lets the group write (002, the rule with
    a group per user): the runtime directory's `mcpd` that it makes for its ledgers is 0700, as the
    daemon makes it, so that a daemon started later takes its socket there. Before, it was made
    775 and the daemon refused it (writable by group)."""
    (tmp_path / "run").mkdir(mode=0o700)
    checks = tmp_path / "run" / "mcpd" / "checks"
    before = os.umask(0o002)
    try:
        async with open_run_ledger(checks, interval=10) as ledger:
            assert ledger is not None
    finally:
        os.umask(before)
    prepare_directory(checks.parent / "mcpd.sock")  # the daemon's look at its socket's directory
    assert stat.S_IMODE(checks.parent.stat().st_mode) == 0o700


async def test_a_check_started_with_sighup_ignored_runs_on_at_a_sighup(tmp_path: Path) -> None:
    """`nohup mcpd check` (SIGHUP ignored when it starts): a closed terminal does not stop it, as
    the caller asked. Before, the check put its own handler in place of the ignoring, and gave up
    at the first SIGHUP (exit status 129)."""
    ignoring = ("sh", "-c", 'trap "" HUP; exec "$@"', "sh")
    async with hung_check(tmp_path, ignoring) as check:
        check.process.send_signal(signal.SIGHUP)
        # Long enough for a check that gave up to stop its server (a grace of 2 s) and exit.
        with anyio.move_on_after(5):
            await check.process.wait()
        assert check.process.returncode is None
        assert not process_gone(check.job)


async def test_a_child_gone_before_its_start_time_was_read_is_in_the_ledger(tmp_path: Path) -> None:
    """A child that exits at once (a wrapper that put the server in the background), often before
    its start time can be read, is named in the ledger all the same: what it left carries its mark,
    which the next daemon reaps only when the ledger names a session. Before, such a child (about
    half of these runs) was not recorded, and its leftovers outlived a killed daemon for good."""
    socket = Path(tempfile.mkdtemp(prefix="mcpd-", dir="/tmp")) / "mcpd.sock"
    ledger_file = socket.with_name(socket.name + SUFFIX)
    detach = "setsid sleep 300 </dev/null >/dev/null 2>&1 & exit 0"
    config = ServerConfig(name="x", command="/bin/sh", args=("-c", detach), stop_grace=0.2)
    missed: list[int] = []
    try:
        async with open_ledger(socket, interval=60) as ledger:
            for _ in range(10):
                async with open_stdio_child(config, groups=ledger) as (child, _lines):
                    groups = json.loads(ledger_file.read_text())["groups"] if ledger_file.exists() else []
                    if child.pid not in {sid for sid, _ in groups}:
                        missed.append(child.pid)
        assert missed == []
    finally:
        shutil.rmtree(socket.parent, ignore_errors=True)


async def test_a_start_whose_look_at_proc_stalls_goes_on_and_keeps_its_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon's start is bounded when its look for what a killed daemon left stalls (a read of
    the environment of one of the user's processes waits on its memory map's lock, held through a
    page fault on a hung network filesystem): the daemon goes on after ``TAKE_OVER_WAIT``, says so,
    and its own ledger is written (the killed daemon's is removed, as the look does when it ends).
    Before, the start waited for the look without a bound. The stalled read is stood in for by a
    look that blocks until the test ends (no hung filesystem can be made without root)."""
    release = threading.Event()

    def stalled(mark: str, moved: object = None) -> list[tuple[int, int]]:
        release.wait(20)
        return []

    monkeypatch.setattr(orphans, "_members", stalled)
    monkeypatch.setattr(orphans, "TAKE_OVER_WAIT", 0.5, raising=False)  # none before the bound
    socket = Path(tempfile.mkdtemp(prefix="mcpd-", dir="/tmp")) / "mcpd.sock"
    ledger_file = socket.with_name(socket.name + SUFFIX)
    config = ServerConfig(name="x", command="sleep", args=("300",), stop_grace=0.2)
    try:
        async with left_session(["sleep", "300"], "2" * 32) as leftover:
            dead_daemons_ledger(socket, leftover.pid, "2" * 32)
            with capture_logs() as logs, anyio.fail_after(5):
                async with open_ledger(socket, interval=60) as ledger:
                    assert ledger is not None
                    async with open_stdio_child(config, groups=ledger) as (child, _lines):
                        groups = json.loads(ledger_file.read_text())["groups"]
                        assert [sid for sid, _ in groups] == [child.pid]
            assert "supervisor.reap_stalled" in [entry["event"] for entry in logs]
    finally:
        release.set()
        shutil.rmtree(socket.parent, ignore_errors=True)
