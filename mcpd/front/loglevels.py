"""The log level servers are asked for: the most detailed one that any host who sees them set.

Each host session hears the log messages of the servers it sees (those it connected, or all) at or
above its own ``logging/setLevel`` level (it filters them itself). A server that declared
``logging`` is asked (``logging/setLevel``) for the most detailed level wanted by the hosts that see
it, so a host at ``debug`` gets the debug messages of a server whose own default is quieter, while
servers it does not see are not made to send what nobody reads, and servers send less while every
host wants only errors. A new run of a server is asked again, and so is a server a host comes to
see. A server that only hosts who left could see is asked for the least detailed level of the
hosts that stay. When the last host with a level leaves, servers keep the level they were last
asked for until they restart: MCP has no request that undoes ``logging/setLevel``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

import structlog

from mcpd.errors import InvalidParams, McpdError, UnknownServer
from mcpd.front.background import Background
from mcpd.model.mcp import LOG_LEVELS, LogLevel
from mcpd.model.servers import ServerEvent, StateChanged
from mcpd.model.states import ServerState
from mcpd.supervisor import surface_requests
from mcpd.supervisor.supervisor import Supervisor

log = structlog.get_logger()

ASK_TIMEOUT = 10.0
"""How long a server may take to answer ``logging/setLevel``."""


class Viewer(Protocol):
    """A host session, as far as the servers it sees go."""

    @property
    def expose_all(self) -> bool: ...

    @property
    def connected(self) -> Collection[str]: ...


class _Wanted:
    """The levels hosts want, worked out once per change of hosts: one pass over them."""

    def __init__(self, levels: dict[Viewer, LogLevel]) -> None:
        everywhere: list[LogLevel] = []
        self._by_server: dict[str, LogLevel] = {}
        for host, level in levels.items():
            if host.expose_all:
                everywhere.append(level)
            else:
                for name in host.connected:
                    self._by_server[name] = _most_detailed(level, self._by_server.get(name, level))
        self._everywhere = _most_detailed(*everywhere) if everywhere else None
        self._quietest = max(levels.values(), key=LOG_LEVELS.index, default=None)

    def level(self, name: str, *, asked: LogLevel | None) -> LogLevel | None:
        """The level for server ``name``, last ``asked`` for ``asked`` in its current run (or None)."""
        seen = [level for level in (self._by_server.get(name), self._everywhere) if level is not None]
        if seen:
            return _most_detailed(*seen)
        if asked is None or self._quietest is None:
            return None
        # Seen by hosts who left only: no more detailed than it is now, nor than any host that
        # stays wants (messages nobody reads).
        return max(asked, self._quietest, key=LOG_LEVELS.index)


def _most_detailed(*levels: LogLevel) -> LogLevel:
    return min(levels, key=LOG_LEVELS.index)


class LogLevels:
    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor
        self._levels: dict[Viewer, LogLevel] = {}
        self._runs: dict[str, int] = {}
        """How many runs of each server have started (a new run knows no level)."""
        self._asked: dict[str, tuple[int, LogLevel]] = {}
        """The run of each server last asked, and the level it was asked for (or refused)."""
        self._asking: set[str] = set()
        """Servers being asked now: one request at a time each, however often hosts change levels."""
        self._wanted: _Wanted | None = None
        """The levels hosts want, until hosts change (None: to be worked out)."""
        self._background = Background()
        self.run = self._background.run
        """Own the requests to servers, until cancelled."""

    def wanted(self, name: str) -> LogLevel | None:
        """The level server ``name`` is to be asked for: the most detailed one set by a host that
        sees it (None: nothing to ask)."""
        if self._wanted is None:
            self._wanted = _Wanted(self._levels)
        asked = self._asked.get(name)
        this_run = asked[1] if asked is not None and asked[0] == self._runs.get(name, 0) else None
        return self._wanted.level(name, asked=this_run)

    def set(self, host: Viewer, level: LogLevel) -> None:
        """``host`` wants the log messages of the servers it sees at ``level`` and above."""
        self._levels[host] = level
        self._hosts_changed()

    def sees_more(self, host: Viewer) -> None:
        """``host`` has come to see another server, which may be wanted more detailed now."""
        if host in self._levels:
            self._hosts_changed()

    def drop(self, host: Viewer) -> None:
        """``host`` is gone; servers are asked for a less detailed level if nobody else wants theirs."""
        if self._levels.pop(host, None) is not None:
            self._hosts_changed()

    def on_event(self, event: ServerEvent) -> None:
        """Ask a server that starts a new run (which knows no level) for the level hosts want, and
        one that runs again after a spell of not answering, if it was not asked meanwhile."""
        if isinstance(event, StateChanged) and event.new is ServerState.RUNNING:
            if event.old is ServerState.STARTING:
                self._runs[event.server] = self._runs.get(event.server, 0) + 1
            self._ask(event.server, self.wanted(event.server))

    def _hosts_changed(self) -> None:
        self._wanted = None
        for actor in self._supervisor.actors():
            if actor.state is ServerState.RUNNING:  # the others are asked when they run
                self._ask(actor.name, self.wanted(actor.name))

    def _ask(self, name: str, wanted: LogLevel | None) -> None:
        if (
            self._due(name, wanted) is not None
            and name not in self._asking
            and self._background.start(self._send, name)
        ):
            self._asking.add(name)

    def _due(self, name: str, wanted: LogLevel | None) -> LogLevel | None:
        """The level ``name``'s current run is still to be asked for (None: nothing to ask)."""
        if wanted is None or self._asked.get(name) == (self._runs.get(name, 0), wanted):
            return None
        return wanted

    async def _send(self, name: str) -> None:
        # Each request is for the level wanted when it is sent, and the last one for the level
        # wanted at the end: a host that changes levels a thousand times costs a few requests, and
        # a server that does not answer holds one task, not one per change.
        try:
            while (level := self._due(name, self.wanted(name))) is not None:
                try:
                    actor = self._supervisor.actor(name)
                except UnknownServer:
                    return  # removed by a reload
                if actor.state is not ServerState.RUNNING:
                    return  # asked when it runs
                run = self._runs.get(name, 0)
                try:
                    sent = await surface_requests.set_log_level(actor, level, ASK_TIMEOUT)
                except InvalidParams as exc:
                    # Asked again for another level, not this one.
                    log.info("server.log_level_refused", server=name, level=level, error=exc.message)
                    sent = False
                except McpdError as exc:
                    # No answer (it hangs, or its run ended): asked again when it runs again.
                    log.info("server.log_level_unanswered", server=name, level=level, error=exc.message)
                    return
                # A run that started meanwhile was not asked: the loop asks it.
                self._asked[name] = (run, level)
                if sent:
                    log.debug("server.log_level", server=name, level=level)
        finally:
            self._asking.discard(name)
