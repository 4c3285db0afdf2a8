"""Autostart (``mcpd.client.autostart``) when the files beside the socket are not what it expects: a
clear ``DaemonNotRunning`` naming the path, at once or within the timeout, never a hang."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mcpd.client.autostart import ensure_daemon
from mcpd.errors import DaemonNotRunning
from mcpd.supervisor.orphans import MARK
from mcpd.testing import run_cli


@pytest.fixture
def socket() -> Iterator[Path]:
    # Unix socket paths are short: a directory of its own under /tmp.
    top = Path(tempfile.mkdtemp(prefix="mcpd-autostart-", dir="/tmp"))
    (top / "run").mkdir(mode=0o700)
    yield top / "run" / "mcpd.sock"
    shutil.rmtree(top, ignore_errors=True)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make", [os.mkfifo, os.mkdir], ids=["fifo", "directory"])
def test_a_log_that_is_not_a_plain_file_is_refused(socket: Path, make: Callable[[Path], None]) -> None:
    """A FIFO at ``mcpd.log`` used to hold the starter for ever (opening it waited for a reader), a
    directory to end it with an internal error; both are refused before a daemon is started."""
    log = socket.with_name("mcpd.log")
    make(log)
    with pytest.raises(DaemonNotRunning, match="is not a plain file") as refused:
        ensure_daemon(socket, timeout=10)
    assert refused.value.data["path"] == str(log)
    assert not socket.exists()  # nothing was started
    shown = run_cli("status", "--autostart", "--socket", str(socket), timeout=30)
    assert shown.returncode != 0 and str(log) in shown.stderr
    assert "internal error" not in shown.stderr


@pytest.mark.timeout(60)
def test_a_start_lock_held_elsewhere_is_waited_on_until_the_timeout(socket: Path) -> None:
    """Another process holding ``mcpd.sock.start`` (a hung starter) is waited on for ``timeout``
    seconds, not for ever (the timeout used to start only once the lock was taken)."""
    lock = socket.with_name("mcpd.sock.start")
    holder = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        began = time.monotonic()
        with pytest.raises(DaemonNotRunning, match="held the start lock") as refused:
            ensure_daemon(socket, timeout=2)
        assert 2 <= time.monotonic() - began < 10
        assert refused.value.data["path"] == str(lock)
    finally:
        os.close(holder)
    assert not socket.exists()


@pytest.mark.timeout(60)
def test_a_daemon_started_from_a_servers_process_does_not_carry_that_servers_mark(
    socket: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bridge or an agent that another daemon runs as a server starts its daemon without that
    server's mark: the other daemon ends whatever carries it when it stops the server."""
    monkeypatch.setenv(MARK, "0123456789abcdef0123456789abcdef.7")
    config = socket.parent / "config.toml"
    config.write_text("[daemon]\nusage = false\n")
    assert ensure_daemon(socket, config=config, timeout=30)
    pid = int(socket.with_name(socket.name + ".lock").read_text())
    try:
        environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert not [entry for entry in environment if entry.startswith(MARK.encode() + b"=")]
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_reaped(pid, 20)


def wait_reaped(pid: int, timeout: float) -> bool:
    """Whether ``pid`` is gone for good (not even a zombie) within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)  # a zombie's reaping: nothing to wait on
    return True


@pytest.mark.timeout(60)
@pytest.mark.skipif(not Path("/proc/self").exists(), reason="looks at /proc")
def test_a_started_daemon_that_dies_leaves_no_zombie_under_its_starter(socket: Path) -> None:
    """A daemon that a long-lived starter (a bridge) started is killed: its exit status is collected
    at once. Before, it stayed a zombie under the starter until the starter happened to start another
    daemon, for good when a service manager or a person started the next one."""
    config = socket.parent / "config.toml"
    config.write_text("[daemon]\nusage = false\n")
    assert ensure_daemon(socket, config=config, timeout=30)
    pid = int(socket.with_name(socket.name + ".lock").read_text())
    os.kill(pid, signal.SIGKILL)
    assert wait_reaped(pid, 5), Path(f"/proc/{pid}/stat").read_text()
