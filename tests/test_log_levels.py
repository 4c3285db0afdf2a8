"""Servers are asked (``logging/setLevel``) for the most detailed level any host set, and asked
again when they start a new run. Hosts are SDK clients through real bridges or raw JSON-RPC on the
socket; the server is ``mcpd.testing.fullserver`` (which keeps the levels it was asked for)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import anyio
import pytest
from test_bridge import bridge
from test_front import initialize, peer

from mcpd.client.aio import AsyncClient, connect
from mcpd.model.mcp import SessionState
from mcpd.testing import fullserver_command, fullserver_toml
from mcpd.testing.daemon import DaemonProcess, running_daemon
from mcpd.testing.remote import free_port, running_http_server

pytestmark = pytest.mark.anyio


async def asked(client: AsyncClient, server: str = "full") -> list[str]:
    result = await client.call_tool(f"{server}__levels")
    return list(json.loads(result.content[0]["text"]))


async def until_asked(client: AsyncClient, expected: list[str], server: str = "full") -> None:
    with anyio.fail_after(30):
        while (levels := await asked(client, server)) != expected:
            assert len(levels) <= len(expected), levels
            await anyio.sleep(0.05)


def fullservers(tmp_path: Path, *names: str) -> Path:
    config = tmp_path / "config.toml"
    config.write_text("".join(fullserver_toml(name) for name in names))
    return config


async def running_pid(daemon: DaemonProcess, client: AsyncClient, after: int = 0) -> int:
    event = await daemon.wait_for("server.state", server="full", new="running", after=after, timeout=60)
    pid = event["pid"] or next(s.pid for s in await client.status() if s.name == "full")
    assert pid is not None
    return int(pid)


# Deprecated in the newest MCP revision (SEP-2577), still part of those mcpd speaks.
@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_servers_hear_the_most_detailed_level_any_host_wants(tmp_path: Path) -> None:
    """Two hosts: the server is asked for the more detailed level, not again for a less detailed
    one while the other host wants more; a new run is asked at once; when the more detailed host
    leaves, the server is asked for the level of the host that stays."""
    async with running_daemon(fullservers(tmp_path, "full")) as daemon, connect(daemon.socket) as client:
        pid = await running_pid(daemon, client)
        assert await asked(client) == []  # nobody set a level: the server keeps its own
        async with bridge(daemon.socket, "--all") as stays:
            await stays.session.set_logging_level("warning")
            await until_asked(client, ["warning"])
            async with bridge(daemon.socket, "--all") as detailed:
                await detailed.session.set_logging_level("debug")
                await until_asked(client, ["warning", "debug"])
                await stays.session.set_logging_level("error")
                await anyio.sleep(0.5)
                assert await asked(client) == ["warning", "debug"]  # debug is still wanted
                mark = len(daemon.events)
                os.kill(pid, signal.SIGKILL)
                await running_pid(daemon, client, after=mark)
                await until_asked(client, ["debug"])  # the new run, asked at once
            await until_asked(client, ["debug", "error"])  # what the host that stays wants


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_only_servers_a_host_sees_are_asked_for_its_level(tmp_path: Path) -> None:
    """A host at ``debug`` that connected one server of two: that one is asked, the other (whose
    messages it would never get) not, until the host connects it too. When that host leaves, a
    server only it saw is asked for the least detailed level of the hosts that stay."""
    servers = fullservers(tmp_path, "full", "other")
    async with running_daemon(servers) as daemon, connect(daemon.socket) as client:
        for name in ("full", "other"):
            await daemon.wait_for("server.state", server=name, new="running", timeout=60)
        async with bridge(daemon.socket, "--connect", "other") as stays:
            await stays.session.set_logging_level("error")
            await until_asked(client, ["error"], "other")
            async with bridge(daemon.socket, "--connect", "full") as detailed:
                await detailed.session.set_logging_level("debug")
                await until_asked(client, ["debug"])
                await anyio.sleep(0.5)
                assert await asked(client, "other") == ["error"]
                await detailed.session.call_tool("mcpd_connect_server", {"server": "other"})
                await until_asked(client, ["error", "debug"], "other")
            await until_asked(client, ["debug", "error"])
            await until_asked(client, ["error", "debug", "error"], "other")


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_a_level_mcp_does_not_define_reaches_hosts_as_one_it_does(tmp_path: Path) -> None:
    """Log messages at levels MCP does not define ("ERROR", "banana", "") reach a host at one it
    does, and are filtered by it: a level in capitals as that level, anything else as ``info``
    (passed on as they came, and past any level the host set, hosts' SDKs refused them)."""
    async with running_daemon(fullservers(tmp_path, "full")) as daemon, connect(daemon.socket) as client:
        await daemon.wait_for("server.state", server="full", new="running", timeout=60)
        host = await peer(daemon, SessionState(expose_all=True))

        def run() -> None:
            host.request(1, "initialize", initialize("2025-06-18"))
            host.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
            host.request(2, "logging/setLevel", {"level": "info"})
            levels = ["ERROR", "banana", "", "debug", "Emergency"]
            call = {"name": "full__log", "arguments": {"levels": levels}}
            host.request(3, "tools/call", call)

        try:
            await anyio.to_thread.run_sync(run)
        finally:
            host.channel.close()
        await until_asked(client, ["info"])
    sent = [
        (m["params"]["level"], m["params"]["data"])
        for m in host.seen
        if m["method"] == "notifications/message"
    ]
    assert sent == [("error", "ERROR"), ("info", "banana"), ("info", ""), ("emergency", "Emergency")]


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_a_remote_server_hears_the_level_too(tmp_path: Path) -> None:
    """The same over streamable HTTP (the daemon's SDK session)."""
    port = free_port()
    command = fullserver_command("--transport", "http", "--port", str(port))
    async with running_http_server(command, port) as url:
        config = tmp_path / "config.toml"
        config.write_text(f'[servers.full]\nurl = "{url}"\n')
        async with running_daemon(config) as daemon, connect(daemon.socket) as client:
            await daemon.wait_for("server.state", server="full", new="running", timeout=60)
            async with bridge(daemon.socket, "--all") as host:
                await host.session.set_logging_level("notice")
                await until_asked(client, ["notice"])


async def test_a_host_that_changes_levels_fast_costs_the_server_few_requests(tmp_path: Path) -> None:
    """200 level changes sent at once: the server is asked a few times, the last time for the last
    level."""
    async with running_daemon(fullservers(tmp_path, "full")) as daemon, connect(daemon.socket) as client:
        await daemon.wait_for("server.state", server="full", new="running", timeout=60)
        host = await peer(daemon, SessionState(expose_all=True))  # a host that sees the server

        def run() -> None:
            host.request(1, "initialize", initialize("2025-06-18"))
            levels = [*(["debug", "info"] * 100), "notice"]
            for request_id, level in enumerate(levels, start=2):
                message = {"jsonrpc": "2.0", "id": request_id, "method": "logging/setLevel"}
                host.send(json.dumps({**message, "params": {"level": level}}).encode())
            for _ in levels:
                assert "result" in host.next_answer()

        # The host stays until the server was asked for its last level: once it leaves, nobody wants
        # "notice", and a server still being asked for an earlier level is left at that one.
        try:
            await anyio.to_thread.run_sync(run)
            with anyio.fail_after(30):
                while (levels := await asked(client))[-1:] != ["notice"]:
                    await anyio.sleep(0.05)
        finally:
            host.channel.close()
        assert len(levels) < 20, levels
