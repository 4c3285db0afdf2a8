"""The supervisor against real MCP server processes: start, death, restart, health, stop, reload."""

from __future__ import annotations

import base64
import gc
import os
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpd.config.model import Config, RestartPolicy, ServerConfig
from mcpd.errors import CallTimeout, ServerNotRunning, TransportError, UnknownServer, UnknownTool
from mcpd.model.servers import ServerEvent, ServerStatus, StateChanged, ToolsChanged
from mcpd.model.states import ServerState
from mcpd.supervisor import actor as actor_module
from mcpd.supervisor import surface_requests
from mcpd.supervisor.supervisor import Supervisor, open_supervisor, plan_reload
from mcpd.supervisor.watchers import TOOLS_REFRESH_GAP
from mcpd.testing import (
    FAST_RESTARTS,
    fixture_command,
    fixture_server,
    fullserver_command,
    fullserver_config,
    process_gone,
)
from mcpd.testing.remote import free_port, running_http_fixture

pytestmark = pytest.mark.anyio
S = ServerState


def config(*servers: ServerConfig) -> Config:
    return Config(source="<test>", servers=tuple(sorted(servers, key=lambda s: s.name)))


async def wait_gone(pid: int, timeout: float = 10.0) -> None:
    with anyio.fail_after(timeout):
        while not process_gone(pid):
            await anyio.sleep(0.02)


async def test_parallel_start_two_hanging_of_four() -> None:
    """Hung servers delay no healthy one: both healthy servers are running while both hung ones
    are still in their first handshake (an ordering, not a time bound). The hung ones sort first
    in the config, so starting servers one after another, or two handshakes at a time each to its
    end, would fail this."""
    healthy = [fixture_server(f"ok{i}") for i in range(2)]
    hung = [fixture_server(f"hung{i}", "--hang-initialize", connect_timeout=120.0) for i in range(2)]
    async with open_supervisor(config(*healthy, *hung)) as sup:
        for server in healthy:
            await sup.actor(server.name).wait_state(S.RUNNING, timeout=110)
        states = {s.name: s for s in sup.status()}
    for server in hung:
        assert states[server.name].state is S.STARTING and states[server.name].alive


async def test_hung_handshake_is_degraded_and_retried() -> None:
    """A process that never answers initialize is degraded (alive, with the reason), then retried;
    through the backoff last_error still says why, not how mcpd stopped the process (it said
    ``killed by SIGTERM``, the exit the daemon itself caused)."""
    hung = fixture_server("hung", "--hang-initialize", connect_timeout=0.5, stop_grace=0.2)
    async with open_supervisor(config(hung)) as sup:
        actor = sup.actor("hung")
        await actor.wait_state(S.DEGRADED, timeout=60)
        status = actor.status()
        assert status.alive and "initialize" in (status.last_error or "")
        await actor.wait_state(S.BACKOFF, timeout=60)
        status = actor.status()
        assert "initialize" in (status.last_error or ""), status.last_error
        assert status.last_exit == status.last_error
        await actor.wait_state(S.STARTING, timeout=60)
    assert actor.status().restarts >= 1


async def test_kill_9_child_is_restarted_with_reason() -> None:
    """A child killed with SIGKILL comes back with a new pid; restarts and last_error say what happened."""
    async with open_supervisor(config(fixture_server("victim"))) as sup:
        actor = sup.actor("victim")
        await actor.wait_state(S.RUNNING, timeout=20)
        first = actor.status().pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        await actor.wait_state(S.BACKOFF, timeout=10)
        await actor.wait_state(S.RUNNING, timeout=20)
        status = actor.status()
    assert status.pid not in (None, first)
    assert status.restarts == 1
    # What is wrong now: nothing. How the previous run ended: kept in last_exit and the history.
    assert status.last_error is None
    assert "SIGKILL" in (status.last_exit or "")
    assert [(c.old, c.new) for c in actor.history[:5]] == [
        (S.STOPPED, S.STARTING),
        (S.STARTING, S.RUNNING),
        (S.RUNNING, S.BACKOFF),
        (S.BACKOFF, S.STARTING),
        (S.STARTING, S.RUNNING),
    ]
    await wait_gone(first)


async def test_a_server_stable_again_is_no_longer_said_to_fail_in_a_row() -> None:
    """Once the run after a crash has lasted ``stable_after``, status counts no failed runs in a row
    (``mcpd status NAME`` said "1 failed in a row" of a server up for days); restarts keeps the crash."""
    steady = RestartPolicy(initial_delay=0.05, max_delay=0.2, stable_after=1.0)
    async with open_supervisor(config(fullserver_config("steady", restart=steady))) as sup:
        actor = sup.actor("steady")
        await actor.wait_state(S.RUNNING, timeout=20)
        first = actor.status().pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        await actor.wait_state(S.BACKOFF, timeout=10)
        await actor.wait_state(S.RUNNING, timeout=20)
        assert actor.status().attempt == 1
        with anyio.fail_after(10):
            while actor.status().attempt:  # what is watched is time passing: no event says it
                await anyio.sleep(0.1)
        assert actor.status().restarts == 1


async def test_crash_loop_ends_in_failed_until_restarted() -> None:
    """With a hard stop set, a server that dies right after start is retried max_retries times,
    then left failed."""
    dying = fixture_server("dying", "--die-after", "0", restart=FAST_RESTARTS)
    async with open_supervisor(config(dying)) as sup:
        actor = sup.actor("dying")
        await actor.wait_state(S.FAILED, timeout=180)  # a hang guard: four spawns on a busy machine
        status = actor.status()
        assert dying.restart.max_retries is not None
        assert status.restarts == dying.restart.max_retries
        assert "crash loop" in (status.last_error or "") and "exited with code 1" in (status.last_error or "")
        assert status.attempt == dying.restart.max_retries + 1
        with pytest.raises(ServerNotRunning, match="failed"):
            await actor.call_tool("echo", {"text": "x"}, timeout=1)
        # failed is sticky: nothing happens until someone asks.
        with pytest.raises(TimeoutError):
            await actor.wait_state(S.STARTING, timeout=0.5)
        actor.restart()
        await actor.wait_state(S.STARTING, timeout=5)


async def test_a_call_to_a_server_whose_next_try_is_past_its_deadline_is_told_at_once() -> None:
    """A server in a crash loop waits out a backoff longer than the call's deadline: the call is told
    at once, with the server's last error (a host, an agent, sees the message alone), instead of
    waiting its whole deadline for nothing (60 s by default: a compat sweep's server missing its
    API key held every call that long)."""
    exiting = ServerConfig(
        name="exiting",
        command="/bin/sh",
        args=("-c", "exit 3"),
        restart=RestartPolicy(initial_delay=3600.0, max_delay=3600.0),
    )
    async with open_supervisor(config(exiting)) as sup:
        actor = sup.actor("exiting")
        await actor.wait_state(S.BACKOFF, timeout=30)
        started = time.monotonic()
        with pytest.raises(
            ServerNotRunning,
            match=r"waiting to restart \(backoff\), its next try in 3\d{3}\.\ds.*: exited with code 3",
        ) as raised:
            await actor.call_tool("echo", {}, timeout=30)
        assert time.monotonic() - started < 1
        assert raised.value.data["state"] == "backoff"


def failing_once(flag: Path, backoff: float) -> ServerConfig:
    """A fixture server ``once`` whose first run exits 3 (leaving ``flag``), then waits ``backoff``."""
    script = 'test -e "$1" || { : > "$1"; exit 3; }; shift; exec "$@"'
    return ServerConfig(
        name="once",
        command="/bin/sh",
        args=("-c", script, "sh", str(flag), *fixture_command("once")),
        restart=RestartPolicy(initial_delay=backoff, max_delay=backoff, jitter=0.0),
    )


@pytest.mark.parametrize("wish", ["start", "restart"])
async def test_a_call_right_after_a_start_during_a_long_backoff_runs(wish: str, tmp_path: Path) -> None:
    """A server in an hour's backoff, fixed meanwhile: a call that comes right after ``mcpd start`` or
    ``restart`` (before the server's task has woken) waits for the try they asked for and runs
    (before: ServerNotRunning at once, 'its next try in 3599.9s', of a try that was already asked for)."""
    async with open_supervisor(config(failing_once(tmp_path / "failed", 3600.0))) as sup:
        actor = sup.actor("once")
        await actor.wait_state(S.BACKOFF, timeout=30)
        getattr(actor, wish)()
        result = await actor.call_tool("echo", {"text": "after the fix"}, timeout=30)
        assert result.content[0]["text"] == "after the fix"


async def test_a_wall_clock_step_back_does_not_refuse_a_call_the_backoff_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wall clock set an hour back during a 2 s backoff (an NTP step, ``date -s``): a call with
    30 s to go waits for the try, which the event loop's clock times, and runs (before: ServerNotRunning
    at once, 'its next try in 3602.0s')."""
    async with open_supervisor(config(failing_once(tmp_path / "failed", 2.0))) as sup:
        actor = sup.actor("once")
        await actor.wait_state(S.BACKOFF, timeout=30)
        wall = time.time
        monkeypatch.setattr(time, "time", lambda: wall() - 3600.0)
        result = await actor.call_tool("echo", {"text": "on time"}, timeout=30)
        assert result.content[0]["text"] == "on time"


async def test_stop_during_backoff_is_prompt() -> None:
    """A server waiting out a long backoff stops when asked, without sitting the backoff out: the
    backoff (an hour) is far longer than a stop may wait, so stopped can only mean cut short."""
    slow_retry = RestartPolicy(initial_delay=3600.0, max_delay=3600.0)
    async with open_supervisor(
        config(fixture_server("waiting", "--die-after", "0", restart=slow_retry))
    ) as sup:
        actor = sup.actor("waiting")
        await actor.wait_state(S.BACKOFF, timeout=60)
        await actor.stop()
        assert actor.state is S.STOPPED
        assert (actor.history[-1].old, actor.history[-1].new) == (S.BACKOFF, S.STOPPED)


async def test_a_supervisor_cancelled_whole_says_its_servers_stopped_at_once() -> None:
    """Cancelled from outside with a server in its handshake (`mcpd check` given up at a signal):
    the run stops the child on its way out and the actor says stopped, so the shielded stop of
    every server returns then. Before, the state stayed starting, no task left to change it, and
    that stop waited out its whole bound (9.3 s of a check's 10 at SIGTERM with the defaults)."""
    hung = fixture_server("hung", "--hang-initialize", connect_timeout=120.0, stop_grace=0.2)
    with anyio.CancelScope() as scope:
        async with open_supervisor(config(hung)) as sup:
            actor = sup.actor("hung")
            with anyio.fail_after(60):
                while not actor.alive:  # the spawn sends no event to wait on
                    await anyio.sleep(0.02)
            cancelled = anyio.current_time()
            scope.cancel()
    took = anyio.current_time() - cancelled
    assert (actor.state, actor.alive) == (S.STOPPED, False)
    assert took < actor_module.stop_bound(hung.stop_grace) - 1, took


async def test_frozen_server_is_degraded_then_restarted() -> None:
    """Alive but silent (pings time out) is degraded, not dead; after unhealthy_after misses, restarted."""
    frozen = fixture_server(
        "frozen",
        "--freeze-after",
        "1",
        ping_interval=0.2,
        ping_timeout=0.3,
        unhealthy_after=3,
        stop_grace=0.5,
    )
    async with open_supervisor(config(frozen)) as sup:
        actor = sup.actor("frozen")
        await actor.wait_state(S.RUNNING, timeout=20)
        pid = actor.status().pid
        await actor.call_tool("echo", {"text": "one"})
        async with anyio.create_task_group() as tg:
            # The second call freezes the process; the call itself times out.
            tg.start_soon(_expect_timeout, sup, "frozen")
            await actor.wait_state(S.DEGRADED, timeout=10)
            status = actor.status()
            assert status.alive and status.degraded and status.pid == pid
            assert "ping" in (status.last_error or "")
            await actor.wait_state(S.BACKOFF, timeout=10)
        assert "unresponsive" in (actor.last_error or "")
        await actor.wait_state(S.RUNNING, timeout=20)
        assert actor.status().pid != pid
    assert pid is not None
    await wait_gone(pid)


SCRIPTED = """
import json, os, sys, time

mode, pings = sys.argv[1], sys.argv[2]
tools = [{"name": "add", "inputSchema": {"type": "object"}}]
refuse_list = False
busy = {"code": -32603, "message": "busy, ask again"}
unknown = {"code": -32601, "message": "Method not found"}

def send(message):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\\n")
    sys.stdout.flush()

for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if method == "initialize":
        info, version = {"name": "s", "version": "1"}, message["params"]["protocolVersion"]
        capabilities = {"prompts": {}} if mode == "prompts-only" else {"tools": {"listChanged": True}}
        result = {"protocolVersion": version, "capabilities": capabilities, "serverInfo": info}
        send({"id": request_id, "result": result})
    elif method == "prompts/list":
        send({"id": request_id, "result": {"prompts": [{"name": "greet"}]}})
    elif method == "notifications/initialized" and mode == "prompts-only":
        send({"method": "notifications/tools/list_changed"})
    elif method == "tools/list" and mode.startswith("pages-") and len(tools) == 1:
        page = int((message.get("params") or {}).get("cursor") or 0)
        following = page + 1 if mode == "pages-endless" else (page + 1) % 3
        tool = {"name": f"t{page}", "inputSchema": {"type": "object"}}
        send({"id": request_id, "result": {"tools": [tool], "nextCursor": str(following)}})
    elif method == "tools/list" and mode == "list-fails-while" and refuse_list:
        answer = {"error": busy} if os.path.exists(pings) else {"result": {"tools": tools}}
        send({"id": request_id, **answer})
    elif method == "tools/list" and (refuse_list or mode == "prompts-only"):
        if mode == "prompts-only":
            with open(pings, "a") as file:
                file.write("tools/list\\n")
        refuse_list = False
        send({"id": request_id, "error": unknown if mode == "prompts-only" else busy})
    elif method == "tools/list":
        send({"id": request_id, "result": {"tools": tools}})
    elif method == "tools/call" and mode == "one-at-a-time":
        time.sleep(message["params"]["arguments"]["seconds"])
        send({"id": request_id, "result": {"content": [{"type": "text", "text": "done"}]}})
    elif method == "tools/call":
        tools.append({"name": f"added{len(tools)}", "inputSchema": {"type": "object"}})
        refuse_list = mode in ("list-fails-once", "list-fails-while")
        if not message["params"]["arguments"].get("hang"):
            send({"id": request_id, "result": {"content": []}})
        send({"method": "notifications/tools/list_changed"})
    elif method == "ping" and mode == "refuse-ping":
        with open(pings, "a") as file:
            file.write(f"{os.getpid()}\\n")
        send({"id": request_id, "error": unknown})
    elif method == "ping" and mode == "ping-errs":
        send({"id": request_id, "error": busy})
    elif method == "ping":
        send({"id": request_id, "result": {}})
"""
"""A raw JSON-RPC server: ``refuse-ping`` answers ping with -32601 (recording the pid of each ping in
the file named next), ``list-fails-once`` refuses the first tools/list after a call added a tool,
``prompts-only`` declares prompts alone and answers tools/list -32601, as the SDK's low-level server
without a tools handler does (and says its tools changed once initialized, noting each tools/list in the
file), ``list-fails-while`` refuses every tools/list after a call while the file exists,
a call with ``hang`` true adds its tool and says so but is never answered,
``pages-endless`` gives a tool a page, its pages never ending, ``pages-repeat`` three pages in a
loop (both list whole, in one page, once a call added a tool), ``one-at-a-time`` works on a call
(``seconds`` long) before it reads anything else, pings too, as a server that runs one request at a
time, ``ping-errs`` answers ping -32603."""


def scripted(tmp_path: Path, mode: str, **settings: Any) -> tuple[ServerConfig, Path]:
    script, pings = tmp_path / "server.py", tmp_path / "pings"
    script.write_text(SCRIPTED)
    pings.touch()
    settings.setdefault("restart", FAST_RESTARTS)
    command = ServerConfig(
        name=mode, command=sys.executable, args=(str(script), mode, str(pings)), **settings
    )
    return command, pings


async def test_a_server_that_refuses_ping_is_alive(tmp_path: Path) -> None:
    """A "method not found" answer to ping (a server that never implemented it) shows the server
    reads and answers: it stays running, never degraded nor restarted. It was counted as a failed
    ping, so such a server was killed every ``unhealthy_after`` pings, its calls with it."""
    refuser, pings = scripted(tmp_path, "refuse-ping", ping_interval=0.1, ping_timeout=1.0, unhealthy_after=2)
    async with open_supervisor(config(refuser)) as sup:
        actor = sup.actor(refuser.name)
        await actor.wait_state(S.RUNNING, timeout=20)
        with anyio.fail_after(20):
            while len(pings.read_text().split()) < 4:
                await anyio.sleep(0.05)
        status = actor.status()
        pinged = set(pings.read_text().split())
    assert pinged == {str(status.pid)}
    assert status.state is S.RUNNING and status.restarts == 0 and status.last_error is None
    assert S.DEGRADED not in {change.new for change in actor.history}


async def test_a_server_that_answers_ping_with_another_error_is_restarted(tmp_path: Path) -> None:
    """Any other error answer to ping is a failed ping (a gateway's word for a server behind it that
    is gone, which a new run may mend): ``unhealthy_after`` of them end the run."""
    server, _ = scripted(tmp_path, "ping-errs", ping_interval=0.1, ping_timeout=1.0, unhealthy_after=2)
    async with open_supervisor(config(server)) as sup:
        actor = sup.actor(server.name)
        await actor.wait_state(S.BACKOFF, timeout=10)
        assert "unresponsive: 2 pings failed" in (actor.last_error or "")


async def test_a_server_busy_with_a_call_is_not_ended_under_it(tmp_path: Path) -> None:
    """A server that answers no ping while it works on a call (one request at a time) is degraded,
    not ended, while that call runs within its deadline: the call gets its answer from the same
    process. It was killed once ``unhealthy_after`` pings had failed, the call failing with it. One
    hung on a call is still ended, once that call has run out of time."""
    server, _ = scripted(
        tmp_path, "one-at-a-time", ping_interval=0.1, ping_timeout=0.2, unhealthy_after=2, call_timeout=2
    )
    async with open_supervisor(config(server)) as sup:
        actor = sup.actor(server.name)
        await actor.wait_state(S.RUNNING, timeout=20)
        pid = actor.status().pid
        result = await actor.call_tool("add", {"seconds": 1.0})
        assert result.content == [{"type": "text", "text": "done"}]
        await actor.wait_state(S.RUNNING, timeout=5)
        assert actor.status().pid == pid and actor.status().restarts == 0
        assert S.DEGRADED in {change.new for change in actor.history}
        with pytest.raises(CallTimeout):
            await actor.call_tool("add", {"seconds": 60})
        await actor.wait_state(S.BACKOFF, timeout=5)
        assert "unresponsive" in (actor.last_error or "")


async def test_a_server_busy_with_one_call_after_another_is_not_ended(tmp_path: Path) -> None:
    """A server that runs one request at a time is not ended under a call sent after its pings began
    to fail, once it answered the call before: an answered call shows it alive, as an answered ping
    does. Only the first call was spared; the pings failed during it still counted, and it was killed
    under the next one ('mcpd stopped ... during add')."""
    server, _ = scripted(
        tmp_path, "one-at-a-time", ping_interval=0.1, ping_timeout=0.2, unhealthy_after=2, call_timeout=5
    )
    async with open_supervisor(config(server)) as sup, anyio.create_task_group() as tg:
        actor = sup.actor(server.name)
        await actor.wait_state(S.RUNNING, timeout=20)
        pid = actor.status().pid

        async def call() -> None:
            result = await actor.call_tool("add", {"seconds": 1.0})
            assert result.content == [{"type": "text", "text": "done"}]

        tg.start_soon(call)
        await actor.wait_state(S.DEGRADED, timeout=5)  # a ping failed: the next call waits behind it
        await call()
        assert actor.status().pid == pid and actor.status().restarts == 0


async def test_tool_calls_that_hang_while_pings_are_answered_are_said_and_degrade() -> None:
    """A server that answers pings but lets its tool calls run out ``call_timeout`` is said to in
    ``last_error`` from the first such call and is ``degraded`` at ``unhealthy_after`` in a row,
    answered pings or not, without a restart; an answered call makes it healthy again. A call that
    timed out by its caller's shorter deadline says nothing of the server. Before, status stayed
    ``running`` with no ``last_error`` however many calls hung."""
    server = fixture_server("hangs", call_timeout=0.5, ping_interval=0.1, ping_timeout=1.0, unhealthy_after=2)
    async with open_supervisor(config(server)) as sup:
        actor = sup.actor("hangs")
        await actor.wait_state(S.RUNNING, timeout=20)
        pid = actor.status().pid
        with pytest.raises(CallTimeout):
            await actor.call_tool("sleep", {"seconds": 30}, timeout=0.2)  # the caller's own hurry
        assert actor.status().last_error is None
        with pytest.raises(CallTimeout):
            await actor.call_tool("sleep", {"seconds": 30})
        status = actor.status()
        assert status.state is S.RUNNING
        said = "1 tool call in a row timed out (last: hangs/sleep gave no answer within 0.5s)"
        assert status.last_error == said
        with pytest.raises(CallTimeout):
            await actor.call_tool("sleep", {"seconds": 30})
        assert actor.status().state is S.DEGRADED
        assert (actor.status().last_error or "").startswith("2 tool calls in a row timed out")
        await anyio.sleep(0.5)  # pings answered meanwhile (every 0.1 s) do not make its tools answer
        assert actor.status().state is S.DEGRADED
        await actor.call_tool("echo", {"text": "back"})
        status = actor.status()
        assert (status.state, status.last_error, status.pid, status.restarts) == (S.RUNNING, None, pid, 0)


async def test_a_call_given_longer_keeps_a_hung_server_no_longer_than_call_timeout(tmp_path: Path) -> None:
    """A server that answers nothing while a call runs is ended once that call has run
    ``call_timeout``, though its caller gave it longer: the call's own timeout (up to a day) kept
    the hung server degraded as long, every other call to it timing out meanwhile. The call's error
    says why mcpd stopped the server under it."""
    server, _ = scripted(
        tmp_path, "one-at-a-time", ping_interval=0.1, ping_timeout=0.2, unhealthy_after=2, call_timeout=1
    )
    async with open_supervisor(config(server)) as sup:
        actor = sup.actor(server.name)
        await actor.wait_state(S.RUNNING, timeout=20)
        stopped = r"mcpd stopped one-at-a-time during add, before it answered: unresponsive: \d+ pings failed"
        with anyio.fail_after(10), pytest.raises(TransportError, match=stopped):
            await actor.call_tool("add", {"seconds": 60}, timeout=60)
        await actor.wait_state(S.BACKOFF, timeout=5)
        assert "unresponsive" in (actor.last_error or "")


async def test_a_server_whose_command_comes_later_starts_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server failed for a command that is not there starts once the command is (installed after
    the daemon started), with no command given; one a person stopped meanwhile is left as it is."""
    monkeypatch.setattr(actor_module, "COMMAND_RECHECK", 0.1)
    script = tmp_path / "later-server"
    args = ("plain", str(tmp_path / "pings"))
    later = ServerConfig(name="later", command=str(script), args=args, restart=FAST_RESTARTS)
    stopped = ServerConfig(
        name="stopped", command=str(tmp_path / "stopped-server"), args=args, restart=FAST_RESTARTS
    )
    async with open_supervisor(config(later, stopped)) as sup:
        for name in ("later", "stopped"):
            await sup.actor(name).wait_state(S.FAILED, timeout=10)
        await sup.actor("stopped").stop()
        await anyio.sleep(0.3)  # looked for, and not there
        assert sup.actor("later").state is S.FAILED
        for path in (script, tmp_path / "stopped-server"):
            path.write_text(f"#!{sys.executable}\n" + SCRIPTED)
            path.chmod(0o755)
        await sup.actor("later").wait_state(S.RUNNING, timeout=10)
        await anyio.sleep(0.3)
        assert sup.actor("stopped").state is S.FAILED  # as the stop left it: not started


def slow_to_look_at(tmp_path: Path) -> tuple[ServerConfig, Path]:
    """A server whose command is not there yet, looked for every 0.05 s, and the path where it comes:
    make a FIFO there, and a look hangs on it (``held_look``), as on a hung network mount."""
    folder = tmp_path / "bin"
    folder.mkdir()
    command = folder / "slow-server"
    server = ServerConfig(
        name="slow", command=command.name, args=("plain", str(tmp_path / "pings")), env={"PATH": str(folder)}
    )
    return server, command


async def held_look(command: Path) -> int:
    """Make ``command`` a FIFO and wait until a look has opened it to read its ``#!`` line; return
    our end, which holds the look until it is written to or closed."""
    os.mkfifo(command, 0o755)
    with anyio.fail_after(10):
        while True:
            try:
                return os.open(command, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: nobody reads it yet
                await anyio.sleep(0.02)


async def test_a_stop_while_the_command_is_looked_at_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop that comes while a failed server's command is being looked at (in a worker thread: a
    slow disk, here a FIFO that the look reads the ``#!`` line of) holds: the server is not started
    when the look then finds the command. It was, as if the stop had never been asked."""
    monkeypatch.setattr(actor_module, "COMMAND_RECHECK", 0.05)
    server, command = slow_to_look_at(tmp_path)
    async with open_supervisor(config(server)) as sup:
        actor = sup.actor(server.name)
        await actor.wait_state(S.FAILED, timeout=10)
        writer = await held_look(command)
        await actor.stop()
        script = tmp_path / "script"
        script.write_text(f"#!{sys.executable}\n" + SCRIPTED)
        script.chmod(0o755)
        script.replace(command)  # what a start would run now
        with os.fdopen(writer, "wb") as fifo:
            fifo.write(f"#!{sys.executable}\n".encode().ljust(256))
        with pytest.raises(TimeoutError):
            await actor.wait_state(S.STARTING, S.RUNNING, timeout=0.5)
        assert actor.state is S.FAILED


async def test_a_look_at_a_command_that_hangs_does_not_hold_up_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The supervisor ends (the daemon's shutdown) at once though a look at a failed server's command
    hangs (a hung network mount; here a FIFO nobody writes to): the look is left to end on its own.
    The end waited for it, as long as it hung (a stop of the daemon until systemd's SIGKILL)."""
    monkeypatch.setattr(actor_module, "COMMAND_RECHECK", 0.05)
    server, command = slow_to_look_at(tmp_path)
    writer = -1
    try:
        async with anyio.create_task_group() as tg:
            async with open_supervisor(config(server)) as sup:
                await sup.actor(server.name).wait_state(S.FAILED, timeout=10)
                writer = await held_look(command)
                # Lets the look go later: an end that waits for it fails this test rather than hangs it.
                tg.start_soon(_write_later, writer)
                ending = anyio.current_time()
            took = anyio.current_time() - ending
            tg.cancel_scope.cancel()
    finally:
        if writer >= 0:
            os.close(writer)  # the look, left to itself, ends too
    assert took < 2


async def _write_later(fd: int) -> None:
    await anyio.sleep(5)
    os.write(fd, b"\n" * 256)


async def test_a_refresh_that_failed_is_asked_again(tmp_path: Path) -> None:
    """A tools/list after list_changed that fails (degraded, saying so) is asked again: the new tool
    comes, and the server is running. The failed refresh was dropped, and a ping's answer then
    ended the degraded state: running, last_error clear, the old list kept for good."""
    server, _ = scripted(tmp_path, "list-fails-once")
    async with open_supervisor(config(server)) as sup:
        actor = sup.actor(server.name)
        await actor.wait_state(S.RUNNING, timeout=20)
        await actor.call_tool("add", {})
        with anyio.fail_after(10):
            while "added1" not in {t.name for t in actor.tools}:
                await anyio.sleep(0.02)
        status = actor.status()
    (degraded,) = [change.reason for change in actor.history if change.new is S.DEGRADED]
    assert "tools/list after list_changed failed" in degraded
    assert status.state is S.RUNNING and status.last_error is None and status.restarts == 0


async def test_a_server_whose_list_refresh_keeps_failing_stays_degraded_until_it_is_listed(
    tmp_path: Path,
) -> None:
    """A tools/list after list_changed that keeps failing leaves the server degraded, saying so,
    though its pings are answered, until the list comes: what mcpd holds of it is old. Before, each
    answered ping put it back to running and each retry degraded it again, a pair of changes (and
    log lines) a retry, filling the history."""
    server, failing = scripted(tmp_path, "list-fails-while", ping_interval=0.1, ping_timeout=1.0)
    async with open_supervisor(config(server)) as sup:
        actor = sup.actor(server.name)
        await actor.wait_state(S.RUNNING, timeout=20)
        await actor.call_tool("add", {})
        await actor.wait_state(S.DEGRADED, timeout=10)
        await anyio.sleep(1.0)  # refreshes retried and refused, pings answered every 0.1 s
        assert actor.state is S.DEGRADED
        assert "tools/list after list_changed failed" in (actor.last_error or "")
        failing.unlink()
        with anyio.fail_after(20):
            while "added1" not in {t.name for t in actor.tools}:
                await anyio.sleep(0.02)
        await actor.wait_state(S.RUNNING, timeout=5)
    assert [change.new for change in actor.history].count(S.DEGRADED) == 1


async def test_a_list_listed_again_leaves_last_error_naming_the_calls_that_hang(tmp_path: Path) -> None:
    """A server degraded because its tool calls hang, whose tools/list refresh then fails and
    succeeds, stays degraded with ``last_error`` naming the hung calls, what keeps it so. Before,
    it kept naming the list's failure, which had passed."""
    server, failing = scripted(
        tmp_path, "list-fails-while", call_timeout=0.5, ping_interval=0.1, ping_timeout=1.0, unhealthy_after=1
    )
    async with open_supervisor(config(server)) as sup:
        actor = sup.actor(server.name)
        await actor.wait_state(S.RUNNING, timeout=20)
        with pytest.raises(CallTimeout):
            await actor.call_tool("add", {"hang": True})  # its list changes, its refresh is refused
        with anyio.fail_after(10):  # a refresh retried after the call hung
            while "tools/list after list_changed failed" not in (actor.last_error or ""):
                await anyio.sleep(0.02)
        failing.unlink()
        with anyio.fail_after(20):
            while "added1" not in {t.name for t in actor.tools}:
                await anyio.sleep(0.02)
        status = actor.status()
    hung = "1 tool call in a row timed out (last: list-fails-while/add gave no answer within 0.5s)"
    assert status.state is S.DEGRADED and status.last_error == hung


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("pages-endless", "tools/list cut at 100 items after 100 pages: its pages did not end"),
        ("pages-repeat", "tools/list cut at 3 items after 4 pages: a cursor it had given before came again"),
    ],
)
async def test_a_tools_list_whose_pages_never_end_is_cut_and_status_says_so(
    tmp_path: Path, mode: str, said: str
) -> None:
    """A server whose tools/list pages never end (more than 100, or a cursor given again) runs with
    the tools listed before the cut, and its status says the list was cut and why, until the list
    is read whole. Before, only the daemon's log said so: status showed the tools and nothing wrong."""
    server, _ = scripted(tmp_path, mode)
    async with open_supervisor(config(server)) as sup:
        actor = sup.actor(server.name)
        await actor.wait_state(S.RUNNING, timeout=20)
        status = actor.status()
        assert status.state is S.RUNNING and status.last_error == said
        assert status.tools == int(said.split()[3])
        await actor.call_tool("t0", {})  # its list changes, and ends
        with anyio.fail_after(10):
            while "added1" not in {t.name for t in actor.tools}:
                await anyio.sleep(0.02)
        assert actor.status().last_error is None


async def test_a_server_that_serves_no_tools_list_runs(tmp_path: Path) -> None:
    """A server with prompts only, that answers tools/list "method not found", runs with no tools and
    its prompts, never degraded, its tools/list_changed too. Its handshake failed on that answer: it
    was degraded and restarted for good, its prompts out of reach; then the refresh after
    list_changed failed on it, degraded again and again."""
    server, asked = scripted(tmp_path, "prompts-only")
    async with open_supervisor(config(server)) as sup:
        actor = sup.actor(server.name)
        state = await actor.wait_state(S.RUNNING, S.DEGRADED, timeout=20)
        with anyio.fail_after(10):
            while len(asked.read_text().split()) < 2:  # the handshake's, then the refresh's
                await anyio.sleep(0.02)
        await anyio.sleep(0.1)  # its answer taken in
        status = actor.status()
        prompts = [p.name for p in actor.surface.prompts]
    assert state is S.RUNNING and status.tools == 0 and status.last_error is None
    assert S.DEGRADED not in {change.new for change in actor.history}
    assert prompts == ["greet"]


async def _expect_timeout(sup: Supervisor, name: str) -> None:
    with pytest.raises(CallTimeout):
        await sup.actor(name).call_tool("echo", {"text": "two"}, timeout=0.5)


async def test_zero_tools_is_running_not_degraded() -> None:
    """A server that legitimately has no tools is healthy."""
    empty = fixture_server("empty", "--tools", "0", "--no-control", ping_interval=0.2)
    async with open_supervisor(config(empty)) as sup:
        actor = sup.actor("empty")
        await actor.wait_state(S.RUNNING, timeout=20)
        await anyio.sleep(0.6)  # let a few pings pass: still healthy
        status = actor.status()
    assert status.state is S.RUNNING and status.tools == 0 and not status.degraded


@pytest.fixture(scope="module")
async def shared() -> AsyncIterator[Supervisor]:
    """One supervisor for the tests that only call its fixture server ``fine`` and watch its lists,
    or need a running neighbour: none stops, kills, restarts or reloads ``fine``, and each adds
    names of its own. ``fine`` and, beside it, ``missing``, a command that does not exist."""
    missing = ServerConfig(name="missing", command="/definitely/not/here-mcp")
    async with open_supervisor(config(missing, fixture_server("fine"))) as sup:
        yield sup


async def test_missing_command_fails_alone(shared: Supervisor) -> None:
    """A command that does not exist fails at once with a clear reason; its neighbour runs."""
    await shared.actor("missing").wait_state(S.FAILED, timeout=10)
    await shared.actor("fine").wait_state(S.RUNNING, timeout=20)
    status = shared.actor("missing").status()
    assert "/definitely/not/here-mcp" in (status.last_error or "")
    assert status.restarts == 0


async def test_a_spawn_failure_names_what_is_wrong(tmp_path: Path) -> None:
    """A working directory that does not exist is named as such (exec blamed the command for it),
    as is one that is a file (it was said not to exist), and a command that is a directory says so.
    A command written as a shell line is told where its arguments go."""
    (tmp_path / "a-file").write_text("")
    no_cwd = ServerConfig(name="nocwd", command=sys.executable, cwd=str(tmp_path / "not-here"))
    file_cwd = ServerConfig(name="filecwd", command=sys.executable, cwd=str(tmp_path / "a-file"))
    a_dir = ServerConfig(name="adir", command=str(tmp_path))
    line = ServerConfig(name="line", command=f"{sys.executable} -m mcpd.testing.fixture")
    names = ("nocwd", "filecwd", "adir", "line")
    async with open_supervisor(config(no_cwd, file_cwd, a_dir, line)) as sup:
        for name in names:
            await sup.actor(name).wait_state(S.FAILED, timeout=10)
        errors = {name: sup.actor(name).status().last_error or "" for name in names}
    assert "working directory (`cwd`) does not exist" in errors["nocwd"] and "not-here" in errors["nocwd"]
    assert "working directory (`cwd`) is not a directory" in errors["filecwd"]
    assert "Is a directory" in errors["adir"]
    assert errors["line"].endswith("; `command` is one program, its arguments go in `args`")


async def test_garbage_on_stdout_is_skipped() -> None:
    """Non-JSON lines on stdout are dropped and counted; the session still works; stderr lines are
    kept as the server's tail (what ``servers.show`` returns)."""
    async with open_supervisor(
        config(fixture_server("noisy", "--garbage-stdout", "--stderr-lines", "5"))
    ) as sup:
        actor = sup.actor("noisy")
        await actor.wait_state(S.RUNNING, timeout=20)
        result = await actor.call_tool("echo", {"text": "still fine"})
    assert result.content == [{"type": "text", "text": "still fine"}]
    assert actor.stderr_tail()[:5] == [f"fixture noisy stderr line {i}" for i in range(5)]


LONG_LINE = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    if message["method"] == "tools/call":
        big = "x" * 33_554_432
        sys.stdout.write('{"jsonrpc": "2.0", "id": "%s", "result": "%s"}\\n' % (message["id"], big))
    else:
        info = {"name": "s", "version": "1"}
        tools = [{"name": "big", "inputSchema": {"type": "object"}}]
        result = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": info, "tools": tools}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\\n")
    sys.stdout.flush()
"""


async def test_a_line_over_the_limit_is_named_as_the_cause(tmp_path: Path) -> None:
    """A server that answers with a line over 32 MiB: the call fails saying so, and so does the run's
    end (it said the server had closed its stdout, and the call "process is running")."""
    (tmp_path / "long.py").write_text(LONG_LINE)
    server = ServerConfig(name="long", command=sys.executable, args=(str(tmp_path / "long.py"),))
    async with open_supervisor(config(server)) as sup:
        actor = sup.actor("long")
        await actor.wait_state(S.RUNNING, timeout=20)
        with pytest.raises(TransportError, match="a line over 32 MiB"):
            await actor.call_tool("big", {}, timeout=60)
        with anyio.fail_after(30):
            while "a line over 32 MiB" not in (actor.status().last_exit or ""):
                await anyio.sleep(0.05)


async def test_tool_results_errors_and_unknown_tools(shared: Supervisor) -> None:
    """A tool error is a result with is_error; an unknown tool and an unknown server are typed errors."""
    actor = shared.actor("fine")
    await actor.wait_state(S.RUNNING, timeout=20)
    failed = await actor.call_tool("fail", {"message": "nope"})
    assert failed.is_error
    with pytest.raises(UnknownTool):
        await actor.call_tool("no_such_tool", {})
    with pytest.raises(UnknownServer):
        shared.actor("no_such_server")
    with pytest.raises(CallTimeout):
        await actor.call_tool("sleep", {"seconds": 5}, timeout=0.3)
    # The slow call did not hurt the server.
    assert (await actor.call_tool("echo", {"text": "ok"})).content[0]["text"] == "ok"
    assert actor.state is S.RUNNING


async def test_list_changed_refreshes_tools(shared: Supervisor) -> None:
    """notifications/tools/list_changed makes the supervisor re-list that server's tools."""
    actor = shared.actor("fine")
    await actor.wait_state(S.RUNNING, timeout=20)
    before = {t.name for t in actor.tools}
    await actor.call_tool("add_tool", {"name": "brand_new"})
    with anyio.fail_after(5):
        while "brand_new" not in {t.name for t in actor.tools}:
            await anyio.sleep(0.02)
    assert "brand_new" not in before
    assert [t.name for t in actor.tools] == sorted(t.name for t in actor.tools)


async def test_prompt_list_changed_refreshes_prompts(shared: Supervisor) -> None:
    """notifications/prompts/list_changed makes the supervisor re-list that server's prompts, and
    the new prompt can be got at once."""
    actor = shared.actor("fine")
    await actor.wait_state(S.RUNNING, timeout=20)
    before = {p.name for p in actor.surface.prompts}
    await actor.call_tool("add_prompt", {"name": "fresh"})
    with anyio.fail_after(5):
        while "fresh" not in {p.name for p in actor.surface.prompts}:
            await anyio.sleep(0.02)
    got = await surface_requests.get_prompt(actor, "fresh", {})
    assert "fresh" not in before
    assert got.messages[0].content["text"] == "Prompt fresh, added at run time."


async def test_call_during_restart_waits_then_runs() -> None:
    """A call that arrives while its server restarts waits for it and succeeds."""
    async with open_supervisor(config(fixture_server("phoenix"))) as sup:
        actor = sup.actor("phoenix")
        await actor.wait_state(S.RUNNING, timeout=20)
        actor.restart()
        await actor.wait_state(S.STARTING, timeout=5)
        result = await actor.call_tool("echo", {"text": "after restart"}, timeout=20)
    assert result.content[0]["text"] == "after restart"
    assert actor.restarts == 1


async def test_stop_start_one_server_leaves_others_alone(shared: Supervisor) -> None:
    """Stopping and starting one server does not touch another's process: the other is ``fine``
    of the shared supervisor, beside which this test runs a server of its own, then removes it."""
    one, two = shared.add(fullserver_config("one")), shared.actor("fine")
    try:
        await one.wait_state(S.RUNNING, timeout=20)
        await two.wait_state(S.RUNNING, timeout=20)
        one_pid, two_pid = one.status().pid, two.status().pid
        assert one_pid is not None
        await one.stop()
        assert one.state is S.STOPPED
        await wait_gone(one_pid)
        with pytest.raises(ServerNotRunning, match="stopped"):
            await one.call_tool("plain", {}, timeout=1)
        one.start()
        await one.wait_state(S.RUNNING, timeout=20)
        assert two.status().pid == two_pid and two.state is S.RUNNING
    finally:
        await shared.remove("one")


async def test_stop_reaches_grandchildren_and_sigterm_ignorers() -> None:
    """Stop signals the whole process group, escalating to SIGKILL within the grace periods."""
    # sh runs a grandchild (sleep) in the same group, then execs a process that ignores SIGTERM and
    # never reads its stdin: neither the closed stdin nor SIGTERM ends it, only SIGKILL. A plain
    # Python process, not the fixture server with --ignore-sigterm: a stop takes the same path with
    # or without a finished handshake (this one never answers it), and the fixture server would
    # import the MCP SDK (~1 s of CPU) only to end by itself, at a time of its own, once its stdin
    # closed, so that whether SIGKILL was needed at all depended on timing.
    ignorer = (
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ignoring SIGTERM', file=sys.stderr, flush=True); time.sleep(3600)"
    )
    wrapper = ServerConfig(
        name="stubborn",
        command="/bin/sh",
        args=("-c", f"sleep 300 & echo $! >&2; exec {_quote(sys.executable)} -c {_quote(ignorer)}"),
        connect_timeout=60.0,
        stop_grace=0.5,
    )
    async with open_supervisor(config(wrapper)) as sup:
        actor = sup.actor("stubborn")
        with anyio.fail_after(20):
            while "ignoring SIGTERM" not in actor.stderr_tail():
                await anyio.sleep(0.02)
        pid = actor.status().pid
        assert pid is not None
        group = _group_members(pid)
        assert len(group) >= 2, group
        await actor.stop()
        # stop() returns once the whole group is gone (SIGKILL included), not at its own time limit.
        assert actor.state is S.STOPPED and not actor.alive
        assert all(process_gone(member) for member in group), group


async def test_an_exit_ends_the_run_though_a_process_it_left_holds_stdout() -> None:
    """A server killed while a process it started holds its stdout (a helper that inherited it):
    its call in flight fails at once naming the kill, it is restarted at once, and the helper is
    stopped with its old session. It stayed ``running`` (pid None) until pings failed, 45 s by
    default, every call to it timing out meanwhile."""
    server = ServerConfig(
        name="helped",
        command="/bin/sh",
        args=("-c", "sleep 300 & exec " + " ".join(map(_quote, fullserver_command()))),
        restart=FAST_RESTARTS,
        stop_grace=0.1,
    )
    async with open_supervisor(config(server)) as sup, anyio.create_task_group() as tg:
        actor = sup.actor("helped")
        await actor.wait_state(S.RUNNING, timeout=20)
        pid = actor.status().pid
        assert pid is not None
        helpers = [member for member in _group_members(pid) if member != pid]

        async def in_flight() -> None:
            with pytest.raises(TransportError, match="killed by SIGKILL"):
                await actor.call_tool("wait", {"seconds": 60}, timeout=30)

        tg.start_soon(in_flight)
        with anyio.fail_after(10):
            while (await actor.call_tool("waiting", {})).content[0]["text"] != "1":
                await anyio.sleep(0.02)
        os.kill(pid, signal.SIGKILL)
        await actor.wait_state(S.BACKOFF, timeout=5)
        assert "killed by SIGKILL; a process it started holds its stdout" in (actor.last_error or "")
        await actor.wait_state(S.RUNNING, timeout=20)
    assert helpers
    for helper in helpers:
        await wait_gone(helper)


async def test_a_run_that_ended_is_said_while_what_it_left_is_stopped() -> None:
    """A server killed while a process it started holds its stdout and ignores SIGTERM: its run's
    teardown takes two stop graces and a SIGKILL, and meanwhile status says ``backoff`` with why
    (the backoff counted from the end of the run), not ``running`` of a process gone (alive false,
    no ``last_error``), as it did until the helper was gone."""
    server = ServerConfig(
        name="helped",
        command="/bin/sh",
        args=(
            "-c",
            "sh -c \"trap '' TERM; sleep 300\" & exec " + " ".join(map(_quote, fullserver_command())),
        ),
        restart=FAST_RESTARTS,
        stop_grace=2.0,
    )
    async with open_supervisor(config(server)) as sup:
        actor = sup.actor("helped")
        await actor.wait_state(S.RUNNING, timeout=20)
        pid = actor.status().pid
        assert pid is not None
        helpers = [member for member in _group_members(pid) if member != pid]
        os.kill(pid, signal.SIGKILL)
        await actor.wait_state(S.BACKOFF, timeout=3)
        status = actor.status()
        assert not all(process_gone(helper) for helper in helpers)  # its teardown is still under way
        assert not status.alive and "killed by SIGKILL" in (status.last_error or "")
        await actor.wait_state(S.RUNNING, timeout=20)
    assert helpers
    for helper in helpers:
        await wait_gone(helper)


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


def _group_members(pgid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "-g", str(pgid)], capture_output=True, text=True, check=False)
    return [int(line) for line in out.stdout.split()]


async def test_reload_applies_only_the_diff() -> None:
    """Added servers start, removed ones stop, changed ones restart, unchanged ones keep their pid."""
    keep, change, drop = fullserver_config("keep"), fullserver_config("change"), fullserver_config("drop")
    async with open_supervisor(config(keep, change, drop)) as sup:
        for name in ("keep", "change", "drop"):
            await sup.actor(name).wait_state(S.RUNNING, timeout=20)
        pids = {s.name: s.pid for s in sup.status()}
        changed = fullserver_config("change", description="now with a description")
        new = config(keep, changed, fullserver_config("add"))
        plan = plan_reload({a.name: a.config for a in sup.actors()}, new)
        assert (plan.added, plan.removed, plan.changed, plan.unchanged) == (
            ("add",),
            ("drop",),
            ("change",),
            ("keep",),
        )
        await sup.apply(new)
        assert sup.names() == ["add", "change", "keep"]
        await sup.actor("add").wait_state(S.RUNNING, timeout=20)
        await sup.actor("change").wait_state(S.RUNNING, timeout=20)
        after = {s.name: s.pid for s in sup.status()}
    assert after["keep"] == pids["keep"]
    assert after["change"] != pids["change"]
    drop_pid = pids["drop"]
    assert drop_pid is not None
    await wait_gone(drop_pid)


async def test_a_call_that_a_stop_fails_is_told_why_mcpd_stopped_the_server() -> None:
    """A call in flight when a reload removes its server (a rename), or when a restart is asked
    for, fails saying why mcpd stopped the server, as the server's history does. Before, the
    call was told 'mcpd stopped old during sleep, before it answered' and no more, and the history
    said 'stop requested' of a reload's removal."""
    old, other = fixture_server("old"), fixture_server("other")
    async with open_supervisor(config(old, other)) as sup:
        for name in ("old", "other"):
            await sup.actor(name).wait_state(S.RUNNING, timeout=20)

        async def sleeping(name: str, why: str) -> None:
            with pytest.raises(
                TransportError, match=f"mcpd stopped {name} during sleep, before it answered: {why}"
            ):
                await sup.actor(name).call_tool("sleep", {"seconds": 30}, timeout=20)

        async with anyio.create_task_group() as tg:
            tg.start_soon(sleeping, "old", "removed from the config by a reload")
            tg.start_soon(sleeping, "other", "restart requested")
            with anyio.fail_after(10):
                while any(not (a.link and a.link.calls) for a in sup.actors()):
                    await anyio.sleep(0.02)
            retired = sup.actor("old")
            await sup.apply(config(fixture_server("new"), other))
            sup.actor("other").restart()
    assert retired.history[-1].reason == "removed from the config by a reload"


async def test_a_reload_hands_what_waits_to_the_changed_server() -> None:
    """A call waiting for a server that a reload changes goes on with the new run instead of failing
    because the old one stopped; and the server stays listed while its old run stops (slowly here:
    it ignores SIGTERM)."""
    stuck = fixture_server(
        "svc", "--hang-initialize", "--ignore-sigterm", connect_timeout=60.0, stop_grace=1.0
    )
    async with open_supervisor(config(stuck)) as sup:
        old = sup.actor("svc")
        await old.wait_state(S.STARTING, timeout=20)
        answers: list[str] = []
        listed: list[list[str]] = []

        async def call() -> None:
            result = await old.call_tool("echo", {"text": "hi"}, timeout=60)
            answers.append(result.content[0]["text"])

        async def reload() -> None:
            await sup.apply(config(fixture_server("svc")))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(reload)
            with anyio.fail_after(30):
                while not answers:
                    listed.append(sup.names())
                    await anyio.sleep(0.05)
        assert answers == ["hi"]
        assert sup.actor("svc") is not old and sup.actor("svc").restarts == 1
    assert listed and all(names == ["svc"] for names in listed)


async def test_actors_a_reload_replaced_are_freed_though_the_first_is_frozen() -> None:
    """The daemon freezes its start-up heap (``gc.freeze``), the first actor of each server with it.
    Each actor used to keep its successor, so from that first one every actor the server had since
    start stayed alive: ~10 KB more at every reload that changed it. Replaced three times here, the
    two in between are freed; the first still hands what waits on it to the one that runs now."""
    async with open_supervisor(config(fullserver_config("svc"))) as sup:
        first = sup.actor("svc")
        gc.freeze()
        try:
            between: list[weakref.ref[object]] = []
            for generation in range(3):
                if generation:
                    between.append(weakref.ref(sup.actor("svc")))
                await sup.apply(config(fullserver_config("svc", description=f"generation {generation}")))
            await sup.actor("svc").wait_state(S.RUNNING, timeout=20)
            gc.collect()
            assert [ref() for ref in between] == [None, None]
            with anyio.fail_after(20):
                assert (await first.call_tool("plain", {}, timeout=20)).content
        finally:
            gc.unfreeze()


async def test_a_call_that_reaches_a_server_before_its_first_step_waits_for_it() -> None:
    """A server wished running whose task has not taken its first step (started again after a stop,
    or just added by a reload while a request was on its way) is on its way: a call waits for it
    instead of failing "is stopped"."""
    async with open_supervisor(config(fixture_server("svc"))) as sup:
        actor = sup.actor("svc")
        await actor.wait_state(S.RUNNING, timeout=20)
        await actor.stop()
        actor.start()
        # No await between the start and the call: the actor is still stopped.
        assert actor.state is S.STOPPED
        result = await actor.call_tool("echo", {"text": "started again"}, timeout=30)
        assert result.content[0]["text"] == "started again"


async def test_disabled_server_stays_down_until_started() -> None:
    """enabled = false means disabled: no process until an explicit start."""
    async with open_supervisor(config(fullserver_config("off", enabled=False))) as sup:
        actor = sup.actor("off")
        assert actor.state is S.DISABLED
        await sup.wait_started(timeout=1)
        assert actor.status().pid is None
        actor.start()
        await actor.wait_state(S.RUNNING, timeout=20)


@pytest.fixture
async def http_fixture() -> AsyncIterator[str]:
    """A fixture server on streamable HTTP at a loopback port; yields its URL."""
    async with running_http_fixture("remote", free_port()) as url:
        yield url


async def test_streamable_http_server(http_fixture: str) -> None:
    """A remote (streamable HTTP) server is supervised like a stdio one: connect, list, call."""
    remote = ServerConfig(name="remote", url=http_fixture)
    async with open_supervisor(config(remote)) as sup:
        actor = sup.actor("remote")
        await actor.wait_state(S.RUNNING, timeout=20)
        status = actor.status()
        result = await actor.call_tool("echo", {"text": "over http"})
    assert status.transport == "http" and status.alive and status.pid is None
    assert status.tools > 0
    assert result.content[0]["text"] == "over http"


async def test_third_party_server_time() -> None:
    """mcp-server-time from PyPI starts and lists its tools."""
    time_server = ServerConfig(name="time", command=sys.executable, args=("-m", "mcp_server_time"))
    async with open_supervisor(config(time_server)) as sup:
        actor = sup.actor("time")
        await actor.wait_state(S.RUNNING, timeout=30)
        names = [t.name for t in actor.tools]
        result = await actor.call_tool("get_current_time", {"timezone": "UTC"})
    assert "get_current_time" in names and "convert_time" in names
    assert not result.is_error


async def test_crash_loop_beyond_the_cap_recovers_without_a_command(tmp_path: Path) -> None:
    """With the default policy (no max_retries) a crashing server is retried past the point where
    mcpd used to give up, shows backoff with its attempt count, next retry and the error, and is
    running again by itself once the cause is gone. A tiny cap keeps the test quick."""
    broken = tmp_path / "broken"
    broken.touch()
    command, *args = fixture_command("flaky")
    script = f"test -e {_quote(str(broken))} && exit 1; exec {' '.join(map(_quote, [command, *args]))}"
    tiny_cap = RestartPolicy(initial_delay=0.01, max_delay=0.1, jitter=0.0)
    flaky = ServerConfig(name="flaky", command="/bin/sh", args=("-c", script), restart=tiny_cap)
    backoffs: list[ServerStatus] = []
    enough = anyio.Event()

    async with open_supervisor(config(flaky)) as sup:
        actor = sup.actor("flaky")

        def record(event: ServerEvent) -> None:
            if isinstance(event, StateChanged) and event.new is S.BACKOFF:
                backoffs.append(actor.status())
                if len(backoffs) == 12:
                    enough.set()

        sup.add_listener(record)
        with anyio.fail_after(120):
            await enough.wait()
        broken.unlink()
        await actor.wait_state(S.RUNNING, timeout=120)
        status = actor.status()
    assert [s.attempt for s in backoffs] == list(range(1, 13))
    assert all(s.state is S.BACKOFF and s.next_retry_at is not None for s in backoffs)
    assert all("exited with code 1" in (s.last_error or "") for s in backoffs)
    assert S.FAILED not in {change.new for change in actor.history}
    assert status.last_error is None and "exited with code 1" in (status.last_exit or "")


async def test_call_the_dead_server_never_saw_waits_and_runs() -> None:
    """A call made after the child died but before the daemon noticed is refused by the dead pipe,
    waits for the restart and succeeds on the new process; a call in flight at the death fails."""
    async with open_supervisor(config(fixture_server("phoenix"))) as sup:
        actor = sup.actor("phoenix")
        await actor.wait_state(S.RUNNING, timeout=60)
        first = actor.status().pid
        assert first is not None
        async with anyio.create_task_group() as tg:
            in_flight: list[BaseException] = []

            async def slow_call() -> None:
                try:
                    await actor.call_tool("sleep", {"seconds": 60}, timeout=120)
                except TransportError as exc:
                    in_flight.append(exc)

            tg.start_soon(slow_call)
            await anyio.wait_all_tasks_blocked()
            os.kill(first, signal.SIGKILL)
            # No await until the call: the event loop has not seen the death, the pipe has.
            while not process_gone(first):
                pass
            assert actor.state is S.RUNNING
            result = await actor.call_tool("pid", {}, timeout=120)
        status = actor.status()
    assert result.structured_content == {"result": status.pid} and status.pid != first
    assert len(in_flight) == 1 and "SIGKILL" in str(in_flight[0])
    assert status.restarts == 1


@pytest.mark.parametrize(
    ("ending", "in_flight_error"),
    [("kill", "killed by SIGKILL"), ("restart", "mcpd stopped lazarus during progress")],
)
async def test_requests_the_server_never_read_wait_and_run(ending: str, in_flight_error: str) -> None:
    """Requests written into the stdin of a server that never read them, before it is killed
    (SIGKILL) or restarted by mcpd, wait for the next process and run there, tool calls and
    ``resources/read`` alike; the call it had read and was running fails with TransportError,
    which says how the run ended.

    The process is stopped (SIGSTOP) before the requests are written, so none of them can be
    read: the window that a kill -9 under load leaves open by chance (its leader already dead,
    a reading thread still holding the pipe) is held open here. Without counting what the
    dead process left unread in its pipe, every one of these requests failed; on a restart they
    failed too, settled as the run was cancelled while the process still held its stdin."""
    async with open_supervisor(config(fixture_server("lazarus", stop_grace=0.2))) as sup:
        actor = sup.actor("lazarus")
        await actor.wait_state(S.RUNNING, timeout=60)
        first = actor.status().pid
        assert first is not None
        running = anyio.Event()
        in_flight: list[TransportError] = []
        echoed: list[str] = []
        read: list[bytes] = []

        async def long_call() -> None:
            try:
                await actor.call_tool("progress", {"steps": 10**6}, 120, lambda *_: running.set())
            except TransportError as exc:
                in_flight.append(exc)

        async def echo(text: str) -> None:
            result = await actor.call_tool("echo", {"text": text}, timeout=120)
            echoed.append(result.content[0]["text"])

        async def read_bytes() -> None:
            result = await surface_requests.read_resource(actor, "fixture://bytes/16", timeout=120)
            read.append(base64.b64decode(result.contents[0].blob or ""))

        async with anyio.create_task_group() as tg:
            tg.start_soon(long_call)
            await running.wait()  # a progress notification: the server has read it and runs it
            os.kill(first, signal.SIGSTOP)
            while not _stopped(first):
                pass
            for index in range(50):
                tg.start_soon(echo, str(index))
            tg.start_soon(read_bytes)
            await anyio.wait_all_tasks_blocked()  # every request is in the pipe, waiting
            if ending == "kill":
                os.kill(first, signal.SIGKILL)
            else:
                actor.restart()
        status = actor.status()
    assert sorted(echoed, key=int) == [str(index) for index in range(50)]
    assert read == [bytes(range(16))]
    assert len(in_flight) == 1 and in_flight_error in str(in_flight[0])
    assert status.pid != first and status.restarts == 1


async def test_calls_after_the_server_closed_its_stdout_wait_and_run() -> None:
    """A server that closes its stdout and keeps running: the call it was running fails, and once
    mcpd has read the end of its output no request is written to it: a call made then waits for
    the next process and runs there.

    Before, for a second after the end of its output (while mcpd waited for an exit that did not
    come) calls were still written to the old process, and failed with TransportError."""
    mute = fixture_server("mute", "--close-stdout-after", "2", stop_grace=0.2)
    async with open_supervisor(config(mute)) as sup:
        actor = sup.actor("mute")
        await actor.wait_state(S.RUNNING, timeout=60)
        first = actor.status().pid
        link = actor.link
        assert first is not None and link is not None and link.child is not None
        stdout = link.child.process.stdout
        assert stdout is not None
        await actor.call_tool("echo", {"text": "one"}, timeout=60)
        in_flight: list[TransportError] = []

        async def closing_call() -> None:
            try:
                await actor.call_tool("echo", {"text": "two"}, timeout=60)
            except TransportError as exc:
                in_flight.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(closing_call)
            with anyio.fail_after(30):
                while not stdout.at_eof():  # mcpd has read the end of the output
                    await anyio.sleep(0.005)
            after = await actor.call_tool("pid", {}, timeout=60)
        status = actor.status()
    assert len(in_flight) == 1 and "mute closed the connection during echo" in str(in_flight[0])
    assert after.structured_content == {"result": status.pid} and status.pid != first


def _stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (none can read its stdin any more)."""
    states = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/stat") as stat:
            states.append(stat.read().rsplit(")", 1)[1].split()[0])
    return all(state == "T" for state in states)


async def test_list_changed_storm_is_coalesced(shared: Supervisor) -> None:
    """A thousand tools/list_changed in a burst cost a handful of tools/list (one in flight, one
    pending, at most one per refresh gap), and the last list still reaches the supervisor."""
    actor = shared.actor("fine")
    await actor.wait_state(S.RUNNING, timeout=60)
    refreshes = 0
    complete = anyio.Event()

    def record(event: ServerEvent) -> None:
        # Counts from here on (the supervisor is shared); once added it stays, harmless: it only counts.
        nonlocal refreshes
        if isinstance(event, ToolsChanged) and event.server == "fine":
            refreshes += 1
            if "storm_999" in {t.name for t in actor.tools}:
                complete.set()

    shared.add_listener(record)
    started = anyio.current_time()
    await actor.call_tool("list_changed_storm", {"count": 1000}, timeout=120)
    with anyio.fail_after(120):
        await complete.wait()
    elapsed = anyio.current_time() - started
    assert 1 <= refreshes <= 2 + elapsed / TOOLS_REFRESH_GAP


async def test_a_reload_counts_a_restart_only_for_a_server_that_ran() -> None:
    """A changed server that was running restarts (one more in its count); one that was disabled or
    stopped on purpose was not running, so a reload that changes it restarts nothing."""
    running, disabled, stopped = (
        fullserver_config("on"),
        fullserver_config("off", enabled=False),
        fullserver_config("st"),
    )
    async with open_supervisor(config(running, disabled, stopped)) as sup:
        await sup.actor("on").wait_state(S.RUNNING, timeout=20)
        await sup.actor("st").wait_state(S.RUNNING, timeout=20)
        await sup.actor("st").stop()
        changed = [fullserver_config(name, description="changed") for name in ("on", "st")]
        await sup.apply(config(*changed, fullserver_config("off", enabled=False, description="changed")))
        await sup.actor("on").wait_state(S.RUNNING, timeout=20)
        await sup.actor("st").wait_state(S.RUNNING, timeout=20)
        counts = {s.name: s.restarts for s in sup.status()}
    assert counts == {"on": 1, "off": 0, "st": 0}
