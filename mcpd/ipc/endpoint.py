"""The socket file: one daemon per path (a lock), private permissions, and who is at the other end.

Binding means deleting whatever file is at the path, which would steal a running
daemon's socket; so the daemon first takes an exclusive ``flock`` on
``<socket>.lock``. The kernel drops the lock when the daemon dies, however it dies,
so a stale socket left by ``kill -9`` is simply replaced by the next daemon.

Nobody else may take the socket over. The directory must be this user's and writable
by nobody else, so no other uid can plant a file in it; and even so nothing in it is
followed through a symlink: the lock is opened ``O_NOFOLLOW`` relative to the checked
directory, and the socket path is ``lstat``-ed before it is replaced. A directory that
fails the check is refused, never repaired: if it was open to others, they may already
have planted something in it, and a ``chmod`` would not undo that (nor is a directory
someone chose to share ours to close). A directory mcpd creates is 0700 from the start.
Clients check the listener's uid from the kernel before they send a byte
(``check_server``), so a socket another user managed to put in place gets nothing.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import socket
import stat
import struct
import sys
import time
from typing import TYPE_CHECKING

from mcpd.errors import McpdError, PeerRejected

if TYPE_CHECKING:
    # Annotations only: a bridge, which checks its daemon's uid with this module, never loads pathlib.
    from pathlib import Path

# sockaddr_un.sun_path is 108 bytes on Linux and 104 on macOS, including the NUL.
MAX_PATH_BYTES = 103 if sys.platform == "darwin" else 107


class AddressInUse(McpdError):
    """Another daemon already serves this socket path."""


class UnsafePath(McpdError):
    """The socket's directory, lock or path could be controlled by someone else; nothing was touched."""


def check_path(path: Path) -> None:
    if len(os.fsencode(path)) > MAX_PATH_BYTES:
        raise McpdError(f"socket path is too long for a Unix socket ({MAX_PATH_BYTES} bytes max): {path}")


def _unsafe(path: Path, problem: str, fix: str) -> UnsafePath:
    return UnsafePath(f"refusing {path}: {problem}; {fix}", {"path": str(path), "fix": fix})


def prepare_directory(path: Path) -> None:
    """Make sure the socket's directory exists, is ours, and only we can write to it.

    Created 0700 when missing. Raises ``UnsafePath`` (naming the directory and the fix)
    for a symlink, a directory of another uid, or one that group or others may write to.
    """
    directory = path.parent
    with contextlib.suppress(FileExistsError):
        directory.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.mkdir(directory, 0o700)
    info = os.lstat(directory)
    if stat.S_ISLNK(info.st_mode):
        raise _unsafe(directory, "the socket directory is a symlink", "use a real directory for the socket")
    if not stat.S_ISDIR(info.st_mode):
        raise _unsafe(directory, "the socket directory is not a directory", "remove it or choose another")
    uid = os.getuid()
    if info.st_uid != uid:
        raise _unsafe(
            directory,
            f"the socket directory belongs to uid {info.st_uid}, not to this user (uid {uid})",
            "choose a directory of your own (e.g. --socket or MCPD_SOCKET) or remove that one",
        )
    if info.st_mode & 0o022:
        raise _unsafe(
            directory,
            f"the socket directory is writable by group or others (mode {stat.S_IMODE(info.st_mode):o})",
            f"run `chmod 700 {directory}`",
        )


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def take_lock(path: Path) -> int:
    """Lock ``<path>.lock`` exclusively and return its descriptor, or raise ``AddressInUse``.

    Opened without following a symlink, inside the directory ``prepare_directory`` checked,
    so a link planted there can never make the daemon truncate another file.
    """
    name = lock_path(path).name
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    # Non-blocking: a device or FIFO in its place must not hold the daemon up at the open (it is
    # refused right after, as not a plain file).
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _unsafe(path.parent / name, "the lock file is a symlink", "remove the link") from None
        raise
    finally:
        os.close(dir_fd)
    try:
        _lock(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _lock(fd: int, path: Path) -> None:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_nlink != 1:
        raise _unsafe(lock_path(path), "the lock is not a plain file of this user", "remove it")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        raise AddressInUse(
            f"another mcpd (pid {holder}) is already serving on {path}", {"socket": str(path)}
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def _file_at(path: Path) -> tuple[int, int] | None:
    """The file at ``path``, None when nothing can be there; ``OSError`` when it cannot be told
    (e.g. ``PermissionError``: the directory is not searchable)."""
    try:
        return _identity(os.lstat(path))
    except (FileNotFoundError, NotADirectoryError):
        # ENOTDIR: the directory was replaced by a file, so neither lock nor socket is there.
        return None


class Claim:
    """What a daemon holds at its socket path: the lock, and the socket file it bound.

    Both are files that anyone of this user can delete under a running daemon (a logout that
    empties the runtime directory, a temp cleaner, a hand), which would leave it serving nobody
    while a second daemon starts beside it. ``lost`` tells, ``renew`` takes them again, and a
    daemon whose path another one took meanwhile gets ``AddressInUse``.
    """

    def __init__(self, path: Path, listener: socket.socket | None = None) -> None:
        """Lock ``path`` (``AddressInUse``, ``UnsafePath``, ``OSError``); ``listener``: the socket
        systemd passed, whose file is systemd's to keep; without it, ``bind`` makes one."""
        check_path(path)
        prepare_directory(path)
        self.path = path
        self._lock_fd: int | None = take_lock(path)
        self._socket: tuple[int, int] | None = None
        """The socket file this daemon bound (None when systemd made it)."""
        self._inherited = listener is not None

    def bind(self) -> socket.socket:
        """A new listener at the path (replacing a stale socket file), remembered as ours."""
        listener = open_listener(self.path)
        self._socket = _file_at(self.path)
        return listener

    def _holds_lock(self) -> bool:
        """The lock file at the path is still the one this daemon locked."""
        fd = self._lock_fd
        return fd is not None and _file_at(lock_path(self.path)) == _identity(os.fstat(fd))

    def _holds_socket(self) -> bool:
        """The socket file at the path is still the one this daemon bound (or systemd's)."""
        return self._inherited or (self._socket is not None and _file_at(self.path) == self._socket)

    def lost(self) -> str | None:
        """What is gone from the path (None while the lock and our socket are both in place);
        ``OSError`` when the path cannot be looked at."""
        if not self._holds_lock():
            return "the lock file was removed or replaced"
        if not self._holds_socket():
            return "the socket file was removed or replaced"
        return None

    def renew(self) -> socket.socket | None:
        """Take the lock again if it was lost, and bind a new socket if ours was; returns it (or None).

        Raises ``AddressInUse`` when another daemon took the path meanwhile, and ``UnsafePath`` or
        ``OSError`` when it cannot be taken yet (e.g. the runtime directory is gone and cannot be
        made again); try again later then.
        """
        if not self._holds_lock():
            prepare_directory(self.path)
            fd = take_lock(self.path)
            if self._lock_fd is not None:
                os.close(self._lock_fd)
            self._lock_fd = fd
        return None if self._holds_socket() else self.bind()

    def release(self) -> None:
        """Remove our socket file (if it is still ours) and let go of the lock."""
        if not self._inherited:
            # Also when the path cannot be looked at (a directory made unsearchable): then the
            # file stays, and the next daemon replaces it as stale.
            with contextlib.suppress(OSError):
                if self._holds_socket():
                    self.path.unlink()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


def open_listener(path: Path) -> socket.socket:
    """Bind and listen with mode 0600, replacing a stale socket (the caller holds the lock).

    Only a socket is ever replaced: anything else at the path (a symlink, a file someone
    named by mistake) is refused with ``UnsafePath`` and left as it is. The socket is bound
    beside the path and renamed onto it once it listens: a client that finds the path never
    finds it refusing (between bind and listen it did: a client starting with the daemon got
    "no daemon is listening").
    """
    with contextlib.suppress(FileNotFoundError):
        info = os.lstat(path)
        if not stat.S_ISSOCK(info.st_mode):
            kind = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a socket"
            raise _unsafe(path, f"the socket path is {kind}", "remove it or choose another path")
    bound = path.with_name(f".{os.getpid()}.{path.name}")
    if len(os.fsencode(bound)) >= _SUN_PATH:
        bound = path  # no room for a longer name: bound in place (the stale socket made way)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        # The umask covers the instant between bind and chmod, when the file would otherwise
        # exist with the default mode. mcpd binds before it starts any child or thread.
        previous = os.umask(0o177)
        try:
            sock.bind(str(bound))
        finally:
            os.umask(previous)
        os.chmod(bound, 0o600)
        sock.listen(1024)
        sock.setblocking(False)
        if bound != path:
            os.replace(bound, path)
    except BaseException:
        sock.close()
        if bound != path:
            with contextlib.suppress(OSError):
                bound.unlink()
        raise
    return sock


_SUN_PATH = 104 if sys.platform == "darwin" else 108
"""Bytes of a Unix socket's path (``sun_path``), its terminating NUL included."""


QUEUE_RETRY = (0.002, 0.05)
"""First and longest wait between tries to connect while the daemon's listen queue is full."""


def connect_now(path: str) -> socket.socket | None:
    """A socket connected to ``path`` (non-blocking), or None while the listener's queue is full
    (a daemon busy accepting a crowd: try again shortly). Other failures raise ``OSError``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        sock.connect(path)
    except BlockingIOError:
        # A Unix socket connects at once or not at all: EAGAIN is a full queue, never "in
        # progress". asyncio takes it for the latter and hands back a socket connected to
        # nothing, whose peer then reads as uid -1 ("served by another user").
        sock.close()
        return None
    except BaseException:
        sock.close()
        raise
    return sock


def connect_within(path: str, timeout: float) -> socket.socket:
    """A blocking socket (``timeout`` on each operation) connected to ``path`` within ``timeout``,
    a full queue waited out; ``TimeoutError`` past it, other failures ``OSError``."""
    deadline = time.monotonic() + timeout
    delay = QUEUE_RETRY[0]
    while (sock := connect_now(path)) is None:
        if time.monotonic() + delay > deadline:
            raise TimeoutError(errno.ETIMEDOUT, "the daemon did not accept the connection in time")
        time.sleep(delay)
        delay = min(2 * delay, QUEUE_RETRY[1])
    sock.settimeout(timeout)
    return sock


def _peer_credentials(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end (``SO_PEERCRED``: Linux)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return int(pid), int(uid)


def peer_pid(sock: socket.socket) -> int | None:
    """The pid of the process that listens at the other end (as it was when it began to listen),
    from the kernel; None where unsupported."""
    return _peer_credentials(sock)[0] if hasattr(socket, "SO_PEERCRED") else None


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end, from the kernel; None where unsupported."""
    if hasattr(socket, "SO_PEERCRED"):
        return _peer_credentials(sock)[1]
    if sys.platform == "darwin":  # pragma: no cover - exercised on macOS only
        # getpeereid(3) is LOCAL_PEERCRED underneath: an xucred whose second field is the uid.
        sol_local, local_peercred = 0, 0x001
        xucred = sock.getsockopt(sol_local, local_peercred, struct.calcsize("IIh16I"))
        return int(struct.unpack_from("II", xucred)[1])
    return None  # pragma: no cover


def peer_hung_up(sock: socket.socket) -> bool:
    """Whether the peer closed its socket (or died), as opposed to shutting down only its sending side.

    Both read as end-of-file; only a socket closed at the other end is hung up for ``poll``. A socket
    closed on this side already is gone too: its transport closes it once a write finds the peer gone.
    """
    if sock.fileno() < 0:
        return True
    poller = select.poll()
    poller.register(sock, select.POLLOUT)
    return any(events & (select.POLLHUP | select.POLLERR) for _, events in poller.poll(0))


def check_server(sock: socket.socket, path: Path | str) -> None:
    """Refuse a listener run by another uid (``PeerRejected``); call it before sending anything.

    Whoever could replace the socket file could otherwise read the client's requests
    (tool arguments included) and answer them.
    """
    uid = peer_uid(sock)
    own = os.getuid()
    if uid is not None and uid != own:
        raise PeerRejected(
            f"the socket {path} is served by uid {uid}, not by this user (uid {own}): refusing to talk "
            "to it; check who created it and whether its directory is writable by others",
            {"socket": str(path), "uid": uid},
        )


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
