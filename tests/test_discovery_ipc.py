"""Discovery through the socket: a 10k-tool catalogue, budgets, index updates, compatible selection."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator

import anyio
import pytest

from mcpd.client.aio import connect
from mcpd.discovery.render import estimate_tokens
from mcpd.testing import fixture_toml, fullserver_toml
from mcpd.testing.daemon import DaemonProcess, running_daemon

pytestmark = pytest.mark.anyio

SERVERS = 4
TOOLS_EACH = 2500


@pytest.fixture(scope="module")
async def daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DaemonProcess]:
    # The plain-Python server wherever the SDK's behaviour plays no part: each SDK server's start
    # took ~0.7 s of CPU, most of this module's setup (brew needs the SDK fixture's add_tool).
    path = tmp_path_factory.mktemp("discovery") / "config.toml"
    path.write_text(
        "".join(
            fullserver_toml(
                f"big{i}",
                "--name",
                f"big{i}",
                "--tools",
                str(TOOLS_EACH),
                description=f"Bulk fixture server {i}",
                connect_timeout=120,
            )
            for i in range(SERVERS)
        )
        # pinning = trust: this server adds a tool at run time, which `pin` would hold for approval.
        + fixture_toml(
            "brew",
            "--tools",
            "1",
            description="Install, update, and manage macOS packages via Homebrew",
            pinning="trust",
        )
        + fullserver_toml("github", description="GitHub repos, issues, pull requests, code search")
        # Cannot serve: a command that does not exist, and a server switched off.
        + '[servers.brokenbrew]\ncommand = "/no/such/brew"\ndescription = "Install packages via Homebrew"\n'
        + fixture_toml("offbrew", description="Install macOS packages with Homebrew", enabled=False)
    )
    async with running_daemon(path) as running:
        # Large servers join the ranking once the background index has taken them in.
        seen = 0
        while True:
            event = await running.wait_for("index.updated", timeout=180, after=seen)
            if event["tools"] >= SERVERS * TOOLS_EACH:
                break
            seen = running.events.index(event) + 1
        yield running


async def test_blank_query_lists_everything_in_stable_order(daemon: DaemonProcess) -> None:
    """Over 10k tools: a listing without a query is every tool, by server then tool name."""
    async with connect(daemon.socket) as client:
        tools = await client.tools()
        again = await client.search("")
    assert len(tools) >= SERVERS * TOOLS_EACH
    keys = [(t.server, t.tool) for t in tools]
    assert keys == sorted(keys)
    assert [t.name for t in again.tools] == [t.name for t in tools]


async def test_query_ranks_the_matching_tool_first(daemon: DaemonProcess) -> None:
    """The one tool whose description holds the query's number and server comes first, with a score."""
    async with connect(daemon.socket) as client:
        result = await client.search("fixture tool number 1234 of big2", limit=5)
    assert result.tools[0].name == "big2__tool_1234"
    assert result.tools[0].score is not None and result.tools[0].score > (result.tools[1].score or 0)
    # The limit is the answer's length: four ranked tools, then the reserved capability-request tool.
    assert len(result.tools) == 5 and result.tools[-1].name == "mcpd_request_capability"


async def test_a_misspelt_query_finds_what_it_meant(daemon: DaemonProcess) -> None:
    """The first ranked query reads the English words for spelling correction: "homebrw" is Homebrew."""
    async with connect(daemon.socket) as client:
        result = await client.search("homebrw", limit=2)  # the best tool, then the reserved one
    assert result.tools[0].server == "brew"


async def test_budgeted_registry_over_the_socket(daemon: DaemonProcess) -> None:
    """A budgeted listing fits its budget and says how many tools it left out."""
    async with connect(daemon.socket) as client:
        result = await client.search("fixture tool number", limit=500, budget_tokens=800)
    rendered = result.rendered
    assert rendered is not None
    assert estimate_tokens(rendered.text) <= rendered.tokens <= 800
    assert rendered.full and rendered.omitted > 0
    assert len(rendered.full) + len(rendered.brief) + len(rendered.names) + rendered.omitted == 500
    # The reserved tool comes first, as one line: its full schema would be more than a small share of 800.
    assert rendered.text.startswith("## When no tool fits\n- mcpd_request_capability")
    assert rendered.brief[0].name == "mcpd_request_capability"


async def test_new_tool_is_searchable_after_list_changed(daemon: DaemonProcess) -> None:
    """A server that adds a tool and sends list_changed has it in the index for the next query."""
    async with connect(daemon.socket) as client:
        await client.call_tool("brew__add_tool", {"name": "zanzibar_forecast"})
        with anyio.fail_after(10):
            while True:
                result = await client.search("zanzibar forecast")
                # Until the tool is indexed, other tools may come first (through "forecast"'s synonyms).
                if "brew__zanzibar_forecast" in {tool.name for tool in result.tools}:
                    break
                await anyio.sleep(0.05)
    assert result.tools[0].name == "brew__zanzibar_forecast"


async def test_select_through_the_cli(daemon: DaemonProcess) -> None:
    """`mcpd select` gives the compatible selection: 'install imagemagick' -> brew."""
    argv = [
        sys.executable,
        "-m",
        "mcpd",
        "select",
        "install imagemagick",
        "--json",
        "--socket",
        str(daemon.socket),
    ]
    with anyio.fail_after(30):
        result = await anyio.run_process(argv)
    selection = json.loads(result.stdout.decode())
    assert selection["servers"] == ["brew"] and selection["fallback"] is False


async def test_selection_leaves_out_servers_that_cannot_serve(daemon: DaemonProcess) -> None:
    """A failed or disabled server is never selected, however well its description matches."""
    async with connect(daemon.socket) as client:
        with anyio.fail_after(30):
            while {s.name: s.state for s in await client.status()}["brokenbrew"] != "failed":
                await anyio.sleep(0.05)
        result = await client.select("install packages with homebrew")
    assert result.servers == ["brew"] and result.fallback is False
