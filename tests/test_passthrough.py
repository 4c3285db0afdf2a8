"""What passes through mcpd unchanged: a host through `mcpd bridge` and over HTTP sees what it would
see talking to the server itself, names qualified.

The server is ``mcpd.testing.fullserver``, which fills every optional field MCP defines (and one it
does not), twice behind a real daemon: ``full`` on stdio, and ``remote`` over HTTP (the daemon's
SDK session). The hosts are the MCP SDK's ``ClientSession`` and, where the SDK would hide what
arrives (progress ``_meta``, integers, a field no revision defines), raw JSON-RPC.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from test_bridge import RawHost

from mcpd.client.aio import connect
from mcpd.errors import SERVER_ERROR, InvalidParams, UnknownResource
from mcpd.testing.daemon import DaemonProcess, running_daemon
from mcpd.testing.fullserver import META
from mcpd.testing.remote import free_port, running_http_server

pytestmark = pytest.mark.anyio
FULL = (sys.executable, "-m", "mcpd.testing.fullserver")
HOSTS = ["bridge", "http"]
SERVERS = ["full", "remote"]
"""``full`` on stdio, ``remote`` over HTTP: the same server, through either of the daemon's sessions."""


@dataclass
class Setup:
    daemon: DaemonProcess
    url: str
    token: str


@pytest.fixture(scope="module")
async def setup(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Setup]:
    directory = tmp_path_factory.mktemp("passthrough")
    port = free_port()
    async with running_http_server([*FULL, "--transport", "http", "--port", str(port)], port) as remote:
        config = directory / "config.toml"
        config.write_text(
            f'[daemon]\nhttp = "127.0.0.1:0"\nhttp_token_file = "{directory / "http.token"}"\n'
            f"[servers.full]\ncommand = {json.dumps(FULL[0])}\nargs = {json.dumps(list(FULL[1:]))}\n"
            f'[servers.remote]\nurl = "{remote}"\n'
        )
        async with running_daemon(config) as running:
            url = (await running.wait_for("http.listening"))["url"]
            for name in SERVERS:
                await running.wait_for("server.state", server=name, new="running", timeout=60)
            yield Setup(running, url, (directory / "http.token").read_text().strip())


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


@asynccontextmanager
async def host(setup: Setup, kind: str, **callbacks: Any) -> AsyncIterator[ClientSession]:
    """An SDK host that sees every server (``--all``, ``?all=1``), initialized."""
    async with contextlib_stack() as stack:
        if kind == "bridge":
            command = [
                "-m",
                "mcpd",
                "bridge",
                "--socket",
                str(setup.daemon.socket),
                "--no-autostart",
                "--all",
            ]
            params = StdioServerParameters(command=sys.executable, args=command, env=dict(os.environ))
            read, write = await stack.enter_async_context(stdio_client(params))
        else:
            auth = {"Authorization": f"Bearer {setup.token}"}
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=auth, timeout=60))
            streams = streamable_http_client(setup.url + "?all=1", http_client=http)
            read, write = await stack.enter_async_context(streams)
        session = await stack.enter_async_context(ClientSession(read, write, **callbacks))
        with anyio.fail_after(60):
            await session.initialize()
        yield session


@asynccontextmanager
async def direct(**callbacks: Any) -> AsyncIterator[ClientSession]:
    """The SDK host on the server itself, no mcpd between: what the others must match."""
    params = StdioServerParameters(command=FULL[0], args=list(FULL[1:]))
    async with stdio_client(params) as (read, write), ClientSession(read, write, **callbacks) as session:
        await session.initialize()
        yield session


def contextlib_stack() -> Any:
    from contextlib import AsyncExitStack  # noqa: PLC0415

    return AsyncExitStack()


class Raw:
    """A host speaking raw JSON-RPC through the bridge or over HTTP: it sees every field and number
    as mcpd wrote it."""

    def __init__(self, ask: Callable[[dict[str, Any]], Any], tell: Callable[[dict[str, Any]], Any]) -> None:
        self._ask = ask
        self._tell = tell

    async def tell(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification."""
        await self._tell({"method": method, "params": params})

    async def ask(self, request_id: int, method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Every message the host gets until the answer, the answer last."""
        messages: list[dict[str, Any]] = await self._ask(
            {"id": request_id, "method": method, "params": params}
        )
        return messages

    async def result(self, method: str, params: dict[str, Any]) -> Any:
        answer = (await self.ask(9, method, params))[-1]
        assert "result" in answer, answer
        return answer["result"]


@asynccontextmanager
async def raw(setup: Setup, kind: str) -> AsyncIterator[Raw]:
    initialize = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw"}}
    if kind == "bridge":
        socket = str(setup.daemon.socket)
        command = [sys.executable, "-m", "mcpd", "bridge", "--socket", socket, "--no-autostart", "--all"]
        async with await anyio.open_process(command) as process:
            bridge = RawHost(process)

            async def over_bridge(message: dict[str, Any]) -> list[dict[str, Any]]:
                await bridge.send(message)
                return await bridge.until_answer(message["id"])

            await over_bridge({"id": 1, "method": "initialize", "params": initialize})
            await bridge.send({"method": "notifications/initialized"})
            try:
                yield Raw(over_bridge, bridge.send)
            finally:
                process.terminate()
        return
    url = setup.url + "?all=1"
    headers = {"Authorization": f"Bearer {setup.token}", "Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:

        async def over_http(message: dict[str, Any]) -> list[dict[str, Any]]:
            response = await http.post(url, json={"jsonrpc": "2.0", **message})
            assert response.status_code == 200, response.text
            if response.headers["content-type"].startswith("application/json"):
                return [response.json()]
            return [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]

        async def tell_http(message: dict[str, Any]) -> None:
            response = await http.post(url, json={"jsonrpc": "2.0", **message})
            assert response.status_code == 202, response.text

        opened = await http.post(
            url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize}
        )
        http.headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
        await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield Raw(over_http, tell_http)


def mine(items: list[dict[str, Any]], server: str, key: str) -> dict[str, dict[str, Any]]:
    """The items of ``server`` under their own names (``key``: ``name``, ``uri``, ``uriTemplate``), by it."""
    prefix = f"mcpd://{server}/" if key != "name" else f"{server}__"
    return {
        item[key].removeprefix(prefix): {**item, key: item[key].removeprefix(prefix)}
        for item in items
        if item[key].startswith(prefix)
    }


# -- list entries ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", HOSTS)
@pytest.mark.parametrize("server", SERVERS)
async def test_list_entries_keep_every_field_the_server_sent(setup: Setup, kind: str, server: str) -> None:
    """Tools, resources, templates and prompts as the SDK host reads them from the server itself:
    icons, annotations, ``_meta``, ``execution``, argument titles; no description where the tool has
    none, no ``arguments`` where the prompt lists none. (The SDK keeps the fields it knows: both the
    host's and mcpd's own, for ``remote``.)"""
    keys = {"tools": "name", "resources": "uri", "templates": "uriTemplate", "prompts": "name"}

    async def lists(session: ClientSession) -> dict[str, list[dict[str, Any]]]:
        return {
            "tools": [dump(t) for t in (await session.list_tools()).tools],
            "resources": [dump(r) for r in (await session.list_resources()).resources],
            "templates": [dump(t) for t in (await session.list_resource_templates()).resource_templates],
            "prompts": [dump(p) for p in (await session.list_prompts()).prompts],
        }

    async with direct() as alone:
        expected = {
            kind_of: {i[keys[kind_of]]: i for i in items} for kind_of, items in (await lists(alone)).items()
        }
    async with host(setup, kind) as through:
        seen = {
            kind_of: mine(items, server, keys[kind_of]) for kind_of, items in (await lists(through)).items()
        }
    assert seen == expected
    assert "description" not in seen["tools"]["plain"]
    assert seen["tools"]["wait"]["execution"] == {"taskSupport": "forbidden"}
    assert seen["tools"]["wait"]["icons"] and seen["resources"]["full://r/0"]["annotations"]
    assert seen["prompts"]["greet"]["arguments"][0]["title"] == "Name"
    assert "arguments" not in seen["prompts"]["bare"]


@pytest.mark.parametrize("kind", HOSTS)
async def test_fields_no_revision_defines_pass_too(setup: Setup, kind: str) -> None:
    """A field mcpd does not model reaches hosts as the server sent it, in each list and read; tool
    annotations alone keep to MCP's hints (the verifier accepted those, ``trust.gate``)."""
    later = {"kept": True}
    async with raw(setup, kind) as through:
        tools = {t["name"]: t for t in (await through.result("tools/list", {}))["tools"]}
        resources = {r["uri"]: r for r in (await through.result("resources/list", {}))["resources"]}
        templates = (await through.result("resources/templates/list", {}))["resourceTemplates"]
        prompts = {p["name"]: p for p in (await through.result("prompts/list", {}))["prompts"]}
        read = await through.result("resources/read", {"uri": "mcpd://full/full://r/0"})
    assert tools["full__wait"]["x-later"] == later
    assert tools["full__wait"]["annotations"] == {"title": "wait hints", "readOnlyHint": True}
    assert resources["mcpd://full/full://r/0"]["x-later"] == later
    assert [t["x-later"] for t in templates if t["uriTemplate"].startswith("mcpd://full/")] == [later]
    assert prompts["full__greet"]["x-later"] == later
    assert prompts["full__greet"]["arguments"][0] == {
        "name": "name",
        "title": "Name",
        "description": "whom to greet",
        "required": True,
        "x-later": later,
    }
    assert read["contents"][0]["x-later"] == later
    async with connect(setup.daemon.socket) as client:
        (entry,) = [r for r in await client.resources(["full"]) if r.uri == "mcpd://full/full://r/0"]
    assert entry.resource.extra is not None and entry.resource.extra["x-later"] == later


# -- results and notifications ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", HOSTS)
async def test_results_keep_fields_no_revision_defines(setup: Setup, kind: str) -> None:
    """A stdio server's results of a call, a read, a prompt and a completion reach the host with the
    fields mcpd does not model beside its own, as the server sent them (mcpd's session read each
    into a struct of the fields it names, and dropped the rest)."""
    greet = {"type": "ref/prompt", "name": "full__greet"}
    async with raw(setup, kind) as through:
        called = await through.result("tools/call", {"name": "full__plain", "arguments": {}})
        read = await through.result("resources/read", {"uri": "mcpd://full/full://r/0"})
        got = await through.result("prompts/get", {"name": "full__greet", "arguments": {"name": "Ada"}})
        completed = await through.result(
            "completion/complete", {"ref": greet, "argument": {"name": "name", "value": "A"}}
        )
    assert called == {
        "content": [{"type": "text", "text": "plain done"}],
        "_meta": META,
        "x-later": {"kept": True},
    }
    assert [result["x-later"] for result in (read, got, completed)] == [{"kept": True}] * 3
    assert read["contents"][0]["uri"] == "mcpd://full/full://r/0"  # mcpd's fields over the server's


@pytest.mark.parametrize("kind", HOSTS)
@pytest.mark.parametrize("server", SERVERS)
async def test_results_keep_their_meta(setup: Setup, kind: str, server: str) -> None:
    """A read (and each of its contents), a prompt and a completion carry the server's ``_meta``."""
    async with direct() as alone:
        read = dump(await alone.read_resource("full://r/1"))
        got = dump(await alone.get_prompt("greet", {"name": "Ada"}))
        ref = types.PromptReference(type="ref/prompt", name="greet")
        completed = dump(await alone.complete(ref, {"name": "name", "value": "A"}))
    assert read["_meta"] == read["contents"][0]["_meta"] == got["_meta"] == completed["_meta"] == META
    async with host(setup, kind) as through:
        read_through = dump(await through.read_resource(f"mcpd://{server}/full://r/1"))
        got_through = dump(await through.get_prompt(f"{server}__greet", {"name": "Ada"}))
        ref = types.PromptReference(type="ref/prompt", name=f"{server}__greet")
        completed_through = dump(await through.complete(ref, {"name": "name", "value": "A"}))
    for contents in read_through["contents"]:
        contents["uri"] = contents["uri"].removeprefix(f"mcpd://{server}/")
    assert read_through == read
    assert got_through == got
    assert completed_through == completed


@pytest.mark.parametrize("kind", HOSTS)
@pytest.mark.parametrize("server", SERVERS)
async def test_progress_keeps_its_numbers_and_meta(setup: Setup, kind: str, server: str) -> None:
    """Progress reaches the host as the server sent it: an integer stays one, ``_meta`` stays; from a
    remote server too, whose notifications the daemon's SDK session gave mcpd as floats without
    ``_meta`` (``1.0``, ``4.0``)."""
    async with raw(setup, kind) as through:
        params = {"name": f"{server}__progress", "arguments": {}, "_meta": {"progressToken": "tok"}}
        messages = await through.ask(5, "tools/call", params)
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert progress == [
        {"progressToken": "tok", "progress": 1, "total": 4, "_meta": META},
        {"progressToken": "tok", "progress": 2.5, "message": "more"},
    ]
    assert isinstance(progress[0]["progress"], int) and isinstance(progress[0]["total"], int)


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
@pytest.mark.parametrize("kind", HOSTS)
async def test_resource_updates_keep_their_meta(setup: Setup, kind: str) -> None:
    updated: list[types.ResourceUpdatedNotificationParams] = []
    arrived = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(message.params)
            arrived.set()

    async with host(setup, kind, message_handler=on_message) as through:
        await through.subscribe_resource("mcpd://full/full://r/0")
        await through.call_tool("full__touch", {})
        with anyio.fail_after(30):
            await arrived.wait()
    assert dump(updated[0]) == {"uri": "mcpd://full/full://r/0", "_meta": META}


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
async def test_an_update_the_socket_cannot_carry_still_reaches_the_host(setup: Setup) -> None:
    """A resource update whose ``_meta`` holds an integer beyond 64 bits: a socket client subscribed
    to it cannot be sent it (msgpack; said once, and its connection stays), and the MCP host
    subscribed beside it still gets it (the first subscriber that failed used to end the delivery,
    with a traceback in the daemon's log)."""
    arrived = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification) and message.params.uri.endswith("r/1"):
            arrived.set()

    mark = len(setup.daemon.events)
    async with connect(setup.daemon.socket) as client:
        await client.subscribe_resource("full://r/1", server="full")
        async with host(setup, "bridge", message_handler=on_message) as through:
            await through.subscribe_resource("mcpd://full/full://r/1")
            await through.call_tool("full__touch", {"uri": "full://r/1", "big": True})
            with anyio.fail_after(30):
                await arrived.wait()
        await setup.daemon.wait_for("client.notification_unsendable", after=mark)
        assert [s.name for s in await client.status()] == ["full", "remote"]
    said = [e["event"] for e in setup.daemon.events[mark:]]
    assert "supervisor.listener_failed" not in said and "subscription.delivery_failed" not in said


# -- errors -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", HOSTS)
@pytest.mark.parametrize("server", SERVERS)
async def test_a_servers_errors_reach_the_host_as_it_sent_them(setup: Setup, kind: str, server: str) -> None:
    """A read, a prompt and a completion the server refuses fail with its code, message and data;
    what mcpd refuses itself, before any server is asked, keeps mcpd's codes (those MCP names for each
    request: an unknown template to complete is invalid params, -32602, not -32002)."""
    ref = types.PromptReference(type="ref/prompt", name=f"{server}__greet")
    asks: list[tuple[Callable[[ClientSession], Any], tuple[int, str, Any]]] = [
        (
            lambda s: s.read_resource(f"mcpd://{server}/full://fail"),
            (-32603, "disk on fire", {"retryAfter": 5}),
        ),
        (
            lambda s: s.read_resource(f"mcpd://{server}/full://none"),
            (-32002, "Resource not found", {"uri": "full://none"}),
        ),
        (lambda s: s.get_prompt(f"{server}__broken"), (-32603, "prompt backend down", {"retryAfter": 5})),
        (
            lambda s: s.get_prompt(f"{server}__greet"),
            (-32602, "missing argument name", {"missing": ["name"]}),
        ),
        (
            lambda s: s.complete(ref, {"name": "fail", "value": ""}),
            (-32050, "no completions today", {"why": "closed"}),
        ),
    ]
    async with host(setup, kind) as through:
        for ask, (code, message, data) in asks:
            with pytest.raises(MCPError) as refused:
                await ask(through)
            assert (refused.value.code, refused.value.error.message, refused.value.error.data) == (
                code,
                message,
                data,
            )
        with pytest.raises(MCPError) as own:
            await through.read_resource("full://r/0")  # not qualified: no server was asked
        assert own.value.code == -32002 and own.value.error.data["type"] == "UnknownResource"
        with pytest.raises(MCPError) as own:
            await through.get_prompt(f"{server}__nosuch")
        assert (own.value.code, own.value.error.data) == (
            -32602,
            {"type": "UnknownPrompt", "server": server, "prompt": "nosuch"},
        )
        # A template the server does not have: an invalid reference to complete (as the server
        # itself would answer), not a resource that was not found.
        template = types.ResourceTemplateReference(
            type="ref/resource", uri=f"mcpd://{server}/full://none/{{id}}"
        )
        with pytest.raises(MCPError) as own:
            await through.complete(template, {"name": "id", "value": ""})
        assert own.value.code == -32602 and own.value.error.data["type"] == "UnknownResource"


@pytest.mark.parametrize("kind", HOSTS)
async def test_mcpds_own_refusals_of_a_call_have_mcps_codes(setup: Setup, kind: str) -> None:
    """A tool no server has, or one its server does not have, is a protocol error, invalid params
    (-32602), as MCP says of an unknown tool and as the server itself answers (it was a tool error
    "UnknownTool: ..."); the message is as people read it, mcpd's details in ``data``. The same name
    given to ``mcpd_call_tool`` is a wrong argument of that tool: a tool error, for the model to see."""
    async with host(setup, kind) as through:
        with pytest.raises(MCPError) as unknown:
            await through.call_tool("full__nosuch", {})
        with pytest.raises(MCPError) as nowhere:
            await through.call_tool("nosuch", {})
        via = await through.call_tool("mcpd_call_tool", {"tool": "full__nosuch", "arguments": {}})
    assert (unknown.value.code, unknown.value.error.message, unknown.value.error.data) == (
        -32602,
        "server 'full' has no tool 'nosuch'",
        {"type": "UnknownTool", "server": "full", "tool": "nosuch"},
    )
    assert nowhere.value.code == -32602 and nowhere.value.error.data == {
        "type": "UnknownTool",
        "tool": "nosuch",
    }
    assert via.is_error and dump(via)["content"] == [
        {"type": "text", "text": "server 'full' has no tool 'nosuch'"}
    ]


@pytest.mark.parametrize("kind", HOSTS)
async def test_wrong_arguments_of_a_tool_there_are_a_tool_error(setup: Setup, kind: str) -> None:
    """Arguments mcpd refuses for a tool that is there (``mcpd_request_capability`` without its
    ``capability``, arguments nested deeper than any server takes) are a tool error the model reads
    and corrects, as MCP 2025-11-25 says of input validation errors (SEP-1303), not a protocol
    error: only a tool that is not there is one."""
    nested: dict[str, Any] = {}
    for _ in range(80):
        nested = {"n": nested}
    async with host(setup, kind) as through:
        missing = await through.call_tool("mcpd_request_capability", {})
        deep = await through.call_tool("full__plain", nested)
    assert missing.is_error and dump(missing)["content"] == [
        {"type": "text", "text": "mcpd_request_capability needs a non-empty string `capability`"}
    ]
    assert deep.is_error and dump(deep)["content"] == [
        {"type": "text", "text": "arguments nested deeper than 64 levels"}
    ]


async def test_socket_clients_get_the_servers_error_in_the_data(setup: Setup) -> None:
    """The library keeps its one class per code; the server's own error is in ``data``."""
    async with connect(setup.daemon.socket) as client:
        with pytest.raises(UnknownResource) as read:
            await client.read_resource("mcpd://full/full://fail")
        with pytest.raises(InvalidParams) as got:
            await client.get_prompt("full__greet")
    assert read.value.data[SERVER_ERROR] == {
        "code": -32603,
        "message": "disk on fire",
        "data": {"retryAfter": 5},
    }
    assert read.value.data["server"] == "full"
    assert got.value.data[SERVER_ERROR] == {
        "code": -32602,
        "message": "missing argument name",
        "data": {"missing": ["name"]},
    }


# -- log messages and cancellation ---------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
@pytest.mark.parametrize("kind", HOSTS)
async def test_log_data_reaches_hosts_as_sent(setup: Setup, kind: str) -> None:
    """A log message's data is any JSON value, given whole (10,000 characters are not cut to the
    log's 8 KiB) with the server's ``_meta``; only the logger is mcpd's, naming the server."""
    logged: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    async with host(setup, kind, logging_callback=on_log) as through:
        await through.set_logging_level("debug")
        await through.call_tool("full__log", {})
        with anyio.fail_after(30):
            while len([p for p in logged if p.logger and p.logger.startswith("full")]) < 3:
                await anyio.sleep(0.02)
    mine = [dump(p) for p in logged if p.logger and p.logger.startswith("full")]
    assert mine == [
        {"level": "warning", "logger": "full/lg", "data": {"k": [1, 2]}, "_meta": META},
        {"level": "info", "logger": "full", "data": 42},
        {"level": "error", "logger": "full", "data": "y" * 10_000},
    ]
    async with connect(setup.daemon.socket) as client:
        kept = [e.text for e in await client.logs("full") if e.source == "mcp"]
    assert '{"k": [1, 2]}' in kept and "42" in kept
    assert any(text.startswith("y" * 8192 + " [... ") for text in kept)  # the log keeps text, cut


@pytest.mark.parametrize("kind", HOSTS)
async def test_the_hosts_cancellation_reason_reaches_the_server(setup: Setup, kind: str) -> None:
    """The SDK host says "caller cancelled" when it gives up on a call: the server hears that. (Given
    up once the server has it: one withdrawn before it was sent is never sent, nor its cancellation.)"""
    async with host(setup, kind) as through:
        before = len(json.loads(await text_of(through, "full__cancellations")))
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(through.call_tool, "full__wait", {"seconds": 30}))
            with anyio.fail_after(30):
                while await text_of(through, "full__waiting") == "0":
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        with anyio.fail_after(30):
            while len(cancelled := json.loads(await text_of(through, "full__cancellations"))) == before:
                await anyio.sleep(0.05)
    assert cancelled[-1]["reason"] == "caller cancelled"


@pytest.mark.parametrize("kind", HOSTS)
@pytest.mark.parametrize("server", SERVERS)
async def test_a_hosts_own_cancellation_reason_reaches_the_server(
    setup: Setup, kind: str, server: str
) -> None:
    """The reason a host gives when it cancels a call reaches the server as it gave it, a remote
    server too (the daemon's SDK session gave its own instead, "caller cancelled")."""
    call = {"name": f"{server}__wait", "arguments": {"seconds": 30}}
    async with host(setup, kind) as watcher, raw(setup, kind) as through:
        before = len(json.loads(await text_of(watcher, f"{server}__cancellations")))
        async with anyio.create_task_group() as tg:
            tg.start_soon(through.ask, 77, "tools/call", call)  # never answered: it is cancelled
            with anyio.fail_after(30):
                while await text_of(watcher, f"{server}__waiting") == "0":
                    await anyio.sleep(0.05)
            await through.tell(
                "notifications/cancelled", {"requestId": 77, "reason": "the user pressed stop"}
            )
            with anyio.fail_after(30):
                while (
                    len(cancelled := json.loads(await text_of(watcher, f"{server}__cancellations"))) == before
                ):
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    assert cancelled[-1]["reason"] == "the user pressed stop"


async def text_of(session: ClientSession, tool: str) -> str:
    result = await session.call_tool(tool, {})
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text
