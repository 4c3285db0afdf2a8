"""Every live server's tools under qualified names, kept current from supervisor events.

Entries are rebuilt per server, only when that server's tools or state change, so a
listing costs a concatenation of cached tuples in the one stable order: by server name,
then tool name. The search index follows the same rule: before a query, servers whose
tool list is not the one indexed are re-indexed, and only those.
"""

from __future__ import annotations

import contextlib

import anyio
import msgspec

from mcpd.discovery.index import Params, ToolIndex, ToolText, schema_params
from mcpd.discovery.prior import UsagePrior
from mcpd.discovery.render import one_line
from mcpd.errors import UnknownServer, UnknownTool
from mcpd.model.servers import ServerEvent
from mcpd.model.states import LIVE_STATES
from mcpd.model.tools import SEPARATOR, ToolEntry, ToolInfo
from mcpd.registry.names import qualify
from mcpd.supervisor.actor import ServerActor
from mcpd.supervisor.supervisor import Supervisor
from mcpd.trust.gate import TrustGate


class Catalog:
    """The aggregated tool catalogue; ``on_event`` must be registered as a supervisor listener."""

    def __init__(
        self, supervisor: Supervisor, params: Params | None = None, gate: TrustGate | None = None
    ) -> None:
        self._supervisor = supervisor
        self.gate = gate or TrustGate()
        self._entries: dict[str, tuple[tuple[ToolInfo, ...], int, dict[str, ToolEntry]]] = {}
        self._by_name: dict[str, tuple[str, str]] | None = None
        self._index = ToolIndex(params or Params())
        self._indexed: dict[str, tuple[tuple[ToolInfo, ...], int]] = {}
        self._index_lock = anyio.Lock()

    def on_event(self, event: ServerEvent) -> None:
        self._by_name = None
        # Review a server's tools as soon as they are known, so findings are logged at once.
        with contextlib.suppress(UnknownServer):
            actor = self._supervisor.actor(event.server)
            if actor.state in LIVE_STATES:
                self.gate.review(actor.config, actor.tools)

    def _allowed_tools(self, actor: ServerActor) -> list[ToolInfo]:
        review = self.gate.review(actor.config, actor.tools)
        if review.blocked:
            return []
        return [tool for tool in actor.tools if tool.name not in review.held]

    def denied(self, actor: ServerActor, tool: str) -> str | None:
        """Why the trust gate keeps this tool out, or None."""
        if actor.tools:
            self.gate.review(actor.config, actor.tools)
        return self.gate.allowed(actor.name, tool)

    def trust_summary(self, actor: ServerActor) -> str | None:
        if not actor.tools:
            return None
        return self.gate.review(actor.config, actor.tools).summary()

    def _server_entries(self, actor: ServerActor) -> dict[str, ToolEntry]:
        """The server's allowed tools by name (in tool order), rebuilt when its tools or verdict change."""
        revision = self.gate.revision(actor.name)
        cached = self._entries.get(actor.name)
        if cached is not None and cached[0] is actor.tools and cached[1] == revision:
            return cached[2]
        entries = {
            tool.name: ToolEntry(
                name=qualify(actor.name, tool.name),
                server=actor.name,
                tool=tool.name,
                description=tool.description,
                input_schema=tool.input_schema,
                title=tool.title,
            )
            for tool in self._allowed_tools(actor)
        }
        # The revision is read after the review above, which may have bumped it.
        self._entries[actor.name] = (actor.tools, self.gate.revision(actor.name), entries)
        return entries

    def tools(self, servers: list[str] | None = None) -> list[ToolEntry]:
        """Tools of live servers (all, or the named ones; an unknown name is an error)."""
        if servers is None:
            actors = self._supervisor.actors()
        else:
            actors = [self._supervisor.actor(name) for name in sorted(set(servers))]
        out: list[ToolEntry] = []
        for actor in actors:
            if actor.state in LIVE_STATES:
                out.extend(self._server_entries(actor).values())
        return out

    async def search(
        self,
        query: str,
        servers: list[str] | None = None,
        limit: int | None = None,
        prior: UsagePrior | None = None,
        explain: bool = False,
    ) -> list[ToolEntry]:
        """Tools of live servers ranked for ``query``, each with its score; best first."""
        if servers is not None:
            for name in servers:
                self._supervisor.actor(name)  # UnknownServer for a name not configured
        async with self._index_lock:
            await self._sync_index()
            wanted = set(servers) if servers is not None else None
            hits = self._index.search(query, limit=limit, servers=wanted, prior=prior)
        found = []
        for hit in hits:
            entry = self._server_entries(self._supervisor.actor(hit.server)).get(hit.tool)
            if entry is not None:
                parts = {k: round(v, 4) for k, v in hit.parts.items()} if explain and hit.parts else None
                found.append(msgspec.structs.replace(entry, score=round(hit.score, 4), score_parts=parts))
        return found

    async def _sync_index(self) -> None:
        live = {actor.name: actor for actor in self._supervisor.actors() if actor.state in LIVE_STATES}
        for name in [name for name in self._indexed if name not in live]:
            self._index.remove_server(name)
            del self._indexed[name]
        # A server is re-indexed when its tool list or the trust gate's verdict on it changed.
        changed: dict[str, tuple[tuple[ToolInfo, ...], int]] = {}
        texts: dict[str, list[ToolText]] = {}
        for name, actor in live.items():
            allowed = self._allowed_tools(actor)  # reviews first, so the revision below is current
            key = (actor.tools, self.gate.revision(name))
            indexed = self._indexed.get(name)
            if indexed is None or indexed[0] is not key[0] or indexed[1] != key[1]:
                changed[name] = key
                texts[name] = [_tool_text(actor, tool) for tool in allowed]
        if not changed:
            return
        # Analysing thousands of tools (the first query after a start) takes seconds of CPU:
        # off the event loop, so calls and status keep flowing meanwhile.
        await anyio.to_thread.run_sync(self._index.replace_servers, texts)
        self._indexed.update(changed)

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


def server_description(actor: ServerActor) -> str:
    """The configured description, else what the server says of itself, else its tool names."""
    if actor.config.description:
        return actor.config.description
    info = actor.server_info
    if info is not None and (info.instructions or info.title):
        return one_line(info.instructions or info.title or "", 200)
    return "Tools: " + ", ".join(tool.name for tool in actor.tools[:12])


def _tool_text(actor: ServerActor, tool: ToolInfo) -> ToolText:
    return ToolText(
        server=actor.name,
        tool=tool.name,
        description=tool.description or tool.title or "",
        server_description=server_description(actor),
        params=schema_params(tool.input_schema),
    )
