"""The log level servers are asked for: the most detailed one that any host set.

Each host session hears servers' log messages at or above its own ``logging/setLevel`` level (it
filters them itself). A server that declared ``logging`` is asked (``logging/setLevel``) for the
most detailed level any host wants, so a host at ``debug`` gets the debug messages of a server
whose own default is quieter, and servers send less while every host wants only errors. A new run
of a server is asked again. When the last host with a level leaves, servers keep the level they
were last asked for: MCP has no request that undoes ``logging/setLevel``.
"""

from __future__ import annotations

from collections.abc import Hashable

import anyio
import structlog
from anyio.abc import TaskGroup

from mcpd.errors import McpdError
from mcpd.model.mcp import LOG_LEVELS, LogLevel
from mcpd.model.servers import ServerEvent, StateChanged
from mcpd.model.states import ServerState
from mcpd.supervisor import surface_requests
from mcpd.supervisor.supervisor import Supervisor

log = structlog.get_logger()

ASK_TIMEOUT = 10.0
"""How long a server may take to answer ``logging/setLevel``."""


class LogLevels:
    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor
        self._levels: dict[Hashable, LogLevel] = {}
        self._asked: dict[str, LogLevel] = {}
        """The level each server's current run was asked for."""
        self._locks: dict[str, anyio.Lock] = {}
        self._tg: TaskGroup | None = None

    async def run(self) -> None:
        """Own the requests to servers, until cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            await anyio.sleep_forever()

    def wanted(self) -> LogLevel | None:
        """The most detailed level any host set (None: no host set one)."""
        return min(self._levels.values(), key=LOG_LEVELS.index, default=None)

    def set(self, owner: Hashable, level: LogLevel) -> None:
        """``owner`` (a host session) wants log messages at ``level`` and above."""
        self._levels[owner] = level
        self._ask_all()

    def drop(self, owner: Hashable) -> None:
        """``owner`` is gone; servers are asked for a less detailed level if nobody else wants theirs."""
        if self._levels.pop(owner, None) is not None:
            self._ask_all()

    def on_event(self, event: ServerEvent) -> None:
        """Ask a server that starts a new run (which knows no level) for the level hosts want."""
        if isinstance(event, StateChanged) and (event.old, event.new) == (
            ServerState.STARTING,
            ServerState.RUNNING,
        ):
            self._asked.pop(event.server, None)
            self._ask(event.server)

    def _ask_all(self) -> None:
        for name in self._supervisor.names():
            self._ask(name)

    def _ask(self, name: str) -> None:
        wanted = self.wanted()
        if wanted is not None and self._asked.get(name) != wanted and self._tg is not None:
            self._tg.start_soon(self._send, name)

    async def _send(self, name: str) -> None:
        # One request at a time per server, each for the level wanted when it is sent: levels
        # set in quick succession end with the last one, whatever order the tasks run in.
        async with self._locks.setdefault(name, anyio.Lock()):
            level = self.wanted()
            if level is None or self._asked.get(name) == level or name not in self._supervisor.names():
                return
            actor = self._supervisor.actor(name)
            if actor.state is not ServerState.RUNNING:
                return  # asked when it runs
            try:
                sent = await surface_requests.set_log_level(actor, level, ASK_TIMEOUT)
            except McpdError as exc:
                log.info("server.log_level_refused", server=name, level=level, error=exc.message)
                return
            self._asked[name] = level
            if sent:
                log.debug("server.log_level", server=name, level=level)
