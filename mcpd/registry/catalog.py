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
from mcpd.trust.gate import Inspection, Review, TrustGate, inspect

_REVIEW_BACKLOG = 1024
"""Servers waiting for a background review; more are dropped (a reader reviews them anyway)."""


class Catalog:
    """The aggregated tool catalogue; ``on_event`` must be a supervisor listener and ``run()`` a task."""

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
        self._inspections: dict[str, Inspection] = {}
        self._inspecting: dict[str, anyio.Lock] = {}
        self._to_review, self._review_queue = anyio.create_memory_object_stream[str](_REVIEW_BACKLOG)

    def on_event(self, event: ServerEvent) -> None:
        self._by_name = None
        # Review a server as soon as it is live or its tools change, so findings are logged at once.
        with contextlib.suppress(UnknownServer, anyio.WouldBlock):
            if self._supervisor.actor(event.server).state in LIVE_STATES:
                self._to_review.send_nowait(event.server)

    async def run(self) -> None:
        """Review servers queued by ``on_event``, one at a time, until cancelled."""
        async for name in self._review_queue:
            with contextlib.suppress(UnknownServer):
                await self.review(self._supervisor.actor(name))

    async def review(self, actor: ServerActor) -> Review:
        """The trust gate's verdict on what the server says now; new texts are inspected off the loop."""
        tools, info = actor.tools, actor.server_info
        if not tools and info is None:
            return Review()  # never seen live: nothing said yet, nothing to pin
        inspection = self._inspections.get(actor.name)
        if inspection is None or not inspection.current(tools, info):
            async with self._inspecting.setdefault(actor.name, anyio.Lock()):
                inspection = self._inspections.get(actor.name)
                if inspection is None or not inspection.current(tools, info):
                    # Scanning and hashing a 2,500-tool server takes ~170 ms: not on the loop.
                    inspection = await anyio.to_thread.run_sync(inspect, actor.config, tools, info)
                    self._inspections[actor.name] = inspection
        return self.gate.review(actor.config, inspection)

    def reviewed(self, actor: ServerActor) -> Review | None:
        """The latest verdict without waiting (for ``status``); None before the first review."""
        return self.gate.cached(actor.name)

    async def denied(self, actor: ServerActor, tool: str) -> str | None:
        """Why the trust gate keeps this tool out, or None."""
        if actor.tools or actor.server_info:
            await self.review(actor)
        return self.gate.denied(actor.name, tool)

    async def _allowed_tools(self, actor: ServerActor) -> list[ToolInfo]:
        review = await self.review(actor)
        if review.blocked:
            return []
        return [tool for tool in actor.tools if tool.name not in review.held]

    async def _server_entries(self, actor: ServerActor) -> dict[str, ToolEntry]:
        """The server's allowed tools by name (in tool order), rebuilt when its tools or verdict change."""
        allowed = await self._allowed_tools(actor)  # reviews first, so the revision below is current
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
            for tool in allowed
        }
        self._entries[actor.name] = (actor.tools, revision, entries)
        return entries

    async def tools(self, servers: list[str] | None = None) -> list[ToolEntry]:
        """Tools of live servers (all, or the named ones; an unknown name is an error)."""
        if servers is None:
            actors = self._supervisor.actors()
        else:
            actors = [self._supervisor.actor(name) for name in sorted(set(servers))]
        out: list[ToolEntry] = []
        for actor in actors:
            if actor.state in LIVE_STATES:
                out.extend((await self._server_entries(actor)).values())
        return out

    async def serving(self) -> list[ServerActor]:
        """Live servers the trust gate lets through: those a model may be told about."""
        out = []
        for actor in self._supervisor.actors():
            if actor.state in LIVE_STATES and not (await self.review(actor)).blocked:
                out.append(actor)
        return out

    def describe(self, actor: ServerActor) -> str:
        """The configured description, else what the server says of itself (unless the verifier found
        something in it), else its tool names."""
        if actor.config.description and actor.config.description.strip():
            return actor.config.description
        info = actor.server_info
        review = self.gate.cached(actor.name)
        trusted = review is not None and not review.tainted_instructions
        if trusted and info is not None and (info.instructions or info.title):
            return one_line(info.instructions or info.title or "", 200)
        return "Tools: " + ", ".join(tool.name for tool in actor.tools[:12])

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
            entry = (await self._server_entries(self._supervisor.actor(hit.server))).get(hit.tool)
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
            allowed = await self._allowed_tools(actor)  # reviews first, so the revision below is current
            key = (actor.tools, self.gate.revision(name))
            indexed = self._indexed.get(name)
            if indexed is None or indexed[0] is not key[0] or indexed[1] != key[1]:
                changed[name] = key
                description = self.describe(actor)
                texts[name] = [_tool_text(actor, tool, description) for tool in allowed]
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


def _tool_text(actor: ServerActor, tool: ToolInfo, server_description: str) -> ToolText:
    return ToolText(
        server=actor.name,
        tool=tool.name,
        description=tool.description or tool.title or "",
        server_description=server_description,
        params=schema_params(tool.input_schema),
    )
