"""A one-line progress bar on stderr for calls whose server reports progress (terminals only).

Drawn with a carriage return and erased when the call ends, so stdout holds only the result
and a pipe or a log file never sees it.
"""

from __future__ import annotations

import os
import shutil
import sys
from types import TracebackType
from typing import IO, Self

from mcpd.cli.output import clip
from mcpd.model.protocol import Progress

_ERASE = "\r\x1b[K"


class ProgressBar:
    def __init__(self, label: str, stream: IO[str] | None) -> None:
        self.label = label
        self.stream = stream
        self.drawn = False

    @classmethod
    def for_stderr(cls, label: str) -> ProgressBar:
        enabled = sys.stderr.isatty() and os.environ.get("TERM") != "dumb"
        return cls(label, sys.stderr if enabled else None)

    @property
    def enabled(self) -> bool:
        return self.stream is not None

    def update(self, progress: Progress) -> None:
        if self.stream is None:
            return
        width = shutil.get_terminal_size((80, 24)).columns
        self.drawn = True  # first: Ctrl-C may land mid-write, and the erase must follow all the same
        self.stream.write(_ERASE + line(self.label, progress, width))
        self.stream.flush()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.stream is not None and self.drawn:
            self.stream.write(_ERASE)
            self.stream.flush()


def line(label: str, progress: Progress, width: int) -> str:
    """``label [#######.......]  45%  message``, or ``label 12 message`` when the total is unknown."""
    # The server's words, on one line (the bar is redrawn with a carriage return), shown not obeyed.
    message = f"  {clip(progress.message, None)}" if progress.message else ""
    if progress.total and progress.total > 0:
        share = min(1.0, max(0.0, progress.progress / progress.total))
        cells = 24
        filled = round(share * cells)
        text = f"{label} [{'#' * filled}{'.' * (cells - filled)}] {share:4.0%}{message}"
    else:
        text = f"{label} {progress.progress:g}{message}"
    return text if len(text) < width else text[: max(0, width - 2)] + "…"
