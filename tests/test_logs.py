"""Per-server logs: the bounded ring on its own, then stderr lines and MCP log messages of real
fixture servers behind a real daemon, through the async client and the `mcpd logs` command."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import pytest
from anyio.streams.text import TextReceiveStream

from mcpd.cli.logs import Printer
from mcpd.cli.output import Style
from mcpd.client import Client, _wire
from mcpd.client.aio import AsyncClient, connect
from mcpd.config.model import Config, ServerConfig
from mcpd.errors import TransportError, UnknownServer
from mcpd.model.logs import LogEntry
from mcpd.model.states import ServerState
from mcpd.supervisor.logring import MAX_CHARS, MAX_ENTRIES, MAX_LINE, LogRing, clip_line
from mcpd.supervisor.stdio import STDERR_LINE_BYTES
from mcpd.supervisor.supervisor import open_supervisor
from mcpd.testing import fixture_toml
from mcpd.testing.daemon import DaemonProcess, running_daemon
from mcpd.testing.remote import free_port, running_http_fixture

# -- the ring -------------------------------------------------------------------------------


def test_ring_keeps_the_latest_entries_within_the_entry_bound() -> None:
    """Past ``max_entries`` the oldest go; numbering goes on, so what was dropped shows as a gap."""
    ring = LogRing(max_entries=3)
    for index in range(5):
        ring.add("stderr", f"line {index}")
    assert [e.text for e in ring.last(None)] == ["line 2", "line 3", "line 4"]
    assert [e.seq for e in ring.last(2)] == [3, 4]
    assert ring.last(0) == []
    assert ring.next_seq == 5


def test_ring_keeps_within_the_character_bound() -> None:
    """A few long lines fill the ring as surely as many short ones: characters are bounded too."""
    ring = LogRing(max_entries=100, max_chars=1000, max_line=400)
    for index in range(10):
        ring.add("mcp", f"{index}" * 300, level="info", logger="db")
    assert ring.chars <= 1000
    assert len(ring) == 3  # 303 characters each (text and logger)
    assert [e.seq for e in ring.last(None)] == [7, 8, 9]


def test_a_long_line_is_cut_with_a_marker() -> None:
    """A line over ``max_line`` keeps its start and says how much was cut."""
    ring = LogRing(max_line=10)
    ring.add("stderr", "abcdefghijKLMNOP")
    (entry,) = ring.last(None)
    assert entry.text == "abcdefghij [... 6 more characters cut]"
    assert clip_line("short", 10) == "short"


def test_since_gives_what_is_still_held_from_a_number_on() -> None:
    """A follower that asks for entries the ring has dropped gets the oldest still held."""
    ring = LogRing(max_entries=2)
    assert ring.since(0) == []
    for index in range(4):
        ring.add("stderr", str(index))
    assert [e.seq for e in ring.since(0)] == [2, 3]
    assert [e.seq for e in ring.since(3)] == [3]
    assert ring.since(4) == []


@pytest.mark.anyio
async def test_followers_wake_on_a_new_entry_and_on_close() -> None:
    """``wait_beyond`` returns once an entry past the given number exists, or the ring closes."""
    ring = LogRing()
    woke: list[int] = []

    async def follower() -> None:
        await ring.wait_beyond(0)
        woke.append(ring.next_seq)
        await ring.wait_beyond(5)
        woke.append(-1 if ring.closed else ring.next_seq)

    async with anyio.create_task_group() as tg:
        tg.start_soon(follower)
        await anyio.wait_all_tasks_blocked()
        ring.add("stderr", "first")
        await anyio.wait_all_tasks_blocked()
        assert woke == [1]
        ring.close()
    assert woke == [1, -1]


def test_the_command_marks_a_gap_in_the_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    """`mcpd logs` prints one line per entry and says how many lines it never received."""
    show = Printer(Style(False))
    for seq in (0, 1, 5):
        show(LogEntry(seq=seq, ts=0.0, source="mcp", text=f"entry {seq}", level="info", logger="db"))
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" ", 2)[2] for line in lines[:2]] == ["info    [db] entry 0", "info    [db] entry 1"]
    assert lines[2:] == ["-- 3 lines skipped --", lines[3]]
    assert lines[3].endswith("info    [db] entry 5")


# -- a real daemon --------------------------------------------------------------------------


class Setup:
    def __init__(self, daemon: DaemonProcess, config: Path) -> None:
        self.daemon = daemon
        self.config = config


def config_text(*, chatty: str = "", gone: bool = True) -> str:
    """chatty (described as ``chatty``), crashy and gone write two stderr lines at start; flooder
    floods when asked."""
    return (
        fixture_toml("chatty", "--stderr-lines", "2", description=chatty or "chatty")
        + fixture_toml("crashy", "--stderr-lines", "2", restart={"initial_delay": 0.05})
        + fixture_toml("flooder")
        + (fixture_toml("gone", "--stderr-lines", "2") if gone else "")
    )


@pytest.fixture(scope="module")
async def setup(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Setup]:
    path = tmp_path_factory.mktemp("logs") / "config.toml"
    path.write_text(config_text())
    async with running_daemon(path) as daemon:
        for name in ("chatty", "crashy", "flooder", "gone"):
            await daemon.wait_for("server.state", server=name, new="running")
        yield Setup(daemon, path)


async def mcpd(setup: Setup, *argv: str) -> subprocess.CompletedProcess[bytes]:
    """The command line as a user runs it, without blocking the loop (the daemon's log is read on it)."""
    command = [sys.executable, "-m", "mcpd", *argv, "--socket", str(setup.daemon.socket)]
    with anyio.fail_after(60):
        return await anyio.run_process(command, check=False)


async def collect(
    client: AsyncClient, server: str, done: Callable[[list[LogEntry]], bool], limit: int | None = None
) -> list[LogEntry]:
    """Follow ``server``'s log (its last ``limit`` entries, then new ones) until ``done`` says so."""
    seen: list[LogEntry] = []
    async with client.follow_logs(server, limit) as entries:
        with anyio.fail_after(60):
            async for entry in entries:
                seen.append(entry)
                if done(seen):
                    return seen
    raise AssertionError(f"the follow ended early: {seen}")


def texts(entries: list[LogEntry], source: str) -> list[str]:
    return [e.text for e in entries if e.source == source]


@pytest.mark.anyio
async def test_logs_show_stderr_lines_and_mcp_messages(setup: Setup) -> None:
    """What the server wrote to stderr (at start and during a call) and the log message it sent
    (level, logger) are both in `mcpd logs`, oldest first, in text and in JSON."""
    async with connect(setup.daemon.socket) as client:
        await client.call_tool("chatty__log", {"text": "hello", "level": "warning", "logger": "db"})
        seen = await collect(
            client, "chatty", lambda s: "hello" in texts(s, "stderr") and "hello" in texts(s, "mcp")
        )
    assert texts(seen, "stderr")[:2] == ["fixture chatty stderr line 0", "fixture chatty stderr line 1"]
    message = next(e for e in seen if e.source == "mcp")
    assert (message.level, message.logger, message.text) == ("warning", "db", "hello")

    shown = await mcpd(setup, "logs", "chatty")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.decode().splitlines()
    assert lines[0].endswith(" stderr  fixture chatty stderr line 0")
    assert any(line.endswith(" warning [db] hello") for line in lines)
    assert any(line.endswith(" stderr  hello") for line in lines)

    document = json.loads((await mcpd(setup, "logs", "chatty", "--json")).stdout)
    assert document["server"] == "chatty"
    assert {"source": "mcp", "level": "warning", "logger": "db", "text": "hello"}.items() <= next(
        e for e in document["entries"] if e["source"] == "mcp"
    ).items()


@pytest.mark.anyio
async def test_n_limits_to_the_latest_entries(setup: Setup) -> None:
    """`-n N` prints the latest N entries, oldest first; `-n 0` none; the library's limit is the same."""
    async with connect(setup.daemon.socket) as client:
        await client.call_tool("chatty__log", {"text": "latest"})
        await collect(client, "chatty", lambda s: "latest" in texts(s, "mcp"))
        every = await client.logs("chatty")
        last_two = await client.logs("chatty", 2)
    assert last_two == every[-2:] and len(every) > 2
    document = json.loads((await mcpd(setup, "logs", "chatty", "-n", "2", "--json")).stdout)
    assert [e["seq"] for e in document["entries"]] == [e.seq for e in last_two]
    text = (await mcpd(setup, "logs", "chatty", "-n", "2")).stdout.decode().splitlines()
    assert len(text) == 2
    assert (await mcpd(setup, "logs", "chatty", "-n", "0")).stdout == b""


@pytest.mark.anyio
async def test_follow_streams_only_new_lines_with_limit_zero(setup: Setup) -> None:
    """A follow that asks for no backlog gets exactly what the server writes after it began."""
    async with connect(setup.daemon.socket) as client, client.follow_logs("chatty", 0) as entries:
        await client.call_tool("chatty__log", {"text": "fresh"})
        with anyio.fail_after(30):
            first = await entries.receive()
    assert first.text == "fresh"


@pytest.mark.anyio
async def test_cli_follow_prints_new_lines_and_ctrl_c_exits_130(setup: Setup) -> None:
    """`mcpd logs -f` prints the backlog, then a line the server writes after it started; Ctrl-C
    ends it with status 130 and nothing on stderr (no traceback)."""
    command = [sys.executable, "-m", "mcpd", "logs", "chatty", "-f", "-n", "1"]
    process = await anyio.open_process([*command, "--socket", str(setup.daemon.socket)])
    assert process.stdout is not None and process.stderr is not None
    lines = TextReceiveStream(process.stdout)
    received = ""
    async with connect(setup.daemon.socket) as client:
        with anyio.fail_after(60):
            while "\n" not in received:  # the backlog of one line
                received += await lines.receive()
            await client.call_tool("chatty__log", {"text": "after-start", "level": "error"})
            while " error   after-start" not in received:
                received += await lines.receive()
    process.send_signal(signal.SIGINT)
    with anyio.fail_after(30):
        status = await process.wait()
    errors = await _rest(process.stderr)
    await process.aclose()  # its pipes closed: nothing left for the garbage collector after the loop
    assert (status, errors) == (130, b"")


async def _rest(stream: anyio.abc.ByteReceiveStream) -> bytes:
    data = b""
    try:
        while True:
            data += await stream.receive()
    except anyio.EndOfStream:
        return data


@pytest.mark.anyio
async def test_stderr_of_a_crashed_run_survives_the_restart(setup: Setup) -> None:
    """The log is per configured server, not per process: after a crash and a restart the dead
    run's last lines are still there, before the new run's."""
    daemon = setup.daemon
    async with connect(daemon.socket) as client:
        await client.call_tool("crashy__log", {"text": "last words"})
        mark = len(daemon.events)
        with pytest.raises(TransportError):
            await client.call_tool("crashy__crash")
        await daemon.wait_for("server.state", server="crashy", new="running", after=mark)
        started = "fixture crashy stderr line 1"
        seen = await collect(client, "crashy", lambda s: texts(s, "stderr").count(started) == 2)
    stderr = texts(seen, "stderr")
    second_run = len(stderr) - 1 - stderr[::-1].index(started)
    assert stderr.index(started) < stderr.index("last words") < second_run


@pytest.mark.anyio
async def test_a_very_long_line_keeps_its_start_and_the_next_line_is_whole(setup: Setup) -> None:
    """A stderr line far longer than the daemon reads (and an MCP message as long) is kept cut,
    with the marker; the line after it arrives whole."""
    long = "L" * (STDERR_LINE_BYTES * 3)
    async with connect(setup.daemon.socket) as client:
        await client.call_tool("chatty__log", {"text": long})
        await client.call_tool("chatty__log", {"text": "after the long one"})
        seen = await collect(client, "chatty", lambda s: "after the long one" in texts(s, "stderr"))
    stderr = texts(seen, "stderr")
    cut = stderr[stderr.index("after the long one") - 1]
    assert cut.startswith("L" * MAX_LINE) and cut.endswith(" more characters cut]")
    assert clip_line(long) in texts(seen, "mcp")


@pytest.mark.anyio
async def test_unknown_server_is_the_typed_error(setup: Setup) -> None:
    """`logs` of a server not in the config raises UnknownServer; the command says so, status 1."""
    async with connect(setup.daemon.socket) as client:
        with pytest.raises(UnknownServer):
            await client.logs("nope")
        with pytest.raises(UnknownServer):
            async with client.follow_logs("nope"):
                pass
    shown = await mcpd(setup, "logs", "nope")
    assert shown.returncode == 1
    assert b"no server named 'nope'" in shown.stderr


@pytest.mark.anyio
async def test_a_flood_keeps_the_log_bounded_and_the_daemon_responsive(setup: Setup) -> None:
    """A server writing long stderr lines without end (after a burst of MCP messages) keeps its
    log within the bounds, each line cut with a marker, while another client's requests are answered."""
    async with connect(setup.daemon.socket) as client, connect(setup.daemon.socket) as other:
        await client.call_tool("flooder__flood", {"size": 2 * MAX_LINE, "messages": 300})
        # Far more lines than the ring holds have gone through once one numbered this high is seen.
        await collect(client, "flooder", lambda s: s[-1].seq > 5 * MAX_ENTRIES)
        for _ in range(20):  # the flood never stops, so each of these is answered during it
            statuses = await other.status()
            assert {s.name for s in statuses} >= {"chatty", "flooder"}
            kept = await other.logs("flooder")
            assert 0 < len(kept) <= MAX_ENTRIES
            assert sum(len(e.text) + len(e.logger or "") for e in kept) <= MAX_CHARS
        assert all(len(e.text) <= len(clip_line("x" * 10 * MAX_LINE)) for e in kept)
        assert all(e.text.endswith(" more characters cut]") for e in kept)
        stopped = await client.stop("flooder")
    assert stopped.state == "stopped"


@pytest.mark.anyio
async def test_the_blocking_client_follows_until_the_loop_is_left(setup: Setup) -> None:
    """`Client.follow_logs` yields the backlog then new entries; leaving the loop ends the follow
    on the daemon (nothing left to unfollow) and the connection goes on."""

    def follow_and_leave() -> tuple[LogEntry, bool, int]:
        with Client(setup.daemon.socket) as client:
            follow = client.follow_logs("chatty", 1)
            entry = next(follow)
            follow.close()  # what leaving a for loop over it does
            still_followed = client.request(_wire.logs_unfollow("chatty")).ok
            return entry, still_followed, len(client.status())

    async with connect(setup.daemon.socket) as client:
        latest = await client.logs("chatty", 1)
    entry, still_followed, servers = await anyio.to_thread.run_sync(follow_and_leave)
    assert (entry, still_followed, servers) == (latest[0], False, 4)


@pytest.mark.anyio
async def test_a_changed_server_keeps_its_log_and_a_removed_one_ends_it(setup: Setup) -> None:
    """A config change restarts a server but keeps its log; a server removed from the config takes
    its log with it: a follower's stream ends (`mcpd logs -f --json` with exit 0, JSON lines only
    and nothing on stderr), and `logs` then knows no such server."""
    command = [sys.executable, "-m", "mcpd", "logs", "gone", "-f", "-n", "1", "--json"]
    follower = await anyio.open_process([*command, "--socket", str(setup.daemon.socket)])
    assert follower.stdout is not None and follower.stderr is not None
    async with connect(setup.daemon.socket) as client:
        before = await client.logs("chatty")
        async with client.follow_logs("gone") as entries:
            with anyio.fail_after(30):
                first = await entries.receive()
                followed = await follower.stdout.receive()  # the backlog: it follows now
            setup.config.write_text(config_text(chatty="changed", gone=False))
            plan = (await client.reload()).plan
            with anyio.fail_after(30):
                rest = [entry async for entry in entries]
        assert (plan.removed, plan.changed) == (("gone",), ("chatty",))
        assert first.text == "fixture gone stderr line 0"
        assert rest[0].text == "fixture gone stderr line 1"
        with pytest.raises(UnknownServer):
            await client.logs("gone")
        after = await client.logs("chatty")
    assert after[: len(before)] == before
    with anyio.fail_after(30):
        followed += await _rest(follower.stdout)
        assert (await follower.wait(), await _rest(follower.stderr)) == (0, b"")
    await follower.aclose()
    lines = followed.splitlines()
    assert lines and all("text" in json.loads(line) for line in lines), followed


@pytest.mark.anyio
async def test_a_remote_servers_log_messages_are_kept() -> None:
    """A streamable HTTP server has no stderr of ours, but the log messages it sends are kept."""
    async with running_http_fixture("remote", free_port()) as url:
        remote = ServerConfig(name="remote", url=url)
        async with open_supervisor(Config(source="<test>", servers=(remote,))) as supervisor:
            actor = supervisor.actor("remote")
            await actor.wait_state(ServerState.RUNNING, timeout=30)
            await actor.call_tool("log", {"text": "over http", "level": "notice", "logger": "net"})
            with anyio.fail_after(30):
                await actor.logs.wait_beyond(0)
            entries = actor.logs.last(None)
    assert [(e.source, e.level, e.logger, e.text) for e in entries] == [("mcp", "notice", "net", "over http")]


STDOUT_NOISE = """
import json, sys

def send(message):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\\n")
    sys.stdout.flush()

print("starting up, on stdout", flush=True)
tools = [{"name": name, "inputSchema": {"type": "object"}} for name in ("noise", "broken")]
for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if method == "initialize":
        server = {"name": "noisy", "version": "1"}
        info = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": server}
        send({"id": request_id, "result": info})
    elif method == "tools/list":
        send({"id": request_id, "result": {"tools": tools}})
    elif method == "tools/call" and message["params"]["name"] == "noise":
        sys.stdout.write("".join(f"noise {i}\\n" for i in range(3000)))
        send({"id": request_id, "result": {"content": []}})
    elif method == "tools/call":  # an answer cut short: its id can be read, nothing else
        sys.stdout.write('{"jsonrpc": "2.0", "id": "%s", "result": {"content": [\\n' % request_id)
        sys.stdout.flush()
    elif request_id is not None:
        send({"id": request_id, "result": {}})
"""


@pytest.mark.anyio
async def test_what_mcpd_cannot_use_of_a_servers_stdout_is_in_its_log_and_status(tmp_path: Path) -> None:
    """A banner and 3,000 lines that are not JSON-RPC, then an answer cut short: `mcpd logs` and
    `mcpd status SERVER` show them (they were only in the daemon's own log), the flood as its first
    ten lines and one in a thousand, each line saying what it was."""
    (tmp_path / "noisy.py").write_text(STDOUT_NOISE)
    config = tmp_path / "config.toml"
    args = json.dumps([str(tmp_path / "noisy.py")])
    config.write_text(f"[servers.noisy]\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n")
    async with running_daemon(config) as daemon, connect(daemon.socket) as client:
        await daemon.wait_for("server.state", server="noisy", new="running")
        await client.call_tool("noisy__noise")
        with pytest.raises(TransportError, match="malformed answer"):
            await client.call_tool("noisy__broken")
        said = texts(await client.logs("noisy"), "stdout")
        setup = Setup(daemon, config)
        logs, status = await mcpd(setup, "logs", "noisy"), await mcpd(setup, "status", "noisy")
    lines = [f"[not JSON-RPC] noise {i}" for i in range(9)]
    lines += [f"[not JSON-RPC, the {n}th] noise {n - 2}" for n in (1000, 2000, 3000)]
    broken = '[an answer to tools/call mcpd could not read] {"jsonrpc": "2.0", "id": "mcpd-'
    assert said[:-1] == ["[not JSON-RPC] starting up, on stdout", *lines]
    assert said[-1].startswith(broken) and said[-1].endswith('"result": {"content": [')
    assert any(
        line.endswith(" stdout  [not JSON-RPC] starting up, on stdout")
        for line in logs.stdout.decode().splitlines()
    )
    shown = status.stdout.decode()
    assert "last 14 stdout line(s) mcpd could not use" in shown and broken in shown, shown
