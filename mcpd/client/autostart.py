"""Start a daemon in the background when none is listening, safely when many try at once.

Starters take an exclusive ``flock`` on ``<socket>.start`` for the check-then-spawn step,
so concurrent starters queue and the later ones find the daemon the first one started.
The daemon's own lock on the socket path is the final guarantee: even a starter that
got past this lock cannot bring up a second daemon on the same socket.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from typing import TYPE_CHECKING

from mcpd.client import _wire
from mcpd.client.channel import open_channel
from mcpd.errors import DaemonNotRunning
from mcpd.ipc.endpoint import prepare_directory

if TYPE_CHECKING:
    from pathlib import Path

POLL = 0.05


def _reachable(path: str | Path | None) -> bool:
    try:
        open_channel(path, mode=None, name="mcpd-autostart", timeout=5).close()
    except DaemonNotRunning:
        return False
    return True


def ensure_daemon(
    socket_path: str | Path | None = None, *, config: str | Path | None = None, timeout: float = 60.0
) -> bool:
    """Make sure a daemon listens on the socket; returns True if this call started it.

    The started daemon runs in its own session (it outlives the caller) and logs to
    ``mcpd.log`` beside the socket. Raises ``DaemonNotRunning`` if it does not come up
    within ``timeout`` seconds, naming that log.
    """
    if _reachable(socket_path):
        return False
    path = _wire.resolve_socket(socket_path)
    prepare_directory(path)
    log_path = path.with_name("mcpd.log")
    start_lock = path.with_name(path.name + ".start")
    lock_fd = os.open(start_lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        if _reachable(path):
            return False
        # Imported here: a bridge that finds its daemon running never pays for subprocess.
        import subprocess  # noqa: PLC0415

        argv = [sys.executable, "-m", "mcpd", "serve", "--socket", str(path), "--log-format", "json"]
        if config is not None:
            argv += ["--config", str(config)]
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _reachable(path):
                return True
            if process.poll() is not None and not _reachable(path):
                break
            time.sleep(POLL)
        raise DaemonNotRunning(
            f"started `mcpd serve` on {path} but it did not come up; see {log_path}",
            {"socket": str(path), "log": str(log_path)},
        )
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(lock_fd, fcntl.LOCK_UN)
        os.close(lock_fd)
