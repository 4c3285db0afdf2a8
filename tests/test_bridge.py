"""`mcpd bridge` driven by the mcp SDK's own client over stdio.

The meta tools, progress, cancellation, sessions, learning from hosts' searches, a daemon
restarted under a live bridge, cold starts, auto-start races.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import mcp_types as types
import msgspec
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from mcpd.bridge import ADVISORY_LIMIT, AUTOSTART_AFTER, AUTOSTART_MAX, AUTOSTART_RETRY, GAP_LIMIT, Relay
from mcpd.client.aio import connect
from mcpd.client.channel import Channel
from mcpd.ipc.framing import FrameBuffer, frame
from mcpd.lines import LineReader, Oversized
from mcpd.model.mcp import (
    DAEMON_RESTARTED,
    DAEMON_UNAVAILABLE,
    INTERNAL_ERROR,
    RESOURCE_UPDATED,
    RESOURCES_LIST_CHANGED,
    SESSION_NOTIFICATION,
    SUBSCRIPTIONS_NOTIFICATION,
    Notification,
    SessionState,
    SubscriptionsChanged,
)
from mcpd.model.protocol import HelloResult
from mcpd.model.servers import SUBSCRIPTION_ENDED
from mcpd.testing import fixture_toml, fullserver_toml, pids_with_args, process_gone
from mcpd.testing.daemon import DaemonProcess, running_daemon
from mcpd.updates import HELD_UPDATES

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DaemonProcess]:
    """One daemon for the module, its socket where a user runtime dir has it (see ``runtime_dir``)."""
    path = tmp_path_factory.mktemp("bridge") / "config.toml"
    path.write_text(
        fixture_toml("tools", description="Echo <text> & friends", call_timeout=1.0) + fixture_toml("other")
    )
    runtime = Path(tempfile.mkdtemp(prefix="xdg-", dir="/tmp"))
    try:
        async with running_daemon(path, socket=runtime / "mcpd" / "mcpd.sock") as running:
            yield running
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def runtime_dir(daemon: DaemonProcess) -> Path:
    """The directory that, as ``$XDG_RUNTIME_DIR``, leads to ``daemon``'s socket."""
    return daemon.socket.parent.parent


class Host:
    """An MCP host's view of one bridge: the SDK session plus the notifications it received."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session
        self.list_changed = anyio.Event()
        self.logged: list[str] = []
        self.log_arrived = anyio.Event()
        self.instructions = ""
        self.received: list[Any] = []
        """Every notification, in order of arrival."""
        self._arrived = anyio.Event()

    async def on_message(self, message: Any) -> None:
        self.received.append(message)
        arrived, self._arrived = self._arrived, anyio.Event()
        arrived.set()
        if isinstance(message, types.ToolListChangedNotification):
            self.list_changed.set()
        if isinstance(message, types.LoggingMessageNotification):
            self.logged.append(str(message.params.data))
            self.log_arrived.set()

    async def wait_received(self, wanted: Callable[[Any], bool], after: int = 0) -> Any:
        """The first notification from index ``after`` on that is ``wanted``; waits for it if need be."""
        with anyio.fail_after(60):
            index = after
            while True:
                for message in self.received[index:]:
                    if wanted(message):
                        return message
                index = len(self.received)
                await self._arrived.wait()

    async def wait_list_changed(self) -> None:
        """Wait for the next tools/list_changed (and re-arm for the one after)."""
        with anyio.fail_after(60):
            await self.list_changed.wait()
        self.list_changed = anyio.Event()

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        with anyio.fail_after(120):  # a guard against a hang, not a bound: machines can be slow
            result = await self.session.call_tool(name, arguments or {})
        assert isinstance(result, types.CallToolResult)
        return result

    async def tool_names(self) -> list[str]:
        return [t.name for t in (await self.session.list_tools()).tools]


@asynccontextmanager
async def bridge(socket: Path, *flags: str, errlog: TextIO = sys.stderr) -> AsyncIterator[Host]:
    """A bridge process serving an SDK client session (its stderr goes to ``errlog``)."""
    # The SDK passes on only a safe subset of the environment: a daemon the bridge starts must keep
    # its usage store in the test's directory, and both must run the code under test (a checkout's
    # on PYTHONPATH, not an installed copy).
    env = {name: os.environ[name] for name in ("XDG_STATE_HOME", "PYTHONPATH") if name in os.environ}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcpd", "bridge", "--socket", str(socket), *flags],
        env=env or None,
    )
    host_ref: list[Host] = []

    async def forward(message: Any) -> None:
        if host_ref:
            await host_ref[0].on_message(message)

    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write, message_handler=forward) as session,
    ):
        host = Host(session)
        host_ref.append(host)
        with anyio.fail_after(120):
            host.instructions = (await session.initialize()).instructions or ""
        yield host


async def wait_logged(errlog: Path, event: str, count: int = 1) -> None:
    """Wait until the bridge logged ``event`` (it writes one JSON line per event) ``count`` times."""
    with anyio.fail_after(30):
        while errlog.read_text().count(f'"{event}"') < count:
            await anyio.sleep(0.02)


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
        # The message alone, for people and models: no class name of mcpd's before it.
        assert unknown.is_error and text(unknown) == "no server named 'ghost' is configured"
        slow = await host.call("tools__sleep", {"seconds": 5})  # call_timeout is 1 s for this server
        assert slow.is_error and text(slow) == "tools/sleep did not answer within 1s"
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
        with pytest.raises(MCPError, match=r"(?i)timed out"):
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
    return pids_with_args("serve", str(socket))


@asynccontextmanager
async def autostart_socket(tmp_path: Path) -> AsyncIterator[Path]:
    """A socket path for daemons that bridges start themselves; on exit those daemons are stopped."""
    socket = Path(tempfile.mkdtemp(prefix="mcpd-auto-", dir="/tmp")) / "mcpd.sock"
    state = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path / "state")  # the started daemons' usage store
    try:
        yield socket
    finally:
        if state is None:
            os.environ.pop("XDG_STATE_HOME", None)
        else:
            os.environ["XDG_STATE_HOME"] = state
        daemons = _daemons_on(socket)
        for pid in daemons:
            os.kill(pid, signal.SIGTERM)
        with anyio.fail_after(20):
            while not all(process_gone(pid) for pid in daemons):
                await anyio.sleep(0.05)
        shutil.rmtree(socket.parent, ignore_errors=True)


async def test_ten_bridges_racing_start_one_daemon(tmp_path: Path) -> None:
    """With no daemon running, ten bridges starting at once end up sharing exactly one."""
    config = tmp_path / "config.toml"
    config.write_text(fixture_toml("solo"))
    pids: list[str] = []
    daemons: list[int] = []
    all_in = anyio.Event()

    async with autostart_socket(tmp_path) as socket:

        async def one() -> None:
            async with bridge(socket, "--config", str(config)) as host:
                pids.append(text(await host.call("mcpd_call_tool", {"tool": "solo__pid"})))
                await all_in.wait()  # stay connected until every bridge is in

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


async def test_all_exposes_every_tool(daemon: DaemonProcess) -> None:
    """`--all`: every server's tools are in the host's list from the start, beside the meta tools."""
    async with bridge(daemon.socket, "--all") as host:
        names = await host.tool_names()
    assert names[:4] == [
        "mcpd_search_tools",
        "mcpd_connect_server",
        "mcpd_call_tool",
        "mcpd_request_capability",
    ]
    assert {"tools__echo", "other__echo", "tools__progress"} <= set(names)


async def test_hosts_searches_teach_the_ranking(daemon: DaemonProcess) -> None:
    """A host that searches and then calls teaches the usage prior the query -> tool association:
    the same search ranks the called tool first afterwards."""
    query = "generic numbered fixture helper"

    async def ranked(host: Host) -> list[str]:
        found = await host.call("mcpd_search_tools", {"query": query, "limit": 10})
        assert found.structured_content is not None
        return [t["name"] for t in found.structured_content["tools"]]

    async def association() -> float:
        explained = await client.search(query, explain=True)
        parts = next(t.score_parts for t in explained.tools if t.name == "other__tool_2")
        return (parts or {}).get("association", 0.0)

    async with bridge(daemon.socket) as host, connect(daemon.socket) as client:
        before = await ranked(host)
        assert "other__tool_2" in before and before[0] != "other__tool_2"
        called = await host.call("mcpd_call_tool", {"tool": "other__tool_2", "arguments": {"text": "x"}})
        assert text(called) == "other:tool_2:x"
        # The prior learns from each batch the store commits (within tens of milliseconds).
        with anyio.fail_after(10):
            while await association() == 0:
                await anyio.sleep(0.02)
        after = await ranked(host)
    assert after[0] == "other__tool_2"


async def test_daemon_restart_under_a_live_bridge(tmp_path: Path) -> None:
    """kill -9 of the daemon under a live bridge: the call it held fails with a clear error, a call
    made during the gap waits and succeeds once a new daemon listens, the host hears list_changed and
    finds its connected server again; the host never restarts."""
    config = tmp_path / "config.toml"
    config.write_text(fixture_toml("tools"))
    async with (
        running_daemon(config) as first,
        bridge(first.socket, "--no-autostart", "--connect", "tools") as host,
    ):
        assert "tools__echo" in await host.tool_names()
        started = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            started.set()

        async def held_call() -> None:
            with pytest.raises(MCPError) as failure:
                await host.session.call_tool(
                    "tools__progress", {"steps": 1000}, progress_callback=on_progress
                )
            assert failure.value.code == DAEMON_RESTARTED and "restarted" in failure.value.error.message

        gap_answer: list[str] = []

        async def gap_call() -> None:
            gap_answer.append(text(await host.call("tools__echo", {"text": "made during the gap"})))

        async with anyio.create_task_group() as tg:
            tg.start_soon(held_call)
            with anyio.fail_after(30):
                await started.wait()
            first.signal(signal.SIGKILL)
            await first.wait_exit()
            tg.start_soon(gap_call)
            async with running_daemon(config, socket=first.socket):
                await host.wait_list_changed()
                with anyio.fail_after(60):
                    while not gap_answer:
                        await anyio.sleep(0.02)
                assert gap_answer == ["made during the gap"]
                assert "tools__echo" in await host.tool_names()
                assert text(await host.call("tools__echo", {"text": "after"})) == "after"


@asynccontextmanager
async def autostarting_host(tmp_path: Path) -> AsyncIterator[tuple[Path, Host, Path]]:
    """A host on a bridge that started its daemon itself (``--config``, server ``solo`` connected):
    the socket, the host and the bridge's log file."""
    config = tmp_path / "config.toml"
    config.write_text(fixture_toml("solo"))
    log_path = tmp_path / "bridge.log"
    errlog = await anyio.to_thread.run_sync(lambda: log_path.open("w"))
    try:
        async with (
            autostart_socket(tmp_path) as socket,
            bridge(socket, "--config", str(config), "--connect", "solo", errlog=errlog) as host,
        ):
            yield socket, host, log_path
    finally:
        errlog.close()


async def test_bridge_starts_a_new_daemon_itself(tmp_path: Path) -> None:
    """With --config, a bridge whose daemon died starts a new one; the host's next call succeeds."""
    async with autostarting_host(tmp_path) as (socket, host, log_path):
        first = _daemons_on(socket)
        assert len(first) == 1
        os.kill(first[0], signal.SIGKILL)
        await wait_logged(log_path, "bridge.daemon_lost")  # so that no call is in flight at the drop
        assert text(await host.call("solo__echo", {"text": "again"})) == "again"
        await host.wait_list_changed()
        second = _daemons_on(socket)
        assert len(second) == 1 and second != first


async def wait_daemon_on(socket: Path, besides: list[int]) -> int:
    """The pid of a daemon serving ``socket`` that is none of ``besides``, once there is one."""
    with anyio.fail_after(AUTOSTART_RETRY + 60):
        while not (new := [pid for pid in _daemons_on(socket) if pid not in besides]):
            await anyio.sleep(0.02)  # a process appearing: nothing else to wait on
    return new[0]


async def test_daemons_killed_in_a_row_are_started_again_soon_then_less_often(tmp_path: Path) -> None:
    """Each daemon a bridge started is kill -9'd as soon as the bridge is on it: the next one comes
    seconds into the new gap (before: ``AUTOSTART_RETRY``, 10 s, from the previous start), and the
    wait grows with each daemon that died soon after it came up (one that crashes on what it is sent
    must not be started every second by every bridge). The host's next call succeeds."""
    async with autostarting_host(tmp_path) as (socket, host, log_path):
        gone: list[int] = []
        waits: list[float] = []
        for _ in range(2):
            if gone:  # on the daemon it started after the last kill
                await wait_logged(log_path, "bridge.reconnected", count=len(gone))
            (daemon,) = [pid for pid in _daemons_on(socket) if pid not in gone]
            os.kill(daemon, signal.SIGKILL)
            gone.append(daemon)
            killed = anyio.current_time()
            await wait_daemon_on(socket, gone)
            waits.append(anyio.current_time() - killed)
        assert waits[-1] < AUTOSTART_MAX
        assert waits[1] > waits[0] + AUTOSTART_AFTER, waits  # doubled, from the first quick death
        assert text(await host.call("solo__echo", {"text": "again"})) == "again"


async def test_a_daemon_that_had_lived_before_the_bridge_came_costs_no_longer_wait(tmp_path: Path) -> None:
    """A daemon up for ``AUTOSTART_RETRY`` before a bridge attached and killed at once after counts as
    one that lived (its age comes with hello): the bridge starts the next ``AUTOSTART_AFTER`` into the
    gap. Its life used to count from the bridge's attach, so the wait doubled as after a crash loop."""
    config = tmp_path / "config.toml"
    config.write_text(fixture_toml("solo"))
    log_path = tmp_path / "bridge.log"
    errlog = await anyio.to_thread.run_sync(lambda: log_path.open("w"))
    try:
        async with (
            autostart_socket(tmp_path) as socket,
            running_daemon(config, socket=socket) as first,
        ):
            await anyio.sleep(AUTOSTART_RETRY)  # the daemon's age is what is under test
            async with bridge(socket, "--config", str(config), errlog=errlog):
                first.signal(signal.SIGKILL)
                await wait_logged(log_path, "bridge.daemon_lost")
                await wait_daemon_on(socket, [first.process.pid])
    finally:
        errlog.close()
    (lost,) = [json.loads(line) for line in log_path.read_text().splitlines() if "bridge.daemon_lost" in line]
    assert lost["autostart_in"] == AUTOSTART_AFTER


async def test_cold_bridge_connects_servers_as_they_run(tmp_path: Path) -> None:
    """A cold `bridge --config X --connect S`: the instructions list every configured server (with the
    state of one that is not running), S's tools reach the host, and a server that cannot start is
    reported to the host."""
    config = tmp_path / "config.toml"
    config.write_text(
        fixture_toml("quick", description="Quick one")
        # Tried once in the test's time: a retry would only start one more server process.
        + fixture_toml("stuck", "--hang-initialize", connect_timeout=1.0, restart={"initial_delay": 30.0})
    )
    async with (
        autostart_socket(tmp_path) as socket,
        bridge(socket, "--config", str(config), "--connect", "quick", "--connect", "stuck") as host,
    ):
        assert '<mcp id="quick"' in host.instructions and "Quick one</mcp>" in host.instructions
        assert '<mcp id="stuck" state=' in host.instructions
        with anyio.fail_after(60):
            while "quick__echo" not in await host.tool_names():
                await host.wait_list_changed()
        with anyio.fail_after(60):
            await host.log_arrived.wait()
        assert any(line.startswith("stuck: not connected") for line in host.logged)


def test_the_bridge_imports_only_what_a_relay_needs() -> None:
    """One bridge runs per host: `mcpd bridge` loads neither the other commands, nor the client
    libraries, anyio, asyncio, the SDK, nor typing_extensions/inspect (msgspec is imported lean), which keeps
    its RSS near Python's floor."""
    import subprocess  # noqa: PLC0415

    heavy = [
        "mcpd.cli.app",
        "mcpd.client.sync",
        "mcpd.client.aio",
        "anyio",
        "asyncio",
        "mcp",
        "pydantic",
        "typing_extensions",
        "inspect",
    ]
    probe = (
        "import contextlib, sys\n"
        "from mcpd.cli import main\n"
        "with contextlib.redirect_stdout(None), contextlib.suppress(SystemExit):\n"
        "    main(['bridge', '--help'])\n"
        "import mcpd.bridge\n"
        f"print(' '.join(m for m in {heavy!r} if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert loaded.stdout.split() == []


def test_a_bridge_with_stdin_closed_says_so(tmp_path: Path) -> None:
    """Run with stdin closed, the bridge was given the daemon's socket as descriptor 0 and ended with
    an internal error; it is refused as a usage error."""
    import subprocess  # noqa: PLC0415

    done = subprocess.run(
        [sys.executable, "-m", "mcpd", "bridge", "--no-autostart", "--socket", str(tmp_path / "none.sock")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=lambda: os.close(0),
    )
    assert done.returncode == 2, done.stderr
    assert "its stdin is closed" in done.stderr


async def test_a_running_bridge_finds_its_daemon_without_path_libraries(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    """A bridge with no --socket and no $MCPD_SOCKET finds the daemon in $XDG_RUNTIME_DIR, serves
    calls, and never loads platformdirs, pathlib or shutil (with tempfile, bz2 and lzma: 2 MB of
    every host's bridge). ``-X importtime`` lists every module the live process imported."""
    errlog_path = tmp_path / "bridge.err"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-X", "importtime", "-m", "mcpd", "bridge", "--no-autostart", "--connect", "other"],
        env={"XDG_RUNTIME_DIR": str(runtime_dir(daemon))},
    )
    with errlog_path.open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            with anyio.fail_after(120):
                await session.initialize()
                while "other__echo" not in [t.name for t in (await session.list_tools()).tools]:
                    await anyio.sleep(0.05)
                result = await session.call_tool("other__echo", {"text": "found"})
            assert text(result) == "found"
    imported = {line.split("|")[-1].strip() for line in errlog_path.read_text().splitlines() if "|" in line}
    assert "mcpd.bridge" in imported
    assert not {"platformdirs", "pathlib", "shutil", "tempfile"} & imported


async def test_a_host_that_stops_reading_ends_the_bridge_quietly(daemon: DaemonProcess) -> None:
    """The host closed its end of the bridge's stdout: the bridge's next answer finds a broken pipe,
    and it ends as a process killed by SIGPIPE would (141), with no traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    initialize = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize}
    command = [sys.executable, "-m", "mcpd", "bridge", "--socket", str(daemon.socket), "--no-autostart"]
    try:
        async with await anyio.open_process(command, stdout=write_end) as bridge:
            assert bridge.stdin is not None and bridge.stderr is not None
            await bridge.stdin.send(json.dumps(request).encode() + b"\n")
            errors = b"".join([chunk async for chunk in bridge.stderr])
            status = await bridge.wait()
    finally:
        os.close(write_end)
    assert b"Traceback" not in errors
    assert status == 141


@pytest.mark.parametrize("stdin", ["pipe", "file"])
async def test_requests_sent_just_before_stdin_closes_are_answered(
    daemon: DaemonProcess, tmp_path: Path, stdin: str
) -> None:
    """`printf REQUESTS | mcpd bridge`: the host's stdin ends right after its last request, and the
    bridge still writes every answer (a call still running at EOF included) before it exits 0.
    `mcpd bridge < requests.jsonl` too: epoll refused the file, an internal error before any answer."""
    initialize = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
    call = {"name": "mcpd_call_tool", "arguments": {"tool": "other__sleep", "arguments": {"seconds": 0.5}}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
    ]
    command = [sys.executable, "-m", "mcpd", "bridge", "--socket", str(daemon.socket), "--no-autostart"]
    requests = "".join(json.dumps(m) + "\n" for m in lines).encode()
    if stdin == "pipe":
        result = await anyio.run_process(command, input=requests)
    else:
        (tmp_path / "requests.jsonl").write_bytes(requests)
        with (tmp_path / "requests.jsonl").open("rb") as file:
            result = await anyio.run_process(command, stdin=file)
    answers = {m["id"]: m for m in map(json.loads, result.stdout.splitlines()) if "id" in m}
    assert answers[1]["result"]["serverInfo"]
    assert answers[2]["result"]["isError"] is False, answers[2]


class RawHost:
    """A host that writes JSON-RPC lines to a bridge and reads its answers, nothing more."""

    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.stdin, self.stdout = process.stdin, process.stdout
        self.pid = process.pid
        self.buffer = b""
        self.greeting: list[dict[str, Any]] = []
        """What the bridge wrote up to the answer to ``initialize`` (``raw_host``)."""

    async def send(self, message: dict[str, Any]) -> None:
        await self.stdin.send(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    async def until_answer(self, *request_ids: int | str) -> list[dict[str, Any]]:
        """Every message the bridge writes until the answers to ``request_ids``, those included."""
        return await self.until(
            lambda seen: set(request_ids) <= {m.get("id") for m in seen if "method" not in m}
        )

    async def until(self, done: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
        """Every message the bridge writes until those seen are ``done``."""
        seen: list[dict[str, Any]] = []
        with anyio.fail_after(60):
            while not done(seen):
                while b"\n" not in self.buffer:
                    self.buffer += await self.stdout.receive()
                line, self.buffer = self.buffer.split(b"\n", 1)
                seen.append(json.loads(line))
        return seen


@asynccontextmanager
async def raw_host(
    socket: Path, capabilities: dict[str, Any] | None = None, *, autostart: bool = False
) -> AsyncIterator[RawHost]:
    """A ``RawHost`` on its own ``mcpd bridge`` (no autostart unless asked), initialized with
    ``capabilities``."""
    command = [sys.executable, "-m", "mcpd", "bridge", "--socket", str(socket)]
    command += [] if autostart else ["--no-autostart"]
    initialize = {
        "protocolVersion": "2025-06-18",
        "capabilities": capabilities or {},
        "clientInfo": {"name": "t"},
    }
    async with await anyio.open_process(command) as process:
        host = RawHost(process)
        await host.send({"id": 1, "method": "initialize", "params": initialize})
        host.greeting = await host.until_answer(1)
        await host.send({"method": "notifications/initialized"})
        try:
            yield host
        finally:
            process.terminate()


async def test_a_cancelled_request_is_not_answered_after_a_daemon_restart(tmp_path: Path) -> None:
    """A request the host cancelled gets no answer (MCP's rule), not even the error the bridge gives
    the requests a daemon held when it went away."""
    config = tmp_path / "config.toml"
    config.write_text(fixture_toml("tools"))
    async with running_daemon(config) as first, raw_host(first.socket) as host:
        sleep = {"name": "tools__sleep", "arguments": {"seconds": 30}}
        await host.send({"id": 50, "method": "tools/call", "params": sleep})
        await host.send({"method": "notifications/cancelled", "params": {"requestId": 50}})
        await host.send({"id": 2, "method": "ping"})
        before = await host.until_answer(2)
        first.signal(signal.SIGKILL)
        await first.wait_exit()
        config.write_text("")  # the next daemon only has to answer a ping: it needs no server
        async with running_daemon(config, socket=first.socket):
            await host.send({"id": 3, "method": "ping"})
            after = await host.until_answer(3)
    assert not [m for m in before + after if m.get("id") == 50]


async def test_a_late_answer_never_settles_the_next_daemons_question(tmp_path: Path) -> None:
    """An elicitation pending at the host when the daemon is killed is withdrawn from the host, and
    the host's late answer to it (a host may answer anyway) must not settle the question the next
    daemon asks: both daemons counted their requests from 1, and an old "accept" became the
    answer to a new question nobody had seen."""
    config = tmp_path / "config.toml"
    config.write_text(fixture_toml("fx"))

    async def asked(text: str) -> dict[str, Any]:
        """The elicitation the host is sent for ``text``."""

        def ask(message: dict[str, Any]) -> bool:
            return message.get("method") == "elicitation/create" and message["params"]["message"] == text

        seen = await host.until(lambda seen: any(map(ask, seen)))
        messages.extend(seen)
        (request,) = filter(ask, seen)
        return request

    messages: list[dict[str, Any]] = []

    async with running_daemon(config) as first, raw_host(first.socket, {"elicitation": {}}) as host:
        await first.wait_for("server.state", server="fx", new="running", timeout=60)
        old = {"name": "fx__ask", "arguments": {"kind": "elicitation", "text": "old question"}}
        await host.send({"id": 10, "method": "tools/call", "params": old})
        old_ask = await asked("old question")
        first.signal(signal.SIGKILL)
        await first.wait_exit()
        async with running_daemon(config, socket=first.socket) as second:
            await second.wait_for("server.state", server="fx", new="running", timeout=60)
            new = {"name": "fx__ask", "arguments": {"kind": "elicitation", "text": "new question"}}
            await host.send({"id": 11, "method": "tools/call", "params": new})
            new_ask = await asked("new question")
            # The user's answer to the old question comes late, then the one to the new question.
            accept = {"action": "accept", "content": {"answer": "yes to the old question"}}
            await host.send({"id": old_ask["id"], "result": accept})
            await host.send({"id": new_ask["id"], "result": {"action": "decline"}})
            (answer,) = [m for m in await host.until_answer(11) if m.get("id") == 11]
    assert answer["result"]["content"][0]["text"] == "elicited: decline null"
    assert new_ask["id"] != old_ask["id"]
    # The bridge told the host as soon as the question had nobody to answer to.
    withdrawn = {"requestId": old_ask["id"], "reason": "the mcpd daemon that asked went away"}
    assert [m["params"] for m in messages if m.get("method") == "notifications/cancelled"] == [withdrawn]


async def test_a_host_that_declares_much_still_resumes_and_searches_within_limits(tmp_path: Path) -> None:
    """What a host declares in ``initialize`` (70 kB of capabilities here) and searches for does not
    grow its session's state past what a reconnecting bridge may send: after a daemon restart the
    session carries on. A search query longer than the socket API takes is refused, not ranked."""
    config = tmp_path / "config.toml"
    config.write_text("")  # no server: the search is refused before any ranking, then only a ping
    capabilities = {"experimental": {"pad": "x" * 70_000}, "sampling": {"tools": {}}}
    search = {"name": "mcpd_search_tools", "arguments": {"query": "echo " * 1000}}
    async with running_daemon(config) as first, raw_host(first.socket, capabilities) as host:
        await host.send({"id": 2, "method": "tools/call", "params": search})
        (refused,) = [m for m in await host.until_answer(2) if m.get("id") == 2]
        first.signal(signal.SIGKILL)
        await first.wait_exit()
        async with running_daemon(config, socket=first.socket):
            await host.send({"id": 3, "method": "ping"})
            (pinged,) = [m for m in await host.until_answer(3) if m.get("id") == 3]
    assert refused["result"]["isError"] and "invalid search" in refused["result"]["content"][0]["text"]
    assert pinged == {"jsonrpc": "2.0", "id": 3, "result": {}}


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
async def test_a_session_of_more_subscriptions_than_a_hello_holds_resumes_with_those_that_fit(
    tmp_path: Path,
) -> None:
    """A host subscribes through a bridge to 400 long URIs one by one (90 kB of them, over what a hello
    may hold) and drops one; the daemon is killed (-9) and another started: the bridge resumes the
    session with the first ones that fit, says how many it dropped, the new daemon takes those again
    (not the one dropped by the host) and their updates reach the host. Before, the whole set went
    back in the hello, which the daemon refused: the bridge began a fresh session, every
    subscription lost."""
    config = tmp_path / "config.toml"
    config.write_text(fullserver_toml("full"))
    uris = [f"mcpd://full/full://r/{index}/{'x' * 200}" for index in range(400)]
    log_path = tmp_path / "bridge.log"
    errlog = await anyio.to_thread.run_sync(lambda: log_path.open("w"))
    try:
        async with (
            running_daemon(config) as first,
            bridge(first.socket, "--no-autostart", "--connect", "full", errlog=errlog) as host,
        ):
            await first.wait_for("server.state", server="full", new="running", timeout=120)
            with anyio.fail_after(300):  # a guard against a hang: 400 round trips on a slow machine
                for uri in uris:
                    await host.session.subscribe_resource(uri)
                await host.session.unsubscribe_resource(uris[1])
            first.signal(signal.SIGKILL)
            await first.wait_exit()
            async with running_daemon(config, socket=first.socket) as second:
                await wait_logged(log_path, "bridge.subscriptions_dropped")
                lines = log_path.read_text().splitlines()
                (said,) = [json.loads(line) for line in lines if "bridge.subscriptions_dropped" in line]
                (lost,) = [json.loads(line) for line in lines if "bridge.daemon_lost" in line]
                assert lost["autostart_in"] is None  # --no-autostart: it starts none
                kept = [uris[0], *uris[2:]][: said["kept"]]
                assert said["dropped"] == len(uris) - 1 - len(kept) > 0
                await second.wait_for("resource.subscribed", server="full", uri=kept[-1][12:], timeout=120)
                taken = [e["uri"] for e in second.events if e.get("event") == "resource.subscribed"]
                assert taken == [uri[12:] for uri in kept]  # in order; the one dropped by the host not
                mark = len(host.received)
                await host.call("full__touch", {"uri": uris[0][12:]})
                update = await host.wait_received(
                    lambda m: isinstance(m, types.ResourceUpdatedNotification), after=mark
                )
    finally:
        errlog.close()
    assert update.params.uri == uris[0]


LOG_FLOOD = """
import json, sys
listed = [{"uri": "lf://r", "name": "r"}]
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method, result = message.get("method"), {}
    if method == "initialize":
        capabilities = {"logging": {}, "resources": {"subscribe": True}}
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": capabilities}
        result["serverInfo"] = {"name": "lf", "version": "1"}
    elif method == "tools/list":
        result = {"tools": [{"name": "flood", "inputSchema": {"type": "object"}}]}
    elif method == "resources/list":
        result = {"resources": listed}
    elif method == "resources/templates/list":
        result = {"resourceTemplates": []}
    elif method == "tools/call":
        arguments = message["params"]["arguments"]
        count, uris = arguments["messages"], arguments.get("updates")
        line = '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"%s"}}\\n'
        if uris:  # updates of lf://r/0 .. lf://r/<uris - 1> in turn, the n-th with n in its _meta
            line = '{"jsonrpc":"2.0","method":"notifications/resources/updated",'
            line += '"params":{"uri":"lf://r/%d","_meta":{"n":%d,"pad":"%s"}}}\\n'
            sys.stdout.write("".join(line % (n % uris, n, "m" * 1000) for n in range(count)))
            if arguments.get("then_remove"):  # lf://r leaves the list after its updates
                listed = [{"uri": "lf://s", "name": "s"}]
                sys.stdout.write('{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}\\n')
        else:
            sys.stdout.write(line % ("m" * 1000) * count)
        result = {"content": [{"type": "text", "text": "flooded"}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\\n")
    sys.stdout.flush()
"""


@pytest.fixture(scope="module")
async def impatient(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DaemonProcess]:
    """A daemon that drops a client not reading for 0.5 s (``client_write_timeout``), with ``tools``
    and ``lf``, a server that floods log messages (or updates of its resource) on demand: for the
    hosts that pause reading."""
    directory = tmp_path_factory.mktemp("impatient")
    script = directory / "flood.py"
    script.write_text(LOG_FLOOD)
    config = directory / "config.toml"
    flooder = f"[servers.lf]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(script))}]\n"
    config.write_text("[daemon]\nclient_write_timeout = 0.5\n" + fixture_toml("tools") + flooder)
    async with running_daemon(config) as running:
        yield running


def dropped_since(daemon: DaemonProcess, mark: int) -> list[dict[str, Any]]:
    """The clients the daemon dropped since its event ``mark``."""
    return [event for event in daemon.events[mark:] if event.get("event") == "client.dropped"]


async def test_a_host_that_pauses_reading_loses_no_call(impatient: DaemonProcess) -> None:
    """A host that stops reading for longer than the daemon waits on a client that does not read
    (``client_write_timeout``) while large answers arrive: the bridge keeps them, keeps reading the
    daemon, and every call is answered once the host reads again."""
    big = "x" * 600_000
    echo = {"name": "mcpd_call_tool", "arguments": {"tool": "tools__echo", "arguments": {"text": big}}}
    mark = len(impatient.events)
    async with raw_host(impatient.socket) as host:
        for request_id in range(10, 14):
            await host.send({"id": request_id, "method": "tools/call", "params": echo})
        await anyio.sleep(1.5)  # not reading: three times client_write_timeout
        answers = await host.until_answer(*range(10, 14))
    results = {m["id"]: m for m in answers if "id" in m}
    assert sorted(results) == [10, 11, 12, 13]
    assert all(results[i]["result"]["content"][0]["text"] == big for i in range(10, 14))
    assert not dropped_since(impatient, mark)


async def test_a_paused_host_at_debug_level_loses_log_messages_not_calls(impatient: DaemonProcess) -> None:
    """A host that set `logging/setLevel debug` and paused reading while a server floods 40 MB of log
    messages: the bridge keeps its answers and drops log messages past 1 MiB held, so it goes on
    reading the daemon, which never drops it, and the host's running call is answered (the log
    messages filled the bridge's 32 MB; with a longer flood the daemon dropped the bridge as not
    reading, and the call failed)."""
    daemon = impatient
    sleep = {"name": "mcpd_call_tool", "arguments": {"tool": "tools__sleep", "arguments": {"seconds": 2}}}
    mark = len(daemon.events)
    async with raw_host(daemon.socket) as host:
        await daemon.wait_for("server.state", server="lf", new="running")
        connect_lf = {"name": "mcpd_connect_server", "arguments": {"server": "lf"}}
        await host.send({"id": 2, "method": "tools/call", "params": connect_lf})
        await host.send({"id": 3, "method": "logging/setLevel", "params": {"level": "debug"}})
        await host.until_answer(2, 3)
        await host.send({"id": 10, "method": "tools/call", "params": sleep})
        async with connect(daemon.socket) as client:  # while the host reads nothing
            await client.call_tool("lf__flood", {"messages": 40_000})
        answers = await host.until_answer(10)
    assert answers[-1]["result"]["content"][0]["text"] == "slept 2.0"
    # About 1 MiB of them, not the 32 MB (~29,000) the bridge kept for a host that does not read.
    assert 0 < sum(m.get("method") == "notifications/message" for m in answers) < 4_000
    assert not dropped_since(daemon, mark)


async def test_a_paused_host_subscribed_to_a_flooding_resource_loses_no_call_nor_the_last_updates(
    impatient: DaemonProcess,
) -> None:
    """A host subscribed to a resource whose server floods 40 MB of updates of three resources under
    it while the host pauses reading: resource updates are advisory in the bridge as in the daemon,
    so past 1 MiB kept for the host they are not added, the bridge goes on reading the daemon and
    the host's running call is answered (the bridge kept them like answers: ~9,000 of them, 10 MB,
    queued ahead of the call's answer). They are held instead, the latest per URI, and sent once the
    host read what was kept: its last update of each URI is the server's last (its ``_meta``).
    Before, they were dropped: the host never heard of the last changes."""
    daemon = impatient
    sleep = {"name": "mcpd_call_tool", "arguments": {"tool": "tools__sleep", "arguments": {"seconds": 2}}}
    count, uris = 40_000, 3
    mark = len(daemon.events)
    async with raw_host(daemon.socket) as host:
        await daemon.wait_for("server.state", server="lf", new="running")
        await host.send({"id": 2, "method": "resources/subscribe", "params": {"uri": "mcpd://lf/lf://r"}})
        await host.until_answer(2)
        await host.send({"id": 10, "method": "tools/call", "params": sleep})
        async with connect(daemon.socket) as client:  # while the host reads nothing
            await client.call_tool("lf__flood", {"messages": count, "updates": uris})
        answers = await host.until_answer(10)
        # Its answer is sent after what is kept for the host; then the updates held, then this one's.
        await host.send({"id": 11, "method": "ping"})
        answers += await host.until_answer(11)
    assert next(m for m in answers if m.get("id") == 10)["result"]["content"][0]["text"] == "slept 2.0"
    updates = [m["params"] for m in answers if m.get("method") == "notifications/resources/updated"]
    assert 0 < len(updates) < 4_000
    last = {update["uri"]: update["_meta"]["n"] for update in updates}
    assert last == {f"mcpd://lf/lf://r/{i}": max(range(i, count, uris)) for i in range(uris)}
    assert not dropped_since(daemon, mark)


def _relay_without_daemon(tmp_path: Path, stdout: int) -> Relay:
    """A relay in a gap: its socket path names no daemon, and it starts none."""
    return Relay(
        str(tmp_path / "no-daemon.sock"), config=None, state=SessionState(), autostart=False, stdout=stdout
    )


def _read_by_a_host_behind(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a host reads, in order, of ``messages`` that a relay delivers while the host is behind
    (a large answer unread first: more than ``ADVISORY_LIMIT`` kept for it), once it reads all."""
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    got = b""
    try:
        relay = Relay(None, config=None, state=SessionState(), autostart=False, stdout=write)
        big = {"jsonrpc": "2.0", "id": 1, "result": {"pad": "x" * 2 * ADVISORY_LIMIT}}
        relay._deliver([json.dumps(big).encode()])  # the host does not read it yet
        relay._deliver([json.dumps(message).encode() for message in messages])
        while True:  # the host reads all
            with contextlib.suppress(BlockingIOError):
                while chunk := os.read(read, 1 << 16):
                    got += chunk
            if not relay._out:
                break
            relay._flush()
    finally:
        os.close(read)
        os.close(write)
    answer, *rest = [json.loads(line) for line in got.splitlines()]
    assert answer.get("id") == 1
    return rest


def test_a_relay_sends_the_updates_it_holds_before_a_list_changed_that_came_after_them() -> None:
    """A host that is behind (more than ``ADVISORY_LIMIT`` kept for it): the relay holds the
    resource updates that come, then a ``resources/list_changed`` comes (it may remove their
    resources): the host reads the updates held before it, as the daemon sent them. Before, the
    ``list_changed`` joined what was kept at once, and the updates held went once the host caught
    up: after it, of a resource the new list may not have."""
    updated = [
        {"jsonrpc": "2.0", "method": RESOURCE_UPDATED, "params": {"uri": f"f://{i}"}} for i in range(3)
    ]
    changed = {"jsonrpc": "2.0", "method": RESOURCES_LIST_CHANGED}
    methods = [message.get("method") for message in _read_by_a_host_behind([*updated, changed])]
    assert methods == [*[RESOURCE_UPDATED] * 3, RESOURCES_LIST_CHANGED]


def test_a_relay_sends_the_last_update_of_an_ended_subscription_to_a_host_far_behind() -> None:
    """A host that is behind, the relay's held updates at their bounds (``HELD_UPDATES`` URIs): the update
    that ends a subscription (its ``_meta`` says ``SUBSCRIPTION_ENDED``) is kept for the host after
    those held, and reaches it. Before, it was held like any other and, past the bounds, dropped:
    the host never learnt that no update of the URI would come."""
    updated = [
        {"jsonrpc": "2.0", "method": RESOURCE_UPDATED, "params": {"uri": f"f://{i}"}}
        for i in range(HELD_UPDATES + 100)
    ]
    why = {SUBSCRIPTION_ENDED: "the resource does not exist"}
    ended = {"jsonrpc": "2.0", "method": RESOURCE_UPDATED, "params": {"uri": "f://", "_meta": why}}
    uris = [message.get("params", {}).get("uri") for message in _read_by_a_host_behind([*updated, ended])]
    assert uris[-1] == "f://", uris[-3:]
    assert len(uris) < len(updated)  # the bounds did apply to the others


def test_a_relay_takes_the_subscriptions_of_a_daemon_that_sends_whole_states() -> None:
    """A daemon that sends whole states (an earlier mcpd's, or one that could not read the resume
    and began afresh) tells no changes: the subscriptions in its states are the session's, and the
    next resume carries those and asks for changes again. The relay kept the changes the daemon
    before had told it: a URI the host had dropped since came back at the next resume."""
    relay = Relay(None, config=None, state=SessionState(subscription_deltas=True), autostart=False)
    told = SubscriptionsChanged(added=["mcpd://a/x", "mcpd://a/y"], removed=[])
    whole = SessionState(subscribed=["mcpd://a/y"])  # the host dropped x under the later daemon
    relay._deliver(
        [
            msgspec.json.encode(Notification(SUBSCRIPTIONS_NOTIFICATION, told)),
            msgspec.json.encode(Notification(SESSION_NOTIFICATION, whole)),
        ]
    )
    resumed = msgspec.json.decode(relay._resume(), type=SessionState)
    assert resumed.subscribed == ["mcpd://a/y"]
    assert resumed.subscription_deltas


async def test_a_message_over_the_daemons_frame_limit_is_refused_by_the_bridge(tmp_path: Path) -> None:
    """A host's message longer than the daemon reads (its hello says how long) is refused by the bridge:
    a request gets an error, a notification is dropped and logged, and the session goes on. Before,
    the daemon cut the connection at it and the bridge sent it again to each next connection, every
    few milliseconds, for good: nothing after it was answered."""
    config = tmp_path / "config.toml"
    config.write_text("[daemon]\nmax_frame_bytes = 65536\n")
    async with running_daemon(config) as daemon, raw_host(daemon.socket) as host:
        mark = len(daemon.events)
        await host.send({"id": 2, "method": "ping", "params": {"padding": "a" * 70_000}})
        progress = {"progressToken": "t", "progress": 1, "message": "a" * 70_000}
        await host.send({"method": "notifications/progress", "params": progress})
        await host.send({"id": 3, "method": "ping"})
        answers = {m["id"]: m for m in await host.until_answer(2, 3) if "id" in m}
    assert answers[2]["error"]["code"] == -32600, answers[2]
    assert "65536" in answers[2]["error"]["message"]
    assert answers[3]["result"] == {}
    assert not [e for e in daemon.events[mark:] if e.get("event") == "client.bad_frame"]


def peak_rss_mib(pid: int) -> float:
    """The most resident memory process ``pid`` has had, in MiB (from /proc; Linux only)."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM:"))


async def test_a_host_line_far_over_the_limit_is_refused_as_it_comes_not_held(tmp_path: Path) -> None:
    """A host's line of 48 MB (the daemon reads 64 KB) is answered with the limit's error at once,
    by the id at either end of it (the TypeScript SDK writes ``id`` last, the Python one first), and
    the bridge never holds it: before, each read was joined to all held and split again (quadratic),
    a 50 MB line took 20 s, every later call of the host waiting behind it, and one with no newline
    was kept whole, however long (170 MB of RSS for 50 MB)."""
    config = tmp_path / "config.toml"
    config.write_text("[daemon]\nmax_frame_bytes = 65536\n")
    padding = "a" * (48 << 20)
    id_last = json.dumps({"method": "ping", "params": {"padding": padding}, "jsonrpc": "2.0", "id": 5})
    id_first = json.dumps({"jsonrpc": "2.0", "id": "six", "method": "ping", "params": {"padding": padding}})
    async with running_daemon(config) as daemon, raw_host(daemon.socket) as host:
        with anyio.fail_after(10):  # well past the few tenths of a second it takes now
            await host.stdin.send(f"{id_last}\n{id_first}\n".encode())
            await host.send({"id": 7, "method": "ping"})
            answers = {m["id"]: m for m in await host.until_answer(5, "six", 7) if "id" in m}
        peak = peak_rss_mib(host.pid)
    assert answers[5]["error"]["code"] == answers["six"]["error"]["code"] == -32600, answers
    assert "65536" in answers[5]["error"]["message"]
    assert answers[7]["result"] == {}
    assert peak < 48, peak


def test_a_line_over_the_default_limit_before_any_daemon_answered_is_refused_as_such() -> None:
    """Before any daemon answered (one stalled at the bridge's start), the bridge bounds a host's
    line by the default limit (16 MiB), which a daemon configured higher would take: the host's
    error says it is the default, not the daemon's. Before, it named "the daemon's limit" that no
    daemon had said."""
    with tempfile.TemporaryFile() as out:
        relay = Relay(None, config=None, state=SessionState(), autostart=False, stdout=out.fileno())
        reader = LineReader(lambda: relay._max_frame)
        call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"pad": "x" * (17 << 20)}}
        for line in reader.feed(json.dumps(call).encode() + b"\n"):
            relay._from_host(line)
        out.seek(0)
        [answer] = [json.loads(line) for line in out.read().splitlines()]
    assert answer["error"]["code"] == -32600
    assert "default limit of 16777216" in answer["error"]["message"], answer


def test_an_oversized_line_is_answered_by_its_own_id_never_one_inside_it() -> None:
    """Only the top-level ``id`` of a line too long to keep names it: one in its params (a request of
    another's, in a tool's arguments) must not be answered, and a notification is answered by none."""
    reader = LineReader(lambda: 100)
    padding = "a" * 10_000
    lines = [
        {"jsonrpc": "2.0", "method": "tools/call", "params": {"id": 1, "arguments": {"x": padding, "id": 2}}},
        {"method": "notifications/progress", "params": {"x": padding, "id": 3}, "jsonrpc": "2.0"},
        {"jsonrpc": "2.0", "method": "tools/call", "id": 's\\"}', "params": {"x": padding}},
        {"jsonrpc": "2.0", "method": "tools/call", "params": {"x": padding}, "id": -4},
    ]
    text = "".join(json.dumps(line) + "\n" for line in lines).encode()
    found = [line for start in range(0, len(text), 999) for line in reader.feed(text[start : start + 999])]
    assert all(isinstance(line, Oversized) for line in found)
    assert [line.request_id() for line in found if isinstance(line, Oversized)] == [None, None, 's\\"}', -4]
    assert [line.size for line in found if isinstance(line, Oversized)] == [len(json.dumps(x)) for x in lines]
    assert reader.feed(b'{"id":1}\n{"id"') == [b'{"id":1}'] and reader.end() == b'{"id"'


def test_an_oversized_response_or_float_id_is_answered_by_no_id() -> None:
    """A host's answer to the daemon's request (a sampling result with an image) over the limit names
    no request of the host's: its id is the daemon's, and an error sent under it would answer the
    host's own request of that id. Nor does an id of 1.5 name request 1. Before, both were taken."""
    reader = LineReader(lambda: 100)
    padding = "a" * 10_000
    lines = [
        {"jsonrpc": "2.0", "id": 5, "result": {"content": {"type": "image", "data": padding}}},
        {"result": {"data": padding}, "jsonrpc": "2.0", "id": 6},
        {"jsonrpc": "2.0", "id": 7, "error": {"code": -1, "message": padding}},
        {"jsonrpc": "2.0", "id": 1.5, "method": "ping", "params": {"x": padding}},
        {"method": "ping", "params": {"x": padding}, "jsonrpc": "2.0", "id": 8},
    ]
    found = reader.feed("".join(json.dumps(line) + "\r\n" for line in lines).encode())
    assert [line.request_id() for line in found if isinstance(line, Oversized)] == [None, None, None, None, 8]


async def test_a_daemon_stopped_past_the_hello_timeout_loses_no_call_nor_a_bridge_started_meanwhile(
    tmp_path: Path,
) -> None:
    """A daemon stopped (SIGSTOP) for 11 s answers everything once it goes on: every request of a host
    that sent more than the socket holds meanwhile (4 MB of tool calls), and the ``initialize`` of a
    host whose bridge started meanwhile. Before, the first bridge gave up on its write after 10 s and
    failed the call already sent as "the daemon restarted" (none had), and the second exited when its
    hello had no answer within 10 s: the host's server gone for good. Both wait as in a gap now
    (``GAP_WAIT``), and the second host hears nothing before its answer to ``initialize``. Costs 11 s:
    the old waits must pass."""
    config = tmp_path / "config.toml"
    config.write_text("")
    late: list[dict[str, Any]] = []
    async with running_daemon(config) as daemon, raw_host(daemon.socket) as host:
        daemon.signal(signal.SIGSTOP)
        pad = "a" * 500_000

        async def write() -> None:
            # The first is small, in the socket's buffer (the daemon's) before the bridge's write waits.
            await host.send({"id": 9, "method": "tools/call", "params": {"name": "nope"}})
            for request_id in range(10, 18):
                # Not a ping: the bridge sends those again after a reconnect, with no error to see.
                call = {"name": "nope", "arguments": {"pad": pad}}
                await host.send({"id": request_id, "method": "tools/call", "params": call})

        async def start_late() -> None:
            # With autostart, as hosts run it: its look for a daemon met the stopped one first.
            async with raw_host(daemon.socket, autostart=True) as second:  # initialized, or it raises
                await second.send({"id": 2, "method": "ping"})
                late.extend([*second.greeting, *await second.until_answer(2)])

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(write)
                tg.start_soon(start_late)
                await anyio.sleep(11)  # the stall itself: past the 10 s the bridges waited
                daemon.signal(signal.SIGCONT)
        finally:
            daemon.signal(signal.SIGCONT)
        answers = [m for m in await host.until_answer(*range(9, 18)) if "id" in m]
    # Each answered by the daemon that took it: there is no tool "nope".
    assert {m["error"]["code"] for m in answers} == {-32602}, answers[:2]
    # Nothing before the answer to its initialize (a list_changed came first, as after a reconnect).
    assert [m.get("id") for m in late] == [1, 2] and late[1]["result"] == {}, late


async def test_an_initialize_the_daemon_died_holding_is_answered_before_any_list_changed(
    tmp_path: Path,
) -> None:
    """A host's ``initialize`` a daemon held when it was killed (a cold start waits for the servers'
    first start) is sent again to the next daemon, and the host hears nothing before its answer: MCP
    allows no notification before it. Before, the bridge counted the host initialized once the first
    daemon had the request, and wrote ``list_changed`` at the reconnect, ahead of the answer."""
    config = tmp_path / "config.toml"
    config.write_text('[servers.mute]\ncommand = "sleep"\nargs = ["60"]\n')  # starting for 20 s
    command = [sys.executable, "-m", "mcpd", "bridge", "--no-autostart", "--socket"]
    async with running_daemon(config, wait_ready=False) as first:
        await first.wait_for("daemon.starting")  # listening: the bridge's hello waits for it to serve
        async with await anyio.open_process([*command, str(first.socket)]) as process:
            host = RawHost(process)
            try:
                initialize = {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t"},
                }
                await host.send({"id": 1, "method": "initialize", "params": initialize})
                await host.send({"id": 2, "method": "ping"})
                # Answered while the initialize waits (2 s) for the server: the daemon has read it.
                assert [m.get("id") for m in await host.until_answer(2)] == [2]
                first.signal(signal.SIGKILL)
                await first.wait_exit()
                config.write_text("")
                async with running_daemon(config, socket=first.socket):
                    seen = await host.until_answer(1)
            finally:
                process.terminate()
    assert [m.get("id") for m in seen] == [1], seen


def test_an_answer_the_daemon_sent_before_it_went_away_reaches_the_host() -> None:
    """A daemon answers a call and goes away (a restart) before the relay read the answer, and the
    relay finds it gone by sending the host's next line (a broken pipe): the host gets the answer
    the daemon sent, still in the socket, not "the mcpd daemon restarted during tools/call"."""
    ours, daemons = socket.socketpair()
    read, write = os.pipe()
    os.set_blocking(read, False)
    hello = HelloResult(protocol=1, version="test", pid=0)
    relay = Relay(None, config=None, state=SessionState(), autostart=False, stdout=write)
    try:
        relay._attach(Channel(ours, hello, [], FrameBuffer()))
        relay._from_host(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call"}).encode())
        daemons.sendall(frame(json.dumps({"jsonrpc": "2.0", "id": 5, "result": {"done": True}}).encode()))
        daemons.close()
        relay._from_host(json.dumps({"jsonrpc": "2.0", "id": 6, "method": "ping"}).encode())
        got = [json.loads(line) for line in os.read(read, 1 << 16).splitlines()]
    finally:
        relay._close()
        os.close(read)
        os.close(write)
    assert [m.get("result") for m in got if m.get("id") == 5] == [{"done": True}], got


def test_a_host_writing_fast_while_the_daemon_is_away_is_refused_past_a_bound_not_held() -> None:
    """A host writes 32 MB of tool calls while there is no daemon (a gap): the first ``GAP_LIMIT``
    bytes are kept for the next daemon, every request after is answered at once with "daemon
    unavailable", and the relay's memory stays near the bound. Before, all were kept for up to
    ``GAP_WAIT``: a host writing fast in a gap grew the bridge without bound (121 MiB of RSS after
    15 s of it, and growing)."""
    pad = "x" * 1000
    count = 2 * GAP_LIMIT // len(pad)
    with tempfile.TemporaryFile() as out:
        relay = Relay(None, config=None, state=SessionState(), autostart=False, stdout=out.fileno())
        tracemalloc.start()
        try:
            for request_id in range(count):
                call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"pad": pad}}
                relay._from_host(json.dumps(call).encode())
            grown = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        out.seek(0)
        answers = [json.loads(line) for line in out.read().splitlines()]
    kept = [json.loads(line)["id"] for _, line, _ in relay.waiting]
    refused = [answer["id"] for answer in answers]
    assert kept == list(range(len(kept))), len(kept)
    assert refused == list(range(len(kept), count)), len(refused)
    assert {answer["error"]["code"] for answer in answers} == {DAEMON_UNAVAILABLE}
    assert grown < 1.5 * GAP_LIMIT, grown


def test_a_host_answer_over_the_limit_fails_the_daemons_request_at_once() -> None:
    """The host answers a server's sampling request with a result longer than the daemon reads (an
    image): the relay cannot send it, and answers the daemon's request with an error at once, by the
    id at either end of the line; a long line whose id the daemon never asked (or asked and was
    answered) is answered to nobody. Before, nothing was sent: the server's request, and the tool
    call that made it, waited out the call's whole deadline (20 s in the repro)."""
    ours, daemons = socket.socketpair()
    hello = HelloResult(protocol=1, version="test", pid=0, max_frame=65536)
    with tempfile.TemporaryFile() as out:
        relay = Relay(None, config=None, state=SessionState(), autostart=False, stdout=out.fileno())
        try:
            relay._attach(Channel(ours, hello, [], FrameBuffer()))
            for asked in (7, "s"):
                request: dict[str, Any] = {"jsonrpc": "2.0", "id": asked, "method": "sampling/createMessage"}
                daemons.sendall(frame(json.dumps(request).encode()))
            relay._from_daemon()
            image = {"type": "image", "mimeType": "image/png", "data": "A" * 100_000}
            answers = [
                {"jsonrpc": "2.0", "id": 7, "result": {"role": "assistant", "content": image}},
                {"result": {"role": "assistant", "content": image}, "jsonrpc": "2.0", "id": "s"},
                {"jsonrpc": "2.0", "id": 8, "result": {"content": image}},  # never asked
                {"jsonrpc": "2.0", "id": 7, "result": {"content": image}},  # answered already
            ]
            reader = LineReader(lambda: relay._max_frame)
            for line in reader.feed(b"".join(json.dumps(answer).encode() + b"\n" for answer in answers)):
                relay._from_host(line)
            relay._from_host(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping"}).encode())
            buffer, sent = FrameBuffer(), list[dict[str, Any]]()
            daemons.settimeout(10)
            while len(sent) < 3:
                sent += [json.loads(data) for data in buffer.feed(daemons.recv(1 << 16))]
        finally:
            relay._close()
            daemons.close()
    codes = [(m["id"], m.get("error", {}).get("code")) for m in sent]
    assert codes == [(7, INTERNAL_ERROR), ("s", INTERNAL_ERROR), (9, None)], codes
    assert "65536" in sent[0]["error"]["message"]


def test_a_request_the_host_cancels_in_a_gap_is_not_run_by_the_next_daemon_however_full_the_gap(
    tmp_path: Path,
) -> None:
    """During a gap the host sends a tool call, then a long one that fills ``GAP_LIMIT``, then
    cancels the first: the next daemon is sent the long call only, never the one cancelled. Before,
    the cancel came past the bound and was dropped like any notification, while the call it
    cancelled, held before, was sent to the next daemon and run."""
    ours, daemons = socket.socketpair()
    received = bytearray()

    def drain() -> None:  # the next daemon reads all it is sent (16 MiB: more than a socket holds)
        while chunk := daemons.recv(1 << 20):
            received.extend(chunk)

    reader = threading.Thread(target=drain)
    with tempfile.TemporaryFile() as out:
        relay = _relay_without_daemon(tmp_path, out.fileno())
        call: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "deploy"},
        }
        relay._from_host(json.dumps(call).encode())
        blob = "x" * (GAP_LIMIT - 700)
        relay._from_host(
            json.dumps({**call, "id": 2, "params": {"name": "store", "arguments": {"blob": blob}}}).encode()
        )
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        relay._from_host(json.dumps(cancel).encode())
        reader.start()
        try:
            relay._attach(Channel(ours, HelloResult(protocol=1, version="test", pid=0), [], FrameBuffer()))
            relay._send_waiting(time.monotonic())
        finally:
            relay._close()
            reader.join(30)
            daemons.close()
    sent = [json.loads(data) for data in FrameBuffer().feed(bytes(received))]
    cancelled = {m["params"]["requestId"] for m in sent if m.get("method") == "notifications/cancelled"}
    run = [m["id"] for m in sent if m.get("method") == "tools/call" and m["id"] not in cancelled]
    assert run == [2], run


def test_a_wake_in_a_gap_costs_the_same_however_many_lines_wait(tmp_path: Path) -> None:
    """A host writes a line at a time (a wake of the relay each) while there is no daemon: holding
    30,000 lines costs well under a second of CPU. Before, each wake looked at every line held (the
    oldest, and those due), quadratic: 9 s for 20,000, 80 s for the 60,000 ``GAP_LIMIT`` holds."""
    with tempfile.TemporaryFile() as out:
        relay = _relay_without_daemon(tmp_path, out.fileno())
        line = json.dumps({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}).encode()
        started = time.process_time()
        for _ in range(30_000):
            relay._from_host(line)
            relay._tick()
            relay._timeout(None)
        spent = time.process_time() - started
    assert len(relay.waiting) == 30_000
    assert spent < 3.0, spent
