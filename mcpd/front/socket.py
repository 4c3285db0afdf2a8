"""A daemon socket connection upgraded to MCP: ``hello`` with ``mode: "mcp"``, then raw JSON-RPC frames.

This is what ``mcpd bridge`` talks to: each frame holds one JSON-RPC message, as bytes,
in both directions. ``resume`` in the hello carries a ``SessionState`` (the relay's
options at first, the daemon's last state after a reconnect, with the subscriptions the relay
was told of).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import msgspec
import structlog

from mcpd.errors import DECODE_FAILURES
from mcpd.front.core import Caller
from mcpd.front.hosts import Hosts
from mcpd.ipc.framing import frame
from mcpd.ipc.server import Connection
from mcpd.model import mcp
from mcpd.model.mcp import SessionState

log = structlog.get_logger("mcpd.front")

MODE = "mcp"
_state = msgspec.json.Decoder(SessionState)
_encoder = msgspec.json.Encoder()


def _resumed(resume: bytes | None, conn: Connection) -> SessionState:
    if not resume:
        return SessionState()
    try:
        return _state.decode(resume)
    except DECODE_FAILURES as exc:
        # A state from another mcpd version: the host keeps its session, minus what it had connected.
        log.warning("front.resume_unreadable", conn=conn.id, error=str(exc))
        return SessionState()


async def serve_socket(
    hosts: Hosts, conn: Connection, frames: AsyncIterator[bytes], resume: bytes | None
) -> None:
    """Run one host session over an upgraded connection until the relay hangs up."""
    stream = conn.stream

    def send(data: bytes, related: mcp.RequestId | None = None, /) -> None:
        # One stream, in order: a call's log messages go before its answer without ``related``.
        stream.send_nowait(frame(data))

    def hand_over(state: SessionState) -> None:
        # The relay keeps the latest, to hand a new daemon if this one goes away.
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            send(_encoder.encode(mcp.Notification(mcp.SESSION_NOTIFICATION, state)))

    def tell(change: mcp.SubscriptionsChanged) -> None:
        # The relay adds it to the state it keeps: the whole set at each change cost O(n) each.
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            send(_encoder.encode(mcp.Notification(mcp.SUBSCRIPTIONS_NOTIFICATION, change)))

    state = _resumed(resume, conn)
    caller = Caller(conn.client, str(conn.id))
    log.info("front.session", conn=conn.id, client=conn.client, resumed=state.initialize is not None)
    async with hosts.open_session(
        send,
        caller,
        state,
        on_state=hand_over,
        on_subscriptions=tell if state.subscription_deltas else None,
        advice=conn,
    ) as session:

        def take(data: bytes) -> bool:
            session.receive(data)
            return True

        # Each message handled in the read callback when the reader waits with nothing read ahead
        # (as ``mcpd.ipc.server`` does for plain requests): the reading task would take it one
        # event-loop iteration later, and its resume through ``frames`` costs as much again.
        conn.stream.express(take)
        try:
            with contextlib.suppress(ConnectionError, OSError):
                async for data in frames:
                    session.receive(data)
        finally:
            conn.stream.express(None)
