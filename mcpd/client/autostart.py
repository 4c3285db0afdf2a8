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
import stat
import sys
import time
from typing import TYPE_CHECKING

from mcpd.client import _wire
from mcpd.client.channel import open_channel
from mcpd.errors import DaemonNotRunning
from mcpd.ipc.endpoint import prepare_directory

if TYPE_CHECKING:
    import subprocess
    from pathlib import Path

POLL = 0.05
LOOK_WHILE_LOCKED = 1.0
"""Seconds between two looks for a daemon while another starter holds the start lock."""


def _reachable(path: str | Path | None) -> bool:
    try:
        open_channel(path, mode=None, name="mcpd-autostart", timeout=5).close()
    except DaemonNotRunning:
        return False
    return True


_SERVER_MARK = "MCPD_DAEMON_MARK"
"""``mcpd.supervisor.orphans.MARK``, not imported: a bridge must not load the supervisor."""


def _daemon_environment() -> dict[str, str]:
    """Ours, less the mark of the daemon whose server we may be (a bridge a server runs, an agent
    under one): a daemon carrying it would be ended with that server, as what the server left."""
    return {key: value for key, value in os.environ.items() if key != _SERVER_MARK}


def ensure_daemon(
    socket_path: str | Path | None = None, *, config: str | Path | None = None, timeout: float = 60.0
) -> bool:
    """Make sure a daemon listens on the socket; returns True if this call started it.

    The started daemon runs in its own session (it outlives the caller) and logs to
    ``mcpd.log`` beside the socket. Raises ``DaemonNotRunning`` naming the path at fault if
    there is none within ``timeout`` seconds (waiting for another starter included), or if
    the start lock or the log is not a plain file that can be opened.
    """
    if _reachable(socket_path):
        return False
    deadline = time.monotonic() + timeout
    path = _wire.resolve_socket(socket_path)
    try:
        prepare_directory(path)
    except OSError as exc:
        raise _cannot_start(path, f"cannot make its directory {path.parent}: {exc.strerror or exc}") from None
    log_path = path.with_name("mcpd.log")
    start_lock = path.with_name(path.name + ".start")
    lock_fd = _open_plain(path, start_lock, os.O_RDWR, "the autostart lock")
    taken = False
    try:
        taken = _take_lock(lock_fd, path, start_lock, deadline)
        if not taken or _reachable(path):
            return False
        # Imported here: a bridge that finds its daemon running never pays for subprocess.
        import subprocess  # noqa: PLC0415

        argv = [sys.executable, "-m", "mcpd", "serve", "--socket", str(path), "--log-format", "json"]
        if config is not None:
            argv += ["--config", str(config)]
        log_fd = _open_plain(path, log_path, os.O_WRONLY | os.O_APPEND, "the daemon's log")
        try:
            os.set_blocking(log_fd, True)  # the daemon's stderr: opened non-blocking only to be checked
            process = subprocess.Popen(
                argv,
                env=_daemon_environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log_fd,
                start_new_session=True,
                close_fds=True,
            )
        finally:
            os.close(log_fd)
        try:
            while time.monotonic() < deadline:
                if _reachable(path):
                    return True
                if process.poll() is not None and not _reachable(path):
                    break
                time.sleep(POLL)
        finally:
            if process.returncode is None:
                _reap_when_it_exits(process)
        raise DaemonNotRunning(
            f"started `mcpd serve` on {path} but it did not come up; see {log_path}",
            {"socket": str(path), "log": str(log_path)},
        )
    finally:
        with contextlib.suppress(OSError):
            if taken:
                os.ftruncate(lock_fd, 0)  # a pid in it names the starter holding it now
                fcntl.flock(lock_fd, fcntl.LOCK_UN)
        os.close(lock_fd)


def _reap_when_it_exits(process: subprocess.Popen[bytes]) -> None:
    """Collect the daemon's exit status as soon as it exits, from a thread that only waits.

    The daemon is our child (``start_new_session`` gives it a session, not another parent): a
    bridge lives on after it, and a daemon killed or stopped left a zombie under the bridge until
    the bridge happened to start another one (``subprocess`` reaps old children only then), for
    good when a service manager or a person started the next. Started only once the daemon is up:
    ``poll`` reports nothing while another thread waits, and the loop above needs it."""
    import threading  # noqa: PLC0415  (as subprocess: only when a daemon is started)

    threading.Thread(target=process.wait, name="mcpd-autostart-reap", daemon=True).start()


def _cannot_start(socket: Path, problem: str, path: Path | None = None) -> DaemonNotRunning:
    data = {"socket": str(socket)} | ({"path": str(path)} if path else {})
    return DaemonNotRunning(f"cannot start `mcpd serve` on {socket}: {problem}", data)


def _open_plain(socket: Path, path: Path, flags: int, what: str) -> int:
    """``path`` opened (created 0600 if missing), refused with ``DaemonNotRunning`` unless a plain file.

    Looked at before it is opened (opening a device can act), and opened non-blocking and without
    following a link: a FIFO there would otherwise hold the caller (a CLI, a host's bridge) for ever.
    """
    try:
        info: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise _cannot_start(socket, f"cannot look at {what} {path}: {exc.strerror or exc}", path) from None
    if info is None or stat.S_ISREG(info.st_mode):
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise _cannot_start(socket, f"cannot open {what} {path}: {exc.strerror or exc}", path) from None
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode):
            return fd
        os.close(fd)
    raise _cannot_start(socket, f"{what} {path} is not a plain file; remove it", path)


def _take_lock(fd: int, socket: Path, path: Path, deadline: float) -> bool:
    """Wait for the start lock until ``deadline``; False if a daemon came up meanwhile (another
    starter's, or one started by hand), ``DaemonNotRunning`` past the deadline."""
    look_at = time.monotonic() + LOOK_WHILE_LOCKED
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass
        else:
            # Who holds it, for the message of a starter that waits on us in vain.
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return True
        now = time.monotonic()
        if now >= deadline:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            raise _cannot_start(
                socket,
                f"another process{f' (pid {holder})' if holder.isdigit() else ''} has held the start "
                f"lock {path} all along and no daemon came up; if that process hangs, stop it",
                path,
            )
        if now >= look_at:
            if _reachable(socket):
                return False
            look_at = time.monotonic() + LOOK_WHILE_LOCKED
        time.sleep(POLL)
