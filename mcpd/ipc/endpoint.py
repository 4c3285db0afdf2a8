"""The socket file: one daemon per path (a lock), private permissions, and who is calling.

Binding means deleting whatever file is at the path, which would steal a running
daemon's socket; so the daemon first takes an exclusive ``flock`` on
``<socket>.lock``. The kernel drops the lock when the daemon dies, however it dies,
so a stale socket left by ``kill -9`` is simply replaced by the next daemon.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

from mcpd.errors import McpdError

# sockaddr_un.sun_path is 108 bytes on Linux and 104 on macOS, including the NUL.
MAX_PATH_BYTES = 103 if sys.platform == "darwin" else 107


class AddressInUse(McpdError):
    """Another daemon already serves this socket path."""


def check_path(path: Path) -> None:
    if len(os.fsencode(path)) > MAX_PATH_BYTES:
        raise McpdError(f"socket path is too long for a Unix socket ({MAX_PATH_BYTES} bytes max): {path}")


@contextlib.contextmanager
def hold_lock(path: Path) -> Iterator[None]:
    """Hold ``<path>.lock`` exclusively for the life of the daemon, or raise ``AddressInUse``."""
    lock_path = path.with_name(path.name + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise AddressInUse(
                f"another mcpd (pid {holder}) is already serving on {path}", {"socket": str(path)}
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def prepare_directory(path: Path) -> None:
    """Create the socket's directory private to this user (0700) if it does not exist."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)


def open_listener(path: Path) -> socket.socket:
    """Bind and listen with mode 0600, replacing a stale file (the caller holds the lock)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        # The umask covers the instant between bind and chmod, when the file would otherwise
        # exist with the default mode. mcpd binds before it starts any child or thread.
        previous = os.umask(0o177)
        try:
            sock.bind(str(path))
        finally:
            os.umask(previous)
        os.chmod(path, 0o600)
        sock.listen(1024)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end, from the kernel; None where unsupported."""
    if hasattr(socket, "SO_PEERCRED"):
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", creds)
        return int(uid)
    if sys.platform == "darwin":  # pragma: no cover - exercised on macOS only
        sol_local, local_peercred = 0, 0x001
        xucred = sock.getsockopt(sol_local, local_peercred, struct.calcsize("IIh16I"))
        return int(struct.unpack_from("II", xucred)[1])
    return None  # pragma: no cover


SD_LISTEN_FDS_START = 3


def inherited_listener() -> socket.socket | None:
    """The listening socket systemd passed (socket activation), if it passed one to this process."""
    if os.environ.get("LISTEN_PID") != str(os.getpid()):
        return None
    try:
        count = int(os.environ.get("LISTEN_FDS", "0"))
    except ValueError:
        return None
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(name, None)  # children must not believe the socket is theirs
    if count < 1:
        return None
    sock = socket.socket(fileno=SD_LISTEN_FDS_START)
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        raise McpdError(f"socket activation passed fd {SD_LISTEN_FDS_START}: not a Unix stream socket")
    os.set_inheritable(SD_LISTEN_FDS_START, False)
    sock.setblocking(False)
    return sock
