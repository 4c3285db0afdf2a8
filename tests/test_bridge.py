"""`mcpd bridge` driven by the mcp SDK's own client over stdio; sessions; auto-start races."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpd.client.aio import connect
from mcpd.testing import fixture_toml, process_gone
from mcpd.testing.daemon import DaemonProcess, running_daemon

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DaemonProcess]:
    path = tmp_path_factory.mktemp("bridge") / "config.toml"
    path.write_text(
        fixture_toml("tools", description="Echo <text> & friends", call_timeout=1.0) + fixture_toml("other")
    )
    async with running_daemon(path) as running:
        yield running


class Host:
    """An MCP host's view of one bridge: the SDK session plus the notifications it received."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session
        self.list_changed = anyio.Event()

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.list_changed.set()

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        with anyio.fail_after(30):
            result = await self.session.call_tool(name, arguments or {})
        assert isinstance(result, types.CallToolResult)
        return result

    async def tool_names(self) -> list[str]:
        return [t.name for t in (await self.session.list_tools()).tools]


@asynccontextmanager
async def bridge(socket: Path, *flags: str) -> AsyncIterator[Host]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcpd", "bridge", "--socket", str(socket), *flags]
    )
    host_ref: list[Host] = []

    async def forward(message: Any) -> None:
        if host_ref:
            await host_ref[0].on_message(message)

    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, message_handler=forward) as session,
    ):
        host = Host(session)
        host_ref.append(host)
        with anyio.fail_after(30):
            await session.initialize()
        yield host


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_meta_tools_search_connect_call(daemon: DaemonProcess) -> None:
    """list -> search -> connect (list_changed arrives, tools join) -> call, through the SDK client."""
    async with bridge(daemon.socket) as host:
        names = await host.tool_names()
        assert names == [
            "mcpd_search_tools",
            "mcpd_connect_server",
            "mcpd_call_tool",
            "mcpd_request_capability",
        ]
        found = await host.call("mcpd_search_tools", {"query": "return the text unchanged", "limit": 5})
        assert "tools__echo" in text(found) and "mcpd_request_capability" not in text(found)
        assert found.structured_content is not None
        connected = await host.call("mcpd_connect_server", {"server": "tools"})
        assert "Connected tools" in text(connected)
        with anyio.fail_after(10):
            await host.list_changed.wait()
        assert "tools__echo" in await host.tool_names()
        echoed = await host.call("tools__echo", {"text": "through the bridge"})
        assert text(echoed) == "through the bridge" and not echoed.is_error
        assert echoed.structured_content == {"result": "through the bridge"}
        via = await host.call("mcpd_call_tool", {"tool": "other__echo", "arguments": {"text": "any tool"}})
        assert text(via) == "any tool"
        again = await host.call("mcpd_connect_server", {"server": "tools"})
        assert "already connected" in text(again)


async def test_errors_timeouts_and_capability_requests(daemon: DaemonProcess) -> None:
    """A tool error, an unknown server, a timeout: error results, never a broken host session."""
    async with bridge(daemon.socket, "--connect", "tools") as host:
        assert "tools__fail" in await host.tool_names()
        failed = await host.call("tools__fail", {"message": "nope"})
        assert failed.is_error
        unknown = await host.call("mcpd_connect_server", {"server": "ghost"})
        assert unknown.is_error and "UnknownServer" in text(unknown)
        slow = await host.call("tools__sleep", {"seconds": 5})  # call_timeout is 1 s for this server
        assert slow.is_error and "CallTimeout" in text(slow)
        noted = await host.call("mcpd_request_capability", {"capability": "fly a drone"})
        assert "Recorded" in text(noted)
        assert text(await host.call("tools__echo", {"text": "still here"})) == "still here"


async def test_progress_passes_through(daemon: DaemonProcess) -> None:
    """Progress notifications of a server reach the host, in order, for the call that asked."""
    updates: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    async with bridge(daemon.socket, "--connect", "tools") as host:
        with anyio.fail_after(30):
            result = await host.session.call_tool(
                "tools__progress", {"steps": 4}, progress_callback=on_progress
            )
        assert isinstance(result, types.CallToolResult)
        assert text(result) == "done 4 steps"
        with anyio.fail_after(5):
            while len(updates) < 4:
                await anyio.sleep(0.02)
    assert [u[0] for u in updates] == [1, 2, 3, 4]
    assert updates[-1] == (4, 4, "step 4 of 4")


async def test_cancellation_reaches_the_daemon(daemon: DaemonProcess) -> None:
    """A host that gives up on a call makes the bridge withdraw it from the daemon."""
    async with bridge(daemon.socket, "--connect", "other") as host:
        mark = len(daemon.events)
        with pytest.raises(Exception):  # noqa: B017,PT011 - the SDK reports the abandoned request its own way
            await host.session.call_tool("other__sleep", {"seconds": 20}, read_timeout_seconds=0.5)
        event = await daemon.wait_for("request.cancelled", after=mark, timeout=10)
        assert event["found"] is True
        assert text(await host.call("other__echo", {"text": "after cancel"})) == "after cancel"


async def test_five_bridges_share_one_process_per_server(daemon: DaemonProcess) -> None:
    """N bridges, still one child per server: every bridge reaches the same server pid."""
    async with AsyncExitStack() as stack:
        hosts = [await stack.enter_async_context(bridge(daemon.socket)) for _ in range(5)]
        pids = {text(await host.call("mcpd_call_tool", {"tool": "tools__pid"})) for host in hosts}
    async with connect(daemon.socket) as client:
        status = {s.name: s.pid for s in await client.status()}
    assert pids == {str(status["tools"])}


async def test_sessions_and_the_prompt_snippet(daemon: DaemonProcess) -> None:
    """One session's connections are invisible to another; the snippet is escaped XML."""
    async with connect(daemon.socket) as first, connect(daemon.socket) as second:
        await first.connect_server("other")
        assert (await first.session_tools()).servers == ["other"]
        assert (await second.session_tools()).servers == []
        snippet = await second.snippet()
    assert snippet.startswith("<available_mcps>") and snippet.endswith("</available_mcps>")
    assert '<mcp id="tools">Echo &lt;text&gt; &amp; friends</mcp>' in snippet


def _daemons_on(socket: Path) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"serve" in argv and str(socket).encode() in argv:
                found.append(int(entry))
    return found


async def test_ten_bridges_racing_start_one_daemon(tmp_path: Path) -> None:
    """With no daemon running, ten bridges starting at once end up sharing exactly one."""
    config = tmp_path / "config.toml"
    config.write_text(fixture_toml("solo"))
    socket = Path(tempfile.mkdtemp(prefix="mcpd-race-", dir="/tmp")) / "mcpd.sock"
    os.environ["XDG_STATE_HOME"] = str(tmp_path / "state")  # the started daemon's usage store
    pids: list[str] = []
    daemons: list[int] = []
    all_in = anyio.Event()

    async def one() -> None:
        async with bridge(socket, "--config", str(config)) as host:
            pids.append(text(await host.call("mcpd_call_tool", {"tool": "solo__pid"})))
            await all_in.wait()  # stay connected until every bridge is in

    try:
        with anyio.fail_after(90):
            async with anyio.create_task_group() as tg:
                for _ in range(10):
                    tg.start_soon(one)
                while len(pids) < 10:
                    await anyio.sleep(0.05)
                daemons = _daemons_on(socket)
                all_in.set()
        assert len(set(pids)) == 1
        assert len(daemons) == 1, daemons
    finally:
        os.environ.pop("XDG_STATE_HOME", None)
        for pid in _daemons_on(socket):
            os.kill(pid, signal.SIGTERM)
            daemons.append(pid)
        with anyio.fail_after(20):
            while not all(process_gone(pid) for pid in daemons):
                await anyio.sleep(0.05)
        shutil.rmtree(socket.parent, ignore_errors=True)
