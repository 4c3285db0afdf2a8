"""A daemon stays reachable at its socket path: removed files are made again, a second daemon never
serves beside it (``mcpd.daemon.socket_guard``)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket
import stat
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from mcpd.client.aio import connect
from mcpd.daemon.socket_guard import guard_socket
from mcpd.errors import DaemonNotRunning
from mcpd.ipc.endpoint import Claim, lock_path, open_listener
from mcpd.supervisor.orphans import SUFFIX
from mcpd.testing import fullserver_toml
from mcpd.testing.daemon import DaemonProcess, running_daemon

pytestmark = pytest.mark.anyio

INTERVAL = 2.0
"""The daemon's default ``socket_check_interval``: where a test's outcome depends on what happens
between two looks (a second daemon starting, a client connecting), it keeps the daemon's timing."""
QUICK = 0.2
"""A shorter ``socket_check_interval`` for tests that only wait for looks (whatever their number)."""
RESTORED_WITHIN = 2 * INTERVAL + 5


def quick_looks(servers: str) -> str:
    """A config of ``servers`` whose daemon looks at its socket path every ``QUICK`` seconds."""
    return f"[daemon]\nsocket_check_interval = {QUICK}\n" + servers


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    # Unix socket paths are short: a directory of its own under /tmp, whose child the tests remove.
    top = Path(tempfile.mkdtemp(prefix="mcpd-guard-", dir="/tmp"))
    yield top / "run"
    shutil.rmtree(top, ignore_errors=True)


async def daemon_pid(socket: Path) -> int:
    async with connect(socket, name="guard-test") as client:
        assert client.hello_result is not None
        return client.hello_result.pid


async def answering_pid(socket: Path, timeout: float) -> int:
    """The pid of the daemon answering on ``socket``, waiting for one to answer."""
    with anyio.fail_after(timeout):
        while True:
            try:
                return await daemon_pid(socket)
            except DaemonNotRunning:
                await anyio.sleep(0.1)


async def test_a_removed_socket_file_is_bound_again(tmp_path: Path, socket_dir: Path) -> None:
    """The socket file deleted under a running daemon: new clients reach the same daemon again within a
    couple of seconds, and a client connected all along is not disturbed."""
    config = tmp_path / "config.toml"
    config.write_text(fullserver_toml("fx"))
    socket = socket_dir / "mcpd.sock"
    async with running_daemon(config, socket=socket) as daemon, connect(socket, name="old") as old:
        socket.unlink()
        with pytest.raises(DaemonNotRunning):
            await daemon_pid(socket)
        event = await daemon.wait_for("daemon.socket_restored", timeout=RESTORED_WITHIN)
        assert event["reason"] == "the socket file was removed or replaced"
        assert await daemon_pid(socket) == daemon.process.pid
        assert len(await old.status()) == 1  # the connection made before the removal still works
        assert (socket.stat().st_mode & 0o777) == 0o600


@asynccontextmanager
async def ledgered_daemon(
    tmp_path: Path, socket_dir: Path
) -> AsyncIterator[tuple[DaemonProcess, Path, Path]]:
    """A daemon on ``socket_dir/mcpd.sock`` with one server, looking at its path often; its config
    and its children's ledger, which it has written."""
    config = tmp_path / "config.toml"
    config.write_text(quick_looks(fullserver_toml("fx")))
    socket = socket_dir / "mcpd.sock"
    ledger = socket.with_name(socket.name + SUFFIX)
    async with running_daemon(config, socket=socket) as daemon:
        assert ledger.is_file()
        yield daemon, config, ledger


async def written_again(ledger: Path) -> None:
    """Wait for the ledger to be back: its task writes it in a thread, a moment after the look."""
    with anyio.fail_after(RESTORED_WITHIN):
        while not ledger.is_file():
            await anyio.sleep(0.02)


async def test_a_removed_directory_is_made_again(tmp_path: Path, socket_dir: Path) -> None:
    """The whole socket directory deleted (a logout emptying the runtime dir): the daemon makes it again,
    takes a new lock, binds a new socket, writes its children's ledger again (else a kill -9 then
    would leave what they started running); a second daemon then finds the path taken and exits 4."""
    async with ledgered_daemon(tmp_path, socket_dir) as (first, config, ledger):
        socket = first.socket
        shutil.rmtree(socket_dir)
        await first.wait_for("daemon.socket_restored", timeout=RESTORED_WITHIN)
        assert await daemon_pid(socket) == first.process.pid
        assert (socket_dir.stat().st_mode & 0o777) == 0o700
        await written_again(ledger)
        async with running_daemon(config, socket=socket, wait_ready=False) as second:
            assert await second.wait_exit() == 4
            await second.wait_for("daemon.socket_unavailable")
        assert await daemon_pid(socket) == first.process.pid


async def test_a_cleaner_of_plain_files_has_the_ledger_rewritten(tmp_path: Path, socket_dir: Path) -> None:
    """The lock file and the ledger removed, the socket left (a temp cleaner that skips sockets, as
    tmpwatch does by default): the daemon takes the lock again and writes its children's ledger
    again, though it binds no new socket (else a kill -9 then would leave what they started running)."""
    async with ledgered_daemon(tmp_path, socket_dir) as (daemon, _config, ledger):
        lock_path(daemon.socket).unlink()
        ledger.unlink()
        event = await daemon.wait_for("daemon.socket_restored", timeout=RESTORED_WITHIN)
        assert event["reason"] == "the lock file was removed or replaced"
        await written_again(ledger)


async def test_a_ledger_removed_alone_is_written_again(tmp_path: Path, socket_dir: Path) -> None:
    """The ledger removed, lock and socket left (a hand, a cleaner of one pattern): the daemon
    writes it again at its next look, and a kill -9 then still lets the next daemon find what its
    children started. Before, it was written again only at the next spawn or stop."""
    async with ledgered_daemon(tmp_path, socket_dir) as (daemon, _config, ledger):
        before = json.loads(ledger.read_text())
        ledger.unlink()
        await written_again(ledger)
        assert json.loads(ledger.read_text()) == before
        assert daemon.process.returncode is None


async def test_one_daemon_serves_when_a_second_starts_in_the_gap(tmp_path: Path, socket_dir: Path) -> None:
    """The directory deleted and a second daemon started at once (a client's autostart): whichever of the
    two holds the path when the first looks again serves it; the other exits with status 4, its
    servers stopped. Never two daemons, each with its own copy of every server."""
    config = tmp_path / "config.toml"
    config.write_text(fullserver_toml("fx"))
    socket = socket_dir / "mcpd.sock"
    async with running_daemon(config, socket=socket) as first:
        shutil.rmtree(socket_dir)
        async with running_daemon(config, socket=socket, wait_ready=False) as second:
            exited = await first_to_exit(first, second, timeout=RESTORED_WITHIN + 20)
            survivor = second if exited is first else first
            assert await exited.wait_exit() == 4
            if exited is first:
                await first.wait_for("daemon.displaced")
                await first.wait_for("daemon.stopped")
            assert survivor.process.returncode is None
            assert await answering_pid(socket, timeout=RESTORED_WITHIN) == survivor.process.pid


async def first_to_exit(*daemons: DaemonProcess, timeout: float) -> DaemonProcess:
    with anyio.fail_after(timeout):
        while True:
            for daemon in daemons:
                if daemon.process.returncode is not None:
                    return daemon
            await anyio.sleep(0.05)


async def test_a_file_in_place_of_the_directory_is_waited_out(tmp_path: Path, socket_dir: Path) -> None:
    """The socket directory replaced by a file (ENOTDIR on every look): said once, the daemon serves
    its connections on, and binds again once the file is gone (it used to die of NotADirectoryError)."""
    config = tmp_path / "config.toml"
    config.write_text(quick_looks(fullserver_toml("fx")))
    socket = socket_dir / "mcpd.sock"
    async with running_daemon(config, socket=socket) as daemon, connect(socket, name="old") as old:
        shutil.rmtree(socket_dir)
        socket_dir.write_text("not a directory\n")
        lost = await daemon.wait_for("daemon.socket_lost", timeout=RESTORED_WITHIN)
        assert "not a directory" in lost["error"]
        await anyio.sleep(2 * QUICK)  # more looks, the same trouble: not said again
        assert [e["event"] for e in daemon.events].count("daemon.socket_lost") == 1
        assert len(await old.status()) == 1
        socket_dir.unlink()
        await daemon.wait_for("daemon.socket_restored", timeout=RESTORED_WITHIN)
        assert await daemon_pid(socket) == daemon.process.pid
    assert daemon.process.returncode == 0


async def test_an_unsearchable_directory_is_waited_out(tmp_path: Path, socket_dir: Path) -> None:
    """The socket directory made unsearchable (chmod 000, EACCES on every look): said once, the daemon
    serves its connections on and stops cleanly; with the mode back, the path is its own again."""
    wrapper: list[str] = []
    if os.geteuid() == 0:  # root ignores modes unless it gives up the capabilities that let it
        if shutil.which("setpriv") is None:
            pytest.skip("needs setpriv to run without root's file-permission override")
        wrapper = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner", "--"]
    config = tmp_path / "config.toml"
    config.write_text(quick_looks(fullserver_toml("fx")))
    socket = socket_dir / "mcpd.sock"
    async with running_daemon(config, socket=socket, wrapper=wrapper) as daemon:
        async with connect(socket, name="old") as old:
            socket_dir.chmod(0)
            try:
                lost = await daemon.wait_for("daemon.socket_lost", timeout=RESTORED_WITHIN)
                assert lost["reason"] == "the socket directory cannot be looked into"
                await anyio.sleep(2 * QUICK)
                assert [e["event"] for e in daemon.events].count("daemon.socket_lost") == 1
                assert len(await old.status()) == 1
            finally:
                socket_dir.chmod(0o700)
            await daemon.wait_for("daemon.socket_restored", timeout=RESTORED_WITHIN)
            assert await daemon_pid(socket) == daemon.process.pid
        socket_dir.chmod(0)  # and a daemon stopped meanwhile stops cleanly
        try:
            daemon.signal(signal.SIGTERM)
            assert await daemon.wait_exit() == 0
        finally:
            socket_dir.chmod(0o700)
    assert not daemon.stderr_text


class Unsearchable(Claim):
    """A claim whose directory cannot be looked into, each look failing on the socket or on the lock
    by turns: as when ``chmod 000`` lands between the two ``lstat`` calls of a look."""

    looks = 0

    def lost(self) -> str | None:
        self.looks += 1
        name = self.path if self.looks % 2 else lock_path(self.path)
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(name))


async def test_the_same_trouble_is_said_once_whichever_file_a_look_fails_on(socket_dir: Path) -> None:
    """Looks that fail alike but name the lock or the socket are one trouble, said once (the file
    named was part of what was compared, so a look that began before a chmod said it twice)."""
    claim = Unsearchable(socket_dir / "mcpd.sock")
    try:
        with capture_logs() as logs, anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(guard_socket, claim, lambda _: None, lambda: None, 0.01)
                while claim.looks < 4:
                    await anyio.sleep(0.01)
                tg.cancel_scope.cancel()
    finally:
        claim.release()
    assert [entry["event"] for entry in logs] == ["daemon.socket_lost"], logs


async def test_a_displaced_daemon_leaves_the_ledger_to_the_one_that_took_its_path(
    tmp_path: Path, socket_dir: Path
) -> None:
    """The first daemon finds another at its path (it was stopped while the directory was emptied
    and the second started): it stops its servers, and the ledger of children's sessions beside the
    socket (``orphans``) stays the second's. Before, each server stopped rewrote it as the first's
    and the last removed it, so a kill -9 of the second left its servers' grandchildren for ever."""
    config = tmp_path / "config.toml"
    config.write_text(fullserver_toml("fx"))
    socket = socket_dir / "mcpd.sock"
    ledger = socket.with_name(socket.name + ".groups")
    async with running_daemon(config, socket=socket) as first:
        first.signal(signal.SIGSTOP)
        try:
            shutil.rmtree(socket_dir)
            async with running_daemon(config, socket=socket) as second:
                assert json.loads(ledger.read_text())["daemon"] == second.process.pid
                first.signal(signal.SIGCONT)
                assert await first.wait_exit() == 4
                await first.wait_for("daemon.displaced")
                assert json.loads(ledger.read_text())["daemon"] == second.process.pid
        finally:
            if first.process.returncode is None:
                first.signal(signal.SIGCONT)


@pytest.mark.parametrize("room", [True, False], ids=["renamed-into-place", "no-room-bound-in-place"])
def test_a_listener_appears_at_its_path_only_listening(room: bool) -> None:
    """The socket is bound beside its path and renamed onto it once it listens, replacing a stale
    socket there, and leaves nothing beside it; a path with no room for the longer name is bound in
    place. Before, the path existed between bind and listen, and a client that found it then was
    refused ("no mcpd daemon is listening": a test starting a daemon hit it in CI)."""
    directory = Path(tempfile.mkdtemp(prefix="mcpd-", dir="/tmp"))
    try:
        name = "s.sock" if room else "s" * (104 - len(os.fsencode(directory)) - 2)
        path = directory / name
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(str(path))
        stale.close()  # a socket file nothing listens on: a daemon killed with SIGKILL left it
        listener = open_listener(path)
        try:
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(str(path))
            assert sorted(os.listdir(directory)) == [name]
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        finally:
            listener.close()
    finally:
        shutil.rmtree(directory)
