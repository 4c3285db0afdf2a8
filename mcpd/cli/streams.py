"""stdout and stderr as the command line writes them: what the OS refuses becomes one known case.

An ``OSError`` from writing stdout (a reader that went away, a full disk) is no error of the
command and no bug of mcpd, but it looks like any other ``OSError`` (a config file that cannot be
read) by the time it reaches the code that reports errors. So it is told apart where it happens,
at the stream: writing stdout raises ``OutputFailed`` (not an ``OSError``: ``except OSError`` around
a file operation, or argparse's own, must not take it for something else), which ``exit_with``
turns into 141 (closed) or one line on stderr (refused). stderr is where failures are said, so a
failure to write it can be said nowhere: what it cannot take is dropped and the command goes on.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO, TypeVar, cast

T = TypeVar("T")


class OutputFailed(Exception):
    """stdout refused what was written: ``closed`` (EPIPE, ``mcpd ... | head``) or another error."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))
        self.error = error

    @property
    def closed(self) -> bool:
        return self.error.errno == errno.EPIPE


class _Guarded:
    """A stream (text, or its binary ``buffer``) whose write and flush go through ``on_error``;
    with ``flush_each``, every write is flushed at once."""

    def __init__(self, stream: Any, on_error: Callable[[OSError], None], *, flush_each: bool = False) -> None:
        self._stream = stream
        self._on_error = on_error
        self._flush_each = flush_each
        if hasattr(stream, "buffer"):
            self.buffer = _Guarded(stream.buffer, on_error, flush_each=flush_each)

    def write(self, data: Any) -> int:
        written = self._guard(lambda: int(self._stream.write(data)), len(data))
        if self._flush_each:
            self.flush()
        return written

    def flush(self) -> None:
        self._guard(self._stream.flush, None)

    def _guard(self, act: Callable[[], T], otherwise: T) -> T:
        try:
            return act()
        except OSError as exc:
            self._on_error(exc)
            return otherwise

    def __getattr__(self, name: str) -> Any:
        # isatty, fileno, encoding, ...: as the stream has them.
        return getattr(self._stream, name)


def _stdout_failed(error: OSError) -> None:
    raise OutputFailed(error) from None


def _stderr_failed(error: OSError) -> None:
    # Nothing can say that stderr failed. What the stream still holds, and all that follows, goes
    # to /dev/null, so that neither this command nor Python's flush at exit fails over it again.
    silence(sys.__stderr__)


def silence(stream: TextIO | None) -> None:
    """Point ``stream``'s file descriptor at /dev/null: its pending and future output is dropped."""
    if stream is None:
        return
    try:
        descriptor = stream.fileno()
    except (OSError, ValueError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, descriptor)
    os.close(null)


def guard_standard_streams() -> None:
    """Make ``sys.stdout`` raise ``OutputFailed`` and ``sys.stderr`` drop what cannot be written."""
    if sys.stdout is None:
        # Started with stdout closed (`>&-`): what would be printed goes nowhere, as asked.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - stdout for the rest of the process
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - stderr for the rest of the process
    stdout = sys.stdout
    unbuffered = isinstance(stdout, io.TextIOWrapper) and isinstance(stdout.buffer, io.RawIOBase)
    if unbuffered:
        # `python -u`, or PYTHONUNBUFFERED (set in many container images): the text layer writes
        # straight to the descriptor and drops what a short write left, so a reader that went away
        # mid-write (`mcpd tools --json | head -c 10`) cost the rest of the output silently, with
        # exit 0. A buffered layer writes the rest or raises; each write is flushed, as asked.
        sys.stdout = io.TextIOWrapper(
            io.BufferedWriter(cast(io.RawIOBase, stdout.buffer)),
            encoding=stdout.encoding,
            errors=stdout.errors,
            write_through=True,
        )
    if isinstance(sys.stdout, io.TextIOWrapper):
        # A locale that is not UTF-8 (en_US.ISO-8859-1) cannot encode all a server writes, nor the
        # "…" that cuts a description: written as \u2026, as stderr does, not an error that ended
        # `mcpd tools` with exit 2 and "'\u2026' in an argument is not valid UTF-8".
        sys.stdout.reconfigure(errors="backslashreplace")
    # Typed as what they stand in for: every caller uses them as the streams they wrap.
    sys.stdout = cast(TextIO, _Guarded(sys.stdout, _stdout_failed, flush_each=unbuffered))
    sys.stderr = cast(TextIO, _Guarded(sys.stderr, _stderr_failed))
