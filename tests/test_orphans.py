"""The ledger of the daemon's children's sessions (``mcpd.supervisor.orphans``), on real files and
processes; the reaping itself is end to end, in ``test_daemon`` (it needs a daemon that started
after the processes it ends)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from mcpd.supervisor.orphans import take_over

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
