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

from mcpd.model.servers import ReloadPlan, ServerStatus
from mcpd.model.tools import Rendered, ToolEntry
from mcpd.model.trust import Finding, ToolChange
from mcpd.model.usage import StoreState

PROTOCOL_VERSION = 1
MAX_CALL_TIMEOUT = 86400.0
MAX_SERVER_CALL_TIMEOUT = 3600.0
"""The longest ``call_timeout`` a server's config may give: how long a call without a timeout of its own
may run before the daemon answers it (``CallTimeout`` at the latest)."""
SELECT_THRESHOLD = 0.05
"""The reference server selection's default TF-cosine threshold."""

# Limits on what a client may ask for, so that no request costs the daemon more than a
# few milliseconds to read (a refused value is an ``InvalidParams`` naming the limit).
MAX_QUERY = 4096
"""Characters of a query: far beyond any user request, far below what ranking could slow down on."""
MAX_NAME = 256
"""Characters of a server, tool or client name."""
MAX_CALL_PARAMS = 4 * 1024 * 1024
"""Bytes of ``tools.call`` params (the arguments, mostly); other methods take 64 KiB."""

Query = Annotated[str, msgspec.Meta(max_length=MAX_QUERY)]
Name = Annotated[str, msgspec.Meta(max_length=MAX_NAME)]

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


HELLO_MAX_PARAMS = 1024
"""Bytes of ``hello`` params: a version and a client name."""
UPGRADE_MAX_PARAMS = 64 * 1024
"""Bytes of a hello that upgrades the connection (its ``resume`` state included)."""
RESUME_MAX = UPGRADE_MAX_PARAMS - HELLO_MAX_PARAMS
"""Bytes of ``resume`` a relay sends at most: what an upgrading hello may hold, less room for its
other params (those of a plain hello)."""


class HelloParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    protocol: int
    client: Name = "unknown"
    mode: str | None = None
    """Upgrade the connection: after the answer, its frames carry this mode's messages (``"mcp"``)."""
    resume: bytes | None = None
    """Opaque state for the mode's handler to carry on a session from (e.g. after a daemon restart)."""


class HelloResult(msgspec.Struct, frozen=True, kw_only=True):
    protocol: int
    version: str
    pid: int
    """The daemon's process id."""
    uptime_s: float | None = None
    """Seconds the daemon has been serving (None from a daemon too old to say): a bridge that came
    later can still tell a daemon that died soon after it came up from one that had lived."""
    max_frame: int | None = None
    """The largest message the daemon reads, in bytes (``[daemon] max_frame_bytes``; None from a daemon
    too old to say): a relay refuses a longer one itself instead of sending it, being cut off, and
    sending it again to the next connection."""


class StatusResult(msgspec.Struct, frozen=True, kw_only=True):
    servers: list[ServerStatus]
    store: StoreState | None = None
    """The usage store's state (None from a daemon too old to say)."""
    skipped: list[str] = msgspec.field(default_factory=list)
    """The config's bad server entries, each naming file, server and field: skipped at start, they
    have no status of their own (a reload with any is refused, so only the start leaves them)."""


class ServerParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Name


class ToolsListParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    servers: Annotated[list[Name], msgspec.Meta(max_length=1024)] | None = None
    """Only these servers' tools; all live servers when omitted."""
    query: Query | None = None
    """Rank by relevance to this text (tools matching none of its words are left out)."""
    limit: Annotated[int, msgspec.Meta(ge=1)] | None = None
    budget_tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Also render the result for a model's context within this many (estimated) tokens."""
    explain: bool = False
    """Give each ranked tool the parts of its score (text, usage factor, association)."""
    include_reserved: bool = True
    """Add ``mcpd_request_capability`` (front ends that offer it themselves turn this off)."""


class ToolsListResult(msgspec.Struct, frozen=True, kw_only=True):
    tools: list[ToolEntry]
    """Ranked best first when a query was given; else every tool, by server then name."""
    rendered: Rendered | None = None


class SelectParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    query: Query
    threshold: Annotated[float, msgspec.Meta(ge=0, le=1)] = SELECT_THRESHOLD


class SelectResult(msgspec.Struct, frozen=True, kw_only=True):
    servers: list[str]
    """Selected servers in config order (all of them when ``fallback``)."""
    scores: dict[str, float]
    fallback: bool


class ToolsCallParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    tool: Annotated[str, msgspec.Meta(max_length=2 * MAX_NAME + 2)]
    """A qualified name (``server__tool``), or the server's own tool name when ``server`` is given."""
    server: Name | None = None
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    timeout: Annotated[float, msgspec.Meta(gt=0, le=MAX_CALL_TIMEOUT)] | None = None
    """Seconds, including any wait for a restarting server; the server's call_timeout when omitted."""
    query: Query | None = None
    """The user's request that led to this call, if the client knows it: ranking learns from it."""
    progress: bool = False
    """Relay the server's progress for this call as ``progress`` notifications."""
    meta: dict[str, Any] | None = None
    """``_meta`` for the server's ``tools/call`` (a host's tracing or vendor keys); mcpd sets the
    progress token in it itself."""


class CapabilityParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    capability: Annotated[str, msgspec.Meta(min_length=1, max_length=2000)]
    context: Annotated[str, msgspec.Meta(max_length=8000)] | None = None


class ReportParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    since_s: Annotated[float, msgspec.Meta(gt=0)] | None = None
    """Only the last this many seconds; everything retained when omitted."""
    top: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 20
    """How many capability groups to return."""


class ReloadResult(msgspec.Struct, frozen=True, kw_only=True):
    source: str
    plan: ReloadPlan
    restart_needed: list[str] = msgspec.field(default_factory=list)
    """``[daemon]`` settings whose new values wait for a restart (they are read at start only)."""


class Ok(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool = True


class CancelParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    id: int
    """The id of an earlier request on the same connection."""


class ConnectResult(msgspec.Struct, frozen=True, kw_only=True):
    server: str
    already: bool
    """The session had connected this server before; nothing changed."""
    tools: list[ToolEntry]


class SessionTools(msgspec.Struct, frozen=True, kw_only=True):
    servers: list[str]
    """Servers this session has connected."""
    tools: list[ToolEntry]
    """Their tools (of those that are live), by server then name."""


class ApproveParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    server: Name
    tool: Name | None = None
    """One tool; all of the server's held-back tools when omitted."""


class ApproveResult(msgspec.Struct, frozen=True, kw_only=True):
    approved: list[str]
    """Tools whose changed or new definitions were accepted."""
    findings: list[str] = msgspec.field(default_factory=list)
    """Tools (or "(server instructions)") whose verifier findings were accepted."""
    already_approved: list[str] = msgspec.field(default_factory=list)
    """Tools asked about whose current definitions were approved before this call."""
    not_saved: str | None = None
    """Why what was accepted is not in the usage store: it holds for this daemon's run only (unless
    ``pending``). None when it was saved, or nothing was accepted."""
    pending: bool = False
    """The store is retrying: what was accepted is kept and written once it can be."""


class TrustResult(msgspec.Struct, frozen=True, kw_only=True):
    server: str
    summary: str | None
    """Why the server or some of its tools are kept out, if they are."""
    changes: list[ToolChange]
    findings: list[Finding]


class SnippetResult(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    """An ``<available_mcps>`` block for a system prompt."""


class Progress(msgspec.Struct, frozen=True, kw_only=True):
    """Params of a ``progress`` notification: how far request ``request`` has come."""

    request: int
    progress: int | float
    total: int | float | None = None
    message: str | None = None
    meta: dict[str, Any] | None = None
    """The server's ``_meta`` of the notification."""


PROGRESS_NOTIFICATION = "progress"
EVENT_NOTIFICATION = "event"
"""The one notification method: its params are a supervisor ``Event`` (state or tools change)."""
