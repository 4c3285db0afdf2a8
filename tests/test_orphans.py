"""The ledger of the daemon's children's sessions (``mcpd.supervisor.orphans``), on real files and
processes; the reaping itself is end to end, in ``test_daemon`` (it needs a daemon that started
after the processes it ends)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from mcpd.supervisor.orphans import take_over
from mcpd.testing import fixture_toml
from mcpd.testing.daemon import running_daemon

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the ledger reads /proc (Linux only)"),
]


async def test_an_unreadable_ledger_is_said_and_replaced(tmp_path: Path) -> None:
    """A ledger cut short (a full disk, a hand) does not keep the daemon from starting: it is said
    (`supervisor.ledger_unreadable`) and ignored, then replaced by the new daemon's, which names its
    child's session while it runs and is removed once the child is stopped."""
    socket = tmp_path / "mcpd.sock"
    path = tmp_path / "mcpd.sock.groups"
    path.write_bytes(b'{"boot": "x", "daemon": ')
    with capture_logs() as logs:
        ledger = await take_over(socket)
    assert ledger is not None
    assert [(e["event"], e["path"]) for e in logs] == [("supervisor.ledger_unreadable", str(path))]
    child = await anyio.open_process(["sleep", "300"], start_new_session=True)
    try:
        ledger.add(child.pid)
        record = json.loads(path.read_text())
        assert (record["daemon"], [sid for sid, _start in record["groups"]]) == (os.getpid(), [child.pid])
        ledger.discard(child.pid)
        assert not path.exists()
    finally:
        child.send_signal(signal.SIGKILL)
        with anyio.move_on_after(5):
            await child.wait()


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
