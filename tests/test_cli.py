"""The `mcpd` command end to end: real daemon, real fixture servers, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mcpd.testing import fixture_command
from mcpd.testing.daemon import DaemonProcess, running_daemon

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DaemonProcess]:
    command, *args = fixture_command("fx")
    path = tmp_path_factory.mktemp("cli") / "config.toml"
    path.write_text(f"[servers.fx]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n")
    async with running_daemon(path) as running:
        yield running


def mcpd(*argv: str, socket: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    if socket is not None:
        env["MCPD_SOCKET"] = str(socket)
    return subprocess.run(
        [sys.executable, "-m", "mcpd", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


async def test_status_json_has_the_documented_fields(daemon: DaemonProcess) -> None:
    """`mcpd status --json` prints {"servers": [...]} with the fields scripts depend on."""
    result = mcpd("status", "--json", "--socket", str(daemon.socket))
    assert result.returncode == 0, result.stderr
    servers = json.loads(result.stdout)["servers"]
    assert [s["name"] for s in servers] == ["fx"]
    for key in ("name", "state", "alive", "degraded", "pid", "restarts", "uptime_s", "tools", "last_error"):
        assert key in servers[0]
    assert servers[0]["state"] == "running" and servers[0]["alive"] is True


async def test_status_table_uses_mcpd_socket_env(daemon: DaemonProcess) -> None:
    """The human table shows each server; MCPD_SOCKET finds the daemon."""
    result = mcpd("status", socket=daemon.socket)
    assert result.returncode == 0, result.stderr
    header, row = result.stdout.splitlines()[:2]
    assert header.split()[:3] == ["NAME", "STATE", "PID"]
    assert row.split()[:2] == ["fx", "running"]


async def test_tools_and_call(daemon: DaemonProcess) -> None:
    """`mcpd tools` lists qualified names; `mcpd call` prints the result; a tool error exits 1."""
    sock = str(daemon.socket)
    tools = mcpd("tools", "--socket", sock)
    assert "fx__echo" in tools.stdout
    listed = json.loads(mcpd("tools", "--json", "--server", "fx", "--socket", sock).stdout)["tools"]
    assert {t["server"] for t in listed} == {"fx"}
    call = mcpd("call", "fx", "echo", "--args", '{"text": "hello there"}', "--socket", sock)
    assert (call.returncode, call.stdout.strip()) == (0, "hello there")
    failed = mcpd("call", "fx", "fail", "--args", '{"message": "nope"}', "--socket", sock)
    assert failed.returncode == 1
    bad_json = mcpd("call", "fx", "echo", "--args", "{oops", "--socket", sock)
    assert bad_json.returncode == 2 and "not valid JSON" in bad_json.stderr
    unknown = mcpd("call", "ghost", "echo", "--json", "--socket", sock)
    assert unknown.returncode == 1
    assert json.loads(unknown.stdout)["error"]["type"] == "UnknownServer"
    assert "Traceback" not in unknown.stderr


async def test_stop_start_restart_reload(daemon: DaemonProcess) -> None:
    """Lifecycle commands report the server's new state and exit 0 when it got there."""
    sock = str(daemon.socket)
    stopped = mcpd("stop", "fx", "--socket", sock)
    assert (stopped.returncode, stopped.stdout.strip()) == (0, "fx: stopped")
    not_running = mcpd("call", "fx", "echo", "--args", '{"text": "x"}', "--socket", sock)
    assert not_running.returncode == 1 and "is stopped" in not_running.stderr
    started = mcpd("start", "fx", "--socket", sock)
    assert started.returncode == 0 and started.stdout.startswith("fx: running (pid ")
    restarted = json.loads(mcpd("restart", "fx", "--json", "--socket", sock).stdout)
    assert restarted["state"] == "running" and restarted["restarts"] >= 1
    reloaded = mcpd("reload", "--socket", sock)
    assert reloaded.returncode == 0 and "unchanged: 1" in reloaded.stdout


async def test_no_daemon_is_one_clear_line(tmp_path: Path) -> None:
    """Without a daemon every command says how to start one, exit status 3, no traceback."""
    result = mcpd("status", "--socket", str(tmp_path / "absent.sock"))
    assert result.returncode == 3
    assert result.stderr.strip().count("\n") == 0
    assert "mcpd serve" in result.stderr and "Traceback" not in result.stderr
