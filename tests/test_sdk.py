"""The SDK adapter (mcpd.supervisor.sdk): fails loudly when the SDK changes what mcpd relies on."""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

import mcpd
from mcpd.config.model import ServerConfig
from mcpd.supervisor import sdk, sdkload
from mcpd.supervisor.session import NotDelivered, SessionHooks, handshake
from mcpd.testing.remote import free_port, running_http_fixture

pytestmark = pytest.mark.anyio
PACKAGE = Path(mcpd.__file__).parent


def _sdk_imports(path: Path) -> list[str]:
    modules = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.append(node.module)
        elif isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
    return [m for m in modules if m == "mcp" or m.startswith("mcp.")]


def test_no_private_sdk_module_is_imported() -> None:
    """No module of mcpd imports a private module of the SDK (a path part starting with "_")."""
    private = {
        str(path.relative_to(PACKAGE)): module
        for path in PACKAGE.rglob("*.py")
        for module in _sdk_imports(path)
        if any(part.startswith("_") for part in module.split("."))
    }
    assert private == {}


def test_the_supervisor_reaches_the_client_sdk_only_through_the_adapter() -> None:
    """Within the supervisor, only sdk.py imports the SDK's client side."""
    users = {
        path.name
        for path in (PACKAGE / "supervisor").glob("*.py")
        if any(m.startswith("mcp.client") for m in _sdk_imports(path))
    }
    assert users == {"sdk.py"}


def test_the_sdk_entry_points_take_what_the_adapter_passes() -> None:
    """The keyword arguments the adapter passes still exist."""
    assert {"http_client"} <= inspect.signature(streamable_http_client).parameters.keys()
    assert {"message_handler", "client_info"} <= inspect.signature(ClientSession).parameters.keys()


async def test_a_refused_request_is_not_delivered() -> None:
    """A call whose connection is refused ends as ``NotDelivered`` (the caller may send it again): the
    SDK still runs a request's POST in the sending task's context, which is how mcpd knows the
    server cannot have seen the call."""
    port = free_port()
    config = ServerConfig(name="remote", url=f"http://127.0.0.1:{port}/mcp")
    sessions: list[sdk.SdkSession] = []
    ready, ended = anyio.Event(), anyio.Event()

    async def host() -> None:
        try:
            async with sdk.open_http_session(
                config, sdk.HttpWatch(), SessionHooks(lambda: None, lambda: None)
            ) as session:
                await handshake(session)
                sessions.append(session)
                ready.set()
                await anyio.sleep_forever()
        except Exception:  # the refused POST ends the transport: what this test provokes
            ended.set()

    async with anyio.create_task_group() as tg:
        async with running_http_fixture("remote", port):
            tg.start_soon(host)
            with anyio.fail_after(60):
                await ready.wait()
            answered = await sessions[0].call_tool("echo", {"text": "x"}, anyio.current_time() + 30, None)
            assert answered.content and not answered.is_error
        with pytest.raises(NotDelivered):
            await sessions[0].call_tool("echo", {"text": "y"}, anyio.current_time() + 30, None)
        with anyio.fail_after(60):
            await ended.wait()


# -- the adapter loaded off the event loop (sdkload) ------------------------------------------------


SERVE_IMPORTS = "mcpd.cli.app, mcpd.daemon.app, mcpd.daemon.serving"
"""What ``mcpd serve`` imports: up to its first spawn (``app``), then while the children boot."""


def test_the_daemon_imports_no_sdk_at_start() -> None:
    """What `mcpd serve` imports holds none of the SDK's stack: only an actor of a remote server has
    it imported, in a worker thread (``sdkload``); stdio children have mcpd's own session."""
    stack = {"mcp", "mcp_types", "pydantic", "httpx2", "starlette", "uvicorn", "sse_starlette"}
    loaded = subprocess.check_output(
        [sys.executable, "-c", f"import sys, {SERVE_IMPORTS}; print(*sys.modules)"],
        text=True,
        timeout=60,
    )
    assert {name.split(".")[0] for name in loaded.split()} & stack == set()


def test_the_daemon_never_imports_rich(tmp_path: Path) -> None:
    """structlog loads rich when it can (~55 ms and 5 MB before the first spawn) for console tracebacks
    mcpd turns off: the daemon's structlog is imported with rich out of sight. A stand-in rich that
    stops the process when imported shows it, whether or not the real one is installed."""
    (tmp_path / "rich").mkdir()
    (tmp_path / "rich" / "__init__.py").write_text("raise SystemExit('rich was imported')\n")
    script = f"import {SERVE_IMPORTS}, mcpd.daemon.check, structlog.dev; print('ok')"
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env, timeout=60
    )
    assert done.stdout.strip() == "ok", done.stderr


async def test_every_waiter_gets_the_one_import() -> None:
    """Tasks that wait on a loader together all go on once its single import is done, and the stand-in
    then hands on the adapter's own attributes."""
    loader = sdkload.SdkLoader("mcpd.supervisor.sdk")
    done: list[int] = []

    async def wait(index: int) -> None:
        await loader.wait_loaded()
        done.append(index)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for index in range(5):
                tg.start_soon(wait, index)
    assert sorted(done) == list(range(5))
    assert loader.module() is sdk
    assert sdkload.sdk.SdkSession is sdk.SdkSession


async def test_a_failed_import_is_raised_and_tried_again() -> None:
    """An adapter that cannot be imported fails each wait with the import's own error, and the next
    wait tries the import again rather than keeping the failure."""
    loader = sdkload.SdkLoader("mcpd.no_such_adapter")
    for _ in range(2):
        with pytest.raises(ModuleNotFoundError, match="no_such_adapter"):
            await loader.wait_loaded()
