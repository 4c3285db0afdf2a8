"""What the CLI prints: JSON documents, tables, colour, errors, and the exit status it ends with.

Exit status: 0 success; 1 the daemon reported an error or the tool failed; 2 bad usage or an
unusable config; 3 no daemon is listening; 130 interrupted (Ctrl-C) and 141 output closed early
(``mcpd ... | head``), the numbers a shell shows for a process ended by SIGINT or SIGPIPE, so
scripts see what they would see from git or cat.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import IO, Any, NoReturn

import msgspec

from mcpd import controls
from mcpd.cli import streams
from mcpd.cli.streams import OutputFailed
from mcpd.errors import ConfigError, DaemonNotRunning, InvalidParams, McpdError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NO_DAEMON = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


class UsageError(Exception):
    """The command line is wrong (an option's value, a missing argument): exit status 2."""

    def __init__(self, message: str, prog: str = "mcpd") -> None:
        super().__init__(message)
        self.prog = prog


class InternalError(Exception):
    """A bug in mcpd itself, reported in one line (exit status 1)."""

    @classmethod
    def of(cls, exc: Exception) -> InternalError:
        """``exc`` as the user sees it: one line that says it is a bug, never a traceback."""
        if os.environ.get("MCPD_TRACEBACK"):
            raise exc
        # A task group's one failure is named, not the group: a fault of ``mcpd serve`` once its
        # servers are spawned comes out of the supervisor's task group ("ExceptionGroup: unhandled
        # errors in a TaskGroup (1 sub-exception)" said nothing of what failed).
        while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        return cls(f"internal error: {type(exc).__name__}: {exc} (MCPD_TRACEBACK=1 shows where)")


class Interrupted(Exception):
    """Ctrl-C: reported as an error document in ``--json`` mode, silently otherwise."""


def exit_status(error: BaseException) -> int:
    if isinstance(error, DaemonNotRunning):
        return EXIT_NO_DAEMON
    if isinstance(error, UsageError | InvalidParams | ConfigError):
        return EXIT_USAGE
    if isinstance(error, Interrupted):
        return EXIT_INTERRUPTED
    return EXIT_ERROR


class ErrorInfo(msgspec.Struct, frozen=True, kw_only=True):
    type: str
    """The error's class: ``UnknownServer``, ``UsageError``, ``DaemonNotRunning``, ..."""
    code: int | None
    """Its wire code (see ``mcpd.errors``); null for errors of the command line itself."""
    message: str
    data: dict[str, Any]
    exit: int
    """The exit status that goes with it."""


class ErrorDocument(msgspec.Struct, frozen=True, kw_only=True):
    """What ``--json`` prints for any error: ``{"error": {...}}``."""

    error: ErrorInfo


def error_document(error: BaseException) -> ErrorDocument:
    mcpd_error = error if isinstance(error, McpdError) else None
    info = ErrorInfo(
        type=type(error).__name__,
        code=mcpd_error.code if mcpd_error else None,
        message=mcpd_error.message if mcpd_error else str(error),
        data=mcpd_error.data if mcpd_error else {},
        exit=exit_status(error),
    )
    return ErrorDocument(error=info)


def emit_json(value: object) -> None:
    text = msgspec.json.encode(value).decode()
    if not text.isascii():
        # Outside ASCII (only inside strings in msgspec's output) a character may be written as
        # its JSON escape, which a reader decodes to the same text. JSON is read as UTF-8
        # whatever the locale: in another, each such character is escaped, never written in the
        # locale's encoding nor as Python's \U0001f600, which no JSON reader takes. In UTF-8, the
        # C1 controls, bidi controls and invisible characters (``controls.HIDDEN``) are, so that a
        # document read on a terminal shows them as they are shown elsewhere, never obeyed.
        utf8 = codecs.lookup(sys.stdout.encoding or "utf-8").name == "utf-8"
        text = (controls.HIDDEN if utf8 else _NOT_ASCII).sub(lambda found: json.dumps(found[0])[1:-1], text)
    sys.stdout.write(text + "\n")


_NOT_ASCII = re.compile(r"[^\x00-\x7f]")


def wants_json(argv: list[str]) -> bool:
    """``--json`` anywhere before a ``--``: known before parsing, so usage errors are JSON too."""
    words = argv[: argv.index("--")] if "--" in argv else argv
    return "--json" in words


def reported(command: Callable[[], int], *, as_json: bool) -> int:
    """Run ``command``: what goes wrong is said once (``report``) and becomes the exit status, never
    a traceback. Output that cannot be written is left to ``exit_with``."""
    try:
        return command()
    except (McpdError, UsageError) as exc:
        return report(exc, as_json=as_json)
    except KeyboardInterrupt:
        return report(Interrupted("interrupted"), as_json=as_json)
    except UnicodeEncodeError as exc:
        # Bytes the locale could not decode (``$'\xff'`` in an argument) reached something that
        # must send them as text: a usage error. (A file path of such bytes still works.)
        bad = exc.object[exc.start : exc.end] if isinstance(exc.object, str) else ""
        return report(UsageError(f"{bad!r} in an argument is not valid UTF-8", "mcpd"), as_json=as_json)
    except (OutputFailed, BrokenPipeError, SystemExit):
        # BrokenPipeError: the bridge writes its stdout's descriptor itself, past sys.stdout.
        raise
    except Exception as exc:
        return report(InternalError.of(exc), as_json=as_json)


def exit_with(command: Callable[[], int]) -> NoReturn:
    """Run ``command`` and exit with its status; stdout that cannot be written ends it as the
    README says: 141 and silence for a reader gone, one line on stderr and 1 for the rest."""
    streams.guard_standard_streams()
    try:
        try:
            status = command()
        except SystemExit as exc:
            # argparse's --help and usage errors: their output is flushed below like any other.
            status = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        sys.stdout.flush()  # inside the try: a reader that went away is noticed here, not at exit
    except (OutputFailed, BrokenPipeError) as exc:
        # What stdout still holds goes to /dev/null, so that Python's final flush stays quiet too.
        streams.silence(sys.__stdout__)
        if isinstance(exc, BrokenPipeError) or exc.closed:
            # `mcpd ... | head`: the reader has all it wanted; end as a process killed by SIGPIPE would.
            status = EXIT_BROKEN_PIPE
        else:
            # stdout refused what was written (`> /dev/full`): said once, on stderr, not as a traceback.
            print(f"mcpd: cannot write the output: {exc}", file=sys.stderr)
            status = EXIT_ERROR
    except KeyboardInterrupt:
        status = EXIT_INTERRUPTED
    sys.stderr.flush()
    sys.exit(status)


def report(error: BaseException, *, as_json: bool) -> int:
    """Say what went wrong exactly once: a JSON document on stdout, or one line on stderr."""
    if as_json:
        try:
            emit_json(error_document(error))
        except OutputFailed:
            # The error is the output itself (`> /dev/full`): the document cannot go there either,
            # and what stdout holds of it is dropped, so that the error is said once.
            streams.silence(sys.__stdout__)
            _say(f"mcpd: {error}")
    elif isinstance(error, UsageError):
        _say(f"{error.prog}: {error} (see `{error.prog} --help`)")
    elif not isinstance(error, Interrupted):
        _say(f"mcpd: {error}")
    return exit_status(error)


def _say(line: str) -> None:
    # An error carries what a server wrote (its stderr, how it exited, in `last_error`), and an
    # argument echoed back is the user's: either may hold escape sequences, shown, never obeyed.
    print(visible(line), file=sys.stderr)


# -- colour -----------------------------------------------------------------------------------

_CODES = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "dim": "2", "bold": "1"}


class Style:
    """ANSI colour, on only for a terminal and never when ``NO_COLOR`` is set (no-color.org)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    @classmethod
    def of(cls, stream: IO[str]) -> Style:
        return cls(stream.isatty() and not os.environ.get("NO_COLOR"))

    def __call__(self, text: str, colour: str | None) -> str:
        if not self.enabled or colour is None or not text:
            return text
        return f"\x1b[{_CODES[colour]}m{text}\x1b[0m"


STATE_COLOURS = {
    "running": "green",
    "starting": "yellow",
    "degraded": "yellow",
    "backoff": "yellow",
    "failed": "red",
    "blocked": "red",
    "stopped": "dim",
    "disabled": "dim",
}

Cell = str | tuple[str, str | None]
"""A table cell: its text, or its text and a colour."""


def table(headers: Sequence[str], rows: Sequence[Sequence[Cell]], style: Style | None = None) -> str:
    """Columns padded to their widest cell; on a terminal the last column is cut to fit the width."""
    style = style or Style(False)
    header_row: list[Cell] = [(h, "bold") for h in headers]
    cells = [
        [(visible(c[0]), c[1]) if isinstance(c, tuple) else (visible(c), None) for c in row]
        for row in [header_row, *rows]
    ]
    widths = [max(len(row[i][0]) for row in cells) for i in range(len(headers))]
    room = _terminal_width() - sum(w + 2 for w in widths[:-1]) if sys.stdout.isatty() else None
    lines = []
    for row in cells:
        padded = [
            style(text, colour) + " " * (width - len(text))
            for (text, colour), width in zip(row[:-1], widths, strict=False)
        ]
        last_text, last_colour = row[-1]
        if room is not None and room > 10:
            last_text = clip(last_text, room)
        lines.append("  ".join([*padded, style(last_text, last_colour)]).rstrip())
    return "\n".join(lines)


def _terminal_width() -> int:
    # Imported here: shutil brings bz2, lzma and zlib (0.7 MB), and a bridge loads this module.
    import shutil

    return shutil.get_terminal_size((100, 24)).columns


# -- text from servers -------------------------------------------------------------------------


def visible(text: str) -> str:
    """Text mcpd does not control (a server's stderr, a tool's description or result, an agent's
    request) as human output shows it (``controls.visible``). Every renderer of such text goes
    through here (``table`` and ``clip`` do); ``--json`` writes them as JSON escapes (``emit_json``:
    the text a reader decodes stays exact), and ``--raw`` writes content as it is, on purpose."""
    return controls.visible(text)


# -- small formats ----------------------------------------------------------------------------


def clip(text: str | None, width: int | None = 80) -> str:
    """One line, at most ``width`` characters (an ellipsis marks a cut), control characters visible."""
    if not text:
        return ""
    line = visible(" ".join(text.split()))
    if width is None or len(line) <= width:
        return line
    return line[: width - 1] + "…"


def duration(seconds: float | None) -> str:
    """``3s``, ``4m12s``, ``2h5m``, ``3d4h``; ``-`` for none."""
    if seconds is None:
        return "-"
    minutes, secs = divmod(max(0, int(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes}m"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def clock(ts: float, *, date: bool = False) -> str:
    return time.strftime("%Y-%m-%d %H:%M" if date else "%H:%M:%S", time.localtime(ts))


def size(count: int) -> str:
    """Bytes for people: ``812 B``, ``1.2 KiB``, ``3.4 MiB``."""
    if count < 1024:
        return f"{count} B"
    value = count / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
