"""Server states as plain data, and the one function allowed to change them.

Imports nothing else of mcpd, so the rules can be read (and tested) on their own.
"""

from __future__ import annotations

import enum


class ServerState(enum.StrEnum):
    STOPPED = "stopped"
    STARTING = "starting"
    RUNNING = "running"
    DEGRADED = "degraded"
    BACKOFF = "backoff"
    FAILED = "failed"
    DISABLED = "disabled"


S = ServerState

# Every legal edge, with why it exists. Anything else is a bug in the actor.
_ALLOWED: dict[ServerState, frozenset[ServerState]] = {
    # STOPPED -> STARTING: start requested; -> DISABLED: config says enabled = false
    S.STOPPED: frozenset({S.STARTING, S.DISABLED}),
    # DISABLED -> STARTING: explicit start overrides the config; -> STOPPED: config re-enabled it
    S.DISABLED: frozenset({S.STARTING, S.STOPPED}),
    # STARTING -> RUNNING: initialize and tools/list answered
    # STARTING -> DEGRADED: the process is alive but the handshake failed or timed out
    # STARTING -> BACKOFF: died or failed the handshake, will retry
    # STARTING -> FAILED: gave up (crash loop, or the command cannot be spawned at all)
    # STARTING -> STOPPED: stop requested mid-start
    S.STARTING: frozenset({S.RUNNING, S.DEGRADED, S.BACKOFF, S.FAILED, S.STOPPED}),
    # RUNNING -> DEGRADED: a ping or tools/list failed while the process is alive
    # RUNNING -> BACKOFF/FAILED: the process died
    # RUNNING -> STARTING: restart requested
    S.RUNNING: frozenset({S.DEGRADED, S.BACKOFF, S.FAILED, S.STOPPED, S.STARTING}),
    # DEGRADED -> RUNNING: the protocol answers again
    # DEGRADED -> BACKOFF/FAILED: it died, or stayed unhealthy and was killed
    S.DEGRADED: frozenset({S.RUNNING, S.BACKOFF, S.FAILED, S.STOPPED, S.STARTING}),
    # BACKOFF -> STARTING: the delay ran out, or a restart cut it short
    S.BACKOFF: frozenset({S.STARTING, S.STOPPED}),
    # FAILED -> STARTING: only an explicit start/restart leaves FAILED
    S.FAILED: frozenset({S.STARTING, S.STOPPED}),
}

LIVE_STATES = frozenset({S.RUNNING, S.DEGRADED})
"""States in which the server has a session that can take calls."""


class InvalidTransition(RuntimeError):
    """An actor tried an edge the table above does not allow."""


def can_transition(old: ServerState, new: ServerState) -> bool:
    return new in _ALLOWED[old]


def check_transition(old: ServerState, new: ServerState) -> ServerState:
    """Return ``new`` if ``old -> new`` is legal, else raise ``InvalidTransition``."""
    if new not in _ALLOWED[old]:
        raise InvalidTransition(f"{old} -> {new} is not a legal transition")
    return new
