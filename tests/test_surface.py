"""Resources, templates and prompts end to end: server-everything (twice) behind a real daemon,
through the async client and the `mcpd` command."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpd.client.aio import connect
from mcpd.errors import InvalidParams, UnknownPrompt, UnknownResource, UnknownServer
from mcpd.testing import fixture_toml
from mcpd.testing.daemon import DaemonProcess, running_daemon

pytestmark = pytest.mark.anyio
DOC = "demo://resource/static/document/architecture.md"
TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"
BLOB_TEMPLATE = "demo://resource/dynamic/blob/{resourceId}"


@asynccontextmanager
async def everything_daemon(directory: Path, npm_bin: Path) -> AsyncIterator[DaemonProcess]:
    """A daemon running ev and ev2, two server-everything processes (same resources and prompts), and
    fx, the fixture server (only a template of sized blobs, no prompts), once all three run: servers
    built on the two SDKs (TypeScript's, Python's)."""
    everything = json.dumps(str(npm_bin / "mcp-server-everything"))
    path = directory / "config.toml"
    path.write_text(
        f"[servers.ev]\ncommand = {everything}\n[servers.ev2]\ncommand = {everything}\n"
        + fixture_toml("fx", "--sdk")
    )
    async with running_daemon(path) as running:
        for name in ("ev", "ev2", "fx"):
            await running.wait_for("server.state", server=name, new="running", timeout=120)
        yield running


@pytest.fixture(scope="module")
async def daemon(tmp_path_factory: pytest.TempPathFactory, npm_bin: Path) -> AsyncIterator[DaemonProcess]:
    async with everything_daemon(tmp_path_factory.mktemp("surface"), npm_bin) as running:
        yield running


def mcpd(daemon: DaemonProcess, *argv: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "mcpd", *argv, "--socket", str(daemon.socket)],
        capture_output=True,
        timeout=60,
        check=False,
    )


async def test_lists_are_qualified_per_server_and_never_collide(daemon: DaemonProcess) -> None:
    """Each server's resources, templates and prompts appear once under its own prefix; two servers
    offering the same ones stay apart, and a server without the capabilities adds nothing."""
    async with connect(daemon.socket) as client:
        resources = await client.resources()
        templates = await client.resource_templates()
        prompts = await client.prompts()
        only_ev2 = await client.resources(["ev2"])
    assert f"mcpd://ev/{DOC}" in {r.uri for r in resources}
    assert f"mcpd://ev2/{DOC}" in {r.uri for r in resources}
    assert {r.server for r in resources} == {"ev", "ev2"}
    assert len({r.uri for r in resources}) == len(resources)
    assert {r.uri for r in only_ev2} == {r.uri for r in resources if r.server == "ev2"}
    assert f"mcpd://ev/{TEXT_TEMPLATE}" in {t.uri_template for t in templates}
    names = {p.name: p for p in prompts}
    assert {"ev__args-prompt", "ev2__args-prompt", "ev__simple-prompt"} <= names.keys()
    arguments = names["ev__args-prompt"].prompt.arguments or ()
    assert [a.name for a in arguments] == ["city", "state"]
    assert arguments[0].required


async def test_read_text_blob_and_template_round_trip(daemon: DaemonProcess) -> None:
    """A static text resource, a template-expanded text URI and a blob come back with their
    contents, each under the qualified URI it was read by (the server's URI unchanged in it)."""
    async with connect(daemon.socket) as client:
        doc = await client.read_resource(f"mcpd://ev/{DOC}")
        text_uri = "mcpd://ev2/" + TEXT_TEMPLATE.replace("{resourceId}", "7")
        text = await client.read_resource(text_uri)
        blob = await client.read_resource("mcpd://ev/" + BLOB_TEMPLATE.replace("{resourceId}", "3"))
        by_server = await client.read_resource(DOC, server="ev2")
    assert doc.contents[0].uri == f"mcpd://ev/{DOC}"
    assert doc.contents[0].text and doc.contents[0].blob is None
    assert text.contents[0].uri == text_uri
    assert text.contents[0].text is not None and "7" in text.contents[0].text
    assert blob.contents[0].blob is not None and blob.contents[0].text is None
    assert base64.b64decode(blob.contents[0].blob)
    assert by_server.contents[0].uri == f"mcpd://ev2/{DOC}"
    assert by_server.contents[0].text == doc.contents[0].text


async def test_a_blob_of_megabytes_arrives_whole(daemon: DaemonProcess) -> None:
    """A 6 MB binary resource (8 MB of base64 on the server's stdout) comes through the daemon
    byte for byte (bench/resources.py measures what such reads cost other clients)."""
    size = 6_000_000
    async with connect(daemon.socket, timeout=120) as reader:
        result = await reader.read_resource(f"mcpd://fx/fixture://bytes/{size}", timeout=120)
    (contents,) = result.contents
    assert contents.uri == f"mcpd://fx/fixture://bytes/{size}"
    assert contents.mime_type == "application/octet-stream"
    assert base64.b64decode(contents.blob or "") == (bytes(range(256)) * (size // 256 + 1))[:size]


async def test_prompt_get_with_arguments(daemon: DaemonProcess) -> None:
    """A prompt's arguments reach the server; qualified name or server= lead to the same prompt."""
    async with connect(daemon.socket) as client:
        got = await client.get_prompt("ev__args-prompt", {"city": "Lyon", "state": "Rhône"})
        plain = await client.get_prompt("simple-prompt", server="ev2")
    assert got.messages[0].role == "user"
    assert "Lyon" in got.messages[0].content["text"] and "Rhône" in got.messages[0].content["text"]
    assert plain.messages[0].content["type"] == "text"


async def test_unknown_uri_and_prompt_are_typed_errors(daemon: DaemonProcess) -> None:
    """Unknown resources and prompts, an unqualified URI, an unknown server, and arguments the
    server refuses each raise their own error class."""
    async with connect(daemon.socket) as client:
        with pytest.raises(UnknownResource):
            await client.read_resource("mcpd://ev/demo://no/such/thing")
        with pytest.raises(UnknownResource):
            await client.read_resource(DOC)  # neither qualified nor with server=
        with pytest.raises(UnknownServer):
            await client.read_resource(f"mcpd://nope/{DOC}")
        with pytest.raises(UnknownPrompt):
            await client.get_prompt("ev__no-such-prompt")
        with pytest.raises(UnknownPrompt):
            await client.get_prompt("no-separator-at-all")
        with pytest.raises(InvalidParams):
            await client.get_prompt("ev__resource-prompt", {"resourceType": "Neither", "resourceId": "1"})


async def test_cli_lists_reads_and_gets(daemon: DaemonProcess) -> None:
    """`mcpd resources`, `read`, `prompts` and `prompt` print what the client library returns; an
    unknown URI exits 1 with a JSON error naming its class."""
    listed = mcpd(daemon, "resources")
    assert listed.returncode == 0 and f"mcpd://ev/{DOC}".encode() in listed.stdout
    as_json = json.loads(mcpd(daemon, "resources", "--json", "--server", "ev").stdout)
    assert {r["server"] for r in as_json["resources"]} == {"ev"} and as_json["templates"]
    read = mcpd(daemon, "read", f"mcpd://ev/{DOC}")
    assert read.returncode == 0 and read.stdout.startswith(b"# ")
    blob = mcpd(daemon, "read", "mcpd://ev/" + BLOB_TEMPLATE.replace("{resourceId}", "3"))
    assert blob.returncode == 0 and blob.stdout  # decoded bytes to a pipe
    prompts = mcpd(daemon, "prompts")
    assert prompts.returncode == 0 and b"ev2__args-prompt" in prompts.stdout
    got = mcpd(daemon, "prompt", "ev__args-prompt", "--args", '{"city": "Lyon"}', "--json")
    assert got.returncode == 0 and "Lyon" in json.loads(got.stdout)["messages"][0]["content"]["text"]
    missing = mcpd(daemon, "read", "mcpd://ev/demo://no/such/thing", "--json")
    assert missing.returncode == 1
    assert json.loads(missing.stdout)["error"]["type"] == "UnknownResource"


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps (Linux)")
async def test_a_daemon_of_stdio_servers_never_loads_the_sdk(daemon: DaemonProcess) -> None:
    """Lists, reads, prompts and calls to stdio servers (a third-party one among them) go through
    mcpd's own session: the daemon never loads pydantic, which the MCP SDK cannot run without."""
    async with connect(daemon.socket) as client:
        await client.resources()
        await client.read_resource(f"mcpd://ev/{DOC}")
        await client.get_prompt("ev__args-prompt", {"city": "Lyon", "state": "Rhône"})
        assert not (await client.call_tool("ev__echo", {"message": "hi"})).is_error
    maps = Path(f"/proc/{daemon.process.pid}/maps").read_text()
    assert "pydantic_core" not in maps


async def test_a_host_sees_each_tool_defined_as_the_server_defines_it(
    daemon: DaemonProcess, npm_bin: Path
) -> None:
    """Through `mcpd bridge` a host lists each of server-everything's tools with the definition the
    server gives a host directly: title, description, input and output schemas, annotations, icons
    and `_meta` (output schemas, annotations and `_meta` used to be dropped, so hosts could not
    validate structured results nor see read-only or destructive hints)."""
    passed = ("title", "description", "inputSchema", "outputSchema", "annotations", "icons", "_meta")

    def definitions(tools: list[types.Tool], prefix: str) -> dict[str, dict[str, Any]]:
        dumped = (tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in tools)
        return {
            tool["name"].removeprefix(prefix): {key: tool[key] for key in passed if key in tool}
            for tool in dumped
            if tool["name"].startswith(prefix)
        }

    direct_params = StdioServerParameters(command=str(npm_bin / "mcp-server-everything"))
    async with stdio_client(direct_params) as (read, write), ClientSession(read, write) as direct:
        with anyio.fail_after(60):
            await direct.initialize()
            expected = definitions((await direct.list_tools()).tools, "")
    bridge_params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcpd", "bridge", "--socket", str(daemon.socket), "--all"]
    )
    async with stdio_client(bridge_params) as (read, write), ClientSession(read, write) as host:
        with anyio.fail_after(60):
            await host.initialize()
            seen = definitions((await host.list_tools()).tools, "ev__")
    # mcpd announces sampling, elicitation and roots for its hosts, so the server offers more tools.
    assert {name: seen.get(name) for name in expected} == expected
    assert any("outputSchema" in d for d in seen.values()) and any("annotations" in d for d in seen.values())
