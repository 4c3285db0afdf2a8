"""What the supervisor tells the rest of the daemon: status snapshots, tools, results, events."""

from __future__ import annotations

from typing import Any

import msgspec

from mcpd.supervisor.states import ServerState


class ToolInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One tool as its server lists it."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = msgspec.field(default_factory=dict)
    title: str | None = None


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
    tools: int
    description: str | None
    server_info: ServerInfo | None
    trust: str | None = None
    """Why the server or some of its tools are kept out of registries (verifier, pins), if they are."""


class ToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """A ``tools/call`` result; ``is_error`` means the tool ran and reported failure."""

    content: list[dict[str, Any]]
    structured_content: Any = None
    is_error: bool = False


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


Event = StateChanged | ToolsChanged
