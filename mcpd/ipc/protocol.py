"""Messages on the socket, and the params and result of every method.

Each frame holds one message, a msgpack array whose first element tags its kind::

    [0, id, method, params]        Request       client -> daemon
    [1, id, result, error]         Response      daemon -> client (error is null on success)
    [2, method, params]            Notification  daemon -> client

``params`` and ``result`` stay raw msgpack at this level and are decoded against the
method's own struct, so a bad params object is an ``InvalidParams`` error for that
request only.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from mcpd.config.model import ConfigIssue
from mcpd.discovery.render import Rendered
from mcpd.discovery.select import DEFAULT_THRESHOLD
from mcpd.registry.model import ToolEntry
from mcpd.supervisor.model import Event, ReloadPlan, ServerStatus, ToolResult

PROTOCOL_VERSION = 1
MAX_CALL_TIMEOUT = 86400.0

_NIL = msgspec.Raw(b"\xc0")


class Request(msgspec.Struct, array_like=True, tag=0, frozen=True):
    id: int
    method: str
    params: msgspec.Raw = _NIL


class ErrorInfo(msgspec.Struct, frozen=True):
    code: int
    message: str
    data: dict[str, Any] = msgspec.field(default_factory=dict)


class Response(msgspec.Struct, array_like=True, tag=1, frozen=True):
    id: int | None
    result: msgspec.Raw = _NIL
    error: ErrorInfo | None = None


class Notification(msgspec.Struct, array_like=True, tag=2, frozen=True):
    method: str
    params: msgspec.Raw = _NIL


Message = Request | Response | Notification


# -- method params and results ---------------------------------------------------------------


class NoParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class HelloParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    protocol: int
    client: str = "unknown"


class HelloResult(msgspec.Struct, frozen=True, kw_only=True):
    protocol: int
    version: str
    pid: int
    """The daemon's process id."""


class StatusResult(msgspec.Struct, frozen=True, kw_only=True):
    servers: list[ServerStatus]


class ServerParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str


class ToolsListParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    servers: list[str] | None = None
    """Only these servers' tools; all live servers when omitted."""
    query: str | None = None
    """Rank by relevance to this text (tools matching none of its words are left out)."""
    limit: Annotated[int, msgspec.Meta(ge=1)] | None = None
    budget_tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Also render the result for a model's context within this many (estimated) tokens."""


class ToolsListResult(msgspec.Struct, frozen=True, kw_only=True):
    tools: list[ToolEntry]
    """Ranked best first when a query was given; else every tool, by server then name."""
    rendered: Rendered | None = None


class SelectParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    query: str
    threshold: Annotated[float, msgspec.Meta(ge=0, le=1)] = DEFAULT_THRESHOLD


class SelectResult(msgspec.Struct, frozen=True, kw_only=True):
    servers: list[str]
    """Selected servers in config order (all of them when ``fallback``)."""
    scores: dict[str, float]
    fallback: bool


class ToolsCallParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    tool: str
    """A qualified name (``server__tool``), or the server's own tool name when ``server`` is given."""
    server: str | None = None
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    timeout: Annotated[float, msgspec.Meta(gt=0, le=MAX_CALL_TIMEOUT)] | None = None
    """Seconds, including any wait for a restarting server; the server's call_timeout when omitted."""


class ReloadResult(msgspec.Struct, frozen=True, kw_only=True):
    source: str
    plan: ReloadPlan
    issues: list[ConfigIssue]


class Ok(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool = True


EVENT_NOTIFICATION = "event"
"""The one notification method: its params are a supervisor ``Event`` (state or tools change)."""

__all__ = [
    "EVENT_NOTIFICATION",
    "PROTOCOL_VERSION",
    "ErrorInfo",
    "Event",
    "HelloParams",
    "HelloResult",
    "Message",
    "NoParams",
    "Notification",
    "Ok",
    "ReloadResult",
    "Request",
    "Response",
    "SelectParams",
    "SelectResult",
    "ServerParams",
    "StatusResult",
    "ToolResult",
    "ToolsCallParams",
    "ToolsListParams",
    "ToolsListResult",
]
