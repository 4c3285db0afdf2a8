"""mcpd's own session to a stdio child (mcpd.supervisor.stdio_session), against a scripted server:
what it answers to the server's own requests, and what it makes of what it cannot use."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog

from mcpd.config.model import ServerConfig
from mcpd.memory import Reclaimer
from mcpd.model.logs import LogMessage
from mcpd.model.requests import ServerReply
from mcpd.model.resources import Surface
from mcpd.model.servers import ServerInfo
from mcpd.model.tools import ToolInfo
from mcpd.supervisor.logring import MAX_LINE
from mcpd.supervisor.server_asks import MAX_SERVER_REQUESTS
from mcpd.supervisor.session import Malformed, Refused, SessionHooks, handshake
from mcpd.supervisor.stdio import open_stdio_child
from mcpd.supervisor.stdio_session import StdioSession, open_stdio_session
from mcpd.testing import rss_mib

pytestmark = pytest.mark.anyio

ASKED = MAX_SERVER_REQUESTS + 4

SCRIPT = f"""
import json, sys
received = open(sys.argv[1], "a")
version = sys.argv[2]

def send(message):
    sys.stdout.write(json.dumps({{"jsonrpc": "2.0", **message}}) + "\\n")
    sys.stdout.flush()

for line in sys.stdin:
    received.write(line)
    received.flush()
    message = json.loads(line)
    method = message.get("method")
    if method == "initialize" and version == "hang":
        continue
    if method == "initialize":
        info = {{"name": "s", "version": "1"}}
        result = {{"protocolVersion": version, "capabilities": {{}}, "serverInfo": info}}
        send({{"id": message["id"], "result": result}})
    elif method == "notifications/initialized":
        print("a banner, not JSON-RPC", flush=True)
        print(json.dumps({{"level": 30, "msg": "a structured log line"}}), flush=True)
        send({{"id": "s", "method": "sampling/createMessage", "params": {{"messages": []}}}})
        send({{"method": "notifications/message", "params": {{"level": "info", "data": {{"k": 1}}}}}})
        send({{"id": "p", "method": "ping"}})
        send({{"id": "u", "method": "no/such/method"}})
        for i in range({ASKED}):
            send({{"id": i, "method": "roots/list"}})
        send({{"id": 1, "method": "roots/list"}})
        send({{"method": "notifications/cancelled", "params": {{"requestId": 0}}}})
    elif method == "ping":
        send({{"id": message["id"], "error": {{"code": -1}}}})
    elif method == "tools/list":
        send({{"id": message["id"], "result": {{"tools": []}}}})
"""


@contextlib.asynccontextmanager
async def session_of(config: ServerConfig, hooks: SessionHooks) -> AsyncIterator[StdioSession]:
    """A child of ``config`` and mcpd's session with it."""
    async with open_stdio_child(config) as (child, lines), open_stdio_session(child, lines, hooks) as session:
        yield session


def scripted(tmp_path: Path, version: str) -> tuple[ServerConfig, Path]:
    script = tmp_path / "server.py"
    script.write_text(SCRIPT)
    received = tmp_path / "received.jsonl"
    received.touch()
    return ServerConfig(
        name="scripted", command=sys.executable, args=(str(script), str(received), version)
    ), received


def sent(received: Path) -> list[dict[str, Any]]:
    """What mcpd wrote to the server."""
    return [json.loads(line) for line in received.read_text().splitlines()]


def answers(received: Path) -> dict[Any, dict[str, Any]]:
    """The responses mcpd wrote to the server, by id."""
    return {m["id"]: m for m in sent(received) if "method" not in m}


async def test_the_servers_own_requests_are_answered_bounded_and_cancellable(tmp_path: Path) -> None:
    """A ping is answered, an unknown method refused, a request without the params its method needs
    refused; at most MAX_SERVER_REQUESTS of the server's requests wait on hosts at once (the rest are
    refused at once); an id sent again while its request runs gets one answer, not two; one the
    server cancels gets no answer; a host's answer of the wrong shape reaches the server as an error;
    a log message whose data is not a string arrives as its JSON; lines that are not JSON-RPC (text,
    a JSON log line) are counted and skipped; an error reply without a message is ``Malformed``."""
    config, received = scripted(tmp_path, "2025-06-18")
    release = anyio.Event()
    cancelled: list[bool] = []
    logged: list[LogMessage] = []

    async def ask(method: str, params: dict[str, Any]) -> ServerReply:
        try:
            await release.wait()
        except anyio.get_cancelled_exc_class():
            cancelled.append(True)
            raise
        return ServerReply(result={"not": "roots"})

    hooks = SessionHooks(lambda: None, lambda: None, ask=ask, log=logged.append)
    async with session_of(config, hooks) as session:
        with anyio.fail_after(30):
            await handshake(session)
            refused_at_once = {"p", "u", "s", *range(MAX_SERVER_REQUESTS, ASKED)}
            while not refused_at_once <= answers(received).keys() or not cancelled:
                await anyio.sleep(0.02)
            release.set()
            while not set(range(1, MAX_SERVER_REQUESTS)) <= answers(received).keys():
                await anyio.sleep(0.02)
            with pytest.raises(Malformed, match="ping"):
                await session.ping()
        assert session.garbage_lines == 2
    assert [m["id"] for m in sent(received) if "method" not in m].count(1) == 1
    got = answers(received)
    assert got["p"]["result"] == {}
    assert got["u"]["error"]["code"] == -32601
    assert got["s"]["error"]["code"] == -32602 and "maxTokens" in got["s"]["error"]["message"]
    assert {got[i]["error"]["code"] for i in range(MAX_SERVER_REQUESTS, ASKED)} == {-32012}
    assert 0 not in got
    assert {got[i]["error"]["code"] for i in range(1, MAX_SERVER_REQUESTS)} == {-32603}
    assert "not a valid result" in got[1]["error"]["message"]
    assert logged == [LogMessage(level="info", data={"k": 1})]


async def test_a_protocol_revision_mcpd_does_not_speak_fails_the_handshake(tmp_path: Path) -> None:
    """A server that answers initialize with a revision mcpd does not know is not taken as a server."""
    config, _received = scripted(tmp_path, "1999-01-01")
    hooks = SessionHooks(lambda: None, lambda: None)
    async with session_of(config, hooks) as session:
        with anyio.fail_after(30), pytest.raises(Malformed, match="1999-01-01"):
            await handshake(session)


async def test_an_initialize_that_times_out_is_not_cancelled(tmp_path: Path) -> None:
    """MCP forbids cancelling ``initialize``: a handshake that times out sends no cancellation (a
    ping sent after it shows what was written: a cancellation would come before the ping)."""
    config, received = scripted(tmp_path, "hang")
    hooks = SessionHooks(lambda: None, lambda: None)
    async with session_of(config, hooks) as session:
        with pytest.raises(TimeoutError), anyio.fail_after(1):
            await handshake(session)
        with anyio.fail_after(30), pytest.raises(Malformed):
            await session.ping()
    assert [m.get("method") for m in sent(received)] == ["initialize", "ping"]


CANNED = """
import json, sys
answers = json.load(open(sys.argv[1]))
for line in sys.stdin:
    message = json.loads(line)
    if "id" in message:
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": answers[message["method"]]}
        sys.stdout.write(json.dumps(answer) + "\\n")
        sys.stdout.flush()
"""


async def canned_handshake(
    tmp_path: Path, answers: dict[str, Any]
) -> tuple[ServerInfo, tuple[ToolInfo, ...], Surface]:
    """The handshake with a server that gives ``answers`` (method -> result) as they are."""
    (tmp_path / "answers.json").write_text(json.dumps(answers))
    (tmp_path / "canned.py").write_text(CANNED)
    config = ServerConfig(
        name="canned",
        command=sys.executable,
        args=(str(tmp_path / "canned.py"), str(tmp_path / "answers.json")),
    )
    hooks = SessionHooks(lambda: None, lambda: None)
    async with session_of(config, hooks) as session:
        with anyio.fail_after(30):
            return await handshake(session)


async def test_answers_are_read_as_leniently_as_the_sdk_read_them(tmp_path: Path) -> None:
    """Nulls where a string may be absent, a size sent as a float: a server the SDK's models took is
    taken. Tool annotations keep the hints MCP defines, as the SDK's model did, and nothing else: a
    key a server adds must not change the tool's pinned definition."""
    tool = {
        "name": "t",
        "inputSchema": {"type": "object"},
        "description": None,
        "annotations": {"readOnlyHint": True, "title": None, "x-vendor": {"a": 1}},
    }
    answers = {
        "initialize": {
            "protocolVersion": "2025-03-26",
            "capabilities": {"resources": {}},
            "serverInfo": {"name": "s", "version": "1", "title": None},
            "instructions": None,
        },
        "tools/list": {"tools": [tool]},
        "resources/list": {"resources": [{"uri": "x://a", "name": "a", "size": 1024.0, "mimeType": None}]},
        "resources/templates/list": {"resourceTemplates": []},
    }
    info, tools, surface = await canned_handshake(tmp_path, answers)
    assert info.title is None and info.instructions is None
    assert tools[0].description == "" and tools[0].annotations == {"readOnlyHint": True}
    assert surface.resources[0].size == 1024 and surface.resources[0].mime_type is None


TOGETHER = """
import json, sys
refusals = json.loads(sys.argv[1])
hold_all = sys.argv[2] == "hold"
lists = {
    "tools/list": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]},
    "resources/list": {"resources": [{"uri": "x://a", "name": "a"}]},
    "resources/templates/list": {"resourceTemplates": []},
    "prompts/list": {"prompts": [{"name": "p"}]},
}
held = []

def answer(message):
    method = message["method"]
    if method in refusals:
        reply = {"error": {"code": refusals[method], "message": method + " refused"}}
    elif method == "initialize":
        said = {"tools": {}, "resources": {}, "prompts": {}}
        info = {"name": "s", "version": "1"}
        reply = {"result": {"protocolVersion": "2025-06-18", "capabilities": said, "serverInfo": info}}
    else:
        reply = {"result": lists[method]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], **reply}) + "\\n")
    sys.stdout.flush()

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    if message["method"] not in lists or (not hold_all and message["method"] in refusals):
        answer(message)
        continue
    held.append(message)
    if len(held) == len(lists) and hold_all:
        for waiting in reversed(held):  # the last asked is answered first
            answer(waiting)
"""


@contextlib.asynccontextmanager
async def together_session(
    tmp_path: Path, refusals: dict[str, int], hold: str
) -> AsyncIterator[StdioSession]:
    """A session to a server that declares tools, resources and prompts and refuses the lists in
    ``refusals`` (method -> error code). ``hold="hold"``: it answers no list until it has been asked
    all four, then the last asked first; otherwise it refuses at once and never answers the other
    lists."""
    (tmp_path / "together.py").write_text(TOGETHER)
    config = ServerConfig(
        name="together",
        command=sys.executable,
        args=(str(tmp_path / "together.py"), json.dumps(refusals), hold),
    )
    async with session_of(config, SessionHooks(lambda: None, lambda: None)) as session:
        yield session


async def test_the_lists_after_initialize_are_asked_together(tmp_path: Path) -> None:
    """tools/list, resources/list, resources/templates/list and prompts/list are in flight at once
    (the server answers none until it holds all four), not one round trip after the other; each
    result lands in its place, whatever order the answers came in. A list the server declared but
    does not serve (-32601) is empty, as before."""
    async with together_session(tmp_path, {}, "hold") as session:
        with anyio.fail_after(30):
            info, tools, surface = await handshake(session)
    assert info.name == "s" and [t.name for t in tools] == ["t"]
    assert [r.uri for r in surface.resources] == ["x://a"] and [p.name for p in surface.prompts] == ["p"]
    async with together_session(tmp_path, {"prompts/list": -32601}, "hold") as session:
        with anyio.fail_after(30):
            _, tools, surface = await handshake(session)
    assert [t.name for t in tools] == ["t"] and surface.prompts == () and len(surface.resources) == 1


@pytest.mark.parametrize(
    ("refusals", "hold", "failed"),
    [
        # prompts/list is refused first, tools/list after: the error is tools/list's, as when
        # tools/list was asked (and refused) before any other list
        ({"prompts/list": -32000, "tools/list": -32001}, "hold", -32001),
        ({"resources/templates/list": -32002}, "hold", -32002),
        # refused at once while the other lists never answer: the handshake fails at once
        ({"tools/list": -32003}, "answer", -32003),
    ],
)
async def test_a_refused_list_fails_the_handshake_as_one_asked_after_the_other_did(
    tmp_path: Path, refusals: dict[str, int], hold: str, failed: int
) -> None:
    """The lists asked together fail the handshake with the error the first of them (tools, resources,
    templates, prompts) to fail, unwrapped, whatever order the errors came in; a refused tools/list
    fails it without waiting for lists that never answer."""
    async with together_session(tmp_path, refusals, hold) as session:
        with anyio.fail_after(30), pytest.raises(Refused) as refused:
            await handshake(session)
    assert refused.value.code == failed


RAW = """
import json, sys
answers = json.load(open(sys.argv[1]))
sent = {}
for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    if "id" not in message or method not in answers:
        continue
    turn = sent.get(method, 0)
    sent[method] = turn + 1
    token = str(message.get("params", {}).get("_meta", {}).get("progressToken"))
    lines = answers[method][min(turn, len(answers[method]) - 1)]
    text = "".join(lines).replace("{id}", json.dumps(message["id"])).replace("{token}", json.dumps(token))
    sys.stdout.buffer.write(text.encode("latin-1"))  # one write: what follows a bad line comes with it
    sys.stdout.flush()
"""


def reply(result: str) -> str:
    return '{"jsonrpc": "2.0", "id": {id}, "result": ' + result + "}\n"


DEEP = "[" * 3000 + "]" * 3000
"""Nested deeper than Python's recursion limit."""


def log_message(data: str) -> str:
    return (
        '{"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": '
        + data
        + "}}\n"
    )


async def test_what_a_server_cannot_encode_ends_one_request_not_the_session(tmp_path: Path) -> None:
    """Invalid UTF-8 inside a string and nesting past the recursion limit, in replies and in
    notifications: the request it answers fails at once (``Malformed``), a notification is skipped,
    the reply that follows in the same read still arrives, and the session goes on. A cursor the
    server repeats ends its list (each tool once), and a declared list the server does not serve
    (-32601) is empty rather than a failed handshake. A batch (2025-03-26) is taken apart: the
    reply in it answers its request, the notification in it is heard."""
    tool = '{"name": "t", "inputSchema": {"type": "object"}}'
    answers = {
        "initialize": [
            reply(
                '{"protocolVersion": "2025-06-18", "capabilities": {"resources": {}},'
                ' "serverInfo": {"name": "s", "version": "1"}}'
            )
        ],
        "tools/list": [reply('{"tools": [' + tool + '], "nextCursor": "again"}')],
        "resources/list": [reply('{"resources": []}')],
        "resources/templates/list": [
            '{"jsonrpc": "2.0", "id": {id}, "error": {"code": -32601, "message": "no"}}\n'
        ],
        "tools/call": [
            '{"jsonrpc": "2.0", "method": "notifications/progress",'
            ' "params": {"progressToken": {token}, "progress": 1, "message": "caf\xe9"}}\n'
            + reply('{"content": [{"type": "text", "text": "fine"}]}')
        ],
        "ping": [
            log_message('"caf\xe9"') + log_message(DEEP) + reply("{}"),
            '[{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, ' + reply("{}")[:-1] + "]\n",
        ],
        "resources/read": [reply('{"contents": ' + DEEP + "}")],
        "prompts/get": [
            reply('{"messages": [{"role": "user", "content": {"type": "text", "text": "caf\xe9"}}]}')
        ],
    }
    (tmp_path / "answers.json").write_text(json.dumps(answers))
    (tmp_path / "raw.py").write_text(RAW)
    config = ServerConfig(
        name="raw", command=sys.executable, args=(str(tmp_path / "raw.py"), str(tmp_path / "answers.json"))
    )
    progress: list[float] = []
    changed = anyio.Event()
    hooks = SessionHooks(changed.set, lambda: None)
    async with session_of(config, hooks) as session:
        with anyio.fail_after(10):
            _info, tools, surface = await handshake(session)
            assert [t.name for t in tools] == ["t"] and surface.templates == ()
            result = await session.call_tool(
                "t", {}, anyio.current_time() + 10, lambda *p: progress.append(p[0])
            )
            assert result.content == [{"type": "text", "text": "fine"}] and progress == []
            await session.ping()
            with pytest.raises(Malformed):
                await session.read_resource("x://a")
            with pytest.raises(Malformed):
                await session.get_prompt("p", {})
            assert not changed.is_set()
            await session.ping()
            await changed.wait()


async def test_an_invalid_item_leaves_the_rest_of_its_list(tmp_path: Path) -> None:
    """A tool whose `inputSchema` is `true`, missing, or holds an integer beyond 64 bits, a resource
    without a uri, a prompt named 7:
    each is left out (and logged), the valid ones listed; one bad item used to fail the whole
    handshake, and the server went round degraded and backoff for ever."""
    good = {"name": "ok", "inputSchema": {"type": "object"}}
    answers = {
        "initialize": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"resources": {}, "prompts": {}, "tools": {}},
            "serverInfo": {"name": "s", "version": "1"},
        },
        "tools/list": {
            "tools": [
                {"name": "bad", "inputSchema": True},
                good,
                {"name": "no-schema"},
                # msgpack cannot carry it: it failed the socket's tools.list of every server
                {"name": "huge", "inputSchema": {"type": "object", "maximum": 2**128 - 1}},
            ]
        },
        "resources/list": {"resources": [{"name": "no uri"}, {"uri": "x://a", "name": "a"}]},
        "resources/templates/list": {"resourceTemplates": [{"name": "t"}]},
        "prompts/list": {"prompts": [{"name": 7}, {"name": "p"}]},
    }
    with structlog.testing.capture_logs() as logs:
        _, tools, surface = await canned_handshake(tmp_path, answers)
    assert [t.name for t in tools] == ["ok"]
    assert [r.uri for r in surface.resources] == ["x://a"] and surface.templates == ()
    assert [p.name for p in surface.prompts] == ["p"]
    invalid = [(e["list"], e["item"]) for e in logs if e["event"] == "server.list_item_invalid"]
    assert invalid == [
        ("tools/list", 0),
        ("tools/list", 2),
        ("tools/list", 3),
        ("resources/list", 0),
        ("resources/templates/list", 0),
        ("prompts/list", 0),
    ]


PRELUDE = """
import json, sys

def send(message):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\\n")
    sys.stdout.flush()

def initialized(message):
    # Answers initialize; True if that is what ``message`` was.
    if message.get("method") != "initialize":
        return False
    result = {"protocolVersion": "2025-06-18", "capabilities": {}}
    send({"id": message["id"], "result": {**result, "serverInfo": {"name": "s", "version": "1"}}})
    return True
"""


def script_server(tmp_path: Path, name: str, script: str, *args: str) -> ServerConfig:
    """A stdio server running ``script`` (which ``PRELUDE`` may start)."""
    (tmp_path / f"{name}.py").write_text(script)
    return ServerConfig(name=name, command=sys.executable, args=(str(tmp_path / f"{name}.py"), *args))


CHATTY = """
import json, sys, time
results = {
    "initialize": {
        "protocolVersion": "2025-06-18",
        "capabilities": {"logging": {}},
        "serverInfo": {"name": "s", "version": "1"},
    },
    "tools/list": {"tools": []},
    "tools/call": {"content": []},
}
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    said = [{"method": "notifications/message", "params": {"level": "info", "data": i}} for i in range(5)]
    said = said if message["method"] == "tools/call" else []
    for m in [*said, {"id": message["id"], "result": results[message["method"]]}]:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **m}) + "\\n")
        sys.stdout.flush()
        time.sleep(float(sys.argv[1]))
"""


@pytest.mark.parametrize("pause", ["0", "0.00003"])
async def test_a_calls_log_messages_are_taken_before_its_answer(tmp_path: Path, pause: str) -> None:
    """A server that logs while it runs a call, then answers: by the time the call returns, its log
    messages have been passed on, so a host sees them before the answer. The answer used to overtake
    them while they waited in the session's queue, or while the stdout reader held the last one (1 to
    4 of 300 calls per run, with each message written on its own, ``pause`` seconds apart)."""
    config = script_server(tmp_path, "chatty", CHATTY, pause)
    logged: list[LogMessage] = []
    hooks = SessionHooks(lambda: None, lambda: None, log=logged.append)
    async with session_of(config, hooks) as session:
        with anyio.fail_after(30):
            await handshake(session)
            for call in range(1, 301):
                await session.call_tool("t", {}, anyio.current_time() + 10, None)
                assert len(logged) == 5 * call, f"call {call}"
    assert [m.data for m in logged[:5]] == [0, 1, 2, 3, 4]


LENIENT = """
import json, sys
hung = []
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method, name = message["method"], (message.get("params") or {}).get("name")
    if method == "initialize":
        info = {"name": "s", "version": "1"}
        result = json.dumps({"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": info})
    elif method == "tools/list":
        result = '{"tools": []}'
    elif name == "hang":
        hung.append(message["id"])
        continue
    elif name == "cut":  # a JavaScript string cut in the middle of an emoji
        result = '{"content": [{"type": "text", "text": "cut \\\\ud83d"}]}'
    else:  # too deep to decode, and opening with the id of the call that hangs
        result = '{"structuredContent": {"id": "%s"}, "x": %s}' % (hung[-1], "[" * 5000 + "]" * 5000)
    # The TypeScript SDK's order: the id last.
    sys.stdout.write('{"result": %s, "jsonrpc": "2.0", "id": %s}\\n' % (result, json.dumps(message["id"])))
    sys.stdout.flush()
"""


async def test_replies_msgspec_refuses_are_mended_or_end_their_own_call(tmp_path: Path) -> None:
    """A reply written in the TypeScript SDK's order (its id last): with a lone surrogate escape (a
    JavaScript string cut mid-emoji), the text arrives with U+FFFD in its place; too deep to decode,
    it ends its own call at once as ``Malformed`` (it waited out its deadline), and not another call
    whose id it echoes at its start."""
    config = script_server(tmp_path, "lenient", LENIENT)
    hooks = SessionHooks(lambda: None, lambda: None)
    async with session_of(config, hooks) as session:
        with anyio.fail_after(20):
            await handshake(session)
            cut = await session.call_tool("cut", {}, anyio.current_time() + 60, None)
            assert cut.content == [{"type": "text", "text": "cut \ufffd"}]
            async with anyio.create_task_group() as tg:
                hanging = anyio.Event()

                async def hang() -> None:
                    with pytest.raises(TimeoutError):
                        await session.call_tool("hang", {}, anyio.current_time() + 3, None)
                    hanging.set()

                tg.start_soon(hang)
                await anyio.sleep(0.5)  # the server has it
                with pytest.raises(Malformed):
                    await session.call_tool("deep", {}, anyio.current_time() + 60, None)
                assert not hanging.is_set()


GLUED = (
    PRELUDE
    + """
for line in sys.stdin:
    message = json.loads(line)
    if initialized(message) or "id" not in message:
        continue
    print('DEBUG {"not": "a message"}', flush=True)
    print("Loading... ", end="", flush=True)  # no newline: the reply is glued to it
    if message["params"]["name"] == "last":  # the TypeScript SDK's order: the id closes the line
        content = [{"type": "text", "text": "loaded"}]
        print(json.dumps({"jsonrpc": "2.0", "result": {"content": content}, "id": message["id"]}), flush=True)
    else:
        send({"id": message["id"], "result": {"content": [{"type": "text", "text": "loaded"}]}})
"""
)


async def test_a_reply_glued_to_text_printed_without_a_newline_is_read(tmp_path: Path) -> None:
    """Text a server prints with no newline after it (a progress word) starts the line of its next
    message: the message is still read (the call waited out its deadline; with its id last, it
    failed as malformed), the text shown as not JSON-RPC; a line that holds no message is one line
    of garbage, JSON in it or not."""
    config = script_server(tmp_path, "glued", GLUED)
    shown: list[str] = []
    hooks = SessionHooks(lambda: None, lambda: None, stdout=shown.append)
    async with session_of(config, hooks) as session:
        with anyio.fail_after(20):
            await session.initialize()
            for tool in ("first", "last"):
                result = await session.call_tool(tool, {}, anyio.current_time() + 10, None)
                assert result.content == [{"type": "text", "text": "loaded"}]
        assert session.garbage_lines == 4
    assert shown == 2 * ['[not JSON-RPC] DEBUG {"not": "a message"}', "[not JSON-RPC] Loading..."]


LOGS_UPSTREAM = (
    PRELUDE
    + """
PARSE_ERROR = {"code": -32700, "message": "Parse error"}
calls = 0
for line in sys.stdin:
    message = json.loads(line)
    if initialized(message) or "id" not in message:
        continue
    # A proxy's log, on stdout, of what its upstream answered: numbered as it numbers (the same
    # number as ours, ``mcpd-N``), or an error without id; then its own answer.
    calls += 1
    number = int(str(message["id"]).rpartition("-")[2])
    upstream = {"content": [{"type": "text", "text": "the upstream's"}]}
    said = {"id": number, "result": upstream} if calls == 1 else {"id": None, "error": PARSE_ERROR}
    print("upstream said: " + json.dumps({"jsonrpc": "2.0", **said}), flush=True)
    send({"id": message["id"], "result": {"content": [{"type": "text", "text": "its own"}]}})
"""
)


async def test_a_message_in_a_log_line_answers_no_request_by_a_number_or_no_id(tmp_path: Path) -> None:
    """A log line on stdout quoting another party's reply (a proxy's upstream, numbered as it numbers,
    or its error without id): the call gets the server's own answer, which names it by its own id
    (before: the quoted reply was taken as the call's, as a server that made ``mcpd-N`` a number)."""
    config = script_server(tmp_path, "proxy", LOGS_UPSTREAM)
    hooks = SessionHooks(lambda: None, lambda: None)
    async with session_of(config, hooks) as session:
        with anyio.fail_after(20):
            await session.initialize()
            result = await session.call_tool("t", {}, anyio.current_time() + 10, None)
            assert result.content == [{"type": "text", "text": "its own"}]
            result = await session.call_tool("t", {}, anyio.current_time() + 10, None)
            assert result.content == [{"type": "text", "text": "its own"}]


FLOOD = (
    PRELUDE
    + """
for line in sys.stdin:
    message = json.loads(line)
    if not initialized(message) and message.get("method") == "tools/list":
        bad = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": 3}})
        sys.stdout.write((bad + "\\n") * 3000)
        send({"id": message["id"], "result": {"tools": []}})
"""
)


async def test_a_flood_of_bad_notifications_is_said_a_few_times(tmp_path: Path) -> None:
    """3,000 log messages that are not what MCP says (a level that is a number): the first ten are
    logged one by one, then one a thousand (each used to be a warning of its own)."""
    config = script_server(tmp_path, "flood", FLOOD)
    hooks = SessionHooks(lambda: None, lambda: None, log=lambda message: None)
    with structlog.testing.capture_logs() as logs:
        async with session_of(config, hooks) as session:
            with anyio.fail_after(30):
                await handshake(session)
    said = [entry["count"] for entry in logs if entry["event"] == "server.bad_notification"]
    assert said == [*range(1, 11), 1000, 2000, 3000]


NUMBERS_ONLY = (
    PRELUDE
    + """
for line in sys.stdin:
    message = json.loads(line)
    if not initialized(message) and "id" in message:  # a server that reads numeric ids only
        send({"id": None, "error": {"code": -32600, "message": "id must be an integer"}})
"""
)


async def test_an_error_the_server_could_not_tie_to_a_request_answers_the_one_waiting(tmp_path: Path) -> None:
    """JSON-RPC's error with a null id (a server that could not read our request's id): with one request
    waiting it can be no other's, and that call ends with the server's words at once, not at its
    deadline; with two waiting it could be either's, and both wait out their deadline. The daemon's
    log says each, and so does the server's own (``mcpd logs``), where the person debugging it looks."""
    config = script_server(tmp_path, "numbers", NUMBERS_ONLY)
    shown: list[str] = []
    hooks = SessionHooks(lambda: None, lambda: None, stdout=shown.append)

    async def times_out(session: StdioSession) -> None:
        with pytest.raises(TimeoutError):
            await session.call_tool("t", {}, anyio.current_time() + 1, None)

    with structlog.testing.capture_logs() as logs:
        async with session_of(config, hooks) as session:
            with anyio.fail_after(30):
                await session.initialize()
                with anyio.fail_after(5):
                    result = await session.call_tool("t", {}, anyio.current_time() + 20, None)
                assert result.refusal is not None
                assert (result.refusal.code, result.refusal.message) == (-32600, "id must be an integer")
                async with anyio.create_task_group() as tg:
                    tg.start_soon(times_out, session)
                    tg.start_soon(times_out, session)
    said = [entry for entry in logs if entry["event"] == "server.error_without_id"]
    assert [entry["answered"] for entry in said] == [True, False, False]
    assert "id must be an integer" in said[0]["error"]
    assert len(shown) == 3
    assert shown[0].startswith("[an error tied to no request] {") and "id must be an integer" in shown[0]


COERCING = (
    PRELUDE
    + """
for line in sys.stdin:
    message = json.loads(line)
    if initialized(message) or "id" not in message:
        continue
    number = message["id"].removeprefix("mcpd-")  # a server that keeps ids as numbers
    coerced = int(number) if message["method"] == "tools/call" else number
    send({"id": coerced, "result": {"content": [{"type": "text", "text": sys.argv[1]}], "tools": []}})
"""
)


async def test_a_reply_whose_id_the_server_made_a_number_answers_its_request(tmp_path: Path) -> None:
    """A server that answers ``mcpd-5`` as ``5`` (or ``"5"``): the request's number is ours alone, so the
    reply is its answer, at once (each used to wait out its deadline), and the daemon's log says so."""
    config = script_server(tmp_path, "coercing", COERCING, "answered")
    hooks = SessionHooks(lambda: None, lambda: None)
    with structlog.testing.capture_logs() as logs:
        async with session_of(config, hooks) as session:
            with anyio.fail_after(30):
                await session.initialize()
                assert await session.list_tools() == ()
                result = await session.call_tool("t", {}, anyio.current_time() + 20, None)
    assert result.content == [{"type": "text", "text": "answered"}]
    assert [entry["id"] for entry in logs if entry["event"] == "server.coerced_id"] == ["2", 3]


HUGE_LINES = (
    PRELUDE
    + """
for line in sys.stdin:
    message = json.loads(line)
    if not initialized(message) and message.get("method") == "notifications/initialized":
        for _ in range(3):
            sys.stdout.write("x" * 24 * 1024 * 1024 + "\\n")  # not JSON-RPC: read, logged, dropped
        sys.stdout.flush()
"""
)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS in /proc")
async def test_a_servers_huge_lines_are_given_back_once_it_is_quiet(tmp_path: Path) -> None:
    """Three 24 MiB lines on a server's stdout: the reclaimer hears of them (it collects once they
    stop; it heard only of clients' frames) and nothing holds the last one while the server is
    silent (the session's reader kept it until the next line), so the memory can go back. The
    server's log keeps their start, with one marker saying how much of each was cut."""
    config = script_server(tmp_path, "huge", HUGE_LINES)
    shown: list[str] = []
    hooks = SessionHooks(lambda: None, lambda: None, stdout=shown.append)
    collected = anyio.Event()

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == 2:
            collected.set()

    trim = ctypes.CDLL(None).malloc_trim
    before = rss_mib()
    gc.callbacks.append(on_gc)
    try:
        async with (
            anyio.create_task_group() as tg,
            session_of(config, hooks) as session,
        ):
            await tg.start(Reclaimer().run)
            with anyio.fail_after(20):
                await session.initialize()
                await collected.wait()
            trim(0)
            assert rss_mib() - before < 12
            tg.cancel_scope.cancel()
    finally:
        gc.callbacks.remove(on_gc)
    assert len(shown) == 3 and all(len(line) <= MAX_LINE for line in shown)
    kept = shown[0].count("x")  # the newline is among the bytes cut
    assert shown[0] == f"[not JSON-RPC] {'x' * kept} [... {24 * 1024 * 1024 + 1 - kept} more bytes cut]"


LATE_READER = (
    PRELUDE
    + """
lines = iter(sys.stdin)
for line in lines:
    message = json.loads(line)
    if initialized(message) or "id" not in message:
        continue
    if message["params"]["name"] != "slow":
        continue
    # Busy with this call until the next one arrives, and reads those before it meanwhile late.
    later = []
    while not later or '"next"' not in later[-1]:
        later.append(next(lines))
    send({"id": message["id"], "result": {"content": []}})
    for line in later:
        message = json.loads(line)
        if "id" not in message:
            continue
        if message["params"]["name"] == "unreadable":
            send({"id": None, "error": {"code": -32700, "message": "cannot parse that one"}})
        else:
            send({"id": message["id"], "result": {"content": [{"type": "text", "text": "mine"}]}})
"""
)


async def test_an_error_without_id_for_a_request_withdrawn_unread_answers_no_other(tmp_path: Path) -> None:
    """A server busy with a call reads the next lines late: a request it cannot parse, which we
    withdrew at its deadline before the server read it, then another. Its error with id null (for
    the withdrawn one) arrives while that other is our one request waiting: the other must still
    get its own answer, not the withdrawn one's error."""
    config = script_server(tmp_path, "late", LATE_READER)
    hooks = SessionHooks(lambda: None, lambda: None, stdout=lambda line: None)
    async with session_of(config, hooks) as session:
        with anyio.fail_after(30):
            await session.initialize()
            async with anyio.create_task_group() as tg:
                tg.start_soon(session.call_tool, "slow", {}, anyio.current_time() + 20, None)
                await anyio.wait_all_tasks_blocked()  # its request written
                with pytest.raises(TimeoutError):
                    await session.call_tool("unreadable", {}, anyio.current_time() + 0.5, None)
                result = await session.call_tool("next", {}, anyio.current_time() + 20, None)
    assert result.refusal is None, result.refusal
