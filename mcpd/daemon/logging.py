"""structlog set-up: key-value lines on a terminal, JSON lines otherwise, always on stderr.

A logged exception keeps what a reader needs to explain the failure: on a terminal the
usual Python traceback; in JSON (the service's format) an ``exception`` list with each
exception's type, message and frames (file, line, function). Frame locals are left out of
both: they could hold a server's environment values or a tool's arguments.

Lines stderr cannot take (a full disk) are dropped and counted, never raised into the code that
logged them (see ``logsink``).
"""

from __future__ import annotations

import io
import logging
import sys
from typing import Literal, TextIO

import structlog
from structlog.tracebacks import ExceptionDictTransformer

from mcpd.controls import visible
from mcpd.daemon.logsink import SinkHandler, SinkLoggerFactory, StderrSink

LogFormat = Literal["auto", "json", "console"]

_STDERR = 2


def configure_logging(level: str = "info", fmt: LogFormat = "auto") -> StderrSink:
    """Configure structlog once for the process; ``auto`` picks JSON unless stderr is a terminal.
    Returns the sink, which counts the lines it had to drop."""
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    rendering: list[structlog.typing.Processor] = (
        [
            structlog.processors.ExceptionRenderer(
                ExceptionDictTransformer(show_locals=False, use_rich=False)
            ),
            structlog.processors.JSONRenderer(),
        ]
        if use_json
        # The plain Python traceback: rich's (the default when installed) prints frame locals.
        else [
            _shown_not_obeyed,
            structlog.dev.ConsoleRenderer(colors=False, exception_formatter=_visible_traceback),
        ]
    )
    processors: list[structlog.typing.Processor] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        *rendering,
    ]

    def dropped_notice(count: int) -> str:
        # Rendered by the same processors, so a JSON log stays JSON lines.
        event: object = {
            "event": "log.lines_dropped",
            "lines": count,
            "reason": "the log could not be written",
        }
        for processor in processors:
            event = processor(None, "warning", event)  # type: ignore[arg-type]
        return str(event)

    sink = StderrSink(_STDERR, dropped_notice)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=SinkLoggerFactory(sink),
        cache_logger_on_first_use=True,
    )
    # The SDK and uvicorn log through stdlib logging (e.g. a server's unparseable output); keep it on
    # stderr, quiet below warnings, so it cannot interleave with stdout of a front end, and render it
    # as mcpd's own lines: a plain-text line in a JSON log is one a log reader cannot parse.
    handler = SinkHandler(sink)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.stdlib.add_logger_name,
                _library_event if level.lower() != "debug" else _library_event_traced,
            ],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *processors],
        )
    )
    logging.basicConfig(handlers=[handler], level=logging.WARNING)
    return sink


def _shown_not_obeyed(
    logger: object, method: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """On a terminal, the text of an event as ``visible`` shows it: a server's stderr line, a
    client's name or a library's message could otherwise retitle the terminal of ``mcpd serve``,
    clear it or write its clipboard. (The console renderer writes a value without spaces as it is;
    JSON escapes control characters itself.)"""
    for key, value in event.items():
        if isinstance(value, str):
            event[key] = visible(value)
    return event


def _visible_traceback(out: TextIO, exc_info: structlog.typing.ExcInfo) -> None:
    """The plain Python traceback, as ``visible`` shows it: an exception's message may carry what a
    server or client sent (``_shown_not_obeyed`` sees only the event's values, not its traceback)."""
    text = io.StringIO()
    structlog.dev.plain_traceback(text, exc_info)
    out.write(visible(text.getvalue()))


def _library_event_traced(
    logger: object, method: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """A library's log record as an event of mcpd's: ``library.log``, its text as ``message``."""
    event["message"] = event.pop("event", "")
    event["event"] = "library.log"
    return event


def _library_event(
    logger: object, method: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """``_library_event_traced`` with an exception said in one line (``error``), not its traceback.

    What a library logs with a traceback is about a server's or a peer's doing (the SDK's "Error
    parsing SSE message" at each handshake with a server that streams garbage), not a fault of
    mcpd's to debug: a traceback each time reads as a crash. ``--log-level debug`` keeps them.
    Not asyncio's: what it logs is a callback or protocol of mcpd's own that raised (rawrpc's
    expiry timer, a child's pipes), whose frames say where the fault is."""
    event = _library_event_traced(logger, method, event)
    if event.get("logger") == "asyncio":
        return event
    exc_info = event.pop("exc_info", None)
    if isinstance(exc_info, tuple) and isinstance(exc_info[1], BaseException):
        event["error"] = f"{type(exc_info[1]).__name__}: {exc_info[1]}"
    return event
