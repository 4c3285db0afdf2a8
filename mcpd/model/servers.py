"""Servers: status snapshots, what a server says of itself, supervisor events, reload plans."""

from __future__ import annotations

from typing import Any

import msgspec

from mcpd.model.states import ServerState


class ServerInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What a server said about itself in ``initialize``."""

    name: str
    version: str
    title: str | None = None
    instructions: str | None = None


class ServerStatus(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of one supervised server. Holds no config secrets (env, headers)."""

    name: str
    state: ServerState
    transport: str
    alive: bool
    """The process is up (stdio) or the session is connected (HTTP)."""
    degraded: bool
    """Alive, but the protocol is failing (initialize, tools/list or ping)."""
    pid: int | None
    restarts: int
    uptime_s: float | None
    """Seconds since the current session became ready; None when not live."""
    last_error: str | None
    """What is wrong now; cleared by a successful start (the previous failure stays in ``last_exit``).
    When nothing else is, a list of the live server that mcpd cut, its pages never ending (its
    tools are the ones listed before the cut)."""
    tools: int
    """Tools it offers now (0 when it is not live)."""
    description: str | None
    server_info: ServerInfo | None
    trust: str | None = None
    """Why the server or some of its tools are kept out of registries (verifier, pins), if they are."""
    blocked: str | None = None
    """Why the whole server is kept out of registries and selection (verifier findings), if it is."""
    held: list[str] = msgspec.field(default_factory=list)
    """Tools held back until ``mcpd approve`` (changed or new since approval)."""
    held_because: str | None = None
    """Why the held tools wait when it is not their own change: the usage store, where their
    approvals are kept, could not be read."""
    attempt: int = 0
    """Failed runs in a row (reset by a stable run)."""
    next_retry_at: float | None = None
    """Unix time of the next restart attempt, while in ``backoff``."""
    last_exit: str | None = None
    """How the previous run ended, kept after ``last_error`` is cleared."""


class StateChange(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of a server's recent history."""

    ts: float
    """Unix time."""
    old: ServerState
    new: ServerState
    reason: str


class ServerDetail(msgspec.Struct, frozen=True, kw_only=True):
    """``mcpd status SERVER``: the status, recent state changes and the last lines of its stderr."""

    status: ServerStatus
    history: list[StateChange]
    """Oldest first, bounded."""
    stderr: list[str]
    """The last lines the server wrote to stderr, oldest first."""
    stdout: list[str] = msgspec.field(default_factory=list)
    """The last lines of its stdout that mcpd could not use (not JSON-RPC, or an answer it could
    not read), oldest first (empty from a daemon too old to say)."""


class ReloadPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What a new config changes: names of servers to start, stop, restart, and leave alone."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    unchanged: tuple[str, ...]


class StateChanged(msgspec.Struct, frozen=True, kw_only=True, tag="state"):
    server: str
    old: ServerState
    new: ServerState
    reason: str


class ToolsChanged(msgspec.Struct, frozen=True, kw_only=True, tag="tools"):
    server: str
    tools: int


class SurfaceChanged(msgspec.Struct, frozen=True, kw_only=True, tag="surface"):
    """A server's resource (or template) list, prompt list, or both, changed after its ``list_changed``."""

    server: str
    resources: bool
    prompts: bool


class ResourceUpdated(msgspec.Struct, frozen=True, kw_only=True, tag="resource"):
    """A resource the daemon subscribed to changed (``notifications/resources/updated``).

    The supervisor gives the server's own ``uri``; socket clients receive it qualified
    (``mcpd://server/<uri>``), the name they subscribed by, and only for their subscriptions.
    """

    server: str
    uri: str
    meta: dict[str, Any] | None = None
    """The notification's ``_meta``, as the server sent it; or, in the last update of a subscription
    that ended, ``SUBSCRIPTION_ENDED``."""


SUBSCRIPTION_ENDED = "mcpd/subscriptionEnded"
"""The ``_meta`` key of the last update of a subscription that ended (the server says the resource
does not exist, or a reload removed the server), its value why; its holders hold it no more. MCP
has no notification for it, and a host that only reads the resource again learns it too."""


def ends_subscription(meta: dict[str, Any] | None) -> bool:
    """Whether an update with this ``_meta`` is the last of a subscription (``SUBSCRIPTION_ENDED``)."""
    return meta is not None and SUBSCRIPTION_ENDED in meta


class CallActivity(msgspec.Struct, frozen=True, kw_only=True, tag="calls"):
    """Tool calls finished in the last ``interval_s`` seconds, per server (sent once per interval
    when there were any): what a live view such as ``mcpd top`` shows as calls per second."""

    interval_s: float
    calls: dict[str, int]
    errors: dict[str, int]


ServerEvent = StateChanged | ToolsChanged | SurfaceChanged | ResourceUpdated
"""What the supervisor tells its listeners."""

Event = ServerEvent | CallActivity
"""What subscribers of the socket receive."""
