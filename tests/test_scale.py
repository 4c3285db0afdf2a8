"""Scale: a ranked query is answered from the index as it was while a large re-index runs off the loop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from mcpd.config.model import Config, ServerConfig
from mcpd.discovery import index as index_module
from mcpd.discovery.index import ToolText
from mcpd.model.states import ServerState
from mcpd.registry import catalog as catalog_module
from mcpd.registry.catalog import Catalog
from mcpd.supervisor.supervisor import open_supervisor
from mcpd.testing import fixture_server
from mcpd.trust.gate import inspect

pytestmark = pytest.mark.anyio


async def test_query_during_a_large_reindex_does_not_wait_for_it() -> None:
    """A server listing 600 tools: the query that finds it un-indexed returns at once with the small
    server's tools (reviewed and indexed on the loop) and without the big one's (its trust review and
    its indexing left to the background); once the background index is swapped in, the same query
    ranks the big server's tools too."""
    config = Config(
        source="<test>",
        servers=(
            fixture_server("big", "--tools", "600", "--no-control", connect_timeout=120),
            fixture_server("small"),
        ),
    )
    async with open_supervisor(config) as supervisor:
        catalog = Catalog(supervisor)
        supervisor.add_listener(catalog.on_event)
        for name in ("big", "small"):
            await supervisor.actor(name).wait_state(ServerState.RUNNING, timeout=150)
        # The background index runs in catalog.run(): started after the first query, it cannot
        # have indexed the big server before that query, whatever the timing.
        first = await catalog.search("tool echo")
        assert catalog.indexing  # the big change waits for the background index ...
        assert {t.server for t in first} == {"small"}  # ... and the query did not wait for it,
        assert catalog.current_review(supervisor.actor("big")) is None  # nor for the trust review
        async with anyio.create_task_group() as tg:
            tg.start_soon(catalog.run)
            with anyio.fail_after(60):
                await catalog.wait_indexed()
            second = await catalog.search("tool echo", limit=5000)
            assert sum(t.server == "big" for t in second) == 600
            assert any(t.server == "small" for t in second)
            tg.cancel_scope.cancel()


async def test_a_removed_server_leaves_nothing_behind_in_the_catalogue() -> None:
    """What the catalogue and the trust gate keep per server (inspected texts, verdicts, entries)
    goes with a server that a reload removed: a daemon whose config keeps naming new servers must
    not grow for its whole life. A server added again under the name is reviewed afresh."""
    gone, kept = fixture_server("gone"), fixture_server("kept")
    async with open_supervisor(Config(source="<test>", servers=(gone, kept))) as supervisor:
        catalog = Catalog(supervisor)
        for name in ("gone", "kept"):
            await supervisor.actor(name).wait_state(ServerState.RUNNING, timeout=60)
        assert {t.server for t in await catalog.search("echo")} == {"gone", "kept"}
        await supervisor.apply(Config(source="<test>", servers=(kept,)))
        catalog.prune()
        for held in (catalog._entries, catalog._inspections, catalog._inspecting):
            assert set(held) == {"kept"}
        assert catalog.gate.cached("gone") is None and catalog.gate.cached("kept") is not None
        await supervisor.apply(Config(source="<test>", servers=(gone, kept)))
        await supervisor.actor("gone").wait_state(ServerState.RUNNING, timeout=60)
        assert {t.server for t in await catalog.search("echo")} == {"gone", "kept"}


async def test_a_catalogue_made_after_servers_went_live_reviews_and_indexes_them() -> None:
    """The daemon makes the catalogue once the semantic model is loaded, and a server can be running
    by then: its events went to no one, so it was neither reviewed nor indexed until a query came
    (a loaded machine's daemon never logged ``index.updated``). ``catch_up`` takes it in."""
    config = Config(source="<test>", servers=(fixture_server("early"),))
    async with open_supervisor(config) as supervisor:
        await supervisor.actor("early").wait_state(ServerState.RUNNING, timeout=60)
        catalog = Catalog(supervisor)
        supervisor.add_listener(catalog.on_event)
        catalog.catch_up()
        async with anyio.create_task_group() as tg:
            tg.start_soon(catalog.run)
            with anyio.fail_after(60):
                while catalog.gate.cached("early") is None:
                    await anyio.sleep(0.02)
                await catalog.wait_indexed()
            assert not catalog.indexing
            tg.cancel_scope.cancel()


@asynccontextmanager
async def good_and_bad_catalogue() -> AsyncIterator[Catalog]:
    """A catalogue over two running fixture servers, "good" and "bad", its task going, once it has
    taken in (reviewed and indexed) what they list."""
    config = Config(source="<test>", servers=(fixture_server("good"), fixture_server("bad")))
    async with open_supervisor(config) as supervisor:
        for name in ("good", "bad"):
            await supervisor.actor(name).wait_state(ServerState.RUNNING, timeout=60)
        catalog = Catalog(supervisor)
        async with anyio.create_task_group() as tg:
            tg.start_soon(catalog.run)
            with anyio.fail_after(60):
                catalog.catch_up()
                await catalog.wait_indexed()
            yield catalog
            tg.cancel_scope.cancel()


async def test_a_review_or_an_index_that_fails_unexpectedly_costs_only_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bug that a server's texts trip in the inspection (made here: ``inspect`` raises for "bad")
    is logged, and costs that server its review and its place in the index only: the catalogue's
    task (the daemon's) goes on, the other server is reviewed and indexed, and queries neither fail
    nor log it again. An index update that fails (made here: once) leaves the front index
    answering, and the next change is indexed. Before, either ended the catalogue's task group, and
    the daemon with it."""
    apply = catalog_module._Version.apply
    failing_applies = [True]

    def inspect_but_bad(config: ServerConfig, *args: Any) -> Any:
        if config.name == "bad":
            raise RecursionError("a bug the server's texts trip")
        return inspect(config, *args)

    def apply_failing_once(version: Any, changes: Any) -> None:
        if failing_applies and failing_applies.pop():
            raise IndexError("a bug in the index")
        apply(version, changes)

    monkeypatch.setattr(catalog_module, "inspect", inspect_but_bad)
    monkeypatch.setattr(catalog_module._Version, "apply", apply_failing_once)
    with capture_logs() as logs:
        async with good_and_bad_catalogue() as catalog:
            assert [e["event"] for e in logs if e["event"] == "index.update_failed"] == [
                "index.update_failed"
            ]
            with anyio.fail_after(60):
                catalog.catch_up()
                await catalog.wait_indexed()
            said = sum(e["event"] == "catalog.review_failed" for e in logs)
            assert {t.server for t in await catalog.search("echo")} == {"good"}
            assert {t.server for t in await catalog.search("echo")} == {"good"}
    assert {e["server"] for e in logs if e["event"] == "catalog.review_failed"} == {"bad"}
    assert sum(e["event"] == "catalog.review_failed" for e in logs) == said


@pytest.mark.parametrize("inline_tools", [catalog_module._INLINE_TOOLS, 0], ids=["on-the-loop", "background"])
async def test_a_server_whose_texts_fail_to_index_costs_only_its_own_ranking(
    monkeypatch: pytest.MonkeyPatch, inline_tools: int
) -> None:
    """A bug that one server's texts trip in the analysis (made here: it raises for "bad") leaves that
    server out of the ranking, logged once, and indexes the others: on the loop before a query and in
    the background index alike. Before, the whole update failed: every ranked query raised (on the
    loop), or no change of any server was ever swapped in (in the background)."""
    analyse = index_module._analyse

    def analyse_but_bad(tool: ToolText, *args: Any) -> Any:
        if tool.server == "bad":
            raise RecursionError("a bug the server's texts trip")
        return analyse(tool, *args)

    monkeypatch.setattr(index_module, "_analyse", analyse_but_bad)
    monkeypatch.setattr(catalog_module, "_INLINE_TOOLS", inline_tools)
    with capture_logs() as logs:
        async with good_and_bad_catalogue() as catalog:
            for _ in range(3):
                assert {t.server for t in await catalog.search("echo")} == {"good"}
    assert [e.get("server") for e in logs if e["event"] == "index.server_failed"] == ["bad"]
    assert not [e for e in logs if e["event"] == "index.update_failed"]
