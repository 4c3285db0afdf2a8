"""The HTTP front end's bearer token: made once (``secrets.token_urlsafe(32)``), kept in a 0600 file.

The file is ``http.token`` in the user state directory, or ``[daemon] http_token_file``.
Whoever can read it can use every server through the daemon, so it is handled like the
socket's lock: its directory must be this user's and writable by nobody else (or another
user could swap the file for one holding a token they know), nothing is followed through a
symlink (each open is ``O_NOFOLLOW``, relative to the checked directory), and a file that
is not a plain 0600-or-stricter file of this user is refused, never repaired. A new token is
written to a private temporary file and linked into place, so a reader racing the writer
(``mcpd token`` while the daemon starts) sees either no file or the whole token.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import os
import secrets
import stat
from pathlib import Path

from mcpd.config.load import load_config
from mcpd.config.model import DaemonSettings
from mcpd.config.paths import default_state_dir
from mcpd.errors import McpdError

FILE_NAME = "http.token"
_MAX_BYTES = 4096


class TokenUnusable(McpdError):
    """The token file, or its directory, could be read or replaced by someone else; nothing was changed."""


def bearer_matches(header: str | None, token: bytes) -> bool:
    """Whether an ``Authorization`` header value is ``Bearer <token>``, in constant time."""
    scheme, _, credentials = (header or "").partition(" ")
    # Compared even when the scheme is wrong, so that the time taken says nothing either.
    matches = hmac.compare_digest(credentials.strip().encode(), token)
    return matches and scheme.lower() == "bearer"


def token_path(settings: DaemonSettings) -> Path:
    if settings.http_token_file:
        return Path(settings.http_token_file).expanduser()
    return default_state_dir() / FILE_NAME


def configured_token(config_path: Path | None) -> tuple[Path, str]:
    """The token file of the daemon that ``config_path`` configures, and its token (made if missing)."""
    path = token_path(load_config(config_path).daemon)
    return path, load_token(path)


def load_token(path: Path) -> str:
    """The token in ``path``, generated (and the file created, 0600) when there is none."""
    directory = _open_directory(path)
    try:
        with contextlib.suppress(FileNotFoundError):
            return _read(path, directory)
        with contextlib.suppress(FileExistsError):
            _create(path, directory, secrets.token_urlsafe(32))
        return _read(path, directory)  # ours, or the one another process linked in first
    finally:
        os.close(directory)


def _refuse(path: Path, problem: str, fix: str) -> TokenUnusable:
    return TokenUnusable(f"refusing the HTTP token file {path}: {problem}; {fix}", {"path": str(path)})


def _open_directory(path: Path) -> int:
    """An fd of the directory of ``path`` (created 0700 if missing) once it is known to be ours alone."""
    directory = path.parent
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refuse(path, f"{directory} is a symlink or not a directory", "use a real one") from None
        raise
    info = os.fstat(fd)
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        os.close(fd)
        raise _refuse(
            path,
            f"{directory} belongs to uid {info.st_uid} with mode {stat.S_IMODE(info.st_mode):o}",
            f"it must be yours and writable by you alone (chmod 700 {directory})",
        )
    return fd


def _read(path: Path, directory: int) -> str:
    # Looked at before it is opened (opening a device can act), and opened without blocking: a FIFO
    # would otherwise hang `mcpd token`, and `mcpd serve --http` with its socket already bound.
    seen = os.stat(path.name, dir_fd=directory, follow_symlinks=False)
    if stat.S_ISLNK(seen.st_mode):
        raise _refuse(path, "it is a symlink", "remove the link")
    if not _plain(seen):
        raise _refuse(path, "it is not a plain file of this user", "remove it (a new token is made)")
    try:
        fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(path, "it is a symlink", "remove the link") from None
        raise
    try:
        info = os.fstat(fd)
        if not _plain(info):
            raise _refuse(path, "it is not a plain file of this user", "remove it (a new token is made)")
        if info.st_mode & 0o077:
            mode = f"{stat.S_IMODE(info.st_mode):o}"
            raise _refuse(path, f"others may read it (mode {mode})", f"chmod 600 {path}, or remove it")
        raw = os.read(fd, _MAX_BYTES)
    finally:
        os.close(fd)
    token = raw.decode("ascii", errors="replace").strip()
    if not token or not token.isprintable() or " " in token:
        raise _refuse(path, "it holds no token", "remove it (a new token is made)")
    return token


def _plain(info: os.stat_result) -> bool:
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid() and info.st_nlink == 1


def _create(path: Path, directory: int, token: str) -> None:
    """Write ``token`` to a private temporary file and link it in as ``path`` (FileExistsError if
    someone was first)."""
    temporary = f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o600, dir_fd=directory)
    try:
        try:
            os.write(fd, f"{token}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(temporary, path.name, src_dir_fd=directory, dst_dir_fd=directory, follow_symlinks=False)
    finally:
        os.unlink(temporary, dir_fd=directory)
