"""MCP as the daemon speaks it to hosts: JSON-RPC envelopes and the params and results it handles.

msgspec structs for the hot paths (``tools/list``, ``tools/call``, notifications), so a
host's messages are never modelled with pydantic. Field names are the protocol's own
(camelCase); optional fields left ``UNSET`` are omitted from the JSON.

Also the private notifications the daemon sends its relay (``mcpd bridge``), which it never
forwards to the host: ``notifications/mcpd/session`` carries a ``SessionState`` that the relay
keeps and hands back on reconnect, ``notifications/mcpd/subscriptions`` what changed in the
session's subscriptions (``SubscriptionsChanged``), which the relay adds to that state then.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar, get_args

import msgspec
from msgspec import UNSET, UnsetType

from mcpd.model.resources import CompletionArgument, CompletionContext, CompletionRef

JSONRPC = "2.0"
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""Revisions the daemon negotiates through ``initialize``, oldest first."""
LATEST_PROTOCOL_VERSION = PROTOCOL_VERSIONS[-1]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
DAEMON_RESTARTED = -32010
"""(relay) The daemon went away while it held the request: it may or may not have run."""
DAEMON_UNAVAILABLE = -32011
"""(relay) No daemon came back within the wait for a request sent during the gap."""
TOO_MANY_REQUESTS = -32012
"""The session already runs ``max_in_flight`` requests: this one was not started."""
SESSION_ENDED = -32013
"""(HTTP) The host's session ended (the daemon stopping, the session set aside or idle) while it
held the request: it may or may not have run."""

SESSION_NOTIFICATION = "notifications/mcpd/session"
SUBSCRIPTIONS_NOTIFICATION = "notifications/mcpd/subscriptions"
TOOLS_LIST_CHANGED = "notifications/tools/list_changed"
PROGRESS = "notifications/progress"
CANCELLED = "notifications/cancelled"
MESSAGE = "notifications/message"
RESOURCES_LIST_CHANGED = "notifications/resources/list_changed"
PROMPTS_LIST_CHANGED = "notifications/prompts/list_changed"
ROOTS_LIST_CHANGED = "notifications/roots/list_changed"
RESOURCE_UPDATED = "notifications/resources/updated"
ADVISORY = frozenset({PROGRESS, MESSAGE, RESOURCE_UPDATED})
"""What a host can do without, the notifications a host session sends only while the host keeps up:
the relays (bridge, HTTP) drop these first for a host that does not read, never an answer or a
``list_changed`` (a server flooding resource updates would otherwise queue a host's answers behind
megabytes of them)."""
RESOURCE_NOT_FOUND = -32002

RequestId = int | str

S = TypeVar("S", bound=msgspec.Struct)


def with_extra(item: S, extra: dict[str, Any] | None) -> S | dict[str, Any]:
    """``item`` with the fields mcpd does not model (``extra``, wire names) beside its own: the item as
    the server sent it, mcpd's fields (a qualified name or URI) written over it. The struct itself
    when there are none, which is most items and costs nothing."""
    if not extra:
        return item
    return {**extra, **msgspec.to_builtins(item)}


# -- envelopes ---------------------------------------------------------------------------------


class Incoming(msgspec.Struct, frozen=True):
    """Any JSON-RPC message, with its params left raw: what a receiver decodes first.

    A request has ``method`` and ``id``; a notification has ``method`` only; a response
    has ``id`` and ``result`` or ``error``.
    """

    id: RequestId | UnsetType | None = UNSET
    method: str | UnsetType = UNSET
    params: msgspec.Raw = msgspec.Raw(b"{}")
    result: msgspec.Raw | UnsetType = UNSET
    error: msgspec.Raw | UnsetType = UNSET


class Route(msgspec.Struct, frozen=True):
    """Just enough of a message to route it: the relay decodes only this."""

    id: RequestId | UnsetType | None = UNSET
    method: str | UnsetType = UNSET


class SessionEnvelope(msgspec.Struct, frozen=True):
    """The private session notification, with its state left raw: the relay keeps it as bytes (and
    reads its subscriptions only from a daemon that tells no changes of them)."""

    params: msgspec.Raw


class SubscriptionsChanged(msgspec.Struct, frozen=True, omit_defaults=True):
    """What changed in a session's subscriptions (qualified URIs), told to its relay before the
    host's answer: the relay keeps the set, the state's ``subscribed`` when it resumes. A set of
    thousands sent whole at each change cost the daemon and the relay quadratic time."""

    added: list[str] = msgspec.field(default_factory=list)
    removed: list[str] = msgspec.field(default_factory=list)


class SubscriptionsEnvelope(msgspec.Struct, frozen=True):
    """The private subscriptions notification, as the relay reads it."""

    params: SubscriptionsChanged


class ErrorObject(msgspec.Struct, frozen=True):
    code: int
    message: str
    data: Any = UNSET


class Response(msgspec.Struct, frozen=True):
    id: RequestId
    result: Any
    jsonrpc: str = JSONRPC


class ErrorResponse(msgspec.Struct, frozen=True):
    id: RequestId | None
    error: ErrorObject
    jsonrpc: str = JSONRPC


class Notification(msgspec.Struct, frozen=True):
    method: str
    params: Any = UNSET
    jsonrpc: str = JSONRPC


class Request(msgspec.Struct, frozen=True):
    """A request the daemon sends a host (a server's sampling, elicitation or roots request)."""

    id: RequestId
    method: str
    params: Any = UNSET
    jsonrpc: str = JSONRPC


class IncomingReply(msgspec.Struct, frozen=True):
    """A host's response to one of the daemon's requests."""

    id: RequestId | None = None
    result: Any = None
    error: ErrorObject | None = None


# -- params and results -------------------------------------------------------------------------


class Implementation(msgspec.Struct, frozen=True):
    name: str = "unknown"
    version: str = ""
    title: str | UnsetType = UNSET


class InitializeParams(msgspec.Struct, frozen=True, rename="camel"):
    protocol_version: str = LATEST_PROTOCOL_VERSION
    capabilities: dict[str, Any] = msgspec.field(default_factory=dict)
    client_info: Implementation = msgspec.field(default_factory=Implementation)


class InitializeResult(msgspec.Struct, frozen=True, rename="camel"):
    protocol_version: str
    capabilities: dict[str, Any]
    server_info: Implementation
    instructions: str | UnsetType = UNSET


class Paginated(msgspec.Struct, frozen=True):
    """Params of a host's list request. mcpd lists everything on one page and gives no cursor, so
    a cursor is one it never gave: invalid (-32602, as MCP asks), not silently the first page."""

    cursor: str | None = None

    def __post_init__(self) -> None:
        if self.cursor is not None:
            raise ValueError("mcpd lists everything on one page and gave no cursor")


class Tool(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    name: str
    input_schema: dict[str, Any]
    description: str | UnsetType = UNSET
    title: str | None = None
    annotations: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    icons: list[dict[str, Any]] | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class ListToolsResult(msgspec.Struct, frozen=True):
    tools: list[Tool | dict[str, Any]]
    """Each a ``Tool``, or a dict where the server's tool has fields mcpd does not model (``with_extra``)."""


class CallToolParams(msgspec.Struct, frozen=True):
    name: str
    arguments: dict[str, Any] | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")
    """The host's ``_meta``: its progress token, and whatever else it sends the server."""


def passed_meta(meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """A host's request ``_meta`` as the server gets it where mcpd relays no progress (reads, prompts,
    completions): all of it but ``progressToken``, which would have the server report progress to
    no one; None when nothing is left."""
    if not meta:
        return None
    kept = {key: value for key, value in meta.items() if key != "progressToken"}
    return kept or None


def progress_token(meta: dict[str, Any] | None) -> RequestId | None:
    """The ``progressToken`` of a request's ``_meta``, if it has one of a valid type."""
    token = meta.get("progressToken") if meta else None
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


class CallToolResult(msgspec.Struct, frozen=True, rename="camel"):
    content: list[dict[str, Any]]
    structured_content: Any = UNSET
    is_error: bool | UnsetType = UNSET
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ProgressParams(msgspec.Struct, frozen=True, rename="camel"):
    progress_token: RequestId
    progress: int | float
    total: int | float | UnsetType = UNSET
    message: str | UnsetType = UNSET
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


class CancelledParams(msgspec.Struct, frozen=True, rename="camel"):
    request_id: RequestId | None = None
    reason: str | None = None


LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
LOG_LEVELS: tuple[str, ...] = get_args(LogLevel)
"""MCP's log levels, least severe first (RFC 5424's, as the spec takes them)."""


class SetLevelParams(msgspec.Struct, frozen=True):
    level: LogLevel


class LogMessageParams(msgspec.Struct, frozen=True):
    level: str
    data: Any
    """Any JSON value, as the server sent it."""
    logger: str | UnsetType = UNSET
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


class Empty(msgspec.Struct, frozen=True):
    """Params or result with nothing in them (``ping``, ``logging/setLevel``'s answer)."""


# -- resources, prompts, completions --------------------------------------------------------------


class Resource(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    uri: str
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET
    size: int | UnsetType = UNSET


class ResourceTemplate(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    uri_template: str
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET


# The items of lists and reads are each the struct, or a dict where the server's item has fields
# mcpd does not model (``with_extra``).


class ListResourcesResult(msgspec.Struct, frozen=True):
    resources: list[Resource | dict[str, Any]]


class ListResourceTemplatesResult(msgspec.Struct, frozen=True, rename="camel"):
    resource_templates: list[ResourceTemplate | dict[str, Any]]


class PromptArgument(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    required: bool | UnsetType = UNSET


class Prompt(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    arguments: list[PromptArgument | dict[str, Any]] | UnsetType = UNSET


class ListPromptsResult(msgspec.Struct, frozen=True):
    prompts: list[Prompt | dict[str, Any]]


class UriParams(msgspec.Struct, frozen=True):
    """``resources/subscribe``, ``resources/unsubscribe``, and the params of
    ``notifications/resources/updated``."""

    uri: str


class ReadResourceParams(msgspec.Struct, frozen=True):
    """``resources/read``: the URI, and the host's ``_meta`` for the server."""

    uri: str
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class ResourceUpdatedParams(msgspec.Struct, frozen=True):
    uri: str
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ResourceContents(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    uri: str
    mime_type: str | UnsetType = UNSET
    text: str | UnsetType = UNSET
    blob: str | UnsetType = UNSET


class ReadResourceResult(msgspec.Struct, frozen=True):
    contents: list[ResourceContents | dict[str, Any]]
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


class GetPromptParams(msgspec.Struct, frozen=True):
    name: str
    arguments: dict[str, str] | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class PromptMessage(msgspec.Struct, frozen=True):
    role: str
    content: dict[str, Any]


class GetPromptResult(msgspec.Struct, frozen=True, kw_only=True):
    description: str | UnsetType = UNSET
    messages: list[PromptMessage]
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


class CompleteRequestParams(msgspec.Struct, frozen=True):
    ref: CompletionRef
    argument: CompletionArgument
    context: CompletionContext | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class CompletionValues(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    values: list[str]
    total: int | UnsetType = UNSET
    has_more: bool | UnsetType = UNSET


class CompleteResult(msgspec.Struct, frozen=True):
    completion: CompletionValues
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


# -- the session state the relay keeps ------------------------------------------------------------


class SessionState(msgspec.Struct, frozen=True, kw_only=True):
    """What a host session needs to carry on in a new daemon: sent to the relay at each change.

    The relay builds the first one from its options (``preconnect``, ``expose_all``) and
    otherwise keeps the daemon's latest as opaque bytes, handed back on reconnect.
    """

    initialize: InitializeParams | None = None
    """The host's ``initialize`` params, once it has sent them."""
    connected: list[str] = msgspec.field(default_factory=list)
    preconnect: list[str] = msgspec.field(default_factory=list)
    """Servers to connect as soon as they run (``--connect``), not yet connected."""
    expose_all: bool = False
    query: str | None = None
    """The session's most recent ``mcpd_search_tools`` query ..."""
    query_at: float | None = None
    """... and when it was made (Unix time)."""
    subscribed: list[str] = msgspec.field(default_factory=list)
    """Qualified URIs of the resources the host subscribed to: empty in the states sent to a relay
    that takes ``subscription_deltas``, which keeps them itself."""
    subscription_deltas: bool = False
    """The relay keeps the subscriptions from ``notifications/mcpd/subscriptions`` (a relay of an
    earlier mcpd, under a daemon just upgraded, takes them in the states as before)."""
    log_level: LogLevel | None = None
    """The level the host set with ``logging/setLevel`` (None: it never did, so no log messages)."""


class SavedSession(msgspec.Struct, frozen=True):
    """An HTTP host session kept in the store, so that it outlives a daemon restart."""

    key: str
    """The SHA-256 of its ``Mcp-Session-Id`` (the id is a secret: it is never stored)."""
    state: bytes | None
    """Its ``SessionState`` as JSON; None: the session ended, forget it."""
    saved_at: float
    """Unix time of the save; one idle longer than ``http_session_idle`` is not resumed."""
    subscribed: list[str] | None = None
    """All its subscriptions (qualified URIs), which its ``state`` leaves out: the store keeps them as
    rows of their own, changed by ``SavedSubscriptions``. Written, they replace those kept; None: those
    kept stay. Read back, always given."""


class SavedSubscriptions(msgspec.Struct, frozen=True):
    """A change of an HTTP session's subscriptions, kept in the store as it happens: a state holding
    them all, saved at each change, wrote O(n) bytes each (10,000 one-by-one subscribes: ~1.4 GB)."""

    key: str
    """The session's ``SavedSession.key``."""
    added: list[str]
    removed: list[str]
