"""Where the daemon's log lines go: stderr, and nowhere when stderr cannot take them.

A daemon's stderr is often a file (launchd's ``StandardErrorPath``, the ``mcpd.log`` of an
auto-started daemon), and a file can fill its disk or its size limit. A log line that cannot be
written must never cost a client its request, nor stop the daemon: the line is dropped and counted,
and the first line written after that says how many were lost, so the gap in the log is explained.
A line cut short by the failure (part of it written) stays a line of its own: what comes next
starts on a new one.

Lines go to the file descriptor with ``os.write``, not through ``sys.stderr``: a buffered stream
keeps what it could not write and sends it, out of order, when it next flushes, and keeps raising
until then.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Callable
from typing import Any

Notice = Callable[[int], str]
"""Renders the line that says how many lines were dropped, in the log's own format."""


class StderrSink:
    """Writes whole log lines to a file descriptor; those it cannot write are dropped and counted."""

    def __init__(self, fd: int, notice: Notice) -> None:
        self._fd = fd
        self._notice = notice
        # The store's writer thread logs too: one line at a time, and one count.
        self._lock = threading.Lock()
        self.dropped = 0
        """Lines lost since the last one written."""
        self._fragment_end: int | None = None
        """The log ends in part of a line (written, then the write failed): the file's size then
        (0 for a pipe or a terminal), so that the next line starts a line of its own."""

    def write_line(self, line: str) -> None:
        with self._lock:
            if self.dropped:
                if not self._write(self._notice(self.dropped)):
                    # Still not writable: this line is lost too, and the notice waits for the
                    # next line, so that it comes before anything written after the gap.
                    self.dropped += 1
                    return
                self.dropped = 0
            if not self._write(line):
                self.dropped += 1

    def _write(self, line: str) -> bool:
        # After a torn line, a newline first: glued to the fragment, this line would be corrupt too.
        data = (b"\n" if self._fragment_left() else b"") + (line + "\n").encode("utf-8", "backslashreplace")
        end = b""
        try:
            while data:
                written = os.write(self._fd, data)
                if written:
                    end = data[written - 1 : written]  # the last byte the log holds
                data = data[written:]
        except OSError:
            # ENOSPC, EFBIG past RLIMIT_FSIZE (Python ignores SIGXFSZ), EIO, a closed pipe (EPIPE).
            if end:  # part of it went out: the log now ends there
                self._fragment_end = None if end == b"\n" else self._size()
            return False
        self._fragment_end = None
        return True

    def _size(self) -> int:
        try:
            info = os.fstat(self._fd)
        except OSError:
            return 0
        return info.st_size if stat.S_ISREG(info.st_mode) else 0

    def _fragment_left(self) -> bool:
        """The log still ends in a torn line; a file emptied since (rotated by truncation) does not."""
        return self._fragment_end is not None and self._size() >= self._fragment_end


class SinkLogger:
    """A structlog logger (the rendered event in, a line out) that writes to a ``StderrSink``."""

    def __init__(self, sink: StderrSink) -> None:
        self._sink = sink

    def msg(self, message: str) -> None:
        self._sink.write_line(message)

    log = debug = info = warn = warning = error = critical = exception = fatal = failure = err = msg


class SinkLoggerFactory:
    """structlog's ``logger_factory``: every logger writes to the one sink."""

    def __init__(self, sink: StderrSink) -> None:
        self._logger = SinkLogger(sink)

    def __call__(self, *args: Any) -> SinkLogger:
        return self._logger


class SinkHandler(logging.Handler):
    """A stdlib logging handler (the SDK's, uvicorn's) on the same sink, so it drops alike."""

    def __init__(self, sink: StderrSink) -> None:
        super().__init__()
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:  # a record that cannot be formatted: logging reports it its own way
            self.handleError(record)
            return
        self._sink.write_line(line)
