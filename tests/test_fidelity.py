"""A third-party server through mcpd, message by message: the MCP SDK's host talks to
server-everything itself, then to the same server through `mcpd bridge` and over HTTP, and gets the
same messages, names and URIs qualified (``ev__``, ``mcpd://ev/``).

The host reads what arrives as the JSON it was (the fields a message set, ``exclude_unset``): the
SDK's models fill in defaults (``isError: false``, ``required: false``) and would hide a relay that
adds or drops them. (``mcpd.testing.fullserver`` covers what server-everything does not send, in
``test_passthrough``.)
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

import mcpd
from mcpd.testing.daemon import DaemonProcess, running_daemon
from mcpd.testing.remote import free_port, running_http_fixture, running_http_server

pytestmark = pytest.mark.anyio
HOSTS = ["bridge", "http"]


@dataclass
class Setup:
    daemon: DaemonProcess
    url: str
    token: str
    everything: str
    """server-everything's command, run by the daemon as ``ev`` and by the direct host."""
    events_url: str
    """The fixture over HTTP, ``sse``: it answers each request on an event stream."""
    json_url: str
    """``mcpd.testing.fullserver`` over HTTP, ``json``: it answers with JSON. (``full`` is the same
    server on stdio.)"""


@pytest.fixture(scope="module")
async def setup(tmp_path_factory: pytest.TempPathFactory, npm_bin: Path) -> AsyncIterator[Setup]:
    directory = tmp_path_factory.mktemp("fidelity")
    everything = str(npm_bin / "mcp-server-everything")
    config = directory / "config.toml"
    # fullserver from the mcpd under test (``python -m`` in its checkout), whatever is installed.
    checkout = json.dumps(str(Path(mcpd.__file__).resolve().parents[1]))
    config.write_text(
        f'[daemon]\nhttp = "127.0.0.1:0"\nhttp_token_file = "{directory / "http.token"}"\n'
        f"[servers.ev]\ncommand = {json.dumps(everything)}\n"
        f"[servers.full]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = ["-m", "mcpd.testing.fullserver"]\ncwd = {checkout}\n'
    )
    full = (sys.executable, "-m", "mcpd.testing.fullserver", "--transport", "http", "--port")
    async with (
        running_http_server([*full, str(json_port := free_port())], json_port) as answers_json,
        running_http_fixture("sse", free_port()) as answers_events,
    ):
        config.write_text(
            config.read_text()
            + f'[servers.json]\nurl = "{answers_json}"\n[servers.sse]\nurl = "{answers_events}"\n'
        )
        async with running_daemon(config) as running:
            url = (await running.wait_for("http.listening"))["url"]
            for server in ("ev", "full", "json", "sse"):
                await running.wait_for("server.state", server=server, new="running", timeout=120)
            token = (directory / "http.token").read_text().strip()
            yield Setup(running, url, token, everything, answers_events, answers_json)


def sent(model: Any) -> Any:
    """A message as its sender wrote it: the fields it set, no defaults the SDK filled in."""
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


async def sample(_context: Any, _params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    content = types.TextContent(type="text", text="sampled")
    return types.CreateMessageResult(role="assistant", content=content, model="m", stop_reason="endTurn")


async def elicit(_context: Any, _params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"color": "red"})


async def roots(_context: Any) -> types.ListRootsResult:
    return types.ListRootsResult.model_validate(
        {"roots": [{"uri": "file:///tmp/fidelity", "name": "fidelity"}]}
    )


@dataclass
class Host:
    """An SDK host and every message it received, as sent (``sent``)."""

    session: ClientSession
    received: list[dict[str, Any]] = field(default_factory=list)

    def notifications(self, method: str) -> list[Any]:
        return [m.get("params") for m in self.received if m.get("method") == method and "id" not in m]


Streams = tuple[AsyncIterable[SessionMessage | Exception], Any]


@asynccontextmanager
async def sdk_host(streams: Streams) -> AsyncIterator[Host]:
    """An initialized SDK host on ``streams`` that declares sampling, elicitation and roots, and keeps
    what it receives before its session reads it."""
    read, write = streams
    seen, relayed = anyio.create_memory_object_stream[SessionMessage | Exception](100)
    received: list[dict[str, Any]] = []

    async def keep() -> None:
        # Until the session stops reading (it closes its end when it exits).
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            async with seen:
                async for message in read:
                    if isinstance(message, SessionMessage):
                        received.append(sent(message.message))
                    await seen.send(message)

    async with anyio.create_task_group() as tg:
        tg.start_soon(keep)
        callbacks: dict[str, Any] = {
            "sampling_callback": sample,
            "elicitation_callback": elicit,
            "list_roots_callback": roots,
        }
        async with ClientSession(relayed, write, **callbacks) as session:
            with anyio.fail_after(60):
                await session.initialize()
            yield Host(session, received)
        tg.cancel_scope.cancel()


@asynccontextmanager
async def direct(setup: Setup) -> AsyncIterator[Host]:
    """The host on server-everything itself, no mcpd between: what the others must match."""
    async with (
        stdio_client(StdioServerParameters(command=setup.everything)) as streams,
        sdk_host(streams) as host,
    ):
        yield host


@asynccontextmanager
async def direct_over_http(url: str) -> AsyncIterator[Host]:
    """The host on a remote server itself."""
    async with (
        httpx2.AsyncClient(timeout=60) as http,
        streamable_http_client(url, http_client=http) as streams,
        sdk_host(streams) as host,
    ):
        yield host


@asynccontextmanager
async def through(setup: Setup, kind: str) -> AsyncIterator[Host]:
    """The host through ``mcpd bridge`` or over HTTP, seeing every server (``--all``, ``?all=1``)."""
    async with AsyncExitStack() as stack:
        if kind == "bridge":
            socket = str(setup.daemon.socket)
            command = ["-m", "mcpd", "bridge", "--socket", socket, "--no-autostart", "--all"]
            params = StdioServerParameters(command=sys.executable, args=command, env=dict(os.environ))
            streams = await stack.enter_async_context(stdio_client(params))
        else:
            auth = {"Authorization": f"Bearer {setup.token}"}
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=auth, timeout=60))
            streams = await stack.enter_async_context(
                streamable_http_client(setup.url + "?all=1", http_client=http)
            )
        yield await stack.enter_async_context(sdk_host(streams))


def unqualified(value: Any) -> Any:
    """``value`` with mcpd's qualified names and URIs (``ev__x``, ``mcpd://ev/u``) back to the server's."""
    return json.loads(json.dumps(value).replace("mcpd://ev/", "").replace('"ev__', '"'))


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"message": "hi"}),
    ("echo", {}),  # the server's own tool error
    ("get-sum", {"a": 1, "b": 2.5}),
    ("get-tiny-image", {}),
    ("get-annotated-message", {"messageType": "error", "includeImage": True}),
    ("get-resource-links", {"count": 2}),
    ("get-structured-content", {"location": "Chicago"}),
    ("trigger-sampling-request", {"prompt": "hi", "maxTokens": 10}),
    ("trigger-elicitation-request", {}),
    ("get-roots-list", {}),
]
"""Tools whose results do not change between calls (no clocks, no environment)."""


async def answers(host: Host, name: Callable[[str], str]) -> dict[str, Any]:
    """What the host gets for each call, prompt list and prompt, and the progress of a long call
    (its token left out: each host picks its own)."""
    session = host.session
    got: dict[str, Any] = {}
    for tool, arguments in CALLS:
        got[f"{tool} {arguments}"] = sent(await session.call_tool(name(tool), arguments))
    # By name: mcpd lists every server's prompts (this one's by its prefix) in an order of its own.
    prompts = (await session.list_prompts()).prompts
    got["prompts"] = {p.name: sent(p) for p in prompts if p.name.startswith(name(""))}
    mine = "mcpd://ev/" if name("") else ""
    resources = (await session.list_resources()).resources
    got["resources"] = {r.uri: sent(r) for r in resources if r.uri.startswith(mine)}
    templates = (await session.list_resource_templates()).resource_templates
    got["templates"] = {t.uri_template: sent(t) for t in templates if t.uri_template.startswith(mine)}
    asks: dict[str, Callable[[], Awaitable[Any]]] = {
        "args-prompt": lambda: session.get_prompt(name("args-prompt"), {"city": "Lyon"}),
        "simple-prompt": lambda: session.get_prompt(name("simple-prompt")),
        "no prompt": lambda: session.get_prompt(name("no-such-prompt")),
        "read": lambda: session.read_resource(f"{mine}demo://resource/static/document/architecture.md"),
        "ping": session.send_ping,
        "complete": lambda: session.complete(
            types.PromptReference(type="ref/prompt", name=name("completable-prompt")),
            {"name": "name", "value": ""},
            {"department": "Engineering"},
        ),
    }
    for key, ask in asks.items():
        try:
            got[key] = sent(await ask())
        except MCPError as exc:
            # The code alone: mcpd refuses a prompt no server has itself, in its own words.
            got[key] = {"code": exc.code}

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        pass  # asking for progress is what counts; the notifications are read as they came

    long = name("trigger-long-running-operation")
    got["long"] = sent(
        await session.call_tool(long, {"duration": 1, "steps": 2}, progress_callback=on_progress)
    )
    # What the server asked the host during its calls, as it asked. (Not roots/list: a server asks
    # once and keeps the roots, whichever host gave them; see the README.)
    got["asked"] = [
        [m["method"], m.get("params")]
        for m in host.received
        if "id" in m and m.get("method") in ("sampling/createMessage", "elicitation/create")
    ]
    got["progress"] = [
        {key: value for key, value in p.items() if key != "progressToken"}
        for p in host.notifications("notifications/progress")
    ]
    return got


@pytest.mark.parametrize("kind", HOSTS)
async def test_a_host_gets_what_the_server_itself_answers(setup: Setup, kind: str) -> None:
    """Tool results of every content type (text, image, annotated, resource links, structured,
    the server's own tool error), results of sampling, elicitation and roots the host answered,
    prompts with their arguments, completions and progress reach the host as the server wrote them:
    a result without ``isError`` has none (mcpd added ``isError: false``), an argument the server
    marks ``required: false`` keeps it (mcpd dropped it)."""
    async with direct(setup) as alone:
        expected = await answers(alone, lambda n: n)
    async with through(setup, kind) as host:
        seen = unqualified(await answers(host, lambda n: f"ev__{n}"))
    assert seen == expected
    assert "isError" not in seen["echo {'message': 'hi'}"]
    assert seen["echo {}"]["isError"] is True
    assert seen["prompts"]["args-prompt"]["arguments"][1] == {"name": "state", "required": False}
    assert seen["progress"] and len(seen["asked"]) == 2


@pytest.mark.parametrize("kind", HOSTS)
async def test_a_remote_servers_own_minus_32000_is_its_error(setup: Setup, kind: str) -> None:
    """-32000 is a server's to use (JSON-RPC's "server error" range), and the MCP SDK also gives its
    own "connection closed" that code. A remote server's -32000 answer, as JSON or on an event
    stream, reaches the host as the server's error, with its message and data, as it does talking to
    the server itself: mcpd took it for the connection lost (a tool error "TransportError: remote
    closed the connection")."""
    busy = {"code": -32000, "message": "busy", "data": {"why": "busy"}}
    async with direct_over_http(setup.events_url) as alone:
        with pytest.raises(MCPError) as refused:
            await alone.session.call_tool("refuse", {"code": -32000, "message": "busy"})
    assert refused.value.error.model_dump() == busy  # what the host must get through mcpd too
    async with through(setup, kind) as host:
        asks: list[tuple[str, dict[str, Any]]] = [
            ("sse__refuse", {"code": -32000, "message": "busy"}),
            ("json__plain", {"error": busy}),
        ]
        for tool, arguments in asks:
            with pytest.raises(MCPError) as relayed:
                await host.session.call_tool(tool, arguments)
            assert relayed.value.error.model_dump() == busy, tool
        # The connection stays: the next call runs.
        assert sent(await host.session.call_tool("sse__echo", {"text": "on"}))["content"][0]["text"] == "on"


@pytest.mark.parametrize("kind", HOSTS)
async def test_a_request_without_params_reaches_the_host_without_any(setup: Setup, kind: str) -> None:
    """A server asks for roots with no params (as the SDKs send an empty request): the host gets
    the request so, not with ``"params": {}`` that mcpd made of none."""

    def roots_asked(host: Host) -> list[dict[str, Any]]:
        return [m for m in host.received if m.get("method") == "roots/list"]

    async with direct_over_http(setup.events_url) as alone:
        await alone.session.call_tool("ask", {"kind": "roots"})
    async with through(setup, kind) as host:
        answered = sent(await host.session.call_tool("sse__ask", {"kind": "roots"}))
    assert answered["content"][0]["text"] == "roots: file:///tmp/fidelity"
    assert [m.keys() for m in roots_asked(host)] == [m.keys() for m in roots_asked(alone)]
    assert "params" not in roots_asked(host)[0]


@pytest.mark.parametrize("kind", HOSTS)
@pytest.mark.parametrize("server", ["full", "json"])
async def test_the_hosts_meta_reaches_the_server_with_its_read_prompt_and_completion(
    setup: Setup, kind: str, server: str
) -> None:
    """A host's request ``_meta`` (tracing, vendor keys) reaches the server with a read, a prompt and a
    completion, as with a tool call, on stdio (``full``) and over HTTP (``json``); not its progress
    token, as mcpd relays no progress for them. (It went with tool calls only.)"""
    meta = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "example.com/k": [1]}
    asked = types.RequestParamsMeta(progressToken="p", **meta)  # type: ignore[typeddict-item]
    complete = types.CompleteRequest(
        params=types.CompleteRequestParams(
            ref=types.PromptReference(type="ref/prompt", name=f"{server}__greet"),
            argument=types.CompletionArgument(name="name", value="A"),
            _meta=asked,
        )
    )
    async with through(setup, kind) as host:
        session = host.session
        results = [
            await session.read_resource(f"mcpd://{server}/full://r/0", meta=asked),
            await session.get_prompt(f"{server}__greet", {"name": "Ada"}, meta=asked),
            await session.send_request(complete, types.CompleteResult),
        ]
    assert [result.meta and result.meta.get("request") for result in results] == [meta] * 3


@pytest.mark.parametrize("kind", HOSTS)
async def test_a_remote_servers_results_keep_what_it_set(setup: Setup, kind: str) -> None:
    """Through the daemon's SDK session too, a result has ``isError`` only where the server set it:
    fullserver leaves it out, the SDK's server writes ``false``."""
    asks = {"json": ("plain", {}), "sse": ("echo", {"text": "x"})}
    expected = {}
    for server, (tool, arguments) in asks.items():
        async with direct_over_http(setup.json_url if server == "json" else setup.events_url) as alone:
            expected[server] = sent(await alone.session.call_tool(tool, arguments))
    async with through(setup, kind) as host:
        seen = {s: sent(await host.session.call_tool(f"{s}__{t}", a)) for s, (t, a) in asks.items()}
    assert seen == expected
    assert "isError" not in seen["json"]
