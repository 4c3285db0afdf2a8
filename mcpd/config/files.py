"""Reading a file mcpd was pointed at by a config: the config itself, or a host's ``envFile``.

A path in a config is the user's to name, and it may name anything: a FIFO (opening it
waits for a writer, reading it waits forever), a device (``/dev/zero`` never ends), a huge
file. Each would hang or exhaust ``mcpd serve``, ``reload`` and ``config check``, and a thread
stuck in such a read keeps the daemon from exiting. So every such file is read here: a
regular file only, opened without blocking, at most ``MAX_FILE_BYTES``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from mcpd.errors import ConfigError

MAX_FILE_BYTES = 16 * 1024 * 1024
"""A file larger than this is refused (no real config or env file comes near)."""


def read_bounded(path: Path, what: str) -> bytes:
    """``path``'s bytes, or a ``ConfigError`` naming ``path`` and ``what`` it was meant to be."""
    if "\0" in str(path):
        # A name no file can have (a host's `envFile` is any JSON string); os.stat raises ValueError.
        raise ConfigError(f"{str(path)!r}: a path with a NUL byte; not read as {what}")
    try:
        # Looked at before it is opened: opening a device can act (rewind a tape, reset a port).
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ConfigError(f"{path}: not a regular file; not read as {what}")
        # Non-blocking: if a FIFO took the file's place since, opening it must not wait for a writer.
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise ConfigError(f"{path}: not a regular file; not read as {what}")
            raw = file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {_why(path, exc)}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_FILE_BYTES} bytes; not read as {what}")
    return raw


def _why(path: Path, exc: OSError) -> str:
    """The reason, and where a link leads when the link is the trouble (dangling, or a loop)."""
    reason = exc.strerror or str(exc)
    try:
        return f"a symbolic link to {os.readlink(path)}: {reason}"
    except OSError:  # not a link (EINVAL), or not even that could be looked at
        return reason


def present(path: Path, what: str) -> bool:
    """Whether anything is at ``path``; only "no such file" is False.

    ``Path.exists()`` follows links and answers False for a dangling link or a loop, so a user's
    config reached through a broken dotfiles link would read as "no config at all", and it
    raises ``PermissionError`` for a folder that cannot be searched. Both are the user's config
    being unreachable, said here as a ``ConfigError`` naming the path.
    """
    try:
        path.lstat()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise ConfigError(f"{path}: cannot look for {what}: {exc.strerror or exc}") from None
    return True
