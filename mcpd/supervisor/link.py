"""One live connection to a server: its MCP session and what is under it (a child, or HTTP)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from mcpd.supervisor.session import Session
from mcpd.supervisor.stdio import StdioChild

if TYPE_CHECKING:
    from mcpd.supervisor.sdk import HttpWatch


@dataclass
class Link:
    """Made when a handshake succeeds, dropped when that run ends; calls hold it while they run."""

    session: Session
    child: StdioChild | None
    """The process of a stdio server."""
    http: HttpWatch | None
    """The HTTP layer's reports, for a remote server."""
    refused: anyio.Event = field(default_factory=anyio.Event)
    """A call found the connection refusing requests: the run is over, whatever else says so."""
    calls: dict[object, float] = field(default_factory=dict)
    """A token of each tool call in flight (``send_call``), with when the call began (event-loop
    time): what the server may be busy with, and since when."""
    stale: dict[str, str] = field(default_factory=dict)
    """The lists whose refresh after list_changed is failing (``watchers``), each with why: what we
    hold of them is old, so the server stays degraded, whatever pings say, until they are listed again."""
    answered: int = 0
    """Tool calls it answered: a server that answers calls is alive, pings answered or not."""
    hung: int = 0
    """Tool calls in a row that ran out the server's whole ``call_timeout`` unanswered (``calls``);
    an answered call resets it. Pings say nothing of these: a server may answer pings and hang
    every tool."""
    hung_said: str | None = None
    """The server's ``last_error`` that its hung calls set last, which an answered call clears."""

    def usable(self) -> bool:
        """False once no request can reach the server any more (a call must not be written to it)."""
        if self.refused.is_set():
            return False
        if self.child is not None:
            return not self.child.stdout_closed.is_set()
        return self.http is None or not self.http.session_lost.is_set()
