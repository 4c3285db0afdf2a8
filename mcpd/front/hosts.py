"""The daemon's live host sessions: opened and closed here, told of every supervisor event."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

import anyio

from mcpd.front.behind import ALWAYS_ROOM, Advice
from mcpd.front.core import Caller, Core
from mcpd.front.session import COLD_START_WAIT, HostSession, Send
from mcpd.model.logs import LogMessage
from mcpd.model.mcp import SessionState, SubscriptionsChanged
from mcpd.model.servers import ServerEvent


class Hosts:
    """Register ``on_event`` as a supervisor listener; open each host's session with ``open_session``."""

    def __init__(
        self, core: Core, *, max_in_flight: int = 256, cold_start_wait: float = COLD_START_WAIT
    ) -> None:
        self.core = core
        self.sessions: set[HostSession] = set()
        self._max_in_flight = max_in_flight
        self._cold_start_wait = cold_start_wait

    def on_event(self, event: ServerEvent) -> None:
        for session in list(self.sessions):
            session.on_event(event)

    def on_log(self, server: str, message: LogMessage) -> None:
        """A supervisor log listener: each session passes on what its host asked for."""
        if not self.sessions:
            return
        call = self.core.requests.related(server)  # the call it belongs to: the same for every session
        for session in list(self.sessions):
            session.on_log(server, message, call)

    @contextlib.asynccontextmanager
    async def open_session(
        self,
        send: Send,
        caller: Caller,
        state: SessionState,
        *,
        on_state: Callable[[SessionState], None] | None,
        on_subscriptions: Callable[[SubscriptionsChanged], None] | None = None,
        advice: Advice = ALWAYS_ROOM,
    ) -> AsyncIterator[HostSession]:
        """A session for one host, live until the block ends (then its requests are cancelled)."""
        session = HostSession(
            self.core,
            send,
            caller=caller,
            state=state,
            on_state=on_state,
            on_subscriptions=on_subscriptions,
            advice=advice,
            max_in_flight=self._max_in_flight,
            cold_start_wait=self._cold_start_wait,
        )
        self.sessions.add(session)
        try:
            session.start()
            yield session
        finally:
            self.sessions.discard(session)
            with anyio.CancelScope(shield=True):
                await session.aclose()
