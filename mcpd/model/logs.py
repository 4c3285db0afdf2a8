"""Server log entries: what a server wrote to stderr or sent as ``notifications/message``.

The daemon keeps the latest entries of each configured server in a bounded ring; ``logs``
returns them, and ``logs.follow`` pushes new ones to the connection as ``logs``
notifications whose params are a ``LogLines``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import msgspec

from mcpd.model.protocol import Name

LOGS_NOTIFICATION = "logs"
"""The notification that carries a followed server's new entries (params: ``LogLines``)."""

LogSource = Literal["stderr", "stdout", "mcp"]
"""``stderr``: a line the process wrote to stderr; ``stdout``: a line of its stdout that mcpd could not
use (not JSON-RPC, or an answer it could not read), only a few of a flood; ``mcp``: a
``notifications/message`` it sent."""


class LogMessage(msgspec.Struct, frozen=True, kw_only=True):
    """A server's ``notifications/message``, as it sent it: hosts are given ``data`` (any JSON value)
    and ``_meta`` unchanged; the log keeps ``text()``."""

    level: str
    data: Any = None
    logger: str | None = None
    meta: dict[str, Any] | None = None

    def text(self) -> str:
        """``data`` as a log line: a string as it is, anything else as its JSON."""
        data = self.data
        return data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)


class LogEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One line of a server's log."""

    seq: int
    """Its number in this server's log since the daemon started: a jump between two entries
    means lines in between were not delivered (the ring moved on, or a follower fell behind)."""
    ts: float
    """Unix time the daemon received it."""
    source: LogSource
    text: str
    """The line, or the message's ``data`` (as JSON when not a string); a very long one is cut
    and ends with a marker saying how much was cut."""
    level: str | None = None
    """The MCP level (``debug`` ... ``emergency``) of an ``mcp`` entry; None for stderr and stdout."""
    logger: str | None = None
    """The logger name an ``mcp`` entry gave, if any."""


class LogsParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    server: Name
    limit: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """The most recent this many entries; every entry kept when omitted."""


class LogsResult(msgspec.Struct, frozen=True, kw_only=True):
    server: str
    entries: list[LogEntry]
    """Oldest first."""


class LogLines(msgspec.Struct, frozen=True, kw_only=True):
    """Params of a ``logs`` notification: new entries of a followed server, oldest first."""

    server: str
    entries: list[LogEntry]
    ended: bool = False
    """The server was removed from the config: nothing more will come for it."""
