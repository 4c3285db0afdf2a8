"""Every live server's tools under qualified names, kept current from supervisor events.

Entries are rebuilt per server, only when that server's tools or state change, so a
listing costs a concatenation of cached tuples in the one stable order: by server name,
then tool name. The search index follows the same rule: before a query, servers whose
tool list is not the one indexed are re-indexed, and only those.

A query never waits for a large re-index. Changes of up to ``_INLINE_TOOLS`` tools are
indexed on the loop before the query (a few ms); larger ones (a server listing 10k tools,
200 servers at start) are indexed off the loop into the second of two indexes, which is
then swapped in (logged as ``index.updated``). Every server event starts that background
update, so the index is usually current before a query asks. Meanwhile queries are
answered from the index as it was: a freshly changed server's tools join the ranking once
indexed (``wait_indexed``). The same holds for the trust gate's review of new tools (~100 us a
tool, in a worker thread): a query has at most ``_INLINE_TOOLS`` of them reviewed before it
answers, and leaves servers with more to the background, whose tools join the ranking once
reviewed and indexed (200 new servers of 100 tools had held the first query for 2.6 s).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

import anyio
import msgspec
import structlog

from mcpd.discovery import spelling, synonyms
from mcpd.discovery.index import Params, ToolIndex, ToolText, schema_params
from mcpd.discovery.prior import UsagePrior
from mcpd.discovery.render import one_line
from mcpd.errors import UnknownServer, UnknownTool
from mcpd.model.servers import ResourceUpdated, ServerEvent
from mcpd.model.states import LIVE_STATES
from mcpd.model.tools import SEPARATOR, ToolEntry, ToolInfo
from mcpd.registry.names import qualify
from mcpd.supervisor.actor import ServerActor
from mcpd.supervisor.supervisor import Supervisor
from mcpd.trust.gate import Inspection, Review, TrustGate, inspect, verifier

if TYPE_CHECKING:
    from mcpd.discovery.semantic import SemanticIndex

log = structlog.get_logger("mcpd.registry")

_REVIEW_BACKLOG = 1024
"""Servers waiting for a background review; more are dropped (a reader reviews them anyway)."""

_INLINE_TOOLS = 256
"""Most tools re-indexed on the loop before a query (~5 ms); more are indexed in the background."""

IndexKey = tuple[tuple[ToolInfo, ...], int]
"""What an index holds of a server: its tool list (by identity) and the trust gate's revision."""


class _Change(NamedTuple):
    """A server to re-index: its allowed tools, its description, and what the index will hold of it."""

    tools: list[ToolInfo]
    description: str
    key: IndexKey


class _Version:
    """One of the two indexes, with what it holds of each server."""

    def __init__(self, params: Params, semantic: SemanticIndex | None) -> None:
        self.index = ToolIndex(params, semantic=semantic)
        self.indexed: dict[str, IndexKey] = {}

    def apply(self, changes: dict[str, _Change | None]) -> None:
        """Re-index the changed servers (their texts are built here too: off the loop when large)."""
        failed = self.index.replace_servers({name: _texts(name, change) for name, change in changes.items()})
        for name, exc in failed.items():
            # Out of the ranking until its tools change (the same texts would fail again at every
            # query); the other servers' changes go in.
            log.error("index.server_failed", server=name, exc_info=exc)
        for name, change in changes.items():
            if change is None:
                self.indexed.pop(name, None)
            else:
                self.indexed[name] = change.key


class Catalog:
    """The aggregated tool catalogue; ``on_event`` must be a supervisor listener and ``run()`` a task."""

    def __init__(
        self,
        supervisor: Supervisor,
        params: Params | None = None,
        gate: TrustGate | None = None,
        semantic: Callable[[], SemanticIndex] | None = None,
    ) -> None:
        self._supervisor = supervisor
        self.gate = gate or TrustGate()
        self._entries: dict[str, tuple[tuple[ToolInfo, ...], int, dict[str, ToolEntry]]] = {}
        self._by_name: dict[str, tuple[str, str]] | None = None
        # Queries read the front index; the back one is brought up to date off the loop and swapped in.
        # ``semantic`` makes each index its own semantic ranking (they share a model and a cache).
        self._front, self._back = (
            _Version(params or Params(), semantic() if semantic else None) for _ in range(2)
        )
        self._index_lock = anyio.Lock()
        self._reindex = anyio.Event()
        self._building = False
        self._indexed_event = anyio.Event()
        self._inspections: dict[str, Inspection] = {}
        self._inspecting: dict[str, anyio.Lock] = {}
        self._failed: dict[str, tuple[object, ...]] = {}
        """The texts (tools, info, surface) each server's review last failed on unexpectedly."""
        self._to_review, self._review_queue = anyio.create_memory_object_stream[str](_REVIEW_BACKLOG)

    def on_event(self, event: ServerEvent) -> None:
        if isinstance(event, ResourceUpdated):
            return  # a resource's contents: nothing listed or reviewed changed
        self._changed(event.server)

    def catch_up(self) -> None:
        """Take in the servers that went live before ``on_event`` was listening, as their events
        would have: the daemon makes the catalogue once the semantic model is loaded, while the
        supervisor is already starting servers (a slow load missed them all: nothing was reviewed
        nor indexed until the first query)."""
        for actor in self._supervisor.actors():
            self._changed(actor.name)

    def _changed(self, name: str) -> None:
        self._by_name = None
        # Index what changed at once, in the background, so it is ready before most queries.
        self._reindex.set()
        # Review a server as soon as it is live or its tools change, so findings are logged at once.
        with contextlib.suppress(UnknownServer, anyio.WouldBlock):
            if self._supervisor.actor(name).state in LIVE_STATES:
                self._to_review.send_nowait(name)

    async def run(self) -> None:
        """Review servers queued by ``on_event`` and index large changes off the loop, until cancelled.
        The verifier is loaded first, in a worker thread (``verifier``), before servers are live."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, verifier)
            tg.start_soon(self._index_in_background)
            async for name in self._review_queue:
                with contextlib.suppress(UnknownServer):
                    await self._reviewed(self._supervisor.actor(name))
            tg.cancel_scope.cancel()

    async def _reviewed(self, actor: ServerActor) -> Review | None:
        """``review``, or None when it failed unexpectedly (logged once for the texts it failed on).
        What a server says is anyone's text: a bug it trips in the inspection costs that server its
        review (its tools are left out of the index, as while under review), not the catalogue's
        task and the daemon with it (again at each start, while the server says it), nor the
        index of every other server."""
        texts = (actor.tools, actor.server_info, actor.surface)
        failed = self._failed.get(actor.name)
        if failed is not None and all(then is now for then, now in zip(failed, texts, strict=True)):
            return None
        try:
            return await self.review(actor)
        except Exception:
            self._failed[actor.name] = texts
            log.exception("catalog.review_failed", server=actor.name)
            return None

    async def review(self, actor: ServerActor) -> Review:
        """The trust gate's verdict on what the server says now; new texts are inspected off the loop."""
        review = self.current_review(actor)
        if review is not None:
            return review
        async with self._inspecting.setdefault(actor.name, anyio.Lock()):
            tools, info, surface = actor.tools, actor.server_info, actor.surface
            inspection = self._inspections.get(actor.name)
            if inspection is None or not inspection.current(tools, info, surface):
                # Scanning and hashing a 2,500-tool server takes a second: not on the loop. Only
                # what changed since the last inspection is scanned again (a restart changes nothing).
                inspection = await anyio.to_thread.run_sync(
                    inspect, actor.config, tools, info, surface, inspection
                )
                self._inspections[actor.name] = inspection
        return self.gate.review(actor.config, inspection)

    def prune(self) -> None:
        """Forget what is kept for servers no longer supervised (a reload removed them): their
        inspected texts, verdicts and entries, which would otherwise stay for the daemon's life."""
        names = set(self._supervisor.names())
        for kept in (self._entries, self._inspections, self._inspecting, self._failed):
            for name in kept.keys() - names:
                del kept[name]
        self.gate.prune(names)
        self._by_name = None

    def current_review(self, actor: ServerActor) -> Review | None:
        """The verdict on what the server says now, if its texts are inspected already (no waiting)."""
        tools, info, surface = actor.tools, actor.server_info, actor.surface
        if not tools and info is None:
            return Review()  # never seen live: nothing said yet, nothing to pin
        inspection = self._inspections.get(actor.name)
        if inspection is None or not inspection.current(tools, info, surface):
            return None
        return self.gate.review(actor.config, inspection)

    def reviewed(self, actor: ServerActor) -> Review | None:
        """The latest verdict without waiting (for ``status``); None before the first review."""
        return self.gate.cached(actor.name)

    async def denied(self, actor: ServerActor, tool: str) -> str | None:
        """Why the config or the trust gate keeps this tool out, or None."""
        if tool in actor.config.disabled_tools:
            return f"disabled in the config (`disabled_tools` of server {actor.name!r})"
        # The verdict is almost always current (``current_review``): no coroutine for ``review``.
        if (actor.tools or actor.server_info) and self.current_review(actor) is None:
            await self.review(actor)
        return self.gate.denied(actor.name, tool)

    async def _server_entries(self, actor: ServerActor) -> dict[str, ToolEntry]:
        """The server's allowed tools by name (in tool order), rebuilt when its tools or verdict change."""
        return self._entries_for(actor, await self.review(actor))

    def _entries_for(self, actor: ServerActor, review: Review) -> dict[str, ToolEntry]:
        """``_server_entries`` given the current ``review`` (so the revision below is current too)."""
        revision = self.gate.revision(actor.name)
        cached = self._entries.get(actor.name)
        if cached is not None and cached[0] is actor.tools and cached[1] == revision:
            return cached[2]
        allowed = _allowed(actor, review)
        entries = {
            tool.name: ToolEntry(
                name=qualify(actor.name, tool.name),
                server=actor.name,
                tool=tool.name,
                description=tool.description,
                input_schema=tool.input_schema,
                title=tool.title,
                annotations=tool.annotations,
                output_schema=tool.output_schema,
                icons=tool.icons,
                meta=tool.meta,
                extra=tool.extra,
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
            await self._sync_small_changes()
        if query.strip() and not (spelling.tried() and synonyms.tried()):
            # The first ranked query reads the English words and the thesaurus (~0.3 s of CPU, off
            # the loop): at start it would have competed with the servers' own.
            await anyio.to_thread.run_sync(_read_lexicons)
        wanted = set(servers) if servers is not None else None
        hits = self._front.index.search(query, limit=limit, servers=wanted, prior=prior)
        found = []
        for hit in hits:
            try:
                actor = self._supervisor.actor(hit.server)
            except UnknownServer:
                continue  # removed since the index was built
            if actor.state not in LIVE_STATES:
                continue  # down since: the background index has yet to drop it
            review = self.current_review(actor)
            if review is None:
                continue  # its tools changed since: back once reviewed and indexed anew
            entry = self._entries_for(actor, review).get(hit.tool)
            if entry is not None:
                parts = {k: round(v, 4) for k, v in hit.parts.items()} if explain and hit.parts else None
                found.append(msgspec.structs.replace(entry, score=round(hit.score, 4), score_parts=parts))
        return found

    @property
    def indexing(self) -> bool:
        """Whether changes wait for the background index (queries leave them out meanwhile)."""
        return self._building or self._reindex.is_set()

    async def wait_indexed(self) -> None:
        """Wait until the background index has taken in every change it has heard of."""
        while self.indexing:
            await self._indexed_event.wait()

    async def _changes(self, version: _Version, *, wait: bool = True) -> dict[str, _Change | None]:
        """Servers whose tools ``version`` lacks (None: a server gone). Without ``wait``, new tools are
        reviewed only up to ``_INLINE_TOOLS`` of them; servers with more still under review are left
        out (``_reindex`` is set for them)."""
        live = {actor.name: actor for actor in self._supervisor.actors() if actor.state in LIVE_STATES}
        changes: dict[str, _Change | None] = {name: None for name in version.indexed if name not in live}
        budget = _INLINE_TOOLS
        for name, actor in live.items():
            # The review comes first, so the revision below is current.
            review = self.current_review(actor)
            if review is None:
                if not wait and len(actor.tools) > budget:
                    self._reindex.set()
                    continue
                budget -= len(actor.tools)
                review = await self._reviewed(actor)
                if review is None:
                    continue
            key = (actor.tools, self.gate.revision(name))
            indexed = version.indexed.get(name)
            # A server is re-indexed when its tool list or the trust gate's verdict on it changed.
            if indexed is None or indexed[0] is not key[0] or indexed[1] != key[1]:
                changes[name] = _Change(_allowed(actor, review), self.describe(actor), key)
        return changes

    async def _sync_small_changes(self) -> None:
        """Index small changes into the front index now; leave larger ones, and servers still under
        review, to the background."""
        changes = await self._changes(self._front, wait=False)
        # A removal costs about what the server's indexed tools did.
        sizes = {
            name: len(change.tools) if change else len(self._front.indexed[name][0])
            for name, change in changes.items()
        }
        budget, now = _INLINE_TOOLS, {}
        for name in sorted(changes, key=sizes.__getitem__):
            if sizes[name] <= budget:
                budget -= sizes[name]
                now[name] = changes[name]
        if now:
            self._front.apply(now)
        if len(now) < len(changes) and not self._reindex.is_set():
            self._reindex.set()

    async def _index_in_background(self) -> None:
        while True:
            await self._reindex.wait()
            self._reindex = anyio.Event()  # a change from now on starts another round
            back, self._building = self._back, True
            try:
                changes = await self._changes(back)
                # Analysing thousands of tools takes seconds of CPU: off the loop, on the index
                # no query reads, so queries go on meanwhile (answered from the front index).
                await anyio.to_thread.run_sync(back.apply, changes)
            except Exception:
                # The tools indexed are servers' texts too: a bug one trips leaves the front index
                # answering (the servers it failed on are not marked indexed: the next change
                # tries them again), and the daemon up.
                log.exception("index.update_failed")
            else:
                self._front, self._back = back, self._front
                log.info("index.updated", servers=len(back.indexed), tools=len(back.index))
            finally:
                self._building = False
            # Small changes made to the old front since are found again by the next query.
            self._indexed_event.set()
            self._indexed_event = anyio.Event()

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


def _read_lexicons() -> None:
    spelling.load()
    synonyms.load()


def _allowed(actor: ServerActor, review: Review) -> list[ToolInfo]:
    """The server's tools that neither the trust gate nor the config keeps out."""
    if review.blocked:
        return []
    hidden = actor.config.disabled_tools
    return [tool for tool in actor.tools if tool.name not in review.held and tool.name not in hidden]


def _texts(server: str, change: _Change | None) -> Iterator[ToolText]:
    """A server's texts, built as the index takes them: a bug one server's texts trip fails it alone."""
    if change is not None:
        for tool in change.tools:
            yield _tool_text(server, tool, change.description)


def _tool_text(server: str, tool: ToolInfo, server_description: str) -> ToolText:
    return ToolText(
        server=server,
        tool=tool.name,
        description=tool.description or tool.title or "",
        server_description=server_description,
        params=schema_params(tool.input_schema),
    )
