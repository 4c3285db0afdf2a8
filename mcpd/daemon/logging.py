"""structlog set-up: key-value lines on a terminal, JSON lines otherwise, always on stderr.

A logged exception keeps what a reader needs to explain the failure: on a terminal the
usual Python traceback; in JSON (the service's format) an ``exception`` list with each
exception's type, message and frames (file, line, function). Frame locals are left out of
both: they could hold a server's environment values or a tool's arguments.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog
from structlog.tracebacks import ExceptionDictTransformer

LogFormat = Literal["auto", "json", "console"]


def configure_logging(level: str = "info", fmt: LogFormat = "auto") -> None:
    """Configure structlog once for the process; ``auto`` picks JSON unless stderr is a terminal."""
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderers: list[structlog.typing.Processor] = (
        [
            structlog.processors.ExceptionRenderer(
                ExceptionDictTransformer(show_locals=False, use_rich=False)
            ),
            structlog.processors.JSONRenderer(),
        ]
        if use_json
        # The plain Python traceback: rich's (the default when installed) prints frame locals.
        else [structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)]
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *renderers,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
    # The SDK logs through stdlib logging (e.g. a server's unparseable output); keep it on stderr,
    # quiet below warnings, so it cannot interleave with stdout of a front end.
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
