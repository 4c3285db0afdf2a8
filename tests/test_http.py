"""The HTTP front end: a real daemon serving hosts over MCP Streamable HTTP.

The MCP SDK's own ``streamable_http_client`` + ``ClientSession`` is the host; raw HTTP
(httpx2) checks what the SDK would never send: no token, a wrong token, a foreign Origin or
Host, no session, an ended session, a batch, an oversized body.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types as types
import pytest
import structlog
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from msgspec.structs import replace as replace_struct

from mcpd.client.aio import connect
from mcpd.config.load import load_config
from mcpd.errors import ConfigError
from mcpd.front.hosts import Hosts
from mcpd.front.http.sessions import (
    EVENTS_KEPT,
    OUTBOX_BYTES,
    SET_ASIDE_AFTER,
    STREAM_SET_ASIDE_AFTER,
    HttpSession,
    HttpSessions,
    Outbox,
    saved_sessions,
    session_key,
)
from mcpd.model.mcp import SESSION_ENDED, SavedSession, SavedSubscriptions, SessionState, SubscriptionsChanged
from mcpd.model.servers import SUBSCRIPTION_ENDED
from mcpd.store.db import MIGRATIONS, Store
from mcpd.store.sessions import drop_subscriptions, prune_sessions, session_row
from mcpd.testing import fixture_toml, fullserver_toml, run_cli
from mcpd.testing.daemon import DaemonProcess, running_daemon
from mcpd.testing.remote import free_port, running_http_fixture
from mcpd.updates import HELD_UPDATES

pytestmark = pytest.mark.anyio

META_TOOLS = ["mcpd_search_tools", "mcpd_connect_server", "mcpd_call_tool", "mcpd_request_capability"]


@dataclass
class Front:
    """A daemon with HTTP on, its URL and its token."""

    daemon: DaemonProcess
    url: str
    token: str
    config: Path

    def client(self, token: str | None = None, **headers: str) -> httpx2.AsyncClient:
        auth = {"Authorization": f"Bearer {token or self.token}"}
        return httpx2.AsyncClient(headers={**auth, **headers}, timeout=httpx2.Timeout(60.0))


def http_config(directory: Path, *, servers: Sequence[str] = (), **daemon: Any) -> Path:
    """A config with HTTP on, its token file in ``directory``, and a fixture server for each of
    ``servers`` (none by default: a test of HTTP itself calls no tool, and each server started is one
    more process on a shared machine)."""
    settings = {"http": '"127.0.0.1:0"', "http_token_file": f'"{directory / "http.token"}"', **daemon}
    config = directory / "config.toml"
    table = "".join(f"{key} = {value}\n" for key, value in settings.items())
    config.write_text("[daemon]\n" + table + "".join(fixture_toml(name) for name in servers))
    return config


def full_http_config(directory: Path, **daemon: Any) -> tuple[Path, Path]:
    """``http_config`` on a free port with a usage store in ``directory`` and the full fixture server
    (``full``, whose resources take subscriptions); and the store's path."""
    db = directory / "usage.db"
    config = http_config(directory, http=f'"127.0.0.1:{free_port()}"', usage_db=f'"{db}"', **daemon)
    config.write_text(config.read_text() + fullserver_toml("full"))
    return config, db


@asynccontextmanager
async def subscribed_host(
    config: Path, directory: Path, uris: Sequence[str]
) -> AsyncIterator[tuple[DaemonProcess, Host]]:
    """A daemon of ``full_http_config`` once ``full`` runs, and an SDK host subscribed to ``uris`` one
    by one."""
    async with running_daemon(config) as daemon:
        url = (await daemon.wait_for("http.listening"))["url"]
        await daemon.wait_for("server.state", server="full", new="running", timeout=120)
        async with sdk_host(Front(daemon, url, token_in(directory), config)) as host:
            for uri in uris:
                await host.session.subscribe_resource(uri)
            yield daemon, host


def token_in(directory: Path) -> str:
    """The token a daemon of ``http_config(directory)`` made before it listened (read from its
    file: the ``front`` fixture checks that `mcpd token` prints it, and ``test_token_file_*`` the
    file itself)."""
    return (directory / "http.token").read_text().strip()


@asynccontextmanager
async def http_daemon(directory: Path, *, servers: Sequence[str] = (), **daemon: Any) -> AsyncIterator[Front]:
    config = http_config(directory, servers=servers, **daemon)
    async with running_daemon(config) as running:
        url = (await running.wait_for("http.listening"))["url"]
        yield Front(running, url, token_in(directory), config)


@pytest.fixture(scope="module")
async def front(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Front]:
    """The daemon shared by the tests that do not disturb it, with two servers; its token as
    `mcpd token` prints it, so every test on it also checks that the CLI gives the running daemon's."""
    directory = tmp_path_factory.mktemp("http")
    async with http_daemon(directory, servers=["tools", "other"], max_frame_bytes=100_000) as running:
        printed = await anyio.to_thread.run_sync(lambda: run_cli("token", "--config", str(running.config)))
        assert printed.returncode == 0, printed.stderr
        yield replace(running, token=printed.stdout.strip())


class Host:
    """An MCP host on one HTTP session: the SDK session plus what it was told unasked."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session
        self.list_changed = anyio.Event()
        self.updated = anyio.Event()
        """Set at each ``notifications/resources/updated``."""

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.list_changed.set()
        elif isinstance(message, types.ResourceUpdatedNotification):
            self.updated.set()

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        with anyio.fail_after(60):  # a guard against a hang, not a bound
            result = await self.session.call_tool(name, arguments or {})
        assert isinstance(result, types.CallToolResult) and not result.is_error, result
        block = result.content[0]
        assert isinstance(block, types.TextContent)
        return block.text

    async def tool_names(self) -> list[str]:
        return [t.name for t in (await self.session.list_tools()).tools]

    async def listing(self, wanted: set[str]) -> list[str]:
        """The tool names once they include ``wanted``, listing again at each ``list_changed``."""
        with anyio.fail_after(30):
            while not wanted <= set(names := await self.tool_names()):
                await self.list_changed.wait()
                self.list_changed = anyio.Event()
        return names


@asynccontextmanager
async def sdk_host(front: Front, **callbacks: Any) -> AsyncIterator[Host]:
    """The SDK's streamable HTTP client with the token (and ``callbacks``: ``sampling_callback``...),
    initialized."""
    hosts: list[Host] = []

    async def forward(message: Any) -> None:
        for host in hosts:
            await host.on_message(message)

    async with (
        front.client() as http,
        streamable_http_client(front.url, http_client=http) as (read, write),
        ClientSession(read, write, message_handler=forward, **callbacks) as session,
    ):
        hosts.append(Host(session))
        with anyio.fail_after(60):
            await session.initialize()
        yield hosts[0]


def initialize_body(request_id: int = 1, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    params = {
        "protocolVersion": "2025-06-18",
        "capabilities": capabilities or {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


JSON_AND_SSE = {"Accept": "application/json, text/event-stream"}


async def raw_session(http: httpx2.AsyncClient, url: str, capabilities: dict[str, Any] | None = None) -> str:
    """Initialize over raw HTTP; the session id."""
    response = await http.post(url, json=initialize_body(capabilities=capabilities), headers=JSON_AND_SSE)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["serverInfo"]["name"] == "mcpd"
    return response.headers["mcp-session-id"]


async def test_sdk_host_lists_searches_connects_and_calls(front: Front) -> None:
    """Through the SDK's streamable HTTP client: the meta tools, a search, a connect whose
    list_changed arrives on the GET stream, a call of the connected tool, progress on the call's
    event stream, and mcpd_call_tool for a server not connected."""
    async with sdk_host(front) as host:
        assert await host.tool_names() == META_TOOLS
        found = await host.call("mcpd_search_tools", {"query": "return the text unchanged", "limit": 5})
        assert "tools__echo" in found
        assert "Connected tools" in await host.call("mcpd_connect_server", {"server": "tools"})
        with anyio.fail_after(30):
            await host.list_changed.wait()
        assert "tools__echo" in await host.tool_names()
        assert await host.call("tools__echo", {"text": "over HTTP"}) == "over HTTP"
        assert await host.call("mcpd_call_tool", {"tool": "other__echo", "arguments": {"text": "x"}}) == "x"

        updates: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            updates.append(progress)

        with anyio.fail_after(60):
            result = await host.session.call_tool(
                "tools__progress", {"steps": 3}, progress_callback=on_progress
            )
        assert isinstance(result.content[0], types.TextContent) and result.content[0].text == "done 3 steps"
    # The stream ends with the answer, after every progress notification.
    assert updates == [1, 2, 3]


async def test_server_requests_reach_the_http_host(front: Front) -> None:
    """Sampling and elicitation asked by a server during a call reach the HTTP host that made it (on
    the call's own event stream), and its answers (POSTed back) reach the server."""

    async def sample(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        content = params.messages[0].content
        prompt = content.text if isinstance(content, types.TextContent) else "?"
        text = types.TextContent(type="text", text=f"host says {prompt}")
        return types.CreateMessageResult(role="assistant", content=text, model="host-llm")

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": "yes"})

    async with sdk_host(front, sampling_callback=sample, elicitation_callback=elicit) as host:
        ask = {"tool": "tools__ask", "arguments": {"kind": "sampling", "text": "hi"}}
        assert await host.call("mcpd_call_tool", ask) == "sampled (host-llm): host says hi"
        ask = {"tool": "tools__ask", "arguments": {"kind": "elicitation", "text": "ok?"}}
        assert await host.call("mcpd_call_tool", ask) == 'elicited: accept {"answer": "yes"}'


async def test_missing_or_wrong_token_gets_401_and_nothing_else(front: Front) -> None:
    """No token, a wrong token, another scheme: 401, `WWW-Authenticate: Bearer`, an empty body, and no
    session opened (the next session the daemon logs is the next valid one)."""
    mark = len(front.daemon.events)
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(60.0)) as anonymous:
        refused = [
            await anonymous.post(front.url, json=initialize_body(), headers=JSON_AND_SSE),
            await anonymous.post(front.url, json=initialize_body(), headers={"Authorization": "Bearer nope"}),
            await anonymous.post(
                front.url, json=initialize_body(), headers={"Authorization": f"Basic {front.token}"}
            ),
            await anonymous.get(front.url, headers={"Authorization": f"Bearer {front.token}x"}),
            await anonymous.get(f"{front.url}/elsewhere"),
        ]
    for response in refused:
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.headers["connection"] == "close"  # one answer per connection without the token
        assert response.content == b""
        assert "mcp-session-id" not in response.headers
    async with front.client() as http:
        await raw_session(http, front.url)
    opened = await front.daemon.wait_for("http.session", after=mark)
    assert [e for e in front.daemon.events[mark:] if e.get("event") == "http.session"] == [opened]


async def test_foreign_origin_and_host_are_refused(front: Front) -> None:
    """DNS rebinding: an Origin that is not loopback gets 403, a Host that is not loopback 421, even
    with the token; a loopback Origin (a local web tool) is served."""
    async with front.client(Origin="http://evil.example") as http:
        assert (await http.post(front.url, json=initialize_body(), headers=JSON_AND_SSE)).status_code == 403
    async with front.client(Host="evil.example") as http:
        assert (await http.post(front.url, json=initialize_body(), headers=JSON_AND_SSE)).status_code == 421
    async with front.client(Origin="http://localhost:6274") as http:
        await raw_session(http, front.url)


async def test_two_sessions_are_separate(front: Front) -> None:
    """A server connected in one HTTP session joins that session's tools only."""
    async with sdk_host(front) as first, sdk_host(front) as second:
        await first.call("mcpd_connect_server", {"server": "other"})
        assert "other__echo" in await first.tool_names()
        assert await second.tool_names() == META_TOOLS


def address_of(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def raw_post(front: Front, session: str, length: int, body: bytes = b"") -> bytes:
    """A POST on the session as bytes on the wire: its head, announcing ``length`` bytes of body, and
    ``body``."""
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {front.token}\r\n"
        f"Mcp-Session-Id: {session}\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode() + body


def half_request(front: Front) -> bytes:
    """A POST that announces 5,000 bytes of body and sends a few."""
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {front.token}\r\n"
        'Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"jsonrpc": '
    ).encode()


async def test_a_stalled_client_holds_up_nobody(front: Front) -> None:
    """A client that sends half a request body and then nothing, and one that opens its event stream
    and never reads it: another host's session works meanwhile."""
    async with front.client() as http:
        session = await raw_session(http, front.url)
    stream = (
        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {front.token}\r\n"
        f"Accept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\r\n"
    )
    async with (
        await anyio.connect_tcp(*address_of(front.url)) as half_sent,
        await anyio.connect_tcp(*address_of(front.url)) as never_reads,
    ):
        await half_sent.send(half_request(front))
        await never_reads.send(stream.encode())
        async with sdk_host(front) as host:
            assert (
                await host.call("mcpd_call_tool", {"tool": "other__echo", "arguments": {"text": "ok"}})
                == "ok"
            )


async def test_delete_ends_a_session(front: Front) -> None:
    """DELETE ends the session (logged); afterwards its id gets 404, as does a second DELETE; the SDK
    client deletes its session when it closes."""
    mark = len(front.daemon.events)
    async with front.client() as http:
        session = await raw_session(http, front.url)
        headers = {**JSON_AND_SSE, "Mcp-Session-Id": session}
        listed = await http.post(
            front.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=headers
        )
        assert [t["name"] for t in listed.json()["result"]["tools"]] == META_TOOLS
        assert (await http.delete(front.url, headers=headers)).status_code == 200
        after = await http.post(
            front.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=headers
        )
        assert after.status_code == 404
        assert (await http.delete(front.url, headers=headers)).status_code == 404
    await front.daemon.wait_for("http.session_ended", after=mark, why="deleted by the host")
    mark = len(front.daemon.events)
    async with sdk_host(front) as host:
        await host.tool_names()
    await front.daemon.wait_for("http.session_ended", after=mark, why="deleted by the host")


async def _asking_session(http: httpx2.AsyncClient, front: Front) -> tuple[dict[str, str], dict[str, Any]]:
    """An initialized raw session that answers elicitation, and a call whose server will ask it."""
    session = await raw_session(http, front.url, {"elicitation": {}})
    headers = {**JSON_AND_SSE, "Mcp-Session-Id": session}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(front.url, json=initialized, headers=headers)).status_code == 202
    ask = {"tool": "tools__ask", "arguments": {"kind": "elicitation"}}
    call: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
    call["params"] = {"name": "mcpd_call_tool", "arguments": ask}
    return headers, call


async def test_a_server_asks_on_the_calls_own_stream_with_no_get_stream(front: Front) -> None:
    """A host that never opens a GET stream (MCP makes it optional) is asked on the stream that
    answers its call: the POST's answer becomes an event stream holding the server's elicitation,
    then, once the host has POSTed its reply, the call's result (it waited 300 s for a GET)."""
    async with front.client() as http:
        headers, call = await _asking_session(http, front)
        messages: list[dict[str, Any]] = []
        async with http.stream("POST", front.url, json=call, headers=headers) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            with anyio.fail_after(30):
                async for line in response.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    messages.append(json.loads(line[6:]))
                    if messages[-1].get("method") == "elicitation/create":
                        result = {"action": "accept", "content": {"answer": "y"}}
                        reply = {"jsonrpc": "2.0", "id": messages[-1]["id"], "result": result}
                        assert (await http.post(front.url, json=reply, headers=headers)).status_code == 202
    question, answer = messages
    assert question["method"] == "elicitation/create" and answer["id"] == 7
    assert answer["result"]["content"][0]["text"] == 'elicited: accept {"answer": "y"}'


async def sse_events(response: httpx2.Response, count: int) -> list[tuple[str, dict[str, Any]]]:
    """The next ``count`` events of an event stream: (id, message)."""
    events: list[tuple[str, dict[str, Any]]] = []
    event_id = ""
    with anyio.fail_after(30):
        async for line in response.aiter_lines():
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                events.append((event_id, json.loads(line[6:])))
                if len(events) == count:
                    break
    return events


async def test_a_get_stream_resumes_from_its_last_event(front: Front) -> None:
    """GET events carry ids; a GET with ``Last-Event-ID`` first gets again the kept events after
    that one (an id older than all of them: every kept event), then what is new."""
    async with front.client() as http:
        session = await raw_session(http, front.url)
        headers = {**JSON_AND_SSE, "Mcp-Session-Id": session}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(front.url, json=initialized, headers=headers)).status_code == 202

        async def connect(request_id: int, server: str) -> None:
            params = {"name": "mcpd_connect_server", "arguments": {"server": server}}
            call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
            assert (await http.post(front.url, json=call, headers=headers)).status_code == 200

        async def get(last_event_id: str | None, count: int) -> list[tuple[str, dict[str, Any]]]:
            resume = {"Last-Event-ID": last_event_id} if last_event_id else {}
            async with http.stream("GET", front.url, headers={**headers, **resume}) as response:
                assert response.status_code == 200
                return await sse_events(response, count)

        await connect(2, "tools")
        ((first_id, first),) = await get(None, 1)
        await connect(3, "other")
        epoch = first_id.split("-")[0]
        replayed, (second_id, second) = await get(f"{epoch}-0", 2)
        assert replayed == (first_id, first)
        assert second["method"] == "notifications/tools/list_changed" and second_id != first_id
        assert await get(first_id, 1) == [(second_id, second)]


async def test_protocol_errors(front: Front) -> None:
    """No session id: 400; an unknown one: 404; an unsupported MCP-Protocol-Version: 400; a batch: 400;
    a message of the wrong shape: 400 saying where; a body over the frame limit: 413; a notification:
    202 with no body; a wrong Content-Type: 415; a body that cannot be decoded (invalid UTF-8 in a
    string, nested too deep): an error answer."""
    ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
    async with front.client() as http:
        session = await raw_session(http, front.url)
        ours = {**JSON_AND_SSE, "Mcp-Session-Id": session}
        assert (await http.post(front.url, json=ping, headers=JSON_AND_SSE)).status_code == 400
        unknown = {**JSON_AND_SSE, "Mcp-Session-Id": "no-such-session"}
        assert (await http.post(front.url, json=ping, headers=unknown)).status_code == 404
        old = {**ours, "MCP-Protocol-Version": "1999-01-01"}
        assert (await http.post(front.url, json=ping, headers=old)).status_code == 400
        batch = await http.post(front.url, json=[ping, ping], headers=ours)
        assert batch.status_code == 400 and "no batches" in batch.json()["error"]["message"]
        # A message of the wrong shape is told what is wrong with it, not that batches are refused.
        for shape, where in (({"id": {"a": 1}}, "$.id"), ({"id": 1.5}, "$.id"), ({"method": 5}, "$.method")):
            odd = await http.post(front.url, json={**ping, **shape}, headers=ours)
            assert odd.status_code == 400 and where in odd.json()["error"]["message"], odd.text
        huge = {"jsonrpc": "2.0", "id": 10, "method": "ping", "params": {"pad": "x" * 200_000}}
        assert (await http.post(front.url, json=huge, headers=ours)).status_code == 413
        for wrong in ("text/plain", "application/jsonx"):
            text = await http.post(front.url, content=b"{}", headers={**ours, "Content-Type": wrong})
            assert text.status_code == 415, wrong
        charset = {**ours, "Content-Type": "application/json; charset=utf-8"}
        assert (await http.post(front.url, json=ping, headers=charset)).status_code == 200
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        accepted = await http.post(front.url, json=note, headers=ours)
        assert accepted.status_code == 202 and accepted.content == b""
        # A response to no request of mcpd's cannot be accepted: 400, as MCP asks, not a silent 202.
        for stray in ("mcpd-ask-999", 7):
            answer: dict[str, Any] = {"jsonrpc": "2.0", "id": stray, "result": {}}
            refused = await http.post(front.url, json=answer, headers=ours)
            assert refused.status_code == 400 and "waits for an answer" in refused.text, stray
        # Invalid UTF-8 inside a string, nesting past the recursion limit: refused, nothing else.
        json_body = {**ours, "Content-Type": "application/json"}
        for body in (
            b'{"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "caf\xe9"}}',
            b'{"jsonrpc": "2.0", "id": 12, "method": "ping", "params": {"x": '
            + b"[" * 3000
            + b"]" * 3000
            + b"}}",
        ):
            refused = await http.post(front.url, content=body, headers=json_body)
            assert refused.status_code in (200, 400) and "error" in refused.json(), refused.text
        answered = await http.post(
            front.url, json=ping, headers={**ours, "MCP-Protocol-Version": "2025-06-18"}
        )
        assert answered.json() == {"id": 9, "result": {}, "jsonrpc": "2.0"}
        await http.delete(front.url, headers=ours)


async def test_cancellation_reaches_the_daemon(front: Front) -> None:
    """A host that gives up on a call sends notifications/cancelled; the daemon cancels the call."""
    async with sdk_host(front) as host:
        mark = len(front.daemon.events)
        with pytest.raises(MCPError, match=r"(?i)timed out"):
            await host.session.call_tool(
                "mcpd_call_tool",
                {"tool": "other__sleep", "arguments": {"seconds": 30}},
                read_timeout_seconds=0.5,
            )
        event = await front.daemon.wait_for("request.cancelled", after=mark, timeout=30)
        assert event["found"] is True
        assert await host.call("mcpd_call_tool", {"tool": "other__echo", "arguments": {"text": "on"}}) == "on"


async def test_session_limit_idle_expiry_and_slow_bodies(tmp_path: Path) -> None:
    """At http_max_sessions a new initialize sets aside the session idle longest, whose host, back,
    finds it resumed; a session just opened or resumed is not set aside (503, and it stays kept),
    nor is one in use (a GET stream each). Sessions left idle are ended; a body not sent within
    client_write_timeout gets 408."""
    limits: dict[str, Any] = {"http_max_sessions": 2, "http_session_idle": 5.0, "client_write_timeout": 1.0}
    async with http_daemon(tmp_path, **limits) as front:
        mark = len(front.daemon.events)
        async with front.client() as http:
            first = await raw_session(http, front.url)
            second = await raw_session(http, front.url)
            await anyio.sleep(SET_ASIDE_AFTER + 0.1)
            third = await raw_session(http, front.url)  # the first one, idle longest, is set aside
            await front.daemon.wait_for("http.session_ended", after=mark, why="set aside for a new session")
            assert await listed(http, front.url, first) == 200  # resumed, setting aside the second
            # The first was just resumed and the third just opened: the second's host waits.
            assert await listed(http, front.url, second) == 503
            await anyio.sleep(SET_ASIDE_AFTER + 0.1)
            assert await listed(http, front.url, second) == 200  # kept, and resumed now
            assert await listed(http, front.url, first) == 200
            async with AsyncExitStack() as streams:
                for session in (first, second):
                    headers = {**JSON_AND_SSE, "Mcp-Session-Id": session}
                    stream = await streams.enter_async_context(http.stream("GET", front.url, headers=headers))
                    assert stream.status_code == 200
                await anyio.sleep(SET_ASIDE_AFTER + 0.1)
                full = await http.post(front.url, json=initialize_body(), headers=JSON_AND_SSE)
                assert full.status_code == 503 and "in use" in full.json()["error"]["message"]
            mark = len(front.daemon.events)
            one = await front.daemon.wait_for("http.session_ended", after=mark, why="idle")
            two = await front.daemon.wait_for("http.session_ended", after=mark, why="idle", open=0)
            assert one != two
            assert await listed(http, front.url, third) == 404  # idle past the limit: not resumed
            await raw_session(http, front.url)
        async with await anyio.connect_tcp(*address_of(front.url)) as half_sent:
            await half_sent.send(half_request(front))
            with anyio.fail_after(60):
                assert (await half_sent.receive()).startswith(b"HTTP/1.1 408 ")


class _SlowlyEndingHosts:
    """Host sessions that take a while to end, as a busy daemon's do while their calls are cancelled."""

    def __init__(self) -> None:
        self.core = SimpleNamespace(usage=Store.disabled("not kept in this test"))

    @asynccontextmanager
    async def open_session(
        self, send: Any, caller: Any, state: Any, *, on_state: Any, on_subscriptions: Any
    ) -> AsyncIterator[Any]:
        try:
            yield SimpleNamespace(state=lambda: state, relist=lambda: None)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.5)


async def test_a_session_set_aside_and_resumed_at_once_stays_open() -> None:
    """A session set aside whose host comes back while the old session is still ending: the resumed
    one stays open (the old one's end took the new one, of the same id, with it: the host got 404)."""
    async with anyio.create_task_group() as tg:
        sessions = HttpSessions(cast(Hosts, _SlowlyEndingHosts()), tg, max_sessions=1, idle=60)
        first = await sessions.open()
        first.last_seen -= SET_ASIDE_AFTER + 1
        second = await sessions.open()  # sets the first aside
        second.last_seen -= SET_ASIDE_AFTER + 1
        resumed = await sessions.find(first.id)  # sets the second aside
        assert resumed is not None and resumed is not first
        await anyio.sleep(1.0)  # the old first session has ended by now
        assert await sessions.find(first.id) is resumed
        sessions.end_all("test over")


async def test_daemon_stops_cleanly_with_a_session_open(tmp_path: Path) -> None:
    """SIGTERM with an SDK session open (its GET stream attached) and a call in flight: the call gets
    an error instead of hanging, one that says it may have run (not -32600, the host's own fault),
    and the daemon exits 0."""
    async with http_daemon(tmp_path, servers=["tools"]) as front, sdk_host(front) as host:
        outcome: list[MCPError] = []
        started = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            started.set()

        async def held_call() -> None:
            relayed = {"tool": "tools__progress", "arguments": {"steps": 100_000}}
            with pytest.raises(MCPError) as failure:
                await host.session.call_tool("mcpd_call_tool", relayed, progress_callback=on_progress)
            outcome.append(failure.value)

        async with anyio.create_task_group() as tg:
            tg.start_soon(held_call)
            with anyio.fail_after(60):
                await started.wait()
            front.daemon.signal(signal.SIGTERM)
            assert await front.daemon.wait_exit() == 0
        assert "session ended" in outcome[0].error.message
        assert outcome[0].error.code == SESSION_ENDED
        await front.daemon.wait_for("daemon.stopped")


async def test_a_daemon_stopping_withdraws_the_questions_its_servers_asked_a_host(tmp_path: Path) -> None:
    """SIGTERM while a server's sampling request waits on an SDK host (its user being asked): the
    host is told the request is withdrawn (``notifications/cancelled``: the SDK cancels its
    callback) before the session's streams close, as a bridged host is. Before, the streams closed
    first and the withdrawal went nowhere: the host kept asking its user for a daemon gone."""
    asked, withdrawn = anyio.Event(), anyio.Event()

    async def sampling(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        asked.set()
        try:
            await anyio.sleep_forever()
        finally:
            withdrawn.set()
        raise AssertionError("never answered")

    async with (
        http_daemon(tmp_path, servers=["fx"]) as front,
        sdk_host(front, sampling_callback=sampling) as host,
    ):
        assert "Connected fx" in await host.call("mcpd_connect_server", {"server": "fx"})

        async def held_call() -> None:
            with pytest.raises(MCPError):
                await host.session.call_tool("fx__ask", {"kind": "sampling"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(held_call)
            with anyio.fail_after(60):
                await asked.wait()
            front.daemon.signal(signal.SIGTERM)
            with anyio.fail_after(10):
                await withdrawn.wait()
        assert await front.daemon.wait_exit() == 0


async def test_token_file_is_private_and_checked(tmp_path: Path) -> None:
    """`mcpd token` makes a 0600 token once and prints the same one after; a token file others may
    read, or a symlink, is refused with a line saying why."""
    config = http_config(tmp_path)
    token_file = tmp_path / "http.token"
    first = run_cli("token", "--config", str(config))
    assert first.returncode == 0 and len(first.stdout.strip()) >= 43
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert run_cli("token", "--config", str(config)).stdout == first.stdout
    assert run_cli("token", "--path", "--config", str(config)).stdout.strip() == str(token_file)
    token_file.chmod(0o644)
    refused = run_cli("token", "--config", str(config))
    assert refused.returncode != 0 and "others may read it" in refused.stderr
    token_file.unlink()
    os.symlink(tmp_path / "elsewhere", token_file)
    linked = run_cli("token", "--config", str(config))
    assert linked.returncode != 0 and "symlink" in linked.stderr


@pytest.mark.timeout(60)
async def test_a_fifo_or_directory_at_the_token_file_is_refused_at_once(tmp_path: Path) -> None:
    """A FIFO (or a directory) in place of the token file: `mcpd token` and `mcpd serve --http` refuse
    it as not a plain file, at once; they used to wait for a writer for ever, the daemon with its
    socket already bound, so `mcpd status` hung too."""
    config = http_config(tmp_path)
    token_file = tmp_path / "http.token"
    for make in (os.mkfifo, os.mkdir):
        make(token_file, 0o600)
        refused = run_cli("token", "--config", str(config), timeout=20)
        assert refused.returncode != 0 and "not a plain file of this user" in refused.stderr
        assert "internal error" not in refused.stderr
        served = run_cli("serve", "--config", str(config), "--socket", str(tmp_path / "s.sock"), timeout=20)
        assert served.returncode != 0 and "not a plain file of this user" in served.stderr
        (token_file.rmdir if token_file.is_dir() else token_file.unlink)()


async def test_remote_addresses_need_an_explicit_opt_in(tmp_path: Path) -> None:
    """A non-loopback `http` address is a config error unless `http_allow_remote = true`; `mcpd serve
    --http` is checked the same way, before anything starts."""
    config = tmp_path / "config.toml"
    config.write_text('[daemon]\nhttp = "0.0.0.0:8765"\n')
    with pytest.raises(ConfigError, match=r"not a loopback address.*http_allow_remote"):
        load_config(config)
    config.write_text('[daemon]\nhttp = "0.0.0.0:8765"\nhttp_allow_remote = true\n')
    assert load_config(config).daemon.http == "0.0.0.0:8765"
    config.write_text(fixture_toml("tools"))
    socket = Path(tmp_path) / "s.sock"
    served = run_cli("serve", "--config", str(config), "--socket", str(socket), "--http", "0.0.0.0:0")
    assert served.returncode == 2 and "http_allow_remote" in served.stderr


async def listed(http: httpx2.AsyncClient, url: str, session_id: str, request_id: int = 2) -> int:
    """The status of a ``tools/list`` on ``session_id``."""
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}
    return (
        await http.post(url, json=body, headers={**JSON_AND_SSE, "Mcp-Session-Id": session_id})
    ).status_code


def race_delete(front: Front, sessions: list[str]) -> None:
    """For each session, a `logging/setLevel` (which saves the session's state) and a DELETE whose
    last bytes arrive together, on two raw connections."""
    address = urlsplit(front.url)
    set_level = json.dumps(
        {"jsonrpc": "2.0", "id": 5, "method": "logging/setLevel", "params": {"level": "info"}}
    )
    for session in sessions:
        head = (
            f"Host: {address.netloc}\r\nAuthorization: Bearer {front.token}\r\nMcp-Session-Id: {session}\r\n"
            "Connection: close\r\n"
        )
        post = (
            f"POST {address.path} HTTP/1.1\r\n{head}Content-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\n"
            f"Content-Length: {len(set_level)}\r\n\r\n{set_level}"
        ).encode()
        delete = f"DELETE {address.path} HTTP/1.1\r\n{head}\r\n".encode()
        with (
            socket.create_connection((address.hostname, address.port)) as one,
            socket.create_connection((address.hostname, address.port)) as other,
        ):
            one.sendall(post[:-5])
            other.sendall(delete[:-2])
            time.sleep(0.05)
            one.sendall(post[-5:])
            other.sendall(delete[-2:])
            one.recv(4096)
            other.recv(4096)


async def test_a_session_outlives_a_daemon_restart(tmp_path: Path) -> None:
    """The daemon restarted under an SDK host: the host's next call on the same session works, with
    the server it had connected, and it never initializes again (the SDK's client would not: a 404
    is an error to it). A session its host deleted is not resumed; one it kept is."""
    port, db = free_port(), tmp_path / "usage.db"
    config = http_config(tmp_path, servers=["tools"], http=f'"127.0.0.1:{port}"', usage_db=f'"{db}"')
    async with running_daemon(config) as first:
        url = (await first.wait_for("http.listening"))["url"]
        front = Front(first, url, token_in(tmp_path), config)
        async with sdk_host(front) as host, front.client() as http:
            assert "Connected tools" in await host.call("mcpd_connect_server", {"server": "tools"})
            assert await host.call("tools__echo", {"text": "before"}) == "before"
            kept, deleted = await raw_session(http, url), await raw_session(http, url)
            assert (await http.delete(url, headers={"Mcp-Session-Id": deleted})).status_code == 200
            # Deleted while a request that changes its state runs: it must not save the session back.
            raced = [await raw_session(http, url) for _ in range(8)]
            await anyio.to_thread.run_sync(race_delete, front, raced)
            first.signal(signal.SIGTERM)
            assert await first.wait_exit() == 0
            async with running_daemon(config) as second:
                await second.wait_for("http.listening")
                assert await host.call("tools__echo", {"text": "after"}) == "after"
                assert "tools__echo" in await host.tool_names()
                # Two requests at once on a kept session: one resumes it, the other waits for that.
                statuses: list[int] = []

                async def list_kept(request_id: int) -> None:
                    statuses.append(await listed(http, url, kept, request_id))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(list_kept, 2)
                    tg.start_soon(list_kept, 3)
                assert statuses == [200, 200]
                assert await listed(http, url, deleted) == 404
                assert [await listed(http, url, session) for session in raced] == [404] * len(raced)
                # Every session of the second daemon is one of the first's, resumed.
                names = [e["event"] for e in second.events if e["event"].startswith("http.session")]
                assert names.count("http.session") == names.count("http.session_resumed") == 2


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
async def test_a_sessions_subscriptions_are_saved_at_each_change_and_taken_again(tmp_path: Path) -> None:
    """An HTTP host subscribes to three resources and drops one: its session's saved subscriptions
    are the two others once the changes are answered (each change written as it happens, as a bridge
    is told of it), and a daemon killed (-9) then hands them to the next one, which takes those two
    again, not the one dropped."""
    config, db = full_http_config(tmp_path)
    uris = [f"mcpd://full/full://r/{index}" for index in range(3)]

    def saved() -> list[list[str]]:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            return [
                saved_subscriptions(conn, key) for (key,) in conn.execute("SELECT key FROM http_sessions")
            ]

    async with subscribed_host(config, tmp_path, uris) as (first, host):
        await host.session.unsubscribe_resource(uris[1])
        with anyio.fail_after(30):
            while [uris[0], uris[2]] not in await anyio.to_thread.run_sync(saved):
                await anyio.sleep(0.02)
        first.signal(signal.SIGKILL)
        await first.wait_exit()
        async with running_daemon(config) as second:
            await second.wait_for("http.listening")
            await host.tool_names()  # the session resumed from its saved state
            await second.wait_for("resource.subscribed", server="full", uri="full://r/2", timeout=60)
            taken = [e["uri"] for e in second.events if e.get("event") == "resource.subscribed"]
    assert taken == ["full://r/0", "full://r/2"]


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
async def test_a_session_set_aside_resumes_with_its_subscriptions(tmp_path: Path) -> None:
    """A session set aside at http_max_sessions keeps its subscriptions: its host, back, finds them
    taken again (from the session the daemon keeps in memory, whose saved state leaves them out), and
    the store still holds them."""
    config, db = full_http_config(tmp_path, http_max_sessions=1)
    uris = [f"mcpd://full/full://r/{index}" for index in range(2)]
    async with running_daemon(config) as daemon:
        url = (await daemon.wait_for("http.listening"))["url"]
        await daemon.wait_for("server.state", server="full", new="running", timeout=120)
        async with Front(daemon, url, token_in(tmp_path), config).client() as http:
            aside = await raw_session(http, url)
            headers = {**JSON_AND_SSE, "Mcp-Session-Id": aside}
            for request_id, uri in enumerate(uris, 2):
                body = {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "method": "resources/subscribe",
                    "params": {"uri": uri},
                }
                assert (await http.post(url, json=body, headers=headers)).status_code == 200
            await anyio.sleep(SET_ASIDE_AFTER + 0.1)
            await raw_session(http, url)
            await daemon.wait_for("http.session_ended", why="set aside for a new session")
            await anyio.sleep(SET_ASIDE_AFTER + 0.1)  # the new one may be set aside in turn
            mark = len(daemon.events)
            assert await listed(http, url, aside) == 200
            await daemon.wait_for("http.session_resumed", after=mark)
            await daemon.wait_for("resource.subscribed", after=mark, server="full", uri="full://r/1")
        with contextlib.closing(sqlite3.connect(db)) as conn:
            assert saved_subscriptions(conn, session_key(aside)) == uris


@pytest.mark.parametrize("restart", [False, True], ids=["in-memory", "restarted"])
@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
async def test_a_server_removed_by_reload_is_not_subscribed_again_for_a_session_set_aside(
    tmp_path: Path, restart: bool
) -> None:
    """A reload removes the server whose resource a session set aside (at http_max_sessions) was
    subscribed to: when a server of that name is configured again and the host comes back, the new
    server is asked for none of it (``full://asked``), whether the daemon kept the session in memory
    or, restarted in between, only in the store, which keeps none of it either. Before, the host's
    return subscribed the new server to it again, from the session's saved list."""
    config, db = full_http_config(tmp_path, http_max_sessions=1)
    with_full = config.read_text()
    without_full = with_full.replace(fullserver_toml("full"), "")
    uri, other = "mcpd://full/full://r/0", "mcpd://full/full://r/1"

    async def resume(daemon: DaemonProcess, http: httpx2.AsyncClient, url: str, aside: str) -> None:
        mark = len(daemon.events)
        assert await listed(http, url, aside) == 200
        await daemon.wait_for("http.session_resumed", after=mark)
        # The host's own subscribe comes after any its session would take again on its return.
        body = {"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": {"uri": other}}
        headers = {**JSON_AND_SSE, "Mcp-Session-Id": aside}
        assert (await http.post(url, json=body, headers=headers)).status_code == 200
        async with connect(daemon.socket) as client:
            asked = await client.read_resource("mcpd://full/full://asked")
            subscribed = await client.read_resource("mcpd://full/full://subscribed")
        assert json.loads(subscribed.contents[0].text or "") == ["full://r/1"]
        assert json.loads(asked.contents[0].text or "") == 1

    async with running_daemon(config) as first:
        url = (await first.wait_for("http.listening"))["url"]
        await first.wait_for("server.state", server="full", new="running", timeout=120)
        async with Front(first, url, token_in(tmp_path), config).client() as http:
            aside = await raw_session(http, url)
            body = {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": uri}}
            headers = {**JSON_AND_SSE, "Mcp-Session-Id": aside}
            assert (await http.post(url, json=body, headers=headers)).status_code == 200
            await anyio.sleep(SET_ASIDE_AFTER + 0.1)  # idle long enough to be set aside for another
            await raw_session(http, url)
            await first.wait_for("http.session_ended", why="set aside for a new session")
            async with connect(first.socket) as client:
                config.write_text(without_full)
                await client.reload()
                config.write_text(with_full)
                if not restart:
                    mark = len(first.events)
                    await client.reload()
                    await first.wait_for("server.state", server="full", new="running", after=mark, timeout=60)
                    await anyio.sleep(SET_ASIDE_AFTER)  # the newer session may be set aside in turn
                    await resume(first, http, url, aside)
    if restart:
        async with (
            running_daemon(config) as second,
            Front(second, url, token_in(tmp_path), config).client() as http,
        ):
            await second.wait_for("http.listening")
            await second.wait_for("server.state", server="full", new="running", timeout=120)
            await resume(second, http, url, aside)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert saved_subscriptions(conn, session_key(aside)) == [other]


def _as_saved_before_rows(db: Path) -> None:
    """Make the store ``db`` one of the schema before subscriptions were rows of their own: each
    session's state holds its subscriptions."""
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("BEGIN")
        for key, state in conn.execute("SELECT key, state FROM http_sessions").fetchall():
            legacy = {**json.loads(state), "subscribed": saved_subscriptions(conn, key)}
            legacy.pop("subscription_deltas", None)
            conn.execute(
                "UPDATE http_sessions SET state = ? WHERE key = ?", (json.dumps(legacy).encode(), key)
            )
        conn.execute("DROP TABLE http_session_subscriptions")
        conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) - 1}")
        conn.execute("COMMIT")


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
async def test_a_session_saved_with_its_subscriptions_in_its_state_resumes_with_them(tmp_path: Path) -> None:
    """A store of the schema before, whose session states held their subscriptions, is migrated, and
    a host's session saved there resumes with them: the new daemon takes them again, an update reaches
    the host, and they become rows (its state saved then holds none)."""
    config, db = full_http_config(tmp_path)
    uris = [f"mcpd://full/full://r/{index}" for index in range(3)]

    def saved() -> list[tuple[list[str], list[str]]]:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            return [
                (json.loads(state)["subscribed"], saved_subscriptions(conn, key))
                for key, state in conn.execute("SELECT key, state FROM http_sessions")
            ]

    async with subscribed_host(config, tmp_path, uris) as (first, host):
        with anyio.fail_after(30):
            while await anyio.to_thread.run_sync(saved) != [([], uris)]:
                await anyio.sleep(0.02)
        first.signal(signal.SIGKILL)
        await first.wait_exit()
        await anyio.to_thread.run_sync(_as_saved_before_rows, db)
        assert await anyio.to_thread.run_sync(lambda: stored_states(db)) == [uris]
        async with running_daemon(config) as second:
            await second.wait_for("http.listening")
            await host.tool_names()  # the session resumes
            await second.wait_for("resource.subscribed", server="full", uri="full://r/2", timeout=60)
            await host.call("full__touch", {"uri": "full://r/0"})
            with anyio.fail_after(30):
                await host.updated.wait()
                while await anyio.to_thread.run_sync(saved) != [([], uris)]:
                    await anyio.sleep(0.02)
    taken = [e["uri"] for e in second.events if e.get("event") == "resource.subscribed"]
    assert taken == [uri[12:] for uri in uris]


def stored_states(db: Path) -> list[list[str]]:
    """The subscriptions held by the session states of the store ``db`` (that of the schema before)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return [
            json.loads(state)["subscribed"] for (state,) in conn.execute("SELECT state FROM http_sessions")
        ]


def saved_subscriptions(conn: sqlite3.Connection, key: str) -> list[str]:
    """The subscriptions the store keeps for the session ``key``, in the order taken."""
    rows = conn.execute("SELECT uri FROM http_session_subscriptions WHERE key = ? ORDER BY seq", (key,))
    return [uri for (uri,) in rows]


def written(pid: int) -> int:
    """The bytes process ``pid`` has written so far, to files, sockets and pipes alike: what reached the
    disk (``write_bytes``) is 0 on a tmpfs."""
    io = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return int(io["wchar"])


@pytest.mark.timeout(600)
@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
async def test_hundreds_of_subscriptions_are_saved_by_their_changes_and_resumed(tmp_path: Path) -> None:
    """An HTTP host subscribes to 600 resources one by one: each change writes what changed, not
    the whole set (the second 300 cost the store what the first did, and the saved state stays as
    small as it began), and after a kill -9 the next daemon takes all 600 again, an update reaching
    the host. Saved whole at each change, the second half wrote twice what the first did and more
    (10,000 subscribes: ~1.4 GB)."""
    config, db = full_http_config(tmp_path)
    uris = [f"mcpd://full/full://r/{index}/{'x' * 100}" for index in range(600)]

    def state_and_subscriptions() -> tuple[int, int]:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            ((longest, count),) = conn.execute(
                "SELECT max(length(state)), (SELECT count(*) FROM http_session_subscriptions)"
                " FROM http_sessions"
            )
            return longest, count

    async with subscribed_host(config, tmp_path, uris[:1]) as (first, host):
        marks = [written(first.process.pid)]
        with anyio.fail_after(300):  # a guard against a hang: 600 round trips on a slow machine
            for half in (uris[1:301], uris[301:]):
                for uri in half:
                    await host.session.subscribe_resource(uri)
                marks.append(written(first.process.pid))
        first_half, second_half = marks[1] - marks[0], marks[2] - marks[1]
        assert second_half < 1.5 * first_half, (first_half, second_half)
        with anyio.fail_after(30):
            while (stored := await anyio.to_thread.run_sync(state_and_subscriptions))[1] < len(uris):
                await anyio.sleep(0.02)
        assert stored[0] < 1024  # the state holds none of them
        first.signal(signal.SIGKILL)
        await first.wait_exit()
        async with running_daemon(config) as second:
            await second.wait_for("http.listening")
            await host.tool_names()  # the session resumes
            await second.wait_for("resource.subscribed", server="full", uri=uris[-1][12:], timeout=300)
            host.updated = anyio.Event()
            await host.call("full__touch", {"uri": uris[-1][12:]})
            with anyio.fail_after(30):
                await host.updated.wait()
    taken = [e["uri"] for e in second.events if e.get("event") == "resource.subscribed"]
    assert taken == [uri[12:] for uri in uris]


async def test_the_event_stream_comes_back_after_a_crash_and_a_service_restart(tmp_path: Path) -> None:
    """The daemon killed, and started again after the pause a service manager takes (systemd's
    RestartSec=2): the SDK host opens its event stream again (the ``retry`` the stream told it; it
    gave up after its one retry a second later, deaf for the rest of its session), and its session,
    resumed, tells it to list its tools again (what changed meanwhile was never announced)."""
    port, db = free_port(), tmp_path / "usage.db"
    config = http_config(tmp_path, servers=["tools"], http=f'"127.0.0.1:{port}"', usage_db=f'"{db}"')
    async with running_daemon(config) as first:
        url = (await first.wait_for("http.listening"))["url"]
        front = Front(first, url, token_in(tmp_path), config)
        async with sdk_host(front) as host:
            assert "Connected tools" in await host.call("mcpd_connect_server", {"server": "tools"})
            with anyio.fail_after(30):
                await host.list_changed.wait()
            first.signal(signal.SIGKILL)
            await first.wait_exit()
            await anyio.sleep(1.5)  # past the SDK's own second; the new daemon listens well within 10 s
            async with running_daemon(config) as second:
                # Running before the session resumes: no change of theirs is announced after it.
                await second.wait_for("server.state", server="tools", new="running", timeout=60)
                host.list_changed = anyio.Event()
                assert await host.call("tools__echo", {"text": "back"}) == "back"  # resumes it
                with anyio.fail_after(30):
                    await host.list_changed.wait()


async def test_saved_sessions_expire_and_end(tmp_path: Path) -> None:
    """What a new daemon finds in the store: the latest save of each session still within the idle
    limit; a session saved longer ago is dropped (and deleted), an ended one is gone."""
    store = Store.open(tmp_path / "usage.db")
    now = time.time()
    state = b'{"connected": ["tools"]}'
    store.save_session(SavedSession("stale", state, now - 120))
    store.save_session(SavedSession("fresh", b"{}", now - 10))
    store.save_session(SavedSession("fresh", state, now - 5))
    store.save_session(SavedSession("ended", state, now - 5))
    store.save_session(SavedSession("ended", None, now - 1))
    found = await saved_sessions(store, idle=60)
    assert list(found) == ["fresh"] and found["fresh"].state == state
    assert list(await saved_sessions(store, idle=3600)) == ["fresh"]  # the stale row was deleted
    store.close()


async def test_saved_subscriptions_change_and_go_with_their_session(tmp_path: Path) -> None:
    """A session's subscriptions are kept as they change, in the order taken, and read back with it;
    a save with all of them replaces those kept. They go with their session (ended, idle too long,
    pruned), and a change of a session not kept is not written: nothing would ever delete it."""
    db = tmp_path / "usage.db"
    store = Store.open(db)
    now = time.time()
    for key, saved_at in (("open", now - 5), ("stale", now - 120), ("ended", now - 5)):
        store.save_session(SavedSession(key, b"{}", saved_at))
        store.save_subscriptions(SavedSubscriptions(key, [f"{key}/1", f"{key}/2", f"{key}/3"], []))
    store.save_subscriptions(SavedSubscriptions("open", ["open/4"], ["open/2"]))
    store.save_session(SavedSession("ended", None, now))
    store.save_subscriptions(SavedSubscriptions("unknown", ["unknown/1"], []))

    found = await saved_sessions(store, idle=60)
    assert {key: saved.subscribed for key, saved in found.items()} == {"open": ["open/1", "open/3", "open/4"]}
    assert stored_subscriptions(db) == 3  # the stale session's went with it
    store.save_session(SavedSession("open", b"{}", now, ["open/4", "open/5"]))
    found_one = await store.run(lambda conn: session_row(conn, "open", since=0))
    assert found_one is not None and found_one.subscribed == ["open/4", "open/5"]
    assert await store.run(lambda conn: prune_sessions(conn, since=0, keep=0)) == 1
    assert stored_subscriptions(db) == 0
    store.close()


async def test_the_subscriptions_of_removed_servers_go_from_every_stored_session(tmp_path: Path) -> None:
    """``drop_subscriptions`` deletes the stored subscriptions under the qualified URIs of removed
    servers, of every session, and no other server's, however alike its name."""
    store = Store.open(tmp_path / "usage.db")
    kept = ["mcpd://full2/full://r/0", "mcpd://ful/l/x", "mcpd://other/mcpd://full/x"]
    for key in ("one", "two"):
        store.save_session(SavedSession(key, b"{}", time.time()))
        store.save_subscriptions(SavedSubscriptions(key, ["mcpd://full/full://r/0", *kept, "mcpd://b/y"], []))
    prefixes = ["mcpd://full/", "mcpd://b/"]
    assert await store.run(lambda conn: drop_subscriptions(conn, prefixes)) == 4
    found = await saved_sessions(store, idle=60)
    assert {key: saved.subscribed for key, saved in found.items()} == {"one": kept, "two": kept}
    store.close()


def stored_subscriptions(db: Path) -> int:
    """The rows of subscriptions in the store ``db``, of every session."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        (count,) = conn.execute("SELECT count(*) FROM http_session_subscriptions").fetchone()
        return int(count)


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
async def test_a_store_made_again_under_the_daemon_gets_the_sessions_it_lost(tmp_path: Path) -> None:
    """The usage store deleted under the daemon is made again, and the HTTP sessions kept, open or
    set aside, are saved into it at once, with their subscriptions: a daemon killed afterwards still
    leaves them to the next one (they were saved when they opened or changed, into the file that
    went, and an idle one is not saved again), which takes the subscriptions again."""
    config, _ = full_http_config(tmp_path, http_max_sessions=2)

    async def subscribe(http: httpx2.AsyncClient, session: str, uri: str) -> None:
        body = {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": uri}}
        headers = {**JSON_AND_SSE, "Mcp-Session-Id": session}
        assert (await http.post(url, json=body, headers=headers)).status_code == 200

    async with running_daemon(config) as first:
        url = (await first.wait_for("http.listening"))["url"]
        await first.wait_for("server.state", server="full", new="running", timeout=120)
        async with Front(first, url, token_in(tmp_path), config).client() as http:
            aside = await raw_session(http, url)
            await subscribe(http, aside, "mcpd://full/full://r/0")
            await anyio.sleep(SET_ASIDE_AFTER + 0.1)  # idle long enough to be set aside for another
            kept, _newer = await raw_session(http, url), await raw_session(http, url)
            await subscribe(http, kept, "mcpd://full/full://r/1")
            for file in tmp_path.glob("usage.db*"):
                file.unlink()
            await first.wait_for("usage.store_gone", why="deleted")
            await first.wait_for("usage.resaved")
            first.process.kill()
            await first.wait_exit()
            async with running_daemon(config) as second:
                await second.wait_for("http.listening")
                assert await listed(http, url, kept) == 200
                assert await listed(http, url, aside) == 200
                for uri in ("full://r/0", "full://r/1"):
                    await second.wait_for("resource.subscribed", server="full", uri=uri, timeout=60)


def _corrupt_sessions_table(db: Path) -> None:
    """A usage store whose ``http_sessions`` table's root page is overwritten (the rest intact)."""
    Store.open(db).close()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'http_sessions'").fetchone()
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with db.open("r+b") as file:
        file.seek((root - 1) * page_size)
        file.write(b"\xff" * 200)


async def test_a_corrupt_sessions_table_costs_only_resumption(tmp_path: Path) -> None:
    """A damaged ``http_sessions`` table: no saved sessions (said once), and `serve --http` serves; the
    sqlite3 error used to escape from the front end's start and end the daemon."""
    db = tmp_path / "usage.db"
    _corrupt_sessions_table(db)
    store = Store.open(db)
    try:
        with structlog.testing.capture_logs() as logs:
            assert await saved_sessions(store, idle=3600) == {}
    finally:
        store.close()
    # The store itself turns off over a corrupt page (usage.disabled); the front end says what it costs.
    assert [entry["event"] for entry in logs].count("http.sessions_unreadable") == 1
    async with http_daemon(tmp_path, usage_db=f'"{db}"') as front:
        await front.daemon.wait_for("http.sessions_unreadable")
        async with sdk_host(front) as host:
            assert META_TOOLS[0] in await host.tool_names()


async def test_url_options_connect_and_expose_all(front: Front) -> None:
    """``?connect=S`` and ``?all=1`` on the URL are ``mcpd bridge --connect S`` and ``--all``: a host
    that never calls ``mcpd_connect_server`` gets the server's tools, or every tool."""
    async with sdk_host(replace(front, url=front.url + "?connect=tools")) as host:
        assert "other__echo" not in await host.listing({"tools__echo"})
        assert await host.call("tools__echo", {"text": "preconnected"}) == "preconnected"
    async with sdk_host(replace(front, url=front.url + "?all=1")) as host:
        await host.listing({"tools__echo", "other__echo"})


async def test_what_matters_outlives_a_flood_of_log_messages_in_an_outbox() -> None:
    """A host that does not read its GET stream while a server logs at its level: log messages and
    progress stop at half the outbox, so a `list_changed` or a server's question queued before (or
    among) them is still there when the host reads (1,000 log messages pushed it out)."""
    outbox = Outbox(EVENTS_KEPT, "http-test")
    outbox.push(b"list_changed")
    for n in range(3 * EVENTS_KEPT):
        outbox.push(b"log %d" % n, advisory=True)
        if n == EVENTS_KEPT:
            outbox.push(b"question")
    items, done = await outbox.take()
    assert not done and items[0] == b"list_changed" and b"question" in items
    assert sum(item.startswith(b"log") for item in items) == EVENTS_KEPT // 2
    for n in range(2 * EVENTS_KEPT):  # what matters is bounded too: the oldest goes
        outbox.push(b"event %d" % n)
    items, _ = await outbox.take()
    assert len(items) == EVENTS_KEPT and items[-1] == b"event %d" % (2 * EVENTS_KEPT - 1)
    # And in bytes: a few large log messages cannot hold megabytes per session (each has its own).
    megabyte = b"m" * (1024 * 1024)
    outbox.push(b"list_changed")
    for _ in range(10):
        outbox.push(megabyte, advisory=True)
    for _ in range(3):
        outbox.push(megabyte * 2)
    items, _ = await outbox.take()
    assert sum(map(len, items)) <= OUTBOX_BYTES and items[-1] == megabyte * 2


def updated(uri: str, n: int) -> bytes:
    """A ``notifications/resources/updated`` of ``uri``, ``n`` in its ``_meta``, as a session sends it."""
    params = {"uri": uri, "_meta": {"n": n}}
    return json.dumps({"method": "notifications/resources/updated", "params": params}).encode()


async def test_a_flood_of_resource_updates_never_pushes_a_list_changed_off_the_get_stream() -> None:
    """A host that does not read its GET stream while a subscribed resource's server floods updates:
    they are advisory, as log messages are, so they stop at half the outbox and the `list_changed`
    queued before them is still there (3,000 updates pushed it out); those past half are held, not
    dropped, and come with the next take: every URI's update reaches the host."""
    session = HttpSession(1)
    list_changed = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'
    session.deliver(list_changed)
    uris = [f"mcpd://s/r{n}" for n in range(3 * EVENTS_KEPT)]
    for n, uri in enumerate(uris):
        session.deliver(updated(uri, n))
    items, _ = await session.events.take()
    assert items[0] == list_changed
    assert [json.loads(item)["params"]["uri"] for item in items[1:]] == uris


async def test_resource_updates_past_an_outbox_bound_coalesce_to_the_latest_of_each_uri() -> None:
    """A flood of updates of three URIs into an outbox nobody reads: past half of it they are held
    one per URI, the latest (its ``_meta``), so the host's next take has a bounded number of them and
    the last of each is the server's last. Before, they were dropped: the host never learnt of the
    last changes."""
    outbox = Outbox(EVENTS_KEPT, "http-test")
    count, uris = 3 * EVENTS_KEPT, 3
    for n in range(count):
        outbox.push(updated(f"mcpd://s/r{n % uris}", n), advisory=True)
    items, _ = await outbox.take()
    assert len(items) == EVENTS_KEPT // 2 + uris
    last = {params["uri"]: params["_meta"]["n"] for params in (json.loads(item)["params"] for item in items)}
    assert last == {f"mcpd://s/r{i}": max(range(i, count, uris)) for i in range(uris)}


async def test_updates_an_outbox_pushes_out_come_before_the_later_ones_it_holds() -> None:
    """An outbox nobody reads: updates of one URI fill its advisory half, the next is held, then
    messages that matter push the oldest updates out (held, as the refused one). The host's take has
    them in the order the server sent them, so the last update of the URI is the server's last.
    Before, each update pushed out replaced the later one held (``HeldUpdates`` keeps the last it
    is given), and the take put the held ones after the others: the last the host saw was the
    last pushed out, an old one, and the server's last was lost."""
    outbox = Outbox(EVENTS_KEPT, "http-test")
    half = EVENTS_KEPT // 2
    for n in range(half + 1):
        outbox.push(updated("mcpd://s/r", n), advisory=True)
    for _ in range(half + 10):
        outbox.push(b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}')
    items, _ = await outbox.take()
    sent = [json.loads(item)["params"]["_meta"]["n"] for item in items if b"updated" in item]
    assert sent == sorted(sent)
    assert sent[-1] == half


async def test_the_last_update_of_an_ended_subscription_reaches_a_host_far_behind() -> None:
    """A host that does not read its GET stream while updates of as many URIs as ``HeldUpdates``
    holds came, then its subscription to one more URI ended: the update that says so
    (``SUBSCRIPTION_ENDED``) is kept, after the others. Before, it was advisory like any update and
    dropped past ``HeldUpdates``' bounds: the host never learnt that no update of it would come (as
    the bridge and socket subscribers already keep it: ``Behind.offer(final=True)``)."""
    session = HttpSession(1)
    for n in range(EVENTS_KEPT // 2 + HELD_UPDATES):
        session.deliver(updated(f"mcpd://s/r{n}", n))
    params = {"uri": "mcpd://s/gone", "_meta": {SUBSCRIPTION_ENDED: "the server restarted without it"}}
    ended = json.dumps({"method": "notifications/resources/updated", "params": params}).encode()
    session.deliver(ended)
    items, _ = await session.events.take()
    assert items[-1] == ended


async def test_the_ends_of_many_subscriptions_push_nothing_off_the_get_stream() -> None:
    """A server a host held 3,000 subscriptions of is removed (or its new run offers none): each ends
    with its last update (``SUBSCRIPTION_ENDED``) while the host does not read its GET stream. The
    `list_changed` queued before them is still there, and every one of them reaches the host: they
    stop at half the outbox and are held past it, as other updates are. Before, they counted as what
    matters: they pushed the `list_changed` out, and each other, past the outbox's bound, dropped."""
    session = HttpSession(1)
    list_changed = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'
    session.deliver(list_changed)
    uris = [f"mcpd://s/r{n}" for n in range(3 * EVENTS_KEPT)]
    for uri in uris:
        params = {"uri": uri, "_meta": {SUBSCRIPTION_ENDED: "server 's' was removed from the config"}}
        session.deliver(json.dumps({"method": "notifications/resources/updated", "params": params}).encode())
    items, _ = await session.events.take()
    assert items[0] == list_changed
    assert [json.loads(item)["params"]["uri"] for item in items[1:]] == uris


def raw_outcome(sock: socket.socket, wait: float) -> tuple[bool, int]:
    """After ``wait`` seconds of not reading: whether the daemon ended the connection, and the bytes
    it had sent."""
    time.sleep(wait)
    sock.settimeout(10)
    received = 0
    try:
        while chunk := sock.recv(1 << 20):
            received += len(chunk)
    except TimeoutError:
        return False, received
    except ConnectionResetError:
        pass
    return True, received


async def test_connections_that_send_no_request_or_read_no_answer_are_cut_off(tmp_path: Path) -> None:
    """Before any token is read: a connection that sends nothing, or half a request line, is closed
    after `client_write_timeout` (a thousand of them took every slot for good, no token needed),
    and one that leaves a large answer unread is aborted (it held the answer in memory for good)."""
    async with http_daemon(tmp_path, servers=["other"], client_write_timeout=0.5) as front:
        address = urlsplit(front.url)
        async with front.client() as http:
            session = await raw_session(http, front.url)
        echo = {"tool": "other__echo", "arguments": {"text": "x" * 6_000_000}}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        body = json.dumps({**call, "params": {"name": "mcpd_call_tool", "arguments": echo}})
        request = (
            f"POST {address.path} HTTP/1.1\r\nHost: {address.netloc}\r\n"
            f"Authorization: Bearer {front.token}\r\nMcp-Session-Id: {session}\r\n"
            "Content-Type: application/json\r\nAccept: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n{body}"
        ).encode()

        def attempt(sent: bytes) -> tuple[bool, int]:
            with socket.socket() as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.connect((address.hostname, address.port))
                sock.sendall(sent)
                return raw_outcome(sock, 2.0)

        outcomes: dict[str, tuple[bool, int]] = {}

        async def run(name: str, sent: bytes) -> None:
            outcomes[name] = await anyio.to_thread.run_sync(attempt, sent)

        async with anyio.create_task_group() as tg:
            for name, sent in (("silent", b""), ("half", b"POST /mc"), ("unread", request)):
                tg.start_soon(run, name, sent)
    silent, half, unread = outcomes["silent"], outcomes["half"], outcomes["unread"]
    assert silent == (True, 0) and half == (True, 0)
    ended, received = unread
    assert ended and received < 12_000_000  # the answer (twice the text) was not all sent


KEEP_ALIVE = 5.0
"""Seconds uvicorn keeps an idle connection open (its default ``timeout_keep_alive``)."""


async def test_a_request_sent_while_the_daemon_was_stopped_is_answered(tmp_path: Path) -> None:
    """A host's request on its kept-alive connection while the daemon is stopped (SIGSTOP) past
    uvicorn's keep-alive wait and `client_write_timeout`: once the daemon runs again, it is answered
    (before: the connection was closed with the request unread, a ReadError, and the MCP SDK's host
    lost its session)."""
    async with http_daemon(tmp_path, client_write_timeout=1.0) as front, front.client() as http:
        session = await raw_session(http, front.url)
        statuses: list[int] = []

        async def list_tools() -> None:
            statuses.append(await listed(http, front.url, session))

        front.daemon.signal(signal.SIGSTOP)
        try:
            with anyio.fail_after(KEEP_ALIVE + 30):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(list_tools)
                    await anyio.sleep(KEEP_ALIVE + 1)  # the fault itself: the daemon stopped this long
                    front.daemon.signal(signal.SIGCONT)
        finally:
            front.daemon.signal(signal.SIGCONT)
        assert statuses == [200]


async def test_connections_without_the_token_cannot_lock_hosts_out(tmp_path: Path) -> None:
    """1,100 idle connections of a process without the token (more than MAX_CONNECTIONS): a host's
    established connection and a new host both keep being served. They shared one pool, and uvicorn
    answered 503 even on established connections once it was full."""
    async with http_daemon(tmp_path) as front, front.client() as http:
        session = await raw_session(http, front.url)
        headers = {**JSON_AND_SSE, "Mcp-Session-Id": session}
        assert await listed(http, front.url, session) == 200
        address = address_of(front.url)

        def hold(count: int) -> list[socket.socket]:
            held = []
            for _ in range(count):
                sock = socket.socket()
                sock.connect(address)
                held.append(sock)
            return held

        held = await anyio.to_thread.run_sync(hold, 1100)
        try:
            await anyio.sleep(1.0)  # the daemon accepts them all
            listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
            response = await http.post(front.url, json=listing, headers=headers)
            assert response.status_code == 200, response.text
            async with front.client() as newcomer:
                await raw_session(newcomer, front.url)
            log = await front.daemon.wait_for("http.anonymous_connections_dropped")
            assert log["limit"] == 256
        finally:
            for sock in held:
                sock.close()


@contextlib.asynccontextmanager
async def attacking(args: list[str]) -> AsyncIterator[None]:
    """Python run with ``args`` in a process of its own until the block ends, then killed. The block
    starts once its first line says the attack is under way."""
    attacker = await anyio.open_process(
        [sys.executable, *args], stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        assert attacker.stdout is not None
        with anyio.fail_after(10):
            await attacker.stdout.receive()
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            attacker.kill()
        await attacker.aclose()  # its stdout too, not left to a later test's loop


_TRICKLE = """
import socket, sys, time
host, port, count, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
def opened():
    sock = socket.create_connection((host, port))
    sock.setblocking(False)
    sock.send(b"POST /mcp HTTP/1.1\\r\\nX-a: ")
    return sock
held = [opened() for _ in range(count)]
print("trickling", flush=True)
end = time.monotonic() + seconds
while time.monotonic() < end:
    for index, sock in enumerate(held):
        try:
            sock.send(b"a")
        except OSError:
            sock.close()
            held[index] = opened()
    time.sleep(0.002)  # a sweep at a time: the attack needs no whole core, and other tests run beside it
"""


async def test_connections_trickling_a_head_cannot_lock_new_hosts_out(tmp_path: Path) -> None:
    """300 connections without the token, each sending its request head a byte at a time and
    reopened when dropped: new hosts still get sessions (a connection with bytes waiting was always
    kept over a newcomer, so 20-24 of 40 of a host's new connections were closed unanswered)."""
    async with http_daemon(tmp_path) as front:
        host, port = address_of(front.url)
        async with attacking(["-c", _TRICKLE, host, str(port), "300", "120"]):
            await anyio.sleep(1.5)  # the pool of connections without the token is full by now
            for _ in range(10):
                async with front.client() as newcomer:
                    await raw_session(newcomer, front.url)


async def test_a_flood_of_connections_without_the_token_holds_up_no_host(tmp_path: Path) -> None:
    """A process opening connections as fast as it can, each sending a request without the token and
    closing: a host's calls on its kept-alive connection, and a new host's session, are still served
    within a second or two (asyncio accepted up to 2,048 connections per turn of the loop, each a task
    and an h11 protocol: calls took 5 s and more, and most new connections were reset or timed out)."""
    async with http_daemon(tmp_path) as front, front.client() as http:
        session = await raw_session(http, front.url)
        host, port = address_of(front.url)
        async with attacking(["-m", "mcpd.testing.flood", host, str(port), "30"]):
            await anyio.sleep(1.0)  # the flood under way
            for request_id in range(10):
                with anyio.fail_after(3):
                    assert await listed(http, front.url, session, request_id) == 200
            with anyio.fail_after(6):
                async with front.client() as newcomer:
                    await raw_session(newcomer, front.url)


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the daemon's RSS in /proc")
async def test_pipelined_requests_are_not_read_ahead_without_bound(tmp_path: Path) -> None:
    """A host that pipelines 64 MB of pings and reads no answer: the daemon reads a little ahead of
    the request it serves and the rest waits in the kernel (uvicorn read on whenever the app took a
    body, and h11 kept it all: the daemon's memory grew by the whole 64 MB)."""
    async with http_daemon(tmp_path) as front:
        async with front.client() as http:
            session = await raw_session(http, front.url)
        ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
        request = raw_post(front, session, len(ping), ping)
        pipelined = request * (64 * 1024 * 1024 // len(request))
        pid = front.daemon.process.pid
        before = rss_bytes(pid)

        def push() -> int:
            with socket.socket() as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.connect(address_of(front.url))
                sock.setblocking(False)
                sent, deadline = 0, time.monotonic() + 6
                while sent < len(pipelined) and time.monotonic() < deadline:
                    try:
                        sent += sock.send(pipelined[sent : sent + (1 << 20)])
                    except BlockingIOError:
                        time.sleep(0.05)
                time.sleep(1)
                return rss_bytes(pid) - before

        grown = await anyio.to_thread.run_sync(push)
    assert grown < 24 * 1024 * 1024, grown


class _StoredHosts(_SlowlyEndingHosts):
    """Host sessions that end at once, kept in a real usage store."""

    def __init__(self, store: Store) -> None:
        self.core = SimpleNamespace(usage=store)

    @asynccontextmanager
    async def open_session(
        self, send: Any, caller: Any, state: Any, *, on_state: Any, on_subscriptions: Any
    ) -> AsyncIterator[Any]:
        yield SimpleNamespace(state=lambda: state, relist=lambda: None)


async def test_a_session_set_aside_past_those_kept_in_memory_resumes_from_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More sessions set aside than SET_ASIDE_KEPT: the oldest, gone from memory, is looked up in the
    store when its host comes back (it got 404: a host churning sessions made another's vanish).
    Rows idle too long are pruned while the daemon runs, not only at its start."""
    monkeypatch.setattr("mcpd.front.http.sessions.SET_ASIDE_KEPT", 1)
    store = Store.open(tmp_path / "usage.db")
    try:
        async with anyio.create_task_group() as tg:
            sessions = HttpSessions(cast(Hosts, _StoredHosts(store)), tg, max_sessions=1, idle=60)
            opened = []
            for _ in range(3):  # each new one sets the one before aside
                opened.append(await sessions.open(state=SessionState(connected=["tools"])))
                opened[-1].last_seen -= SET_ASIDE_AFTER + 1
            resumed = await sessions.find(opened[0].id)
            assert resumed is not None and resumed.state() == SessionState(connected=["tools"])
            store.save_session(SavedSession("stale", b"{}", time.time() - 120))
            await sessions.prune_stored()
            keys = await store.run(lambda conn: [k for (k,) in conn.execute("SELECT key FROM http_sessions")])
            assert "stale" not in keys and opened[1].key in keys
            sessions.end_all("test over")
    finally:
        store.close()


class _TellingHosts(_StoredHosts):
    """Host sessions kept in a real usage store that tell their state when they start and the
    changes of their subscriptions (``subscribe``), as a HostSession does."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.told: list[tuple[Any, Any]] = []
        self._subscribed: list[list[str]] = []

    def subscribe(self, opened: int, uri: str) -> None:
        """The ``opened``-th session (from 0) subscribes to ``uri``."""
        self._subscribed[opened].append(uri)
        self.told[opened][1](SubscriptionsChanged([uri], []))

    @asynccontextmanager
    async def open_session(
        self, send: Any, caller: Any, state: SessionState, *, on_state: Any, on_subscriptions: Any
    ) -> AsyncIterator[Any]:
        subscribed = list(state.subscribed)
        on_state(replace_struct(state, subscribed=[]))
        self.told.append((on_state, on_subscriptions))
        self._subscribed.append(subscribed)
        yield SimpleNamespace(state=lambda: replace_struct(state, subscribed=subscribed), relist=lambda: None)


async def test_pruning_leaves_the_open_sessions_and_their_subscriptions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More sessions kept than STORED_SESSIONS (http_max_sessions may be ten times it), an open one
    saved longest ago: pruning leaves it. Its subscriptions are rows written as they change, which
    its later states leave out: deleted with its row, they were lost for good (its next change not
    written, no session row to go with; its next save without them) where, saved whole in each
    state, the next save brought them back."""
    monkeypatch.setattr("mcpd.front.http.sessions.STORED_SESSIONS", 1)
    store = Store.open(tmp_path / "usage.db")
    hosts = _TellingHosts(store)
    state = SessionState(connected=["tools"])
    try:
        async with anyio.create_task_group() as tg:
            sessions = HttpSessions(cast(Hosts, hosts), tg, max_sessions=4, idle=60)
            opened = await sessions.open(state=state)
            hosts.subscribe(0, "tools/a")
            store.save_session(SavedSession(opened.key, b"{}", time.time() - 5))  # saved longest ago
            await sessions.open(state=state)
            await sessions.prune_stored()
            hosts.subscribe(0, "tools/b")
            hosts.told[0][0](state)
            saved = await store.run(lambda conn: session_row(conn, opened.key, since=0))
            assert saved is not None and saved.subscribed == ["tools/a", "tools/b"]
            sessions.end_all("test over")
    finally:
        store.close()


async def test_a_session_set_aside_and_pruned_from_the_store_is_kept_whole_again_when_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session set aside, kept in memory, whose row the store pruned (more sessions open than
    STORED_SESSIONS): resumed, the store has it again with all its subscriptions. Its states leave
    them out, so the resumed session's saves alone left none for a daemon killed then."""
    monkeypatch.setattr("mcpd.front.http.sessions.STORED_SESSIONS", 1)
    store = Store.open(tmp_path / "usage.db")
    hosts = _TellingHosts(store)
    try:
        async with anyio.create_task_group() as tg:
            sessions = HttpSessions(cast(Hosts, hosts), tg, max_sessions=1, idle=60)
            aside = await sessions.open(state=SessionState(connected=["tools"]))
            hosts.subscribe(0, "tools/a")
            aside.last_seen -= SET_ASIDE_AFTER + 1
            other = await sessions.open()  # sets it aside; saved after it, and open: the one kept
            await sessions.prune_stored()
            other.last_seen -= SET_ASIDE_AFTER + 1  # to be set aside for the resumed one
            assert await store.run(lambda conn: session_row(conn, aside.key, since=0)) is None
            resumed = await sessions.find(aside.id)
            assert resumed is not None
            saved = await store.run(lambda conn: session_row(conn, aside.key, since=0))
            assert saved is not None and saved.subscribed == ["tools/a"]
            sessions.end_all("test over")
    finally:
        store.close()


async def test_sessions_holding_only_a_get_stream_are_set_aside_last_and_not_for_ever(tmp_path: Path) -> None:
    """At the bound, a session whose host holds only a GET stream, with no request for
    STREAM_SET_ASIDE_AFTER, is set aside for a new host (256 never-read streams refused every new
    host for good), after any session without a stream; one with a request running never is."""
    store = Store.open(tmp_path / "usage.db")
    try:
        async with anyio.create_task_group() as tg:
            sessions = HttpSessions(cast(Hosts, _StoredHosts(store)), tg, max_sessions=3, idle=60)
            streaming, idle, busy = [await sessions.open() for _ in range(3)]
            streaming.streaming = True
            streaming.last_seen -= STREAM_SET_ASIDE_AFTER + 1
            idle.last_seen -= SET_ASIDE_AFTER + 1
            busy.active, busy.last_seen = 1, busy.last_seen - 1000
            await sessions.open()  # sets aside the session without a stream first
            assert idle.ended.is_set() and not streaming.ended.is_set()
            await sessions.open()
            assert streaming.ended.is_set() and not busy.ended.is_set()
            sessions.end_all("test over")
    finally:
        store.close()


async def test_a_host_that_stops_reading_mid_answer_is_dropped_quietly(tmp_path: Path) -> None:
    """Answers a host does not read fill the connection until one cannot be sent within
    client_write_timeout (http.host_stalled): the connection is dropped, and the log stays JSON with
    no error (uvicorn logged "ASGI callable returned without completing response" in plain text)."""
    async with http_daemon(tmp_path, client_write_timeout=0.5) as front:
        async with front.client() as http:
            session = await raw_session(http, front.url)
        listing = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
        request = raw_post(front, session, len(listing), listing)
        mark = len(front.daemon.events)
        seen = threading.Event()

        def push() -> None:
            with socket.socket() as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.connect(address_of(front.url))
                sock.settimeout(10)
                with contextlib.suppress(OSError):
                    sock.sendall(request * 3000)  # answers of megabytes, never read
                    # Open until the stall is seen: the kernel takes all the requests at once, and a
                    # close after a fixed wait raced a daemon still writing the answers (under load
                    # not yet past the buffers: no stall, the test timed out).
                    seen.wait(30)

        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, push)
            try:
                await front.daemon.wait_for("http.host_stalled", after=mark)
                await anyio.sleep(1.0)
            finally:
                seen.set()
        assert not [line for line in front.daemon.stderr_text if "ASGI" in line]
        assert not [e for e in front.daemon.events[mark:] if e.get("level") == "error"]


async def test_a_malformed_error_reply_to_a_servers_request_answers_it_at_once(front: Front) -> None:
    """The host answers a server's question with ``"error": "boom"`` (not an error object): the
    server's request gets an error at once, and the call its answer (it waited its whole 60 s)."""
    async with front.client() as http:
        headers, call = await _asking_session(http, front)
        messages: list[dict[str, Any]] = []
        async with http.stream("POST", front.url, json=call, headers=headers) as response:
            with anyio.fail_after(15):
                async for line in response.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    messages.append(json.loads(line[6:]))
                    if messages[-1].get("method") == "elicitation/create":
                        reply = {"jsonrpc": "2.0", "id": messages[-1]["id"], "error": "boom"}
                        await http.post(front.url, json=reply, headers=headers)
    question, answer = messages
    assert question["method"] == "elicitation/create" and answer["id"] == 7
    assert "not a JSON-RPC response" in json.dumps(answer)


async def test_made_up_servers_and_cancels_of_nothing_cost_a_line_at_most(front: Front) -> None:
    """``?connect=`` naming 200 made-up servers (and one real one) is one log line (the real one is
    connected); a ``notifications/cancelled`` naming no running
    request is not logged at info (each was a line: 4,000 names made 4,000, 566 cancels a second
    1.3 MB in 15 s)."""
    mark = len(front.daemon.events)
    query = "&".join(f"connect=nope{n}" for n in range(200))
    async with sdk_host(replace(front, url=f"{front.url}?{query}&connect=tools")) as host:
        assert await host.call("tools__echo", {"text": "preconnected"}) == "preconnected"
        for request_id in range(50):
            await host.session.send_notification(
                types.CancelledNotification(params=types.CancelledNotificationParams(request_id=request_id))
            )
        await host.tool_names()  # after the cancels, in order
    unknown = await front.daemon.wait_for("front.preconnect_unknown", after=mark)
    assert unknown["count"] == 200
    names = [e["event"] for e in front.daemon.events[mark:]]
    assert names.count("front.preconnect_unknown") == 1 and "front.preconnect_failed" not in names
    assert "request.cancelled" not in names


async def test_large_bodies_are_read_a_few_at_a_time(tmp_path: Path) -> None:
    """Four hosts each sending a body of max_frame_bytes slowly hold the daemon's budget for bodies
    read at once (4 of the largest): a fifth large body waits until they give up (408 after
    client_write_timeout), while small requests are served meanwhile (30 hosts sending 16 MB bodies
    together took the daemon to 571 MB)."""
    limit = 200_000
    async with (
        http_daemon(tmp_path, max_frame_bytes=limit, client_write_timeout=1.5) as front,
        front.client() as http,
    ):
        session = await raw_session(http, front.url)
        headers = {**JSON_AND_SSE, "Mcp-Session-Id": session}
        head = raw_post(front, session, limit)
        padded = {"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"_meta": {"pad": "x" * 150_000}}}
        async with AsyncExitStack() as stack:
            for _ in range(4):
                slow = await stack.enter_async_context(await anyio.connect_tcp(*address_of(front.url)))
                await slow.send(head + b" " * (limit // 2))
            await anyio.sleep(0.3)
            waited: list[float] = []

            async def large() -> None:
                started = time.monotonic()
                response = await http.post(front.url, json=padded, headers=headers)
                assert response.status_code == 200, response.text
                waited.append(time.monotonic() - started)

            async with anyio.create_task_group() as tg:
                tg.start_soon(large)
                started = time.monotonic()
                assert await listed(http, front.url, session, 6) == 200
                assert time.monotonic() - started < 0.5
            assert waited[0] > 0.6  # until the slow ones were cut off, 1.2 s after it came


async def _post_sse(
    http: httpx2.AsyncClient, url: str, headers: dict[str, str], body: dict[str, Any]
) -> list[Any]:
    """POST ``body``; the messages of its answer, in order (one, as JSON; or those of its event stream)."""
    async with http.stream("POST", url, json=body, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        if not response.headers["content-type"].startswith("text/event-stream"):
            return [json.loads(await response.aread())]
        with anyio.fail_after(30):
            lines = [line async for line in response.aiter_lines()]
    return [json.loads(line[6:]) for line in lines if line.startswith("data: ")]


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_a_calls_log_messages_come_on_its_own_stream_before_its_answer(front: Front) -> None:
    """A host that never opens a GET stream gets the log messages its server sends during its call,
    on the call's own stream and before its answer (they went to the GET stream: lost to it)."""
    async with front.client() as http:
        session = await raw_session(http, front.url + "?connect=tools")
        headers = {**JSON_AND_SSE, "Mcp-Session-Id": session}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(front.url, json=initialized, headers=headers)).status_code == 202
        level = {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "debug"}}
        assert await _post_sse(http, front.url, headers, level) == [{"jsonrpc": "2.0", "id": 2, "result": {}}]
        arguments = {"text": "during the call", "level": "warning"}
        call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call"}
        call["params"] = {"name": "tools__log", "arguments": arguments}
        message, answer = await _post_sse(http, front.url, headers, call)
    assert message["method"] == "notifications/message"
    assert message["params"] == {"level": "warning", "logger": "tools", "data": "during the call"}
    assert answer["id"] == 3 and answer["result"]["content"][0]["text"] == "logged"


class Logs:
    """What a host's log messages said, as they arrived."""

    def __init__(self) -> None:
        self.said: list[str] = []
        self._arrived = anyio.Event()

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.said.append(str(params.data))
        self._arrived.set()

    async def wait_for(self, count: int) -> None:
        with anyio.fail_after(30):
            while len(self.said) < count:
                self._arrived = anyio.Event()
                await self._arrived.wait()


CONCURRENT_LOGGING_CALLS = 50


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_no_log_message_of_a_call_comes_after_its_answer(tmp_path: Path) -> None:
    """Many calls at once to a remote server that logs during each: every call's log message reaches
    its SDK host before the call's answer (on the GET stream, 25 of 676 came after it). Another
    host, which made none of those calls, gets them all on its GET stream."""
    port = free_port()
    async with running_http_fixture("tools", port) as url:
        config = http_config(tmp_path)
        config.write_text(config.read_text() + f'[servers.tools]\nurl = "{url}"\n')
        async with running_daemon(config) as daemon:
            listening = (await daemon.wait_for("http.listening"))["url"]
            front = Front(daemon, listening + "?connect=tools", token_in(tmp_path), config)
            await daemon.wait_for("server.state", server="tools", new="running", timeout=60)
            caller, onlooker = Logs(), Logs()
            async with (
                sdk_host(front, logging_callback=caller) as host,
                sdk_host(front, logging_callback=onlooker) as other,
            ):
                for each in (host, other):  # connected (``?connect``) and at the level
                    await each.listing({"tools__log"})
                    await each.session.set_logging_level("debug")
                late: list[str] = []

                async def log(text: str) -> None:
                    await host.call("tools__log", {"text": text})
                    if text not in caller.said:
                        late.append(text)

                said = [f"call {n}" for n in range(CONCURRENT_LOGGING_CALLS)]
                async with anyio.create_task_group() as tg:
                    for text in said:
                        tg.start_soon(log, text)
                assert late == []
                await onlooker.wait_for(len(said))
    assert sorted(caller.said) == sorted(onlooker.said) == sorted(said)
