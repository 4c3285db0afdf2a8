"""Requests from servers (sampling, elicitation, roots) reach the caller of the running tool call.

A real daemon runs the fixture server on stdio (``fx``: tool calls take the raw JSON-RPC
path) and on streamable HTTP (``remote``: the SDK path). Hosts are the MCP SDK's
``ClientSession`` behind a real ``mcpd bridge``; library callers are ``AsyncClient``s.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import msgspec
import pytest
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpd.client import Client
from mcpd.client.aio import connect
from mcpd.front.server_requests import ServerRequests
from mcpd.model.requests import (
    NOT_AVAILABLE,
    SAMPLING,
    TIMED_OUT,
    ClientCapabilities,
    ServerAsk,
    ServerReply,
    ServerRequest,
)
from mcpd.model.tools import ToolResult
from mcpd.supervisor.server_asks import MAX_SERVER_REQUESTS
from mcpd.testing import fixture_toml
from mcpd.testing.daemon import DaemonProcess, running_daemon
from mcpd.testing.remote import free_port, running_http_fixture

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DaemonProcess]:
    port = free_port()
    async with running_http_fixture("remote", port) as url:
        path = tmp_path_factory.mktemp("server-requests") / "config.toml"
        # fx served through the SDK too: these tests are of the SDK's server side asking, on both transports.
        path.write_text(fixture_toml("fx", "--sdk") + f"[servers.remote]\nurl = {json.dumps(url)}\n")
        async with running_daemon(path) as running:
            for name in ("fx", "remote"):
                await running.wait_for("server.state", server=name, new="running", timeout=120)
            yield running


# -- hosts: the SDK client behind a bridge --------------------------------------------------------


async def host_sampling(
    context: ClientRequestContext, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    content = params.messages[0].content
    prompt = content.text if isinstance(content, types.TextContent) else "?"
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=f"host says {prompt}"), model="host-llm"
    )


async def host_elicitation(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"answer": f"yes to {params.message}"})


async def host_roots(context: ClientRequestContext) -> types.ListRootsResult:
    root = types.Root.model_validate({"uri": "file:///home/user/project", "name": "project"})
    return types.ListRootsResult(roots=[root])


@asynccontextmanager
async def host(socket: Path, **callbacks: Any) -> AsyncIterator[ClientSession]:
    """An SDK host with ``callbacks`` (``sampling_callback`` ...) behind ``mcpd bridge --all``."""
    state = os.environ.get("XDG_STATE_HOME")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcpd", "bridge", "--socket", str(socket), "--all", "--no-autostart"],
        env={"XDG_STATE_HOME": state} if state else None,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write, **callbacks) as session:
        with anyio.fail_after(60):
            await session.initialize()
        yield session


async def host_call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> str:
    with anyio.fail_after(120):  # a guard against a hang, not a bound
        result = await session.call_tool(tool, arguments)
    assert isinstance(result, types.CallToolResult)
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


ALL_CALLBACKS = {
    "sampling_callback": host_sampling,
    "elicitation_callback": host_elicitation,
    "list_roots_callback": host_roots,
}


@pytest.mark.parametrize("server", ["fx", "remote"])
async def test_host_answers_what_the_server_asks_through_the_bridge(
    daemon: DaemonProcess, server: str
) -> None:
    """Sampling, elicitation and roots asked during a call reach the host that made it, and the
    host's answers reach the server (stdio's raw call path and HTTP's SDK path alike)."""
    async with host(daemon.socket, **ALL_CALLBACKS) as session:
        sampled = await host_call(session, f"{server}__ask", {"kind": "sampling", "text": "hi"})
        elicited = await host_call(session, f"{server}__ask", {"kind": "elicitation", "text": "ok?"})
        roots = await host_call(session, f"{server}__ask", {"kind": "roots"})
    assert sampled == "sampled (host-llm): host says hi"
    assert elicited == 'elicited: accept {"answer": "yes to ok?"}'
    assert roots == "roots: file:///home/user/project"


@pytest.mark.parametrize("server", ["fx", "remote"])
async def test_a_flood_of_server_requests_reaches_the_host_bounded(
    daemon: DaemonProcess, server: str
) -> None:
    """A server that asks the host many things at once: MAX_SERVER_REQUESTS of them wait on the
    host, the rest are refused at once (-32012), on stdio and on HTTP alike. This host never
    answers, so however the requests arrive, a bound that let more through would show here."""
    waiting = 0

    async def sampling(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        nonlocal waiting
        waiting += 1
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    asked = MAX_SERVER_REQUESTS + 6
    arguments = {"kind": "sampling", "count": asked, "wait": 2.0}
    async with host(daemon.socket, sampling_callback=sampling) as session:
        outcomes = json.loads(await host_call(session, f"{server}__ask_many", arguments))
    assert outcomes == {"no answer": MAX_SERVER_REQUESTS, "refused -32012": asked - MAX_SERVER_REQUESTS}
    assert waiting == MAX_SERVER_REQUESTS


LISTENER = """
import json, sys
heard = open(sys.argv[1], "a")
for line in sys.stdin:
    heard.write(line)
    heard.flush()
    message = json.loads(line)
    if "id" not in message:
        continue
    result = {"tools": []} if message["method"] == "tools/list" else {}
    if message["method"] == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "listener", "version": "1"}}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\\n")
    sys.stdout.flush()
"""


# Deprecated in the newest MCP revision (SEP-2577), still part of those mcpd speaks with servers.
@pytest.mark.filterwarnings("ignore:The roots capability is deprecated")
async def test_a_hosts_roots_change_reaches_the_servers(tmp_path: Path) -> None:
    """mcpd tells servers it supports roots with ``listChanged``: when a host says its roots changed,
    every live server hears ``notifications/roots/list_changed`` (and may ask again)."""
    script, heard = tmp_path / "listener.py", tmp_path / "heard.jsonl"
    script.write_text(LISTENER)
    heard.touch()
    config = tmp_path / "config.toml"
    args = json.dumps([str(script), str(heard)])
    config.write_text(f"[servers.listener]\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n")
    async with running_daemon(config) as running:
        await running.wait_for("server.state", server="listener", new="running", timeout=60)
        initialize = json.loads(heard.read_text().splitlines()[0])
        assert initialize["params"]["capabilities"]["roots"] == {"listChanged": True}
        async with host(running.socket, list_roots_callback=host_roots) as session:
            await session.send_roots_list_changed()
            with anyio.fail_after(30):
                while "notifications/roots/list_changed" not in heard.read_text():
                    await anyio.sleep(0.05)


async def test_host_without_the_capability_gets_the_server_a_clear_error(daemon: DaemonProcess) -> None:
    """A host that declared roots but not sampling: the server's sampling request is refused with
    METHOD_NOT_FOUND and a message naming the missing capability; roots still work."""
    async with host(daemon.socket, list_roots_callback=host_roots) as session:
        sampled = await host_call(session, "fx__ask", {"kind": "sampling"})
        roots = await host_call(session, "fx__ask", {"kind": "roots"})
    assert sampled.startswith(f"refused {NOT_AVAILABLE}: mcpd cannot pass sampling/createMessage from fx")
    assert "did not declare the sampling capability" in sampled
    assert roots == "roots: file:///home/user/project"


async def test_sampling_with_tools_needs_a_host_that_declared_it(daemon: DaemonProcess) -> None:
    """mcpd announces sampling with tools for every host; a host that declared plain sampling is
    not passed a request offering tools (the spec forbids it), and the server hears why."""
    async with host(daemon.socket, sampling_callback=host_sampling) as session:
        offered = await host_call(session, "fx__ask", {"kind": "sampling-tools"})
    assert offered.startswith(f"refused {NOT_AVAILABLE}: ")
    assert "did not declare the sampling.tools capability" in offered


# -- library callers -------------------------------------------------------------------------------


def text(result: ToolResult) -> str:
    return str(result.content[0]["text"])


async def test_client_library_callbacks_answer(daemon: DaemonProcess) -> None:
    """``connect(on_sampling=..., on_elicitation=..., roots=...)``: the callbacks get the server's
    requests (with the server's name) and their results go back; a raising callback is the error."""
    asked: list[ServerAsk] = []

    async def sample(ask: ServerAsk) -> dict[str, Any]:
        asked.append(ask)
        return {"role": "assistant", "content": {"type": "text", "text": "from the library"}, "model": "lib"}

    async def refuse(ask: ServerAsk) -> dict[str, Any]:
        raise PermissionError("the user said no")

    async with connect(
        daemon.socket,
        on_sampling=sample,
        on_elicitation=refuse,
        roots=["file:///srv", {"uri": "file:///tmp"}],
    ) as client:
        sampled = await client.call_tool("fx__ask", {"kind": "sampling", "text": "hi"})
        elicited = await client.call_tool("remote__ask", {"kind": "elicitation"})
        roots = await client.call_tool("remote__ask", {"kind": "roots"})
    assert text(sampled) == "sampled (lib): from the library"
    assert [(a.server, a.method) for a in asked] == [("fx", SAMPLING)]
    assert asked[0].params["messages"][0]["content"]["text"] == "hi"
    assert text(elicited) == "refused -32603: PermissionError: the user said no"
    assert text(roots) == "roots: file:///srv file:///tmp"


async def test_blocking_client_callbacks_answer(daemon: DaemonProcess) -> None:
    """The blocking ``Client`` takes plain callbacks, run while it waits for its call."""

    def sample(ask: ServerAsk) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": f"sync {ask.server}"}, "model": "s"}

    def call() -> tuple[ToolResult, ToolResult]:
        with Client(daemon.socket, on_sampling=sample, roots=["file:///data"]) as client:
            return (
                client.call_tool("fx__ask", {"kind": "sampling"}),
                client.call_tool("fx__ask", {"kind": "roots"}),
            )

    sampled, roots = await anyio.to_thread.run_sync(call)
    assert text(sampled) == "sampled (s): sync fx"
    assert text(roots) == "roots: file:///data"


async def test_client_library_without_callbacks_declares_nothing(daemon: DaemonProcess) -> None:
    """A client that gave no callback: the server hears that the caller cannot answer."""
    async with connect(daemon.socket) as client:
        result = await client.call_tool("fx__ask", {"kind": "elicitation"})
    assert text(result).startswith(f"refused {NOT_AVAILABLE}: ")
    assert "did not declare the elicitation capability" in text(result)


async def test_outside_a_call_the_server_gets_an_error(daemon: DaemonProcess) -> None:
    """A request sent after the call has ended finds no caller: the server gets the error (its
    stderr line says so), even though the caller could answer."""

    async def sample(ask: ServerAsk) -> dict[str, Any]:
        raise AssertionError("asked outside its call")

    after = len(daemon.events)
    async with connect(daemon.socket, on_sampling=sample) as client:
        assert text(await client.call_tool("fx__ask_later", {"kind": "sampling"})) == "will ask"
        line = await daemon.wait_for("server.stderr", server="fx", after=after)
    assert line["line"].startswith(f"asked later: refused {NOT_AVAILABLE}: mcpd cannot pass sampling")
    assert "no tool call to fx is in flight" in line["line"]


@pytest.mark.parametrize(("server", "exact"), [("remote", True), ("fx", False)])
async def test_which_caller_is_asked_with_two_calls_in_flight(
    daemon: DaemonProcess, server: str, exact: bool
) -> None:
    """A's call is in flight (its elicitation is being answered) when B, who cannot sample, calls a
    tool that samples. HTTP routes exactly: B is asked, and refuses. stdio cannot tell which call
    the request belongs to: nobody is asked (A, who can sample, used to be asked B's question)."""
    a_is_asked, release_a = anyio.Event(), anyio.Event()

    async def a_elicits(ask: ServerAsk) -> dict[str, Any]:
        a_is_asked.set()
        await release_a.wait()
        return {"action": "decline"}

    async def a_samples(ask: ServerAsk) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": "A answers"}, "model": "a"}

    results: dict[str, str] = {}
    async with (
        connect(daemon.socket, on_sampling=a_samples, on_elicitation=a_elicits) as a,
        connect(daemon.socket) as b,
    ):

        async def a_calls() -> None:
            results["a"] = text(await a.call_tool(f"{server}__ask", {"kind": "elicitation"}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(a_calls)
            with anyio.fail_after(60):
                await a_is_asked.wait()
            results["b"] = text(await b.call_tool(f"{server}__ask", {"kind": "sampling"}))
            release_a.set()
    assert results["a"] == "elicited: decline null"
    if exact:
        assert "did not declare the sampling capability" in results["b"]
    else:
        assert "tool calls from 2 callers are in flight to fx" in results["b"]


# -- the router's own bounds ------------------------------------------------------------------------


class Silent:
    """A caller that declared sampling and never answers."""

    def capabilities(self) -> frozenset[str]:
        return frozenset({"sampling"})

    async def ask(self, request: ServerRequest, origin: object) -> ServerReply:
        await anyio.sleep_forever()
        raise AssertionError


REQUEST = ServerRequest(server="s", method=SAMPLING, params={})


async def test_a_caller_that_does_not_answer_times_out() -> None:
    """Past the router's timeout the server gets TIMED_OUT, naming the silent caller."""
    router = ServerRequests(timeout=0.05)
    running, token = router.begin("s", Silent(), "silent", "1")
    try:
        reply = await router.route(REQUEST)
    finally:
        router.end(running, token)
    assert reply.error is not None
    assert reply.error.code == TIMED_OUT
    assert "silent (session 1) did not answer within 0.05s" in reply.error.message


async def test_a_call_that_ends_withdraws_its_questions() -> None:
    """When the call ends while its caller is being asked, the server's request ends at once."""
    router = ServerRequests()
    replies: list[ServerReply] = []
    running, token = router.begin("s", Silent(), "silent", "1")
    async with anyio.create_task_group() as tg:

        async def route() -> None:
            replies.append(await router.route(REQUEST))

        tg.start_soon(route)
        await anyio.wait_all_tasks_blocked()
        router.end(running, token)
    assert replies[0].error is not None
    assert "the tool call ended before silent (session 1) answered" in replies[0].error.message


async def test_a_late_request_of_an_ended_call_is_refused() -> None:
    """A request that arrives in the context of a call that has ended (a remote server's late
    request on that call's stream) is refused, not passed to a caller who no longer waits."""
    router = ServerRequests()
    running, token = router.begin("s", Silent(), "silent", "1")
    during = contextvars.copy_context()
    router.end(running, token)
    reply = await asyncio.get_running_loop().create_task(router.route(REQUEST), context=during)
    assert reply.error is not None
    assert reply.error.code == NOT_AVAILABLE
    assert "the tool call it belongs to, by silent (session 1), has ended" in reply.error.message


# -- server-everything ------------------------------------------------------------------------------


async def test_server_everything_samples_through_the_bridge(tmp_path: Path, npm_bin: Path) -> None:
    """server-everything registers its sampling tool because mcpd announces sampling; through the
    bridge, its request reaches the SDK host and the host's completion comes back in the result."""
    path = tmp_path / "config.toml"
    path.write_text(f"[servers.ev]\ncommand = {json.dumps(str(npm_bin / 'mcp-server-everything'))}\n")
    async with running_daemon(path) as running:
        await running.wait_for("server.state", server="ev", new="running", timeout=120)
        async with host(running.socket, sampling_callback=host_sampling) as session:
            names = [t.name for t in (await session.list_tools()).tools]
            assert "ev__trigger-sampling-request" in names
            result = await host_call(session, "ev__trigger-sampling-request", {"prompt": "a haiku"})
    assert "host says Resource trigger-sampling-request context: a haiku" in result
    assert "host-llm" in result


class Connection:
    def notify(self, method: str, params: msgspec.Struct) -> bool:
        raise AssertionError("not asked")


def test_a_client_connection_is_forgotten_when_it_goes() -> None:
    """The router keeps a library connection's answerer only as long as the connection exists."""
    router = ServerRequests()
    conn = Connection()
    router.client(conn).declared = ClientCapabilities(sampling=True)
    assert "sampling" in router.clients[conn].capabilities()
    del conn
    gc.collect()
    assert len(router.clients) == 0


async def test_a_reply_needs_no_free_slot(tmp_path: Path) -> None:
    """With ``max_in_flight = 1`` the tool call holds the connection's only slot while its server
    asks, and a request sent before the answer waits for that slot: the ``server.reply`` behind it
    must still get through (it needs no slot), and the waiting request runs once the call ends."""
    waiting: list[Awaitable[object]] = []

    async def sample(ask: ServerAsk) -> dict[str, Any]:
        waiting.append(asyncio.ensure_future(client.status()))
        await asyncio.sleep(0)  # its frame is sent before this answer
        return {"role": "assistant", "content": {"type": "text", "text": "one slot"}, "model": "m"}

    config = tmp_path / "config.toml"
    config.write_text("[daemon]\nmax_in_flight = 1\n\n" + fixture_toml("fx"))
    async with running_daemon(config) as running:
        await running.wait_for("server.state", server="fx", new="running", timeout=120)
        async with connect(running.socket, on_sampling=sample) as client:
            with anyio.fail_after(10):  # a guard against the deadlock: both take milliseconds
                sampled = await client.call_tool("fx__ask", {"kind": "sampling"})
                await waiting[0]
    assert text(sampled) == "sampled (m): one slot"
