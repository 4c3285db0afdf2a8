"""Every live server's tools under qualified names, kept current from supervisor events.

Entries are rebuilt per server, only when that server's tools or state change, so a
listing costs a concatenation of cached tuples in the one stable order: by server name,
then tool name.
"""

from __future__ import annotations

from mcpd.errors import UnknownTool
from mcpd.registry.model import ToolEntry
from mcpd.registry.names import SEPARATOR, qualify
from mcpd.supervisor.actor import ServerActor
from mcpd.supervisor.model import Event
from mcpd.supervisor.states import LIVE_STATES
from mcpd.supervisor.supervisor import Supervisor


class Catalog:
    """The aggregated tool catalogue; ``on_event`` must be registered as a supervisor listener."""

    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor
        self._entries: dict[str, tuple[ToolEntry, ...]] = {}
        self._by_name: dict[str, tuple[str, str]] | None = None

    def on_event(self, event: Event) -> None:
        self._entries.pop(event.server, None)
        self._by_name = None

    def _server_entries(self, actor: ServerActor) -> tuple[ToolEntry, ...]:
        cached = self._entries.get(actor.name)
        if cached is None:
            cached = tuple(
                ToolEntry(
                    name=qualify(actor.name, tool.name),
                    server=actor.name,
                    tool=tool.name,
                    description=tool.description,
                    input_schema=tool.input_schema,
                    title=tool.title,
                )
                for tool in actor.tools
            )
            self._entries[actor.name] = cached
        return cached

    def tools(self, servers: list[str] | None = None) -> list[ToolEntry]:
        """Tools of live servers (all, or the named ones; an unknown name is an error)."""
        if servers is None:
            actors = self._supervisor.actors()
        else:
            actors = [self._supervisor.actor(name) for name in sorted(set(servers))]
        out: list[ToolEntry] = []
        for actor in actors:
            if actor.state in LIVE_STATES:
                out.extend(self._server_entries(actor))
        return out

    def resolve(self, name: str) -> tuple[str, str]:
        """(server, tool) for a qualified name, also for a server that is restarting right now."""
        if self._by_name is None:
            # Over every server's last known tools, live or not, so a call can wait for a restart.
            self._by_name = {
                qualify(actor.name, tool.name): (actor.name, tool.name)
                for actor in self._supervisor.actors()
                for tool in actor.tools
            }
        found = self._by_name.get(name)
        if found is not None:
            return found
        server, separator, tool = name.partition(SEPARATOR)
        if separator and server in self._supervisor.names():
            return server, tool
        raise UnknownTool(
            f"no server offers a tool named {name!r} (qualified names look like server__tool)", {"tool": name}
        )
