"""The daemon's MCP session engine, driven over a real socket upgraded with ``hello`` mode ``mcp``."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import shutil
import socket
import sys
import tempfile
import time
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import anyio
import msgspec
import pytest

from mcpd.client import _wire
from mcpd.client.aio import connect
from mcpd.client.channel import Channel, open_channel
from mcpd.discovery.render import estimate_tokens
from mcpd.errors import (
    SERVER_ERROR,
    CallTimeout,
    ConfigError,
    InvalidParams,
    NotApproved,
    PeerRejected,
    ProtocolError,
    ServerNotRunning,
    TooManyRequests,
    TransportError,
    UnknownMethod,
    UnknownPrompt,
    UnknownResource,
    UnknownServer,
    UnknownTool,
    Unsupported,
)
from mcpd.front import socket as front_socket
from mcpd.front.hosts import Hosts
from mcpd.front.rpc_errors import rpc_code, rpc_error
from mcpd.front.session import HELD_LIMIT
from mcpd.ipc import endpoint, framing
from mcpd.ipc.framing import MAX_CLIENT_FRAME, FrameBuffer
from mcpd.ipc.server import MethodTable, RpcServer
from mcpd.model.mcp import (
    SESSION_NOTIFICATION,
    SUBSCRIPTIONS_NOTIFICATION,
    TOO_MANY_REQUESTS,
    InitializeParams,
    SessionState,
)
from mcpd.model.protocol import PROTOCOL_VERSION, HelloParams, Response, ToolsCallParams
from mcpd.model.tools import ToolResult
from mcpd.testing import fixture_toml, fullserver_toml
from mcpd.testing.daemon import DaemonProcess, running_daemon
from mcpd.testing.hostile import hello, request

pytestmark = pytest.mark.anyio

MCPD_PRIVATE = "notifications/mcpd/"


@pytest.fixture(scope="module")
async def daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DaemonProcess]:
    path = tmp_path_factory.mktemp("front") / "config.toml"
    path.write_text(fixture_toml("tools"))
    async with running_daemon(path) as running:
        yield running


def test_each_error_of_mcpd_has_the_json_rpc_code_mcp_names_for_it() -> None:
    """A host is answered with JSON-RPC's and MCP's codes, one per class (a subclass has its
    parent's, any class not listed -32603), the message alone, the class and its details in
    ``data``; a server's own error behind one as the server sent it."""

    class Later(UnknownTool):
        pass

    asked = [UnknownTool, Later, UnknownPrompt, UnknownServer, InvalidParams, UnknownResource]
    asked += [UnknownMethod, Unsupported, CallTimeout, TooManyRequests]
    asked += [ServerNotRunning, NotApproved, TransportError, ConfigError, PeerRejected]
    codes = [-32602] * 5 + [-32002, -32601, -32601, -32001, -32012] + [-32603] * 5
    assert [rpc_code(cls("x")) for cls in asked] == codes
    down = rpc_error(ServerNotRunning("server 'x' is failed", {"server": "x", "state": "failed"}))
    assert (down.code, down.message, down.data) == (
        -32603,
        "server 'x' is failed",
        {"type": "ServerNotRunning", "server": "x", "state": "failed"},
    )
    server_error = {"code": -32050, "message": "not today", "data": [1]}
    refused = rpc_error(UnknownResource("x refused it", {"server": "x", SERVER_ERROR: server_error}))
    assert (refused.code, refused.message, refused.data) == (-32050, "not today", [1])


class Peer:
    """A host speaking raw JSON-RPC on an upgraded channel (blocking; run it in a thread)."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.seen: list[dict[str, Any]] = list(map(json.loads, channel.backlog))
        self._unread: deque[bytes] = deque()
        """Frames that came in one read with an answer, after it."""

    def send(self, data: bytes) -> None:
        self.channel.send(data)

    def receive(self) -> list[bytes]:
        """The frames not read yet: those that came after the last answer, else what arrives now."""
        if self._unread:
            frames = list(self._unread)
            self._unread.clear()
            return frames
        return self.channel.receive()

    def next_answer(self) -> dict[str, Any]:
        """The next response (notifications before it are kept in ``seen``)."""
        while True:
            if not self._unread:
                self._unread.extend(self.receive())
                continue
            message: dict[str, Any] = json.loads(self._unread.popleft())
            if "method" not in message:
                return message
            self.seen.append(message)

    def request(self, request_id: int, method: str, params: Any = None) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(json.dumps(message).encode())
        answer = self.next_answer()
        assert answer["id"] == request_id
        return answer

    def states(self) -> list[dict[str, Any]]:
        return [m["params"] for m in self.seen if m["method"] == "notifications/mcpd/session"]


async def peer(daemon: DaemonProcess, state: SessionState | None = None) -> Peer:
    resume = msgspec.json.encode(state) if state is not None else None
    channel = await anyio.to_thread.run_sync(
        lambda: open_channel(daemon.socket, mode="mcp", name="test-host", resume=resume)
    )
    return Peer(channel)


def initialize(version: str) -> dict[str, Any]:
    return {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "pytest", "version": "1"}}


async def test_protocol_answers_and_errors(daemon: DaemonProcess) -> None:
    """Version negotiation, instructions, ping, setLevel; -32601/-32602/-32700/-32600 (bad params,
    a level MCP does not define, a cursor never given, a batch, an empty object, an id in progress),
    after which the session carries on; the relay hears the session state, the host never."""
    host = await peer(daemon)

    def run() -> None:
        answer = host.request(1, "initialize", initialize("2025-03-26"))["result"]
        assert answer["protocolVersion"] == "2025-03-26"
        assert answer["capabilities"]["tools"] == {"listChanged": True}
        assert '<mcp id="tools">' in answer["instructions"]
        newer = host.request(2, "initialize", initialize("2099-01-01"))["result"]
        assert newer["protocolVersion"] == "2025-11-25"
        assert host.states()[-1]["initialize"]["clientInfo"]["name"] == "pytest"
        assert host.request(3, "ping")["result"] == {}
        assert host.request(4, "logging/setLevel", {"level": "debug"})["result"] == {}
        assert host.request(5, "no/such/method")["error"]["code"] == -32601
        assert host.request(6, "tools/call", {"arguments": {}})["error"]["code"] == -32602
        host.send(b'{"jsonrpc": "2.0", "id": 7, "method": ')
        parse_error = host.next_answer()
        assert parse_error["id"] is None and parse_error["error"]["code"] == -32700
        host.send(b'[{"jsonrpc": "2.0", "id": 8, "method": "ping"}]')
        assert host.next_answer()["error"]["code"] == -32600
        names = [t["name"] for t in host.request(9, "tools/list")["result"]["tools"]]
        assert names == [
            "mcpd_search_tools",
            "mcpd_connect_server",
            "mcpd_call_tool",
            "mcpd_request_capability",
        ]
        # MCP's other -32602s and -32600s: a level it does not define, a cursor mcpd never gave,
        # a message that is neither a request, a notification nor a response, an id in progress.
        assert host.request(10, "logging/setLevel", {"level": "loud"})["error"]["code"] == -32602
        cursor = host.request(11, "tools/list", {"cursor": "made-up"})["error"]
        assert cursor["code"] == -32602 and "cursor" in cursor["message"]
        host.send(b"{}")
        assert host.next_answer()["error"]["code"] == -32600
        sleep = {"name": "mcpd_call_tool", "arguments": {"tool": "tools__sleep", "arguments": {"seconds": 2}}}
        host.send(json.dumps({"jsonrpc": "2.0", "id": 12, "method": "tools/call", "params": sleep}).encode())
        again = host.request(12, "ping")
        assert again["error"]["code"] == -32600 and "in progress" in again["error"]["message"]
        assert host.next_answer()["id"] == 12  # the first one's answer still comes, once

    try:
        await anyio.to_thread.run_sync(run)
    finally:
        host.channel.close()


async def test_resume_carries_the_session_on(daemon: DaemonProcess) -> None:
    """A relay that resumes (after a daemon restart) needs no new initialize: connected servers are
    back, and a call within the learning window is recorded with the session's last search query."""
    state = SessionState(
        initialize=InitializeParams(protocol_version="2025-06-18"),
        connected=["tools"],
        query="say it back unchanged",
        query_at=time.time(),
    )
    host = await peer(daemon, state)

    def run() -> None:
        tools = [t["name"] for t in host.request(1, "tools/list")["result"]["tools"]]
        assert "tools__echo" in tools
        call = {"name": "tools__echo", "arguments": {"text": "resumed"}}
        result = host.request(2, "tools/call", call)["result"]
        assert result["content"] == [{"type": "text", "text": "resumed"}]

    try:
        await anyio.to_thread.run_sync(run)
    finally:
        host.channel.close()
    association = 0.0
    async with connect(daemon.socket) as client:
        # The prior learns from each batch the store commits (within tens of milliseconds).
        with anyio.fail_after(10):
            while association == 0:
                ranked = await client.search("say it back unchanged", explain=True)
                echo = next(t for t in ranked.tools if t.name == "tools__echo")
                association = (echo.score_parts or {}).get("association", 0.0)
                await anyio.sleep(0.02)
    assert association > 0


async def resumed_states(tmp_path: Path, count: int) -> tuple[list[str], list[dict[str, Any]]]:
    """A relay that takes whole states (an earlier mcpd's bridge, under a daemon just upgraded)
    resumes a session of ``count`` subscriptions: the URIs, and the session states it is sent until
    they are all taken again."""
    config = tmp_path / "config.toml"
    config.write_text(fullserver_toml("full"))
    uris = sorted(f"mcpd://full/full://r/{index}" for index in range(count))
    async with running_daemon(config) as running:
        await running.wait_for("server.state", server="full", new="running", timeout=120)
        host = await peer(running, SessionState(subscribed=uris))

        def states_until_back() -> list[dict[str, Any]]:
            while not (host.states() and host.states()[-1]["subscribed"] == uris):
                host.seen += [json.loads(frame) for frame in host.receive()]
            return host.states()

        try:
            with anyio.fail_after(120):
                return uris, await anyio.to_thread.run_sync(states_until_back, abandon_on_cancel=True)
        finally:
            host.channel.close()


async def test_a_resumed_session_of_many_subscriptions_is_told_its_state_once_they_are_back(
    tmp_path: Path,
) -> None:
    """A relay resumes a session of 500 subscriptions: they are all taken again, and the relay is
    sent the session's state a few times (once at the start, once when the server's are back), not
    once per subscription (before: 501 states of up to 64 KiB, quadratic in the subscriptions)."""
    _, states = await resumed_states(tmp_path, 500)
    assert len(states) <= 3, len(states)


async def test_every_state_of_a_resumed_session_keeps_the_subscriptions_still_being_taken_again(
    tmp_path: Path,
) -> None:
    """The relay keeps the state it was sent last and resumes the next daemon with it: a state sent
    while the resumed subscriptions are being taken again must still hold them, or a daemon that dies
    then (kill -9) hands the next one a session without them (before: the state sent at the start,
    and every one until the server's were all back, said none)."""
    uris, states = await resumed_states(tmp_path, 50)
    assert [len(state["subscribed"]) for state in states] == [len(uris)] * len(states)


async def test_a_relay_taking_deltas_is_told_only_the_resumed_subscriptions_refused(tmp_path: Path) -> None:
    """A relay that keeps the subscriptions itself resumes a session of 300 of them, two of which
    this daemon refuses (a server it does not have, a URI of no server): it is told only that those
    two are gone, once each, and no state it is sent carries subscriptions (before: each state carried
    all 302, and the relay was sent them again once they were back)."""
    config = tmp_path / "config.toml"
    config.write_text(fullserver_toml("full"))
    uris = [f"mcpd://full/full://r/{index}" for index in range(300)]
    refused = ["mcpd://gone/full://r/0", "file:///not-qualified"]
    async with running_daemon(config) as running:
        await running.wait_for("server.state", server="full", new="running", timeout=120)
        mark = len(running.events)
        resumed = SessionState(subscribed=[*refused, *uris], subscription_deltas=True)
        host = await peer(running, resumed)
        try:
            with anyio.fail_after(120):
                while sum(e.get("event") == "resource.subscribed" for e in running.events[mark:]) < len(uris):
                    await anyio.sleep(0.05)
                # Anything the last retake made the session send has come by the answer to a ping.
                await anyio.to_thread.run_sync(lambda: host.request(1, "ping"))
        finally:
            host.channel.close()
    changes = [m["params"] for m in host.seen if m["method"] == SUBSCRIPTIONS_NOTIFICATION]
    assert sorted(uri for change in changes for uri in change.get("removed", [])) == sorted(refused)
    assert not any(change.get("added") for change in changes)
    assert host.states() and all(state["subscribed"] == [] for state in host.states())


def relay_subscriptions(host: Peer, told: dict[str, None]) -> None:
    """Apply the subscription changes ``host`` was sent (as a relay does) to ``told``."""
    for message in host.seen:
        if message["method"] == SUBSCRIPTIONS_NOTIFICATION:
            told.update(dict.fromkeys(message["params"].get("added", [])))
            for uri in message["params"].get("removed", []):
                told.pop(uri, None)
    host.seen.clear()


async def test_a_host_subscribing_one_by_one_costs_its_relay_what_each_change_is(tmp_path: Path) -> None:
    """A host subscribes to 400 URIs one by one, then drops one: its relay (taking deltas) is told
    each change before its answer, in a notification of that change alone, and no session state
    carries the subscriptions; the relay's set is then the session's. Before, each change sent the
    whole state, every URI in it: 2,000 subscribes made 2,000 states, 56 MB, and 2.5 GB for 10,000
    (400 here: whole states would be 2.4 MB, 30 times the bound)."""
    config = tmp_path / "config.toml"
    config.write_text(fullserver_toml("full"))
    count = 400
    uris = [f"mcpd://full/full://r/{index}" for index in range(count)]
    async with running_daemon(config) as running:
        await running.wait_for("server.state", server="full", new="running", timeout=120)
        host = await peer(running, SessionState(subscription_deltas=True))

        def run() -> tuple[dict[str, None], int, list[int]]:
            host.request(0, "initialize", initialize("2025-06-18"))
            told: dict[str, None] = {}
            private, late = 0, []
            for index, uri in enumerate(uris):
                host.seen.clear()
                host.request(index + 1, "resources/subscribe", {"uri": uri})
                private += sum(len(json.dumps(m)) for m in host.seen if m["method"].startswith(MCPD_PRIVATE))
                if any(m["method"] == SESSION_NOTIFICATION for m in host.seen):
                    late.append(index)  # a state at a subscribe: one would carry them all
                relay_subscriptions(host, told)
                if uri not in told:
                    late.append(index)
            host.request(count + 1, "resources/unsubscribe", {"uri": uris[5]})
            relay_subscriptions(host, told)
            return told, private, late

        try:
            with anyio.fail_after(300):
                told, private, late = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
        finally:
            host.channel.close()
    assert list(told) == uris[:5] + uris[6:]
    assert late == []
    assert private < count * 200, private  # about 80 bytes each


async def test_unknown_mode_is_refused(daemon: DaemonProcess) -> None:
    """A hello asking for a mode the daemon does not have gets a clear error."""
    with pytest.raises(ProtocolError, match="unknown connection mode"):
        await anyio.to_thread.run_sync(lambda: open_channel(daemon.socket, mode="nope", name="test"))


async def test_a_mode_asked_for_after_the_first_hello_is_refused(daemon: DaemonProcess) -> None:
    """A hello with a mode after a plain hello, a call still running, is refused and the connection
    closed: it was upgraded, and the call's msgpack answer came among the MCP session's JSON."""
    call = request(2, "tools.call", {"tool": "tools__sleep", "arguments": {"seconds": 1}})
    upgrade = request(3, "hello", HelloParams(protocol=PROTOCOL_VERSION, client="late", mode="mcp"))

    def answers() -> list[Response]:
        """Every answer until the daemon closes the connection."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(str(daemon.socket))
            sock.sendall(hello() + call + upgrade)
            frames = FrameBuffer(MAX_CLIENT_FRAME)
            received: list[Response] = []
            while data := sock.recv(65536):
                received += [msgspec.msgpack.decode(f, type=Response) for f in frames.feed(data)]
            return received

    by_id = {answer.id: answer for answer in await anyio.to_thread.run_sync(answers)}
    assert by_id[3].error is not None and "first hello" in by_id[3].error.message
    assert set(by_id) == {1, 3}  # the call's answer went nowhere: the connection is closed


async def test_a_call_sent_before_the_hello_that_asks_for_a_mode_is_refused_not_run(
    daemon: DaemonProcess,
) -> None:
    """A call and then a hello with a mode, in one write: the call is refused at once (the first
    request must be hello). It was started in a task that ran only after the hello had been handled,
    so it found the connection greeted, ran, and its msgpack answer came among the MCP session's JSON."""
    call = request(2, "tools.call", {"tool": "tools__sleep", "arguments": {"seconds": 0.2}})
    upgrade = request(3, "hello", HelloParams(protocol=PROTOCOL_VERSION, client="early", mode="mcp"))

    def frames_for(seconds: float) -> list[bytes]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(daemon.socket))
            sock.sendall(call + upgrade)
            buffer, received = FrameBuffer(MAX_CLIENT_FRAME), []
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0:
                sock.settimeout(left)
                try:
                    data = sock.recv(65536)
                except TimeoutError:
                    break
                if not data:
                    break
                received += buffer.feed(data)
            return received

    frames = await anyio.to_thread.run_sync(frames_for, 2.0)
    refusal = msgspec.msgpack.decode(frames[0], type=Response)
    assert refusal.id == 2 and refusal.error is not None and "hello" in refusal.error.message, refusal
    hello_answer = msgspec.msgpack.decode(frames[1], type=Response)
    assert hello_answer.id == 3 and hello_answer.error is None
    assert all(f.startswith(b"{") for f in frames[2:]), frames[2:]  # the MCP session's JSON alone


async def test_notifications_held_before_initialized_are_bounded(daemon: DaemonProcess) -> None:
    """A host that never sends ``notifications/initialized`` cannot make the daemon hold every
    notification meant for it: the latest ``HELD_LIMIT`` are kept, and delivered once it does."""
    steps = HELD_LIMIT + 50
    host = await peer(daemon, SessionState(connected=["tools"]))

    def run() -> None:
        host.request(1, "initialize", initialize("2025-06-18"))
        call = {"name": "tools__progress", "arguments": {"steps": steps}, "_meta": {"progressToken": "p"}}
        assert host.request(2, "tools/call", call)["result"]["content"][0]["text"] == f"done {steps} steps"
        assert not [m for m in host.seen if m["method"] == "notifications/progress"]
        host.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        host.request(3, "ping")

    try:
        await anyio.to_thread.run_sync(run)
    finally:
        host.channel.close()
    progress = [m["params"]["progress"] for m in host.seen if m["method"] == "notifications/progress"]
    assert progress == list(range(steps - HELD_LIMIT + 1, steps + 1))


async def test_a_request_over_the_limit_is_refused_and_the_host_still_heard(tmp_path: Path) -> None:
    """With ``max_in_flight = 1`` a host's call holds its session's only slot while the server asks
    the host for sampling: another request from the host is refused at once (-32012) instead of
    waiting, so the host's answer to the server is still read and the call completes."""
    config = tmp_path / "config.toml"
    config.write_text("[daemon]\nmax_in_flight = 1\n\n" + fixture_toml("fx"))
    async with running_daemon(config) as running:
        await running.wait_for("server.state", server="fx", new="running", timeout=120)
        host = await peer(running, SessionState(connected=["fx"]))

        def run() -> None:
            hello = {**initialize("2025-06-18"), "capabilities": {"sampling": {}}}
            host.request(1, "initialize", hello)
            host.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
            call = {"name": "fx__ask", "arguments": {"kind": "sampling"}}
            host.send(
                json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}).encode()
            )
            while not any(m.get("method") == "sampling/createMessage" for m in host.seen):
                host.seen += [json.loads(frame) for frame in host.receive()]
            (ask,) = [m for m in host.seen if m.get("method") == "sampling/createMessage"]
            assert host.request(3, "ping")["error"]["code"] == TOO_MANY_REQUESTS
            sample = {"role": "assistant", "content": {"type": "text", "text": "one slot"}, "model": "m"}
            host.send(json.dumps({"jsonrpc": "2.0", "id": ask["id"], "result": sample}).encode())
            answer = host.next_answer()
            assert answer["id"] == 2
            assert answer["result"]["content"][0]["text"] == "sampled (m): one slot"

        try:
            await anyio.to_thread.run_sync(run)
        finally:
            host.channel.close()


async def test_a_search_answer_keeps_its_budget_whole(daemon: DaemonProcess) -> None:
    """`budget_tokens` bounds the whole answer: the rendering and the structured content together
    (the structured part used to list every match with its description, whatever the budget);
    it names exactly the tools the rendering shows. A budget under the schema's minimum is an error,
    not an answer saying that nothing matched."""
    host = await peer(daemon)
    query = {"query": "echo text sleep fail tool", "limit": 100}

    def search(budget: int) -> dict[str, Any]:
        arguments = {**query, "budget_tokens": budget}
        answer = host.request(budget, "tools/call", {"name": "mcpd_search_tools", "arguments": arguments})
        result: dict[str, Any] = answer["result"]
        return result

    def run() -> None:
        host.request(1, "initialize", initialize("2025-06-18"))
        everything = search(100_000)["structuredContent"]
        assert everything["omitted"] == 0 and len(everything["tools"]) > 5
        for budget in (50, 80, 150, 300, 600):
            answer = search(budget)
            text, structured = answer["content"][0]["text"], answer["structuredContent"]
            whole = estimate_tokens(text) + estimate_tokens(json.dumps(structured, separators=(",", ":")))
            assert whole <= budget, (budget, whole)
            shown = [t["name"] for t in structured["tools"]]
            assert all(name in text for name in shown)
            assert structured["omitted"] == len(everything["tools"]) - len(shown) > 0
            assert "No tool matches" not in text
        refused = search(10)
        assert refused["isError"] and "at least 50" in refused["content"][0]["text"]

    try:
        await anyio.to_thread.run_sync(run)
    finally:
        host.channel.close()


@pytest.mark.parametrize("declared", [{}, {"form": {}}, {"form": {}, "url": {}}])
async def test_a_url_elicitation_reaches_only_a_host_that_declared_url_mode(
    daemon: DaemonProcess, declared: dict[str, Any]
) -> None:
    """`elicitation: {}` (or `{form: {}}`) is form mode only: a server's URL-mode elicitation is
    refused for such a host, which would otherwise answer for a page its user never saw; a host
    that declared `url` is asked."""
    host = await peer(daemon)

    def run() -> str:
        init = initialize("2025-11-25") | {"capabilities": {"elicitation": declared}}
        host.request(1, "initialize", init)
        # What a new daemon resumes the session with keeps the mode too.
        kept = host.states()[-1]["initialize"]["capabilities"]["elicitation"]
        assert kept == ({"url": {}} if "url" in declared else {})
        ask = {
            "name": "mcpd_call_tool",
            "arguments": {"tool": "tools__ask", "arguments": {"kind": "elicitation-url"}},
        }
        host.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": ask}).encode())
        while True:
            for frame in host.receive():
                message = json.loads(frame)
                if message.get("method") == "elicitation/create":
                    assert message["params"]["mode"] == "url"
                    reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"action": "accept"}}
                    host.send(json.dumps(reply).encode())
                elif message.get("id") == 2:
                    text: str = message["result"]["content"][0]["text"]
                    return text

    try:
        answer = await anyio.to_thread.run_sync(run)
    finally:
        host.channel.close()
    if "url" in declared:
        assert answer == "elicited by url: accept"
    else:
        assert "did not declare the elicitation.url capability" in answer


async def test_a_servers_json_rpc_error_and_result_meta_reach_the_host_as_sent(daemon: DaemonProcess) -> None:
    """A server that refuses a call with a JSON-RPC error (code and data: -32042 with the URL
    elicitations it requires, say) gives the host that error, not a tool error's text it cannot act
    on; a result's `_meta` arrives with the result. The library caller still reads a tool error."""
    host = await peer(daemon)

    def call(request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return host.request(request_id, "tools/call", {"name": tool, "arguments": arguments})

    def run() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        host.request(1, "initialize", initialize("2025-11-25"))
        host.request(2, "tools/call", {"name": "mcpd_connect_server", "arguments": {"server": "tools"}})
        refused = call(3, "tools__refuse", {"code": -32042, "message": "open the consent page"})
        via_meta_tool = call(
            4, "mcpd_call_tool", {"tool": "tools__refuse", "arguments": {"code": -32042, "message": "again"}}
        )
        meta = call(5, "tools__meta_echo", {"text": "kept"})
        return refused, via_meta_tool, meta

    try:
        refused, via_meta_tool, meta = await anyio.to_thread.run_sync(run)
    finally:
        host.channel.close()
    assert refused["error"] == {
        "code": -32042,
        "message": "open the consent page",
        "data": {"why": "open the consent page"},
    }
    assert via_meta_tool["error"]["code"] == -32042
    assert meta["result"]["_meta"] == {"fixture/echo": "kept"}
    async with connect(daemon.socket) as client:
        result = await client.call_tool("tools__refuse", {"code": -32042, "message": "for a script"})
    assert result.is_error and result.content[0]["text"] == "for a script"


async def test_server_log_messages_reach_a_host_at_the_level_it_set(daemon: DaemonProcess) -> None:
    """A host that set a level with `logging/setLevel` is sent the MCP log messages of the servers it
    sees at or above it, named by server (they never reached hosts: setLevel was accepted and did
    nothing); a host that set none is sent none."""
    host, quiet = await peer(daemon), await peer(daemon)

    def run() -> None:
        for each in (host, quiet):
            each.request(1, "initialize", initialize("2025-06-18"))
            each.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
            each.request(2, "tools/call", {"name": "mcpd_connect_server", "arguments": {"server": "tools"}})
        host.request(3, "logging/setLevel", {"level": "warning"})
        for request_id, level in ((4, "info"), (5, "error")):
            arguments = {"text": f"at {level}", "level": level, "logger": "db"}
            host.request(request_id, "tools/call", {"name": "tools__log", "arguments": arguments})
        quiet.request(
            3, "tools/call", {"name": "tools__log", "arguments": {"text": "unheard", "level": "error"}}
        )
        long_line = {"text": "y" * 20_000, "level": "error"}
        quiet.request(5, "tools/call", {"name": "tools__log", "arguments": long_line})
        host.request(6, "ping")  # the log messages were sent before this answer
        quiet.request(4, "ping")

    try:
        await anyio.to_thread.run_sync(run)
    finally:
        host.channel.close()
        quiet.channel.close()
    messages = [m["params"] for m in host.seen if m["method"] == "notifications/message"]
    assert messages[:2] == [
        {"level": "error", "data": "at error", "logger": "tools/db"},
        {"level": "error", "data": "unheard", "logger": "tools"},  # the server's, whoever called
    ]
    (long_one,) = messages[2:]  # whole: the log cuts what it keeps, hosts get what the server sent
    assert long_one["data"] == "y" * 20_000
    assert not [m for m in quiet.seen if m["method"] == "notifications/message"]
    assert host.states()[-1]["log_level"] == "warning"


async def test_a_hosts_request_meta_reaches_the_server(daemon: DaemonProcess) -> None:
    """A host's `_meta` (tracing, vendor keys) reaches the server with the call, beside the progress
    token mcpd puts there in place of the host's own (it used to be dropped)."""
    host = await peer(daemon)

    def run() -> dict[str, Any]:
        host.request(1, "initialize", initialize("2025-06-18"))
        meta = {"vendor.example/trace": "abc", "progressToken": "host-token"}
        params = {"name": "mcpd_call_tool", "arguments": {"tool": "tools__request_meta"}, "_meta": meta}
        seen: dict[str, Any] = json.loads(
            host.request(2, "tools/call", params)["result"]["content"][0]["text"]
        )
        return seen

    try:
        seen = await anyio.to_thread.run_sync(run)
    finally:
        host.channel.close()
    assert seen["vendor.example/trace"] == "abc"
    assert seen.get("progressToken") != "host-token"  # mcpd gives the server its own token


async def test_a_socket_clients_progress_token_never_reaches_the_server(daemon: DaemonProcess) -> None:
    """A socket client's `meta` reaches the server without a `progressToken` of the client's own: the
    server's progress for it would be routed by that token, which may name another caller's call."""
    meta = {"vendor.example/trace": "abc", "progressToken": "mcpd-1"}
    call = _wire.Call("tools.call", ToolsCallParams(tool="tools__request_meta", meta=meta), ToolResult)
    async with connect(daemon.socket, name="test") as client:
        result = await client.request(call)
    assert json.loads(result.content[0]["text"]) == {"vendor.example/trace": "abc"}


async def test_a_resumed_subscription_the_host_drops_while_its_server_starts_is_not_taken_again(
    tmp_path: Path,
) -> None:
    """A relay resumes a session subscribed to two URIs of a server still starting (held at its
    start until a file exists, here), whose turn another host's subscription holds; the host
    unsubscribes from one before the server runs. Once it runs, that URI is not subscribed behind
    the host's back, and the relay's set (told it lost the URI) stays the session's. Before, the
    re-take waiting for its turn took it all the same, and the host was sent its updates."""
    gate = tmp_path / "gate"
    config = tmp_path / "config.toml"
    script = f'while [ ! -e "{gate}" ]; do sleep 0.05; done; exec "$0" -m mcpd.testing.fullserver'
    config.write_text(
        f'[servers.gated]\ncommand = "sh"\nargs = {json.dumps(["-c", script, sys.executable])}\n'
    )
    dropped, kept, other_uri = (f"mcpd://gated/full://r/{index}" for index in range(3))
    async with running_daemon(config, wait_ready=False) as running:
        await running.wait_for("index.updated", timeout=60)
        other = await peer(running)
        # The other host's subscription waits for the server to run, holding its turn: the resumed
        # ones are taken again after it.
        await anyio.to_thread.run_sync(lambda: other.request(1, "initialize", initialize("2025-06-18")))
        subscribe = {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": other_uri}}
        other.send(json.dumps(subscribe).encode())
        await anyio.to_thread.run_sync(lambda: other.request(3, "ping"))
        resumed = SessionState(
            initialize=InitializeParams(), subscribed=[dropped, kept], subscription_deltas=True
        )
        host = await peer(running, resumed)
        try:
            told = {dropped: None, kept: None}
            answer = await anyio.to_thread.run_sync(
                lambda: host.request(1, "resources/unsubscribe", {"uri": dropped})
            )
            assert "result" in answer, answer
            relay_subscriptions(host, told)
            assert list(told) == [kept]
            mark = len(running.events)
            gate.touch()
            await running.wait_for(
                "resource.subscribed", server="gated", uri="full://r/1", after=mark, timeout=60
            )
            await anyio.to_thread.run_sync(lambda: host.request(2, "ping"))
            relay_subscriptions(host, told)
        finally:
            host.channel.close()
            other.channel.close()
    taken = sorted(e["uri"] for e in running.events[mark:] if e.get("event") == "resource.subscribed")
    assert taken == ["full://r/1", "full://r/2"], taken
    assert list(told) == [kept]


def read_answers(host: Peer, answered: dict[int, dict[str, Any]], ids: set[int]) -> None:
    """Add the answers that come to ``answered`` (by id, in whatever order) until it has ``ids``
    (notifications kept in ``seen``)."""
    while not ids <= answered.keys():
        answer = host.next_answer()
        answered[answer["id"]] = answer


async def test_a_hosts_subscriptions_sent_without_waiting_take_effect_in_the_order_sent(
    tmp_path: Path,
) -> None:
    """While the server holds a host's subscribe (of r/1), the host sends subscribe r/0 and
    unsubscribe r/0 without waiting, and subscribe r/1 again, which it cancels. The relay hears of
    r/1 only with the server's answer, and of r/0 never; the server ends subscribed to r/1 alone.
    Before, the unsubscribe found nothing yet to drop (its subscribe waited for the server's turn),
    which then took r/0 behind the host's back; and the cancelled subscribe told the relay r/1 was
    added before the server answered."""
    gate = tmp_path / "gate"
    config = tmp_path / "config.toml"
    config.write_text(fullserver_toml("full", "--hold", str(gate)))
    r0, r1 = "mcpd://full/full://r/0", "mcpd://full/full://r/1"
    async with running_daemon(config) as running:
        await running.wait_for("server.state", server="full", new="running", timeout=120)
        host = await peer(running, SessionState(subscription_deltas=True))
        try:
            await anyio.to_thread.run_sync(lambda: host.request(1, "initialize", initialize("2025-06-18")))
            gate.touch()
            async with connect(running.socket) as client:

                async def server_says(uri: str) -> Any:
                    return json.loads(
                        (await client.read_resource(f"mcpd://full/{uri}")).contents[0].text or ""
                    )

                def send(request_id: int | None, method: str, params: dict[str, Any]) -> None:
                    message = {"jsonrpc": "2.0", "method": method, "params": params}
                    host.send(
                        json.dumps(message if request_id is None else {**message, "id": request_id}).encode()
                    )

                send(2, "resources/subscribe", {"uri": r1})
                with anyio.fail_after(30):
                    while await server_says("full://held") != 1:
                        await anyio.sleep(0.02)
                send(3, "resources/subscribe", {"uri": r0})
                send(4, "resources/unsubscribe", {"uri": r0})
                send(5, "resources/subscribe", {"uri": r1})
                answered: dict[int, dict[str, Any]] = {}
                # Round trips to the server: by their answers, the requests sent before are under
                # way (a request cancelled before it began would never have run), then cancelled.
                held = {"uri": "mcpd://full/full://held"}
                send(6, "resources/read", held)
                await anyio.to_thread.run_sync(lambda: read_answers(host, answered, {6}))
                send(None, "notifications/cancelled", {"requestId": 5})
                send(7, "resources/read", held)
                await anyio.to_thread.run_sync(lambda: read_answers(host, answered, {6, 7}))
                told: dict[str, None] = {}
                relay_subscriptions(host, told)
                assert told == {}, "told before the server answered"
                gate.unlink()
                await anyio.to_thread.run_sync(lambda: read_answers(host, answered, {2, 3, 4, 6, 7}))
                relay_subscriptions(host, told)
                assert all("result" in answer for answer in answered.values()), answered
                assert list(told) == [r1]
                with anyio.fail_after(30):
                    while await server_says("full://held") != 0:
                        await anyio.sleep(0.02)
                assert await server_says("full://subscribed") == ["full://r/1"]
        finally:
            host.channel.close()


class _WhereHandled:
    """A host session that notes each message and whether a task handled it (None: a read callback)."""

    def __init__(self) -> None:
        self.opened = anyio.Event()
        self.handled: list[tuple[bytes, bool]] = []

    def receive(self, data: bytes) -> None:
        self.handled.append((data, asyncio.current_task() is not None))

    @contextlib.asynccontextmanager
    async def open_session(self, *_args: object, **_options: object) -> AsyncIterator[_WhereHandled]:
        self.opened.set()
        yield self


async def test_a_hosts_message_alone_in_a_read_is_handled_in_the_read_callback() -> None:
    """A relay's message that arrives alone while the connection's reader waits is handled in the
    socket's read callback, as the RPC server's plain requests are (``FrameStream.express``), not an
    event-loop iteration later by the reading task; messages read together are handled by the task,
    in the order they came."""
    session = _WhereHandled()
    upgrade = functools.partial(front_socket.serve_socket, cast(Hosts, session))
    rpc = RpcServer(MethodTable[None](), None, upgrades={front_socket.MODE: upgrade})
    directory = Path(tempfile.mkdtemp(prefix="mcpd-f", dir="/tmp"))
    relay = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(rpc.serve, endpoint.open_listener(directory / "s.sock"))
            relay.connect(str(directory / "s.sock"))
            hello_params = HelloParams(protocol=PROTOCOL_VERSION, client="relay", mode=front_socket.MODE)
            relay.sendall(request(1, "hello", hello_params))
            with anyio.fail_after(10):
                # Opened by the reading task, which goes on to wait for the next read without a pause.
                await session.opened.wait()
                relay.sendall(framing.frame(b'{"n":1}'))
                while len(session.handled) < 1:
                    await asyncio.sleep(0)
                relay.sendall(framing.frame(b'{"n":2}') + framing.frame(b'{"n":3}'))
                while len(session.handled) < 3:
                    await asyncio.sleep(0)
            tg.cancel_scope.cancel()
    finally:
        relay.close()
        shutil.rmtree(directory, ignore_errors=True)
    assert session.handled == [(b'{"n":1}', False), (b'{"n":2}', True), (b'{"n":3}', True)]


async def test_a_server_degraded_by_tool_calls_that_hang_is_still_preconnected(tmp_path: Path) -> None:
    """A host session that asks for a server (``--connect``, ``?connect=``) while that server is
    ``degraded`` only because tool calls hung, its handshake done and its pings answered, is given
    its tools. Before, preconnect waited for ``running``, which such a server reaches only when a
    tool call is answered: the host, which never saw its tools, could not make one."""
    path = tmp_path / "config.toml"
    settings = {"call_timeout": 0.5, "unhealthy_after": 1, "ping_interval": 0.2, "ping_timeout": 2}
    path.write_text(fixture_toml("tools", **settings))
    async with running_daemon(path) as daemon, connect(daemon.socket) as client:
        with pytest.raises(CallTimeout):
            await client.request(_wire.tools_call("tools__sleep", {"seconds": 30}))
        (status,) = (await client.request(_wire.status())).servers
        assert status.state == "degraded"
        host = await peer(daemon, SessionState(preconnect=["tools"]))

        def tools() -> list[str]:
            host.request(1, "initialize", initialize("2025-06-18"))
            host.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
            listed: list[str] = []
            for request_id in range(2, 102):  # 10 s
                listed = [t["name"] for t in host.request(request_id, "tools/list")["result"]["tools"]]
                if "tools__echo" in listed:
                    break
                time.sleep(0.1)
            return listed

        try:
            assert "tools__echo" in await anyio.to_thread.run_sync(tools)
        finally:
            host.channel.close()
