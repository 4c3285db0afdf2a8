"""Helpers for testing with mcpd, in this repository and in users' own test suites.

``fixture_server()`` builds the config of a fixture server (see ``mcpd.testing.fixture``
for its misbehaviour flags; ``--sdk`` for one served through the mcp SDK) and ``fixture_toml()``
the same as a ``[servers.NAME]`` section of a config file (``fullserver_toml()`` one running
``mcpd.testing.fullserver``); ``process_gone()`` tells whether a pid has really exited, and
``pids_with_args()`` finds processes by their arguments (Linux).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import anyio
from anyio.abc import Process

from mcpd.config.model import RestartPolicy, ServerConfig

FAST_RESTARTS = RestartPolicy(initial_delay=0.05, max_delay=0.2, max_retries=3, stable_after=10.0)
"""A restart policy that keeps tests quick: short backoff, three retries."""


def fixture_command(name: str, *flags: str) -> tuple[str, ...]:
    """argv that runs the fixture server named ``name`` with misbehaviour ``flags``: in plain Python,
    unless ``flags`` hold ``--sdk`` (or ``--transport http``)."""
    return (sys.executable, "-m", "mcpd.testing.fixture", "--name", name, *flags)


def fullserver_command(*flags: str) -> tuple[str, ...]:
    """argv that runs ``mcpd.testing.fullserver``: an MCP server in plain Python that fills every
    optional field MCP defines, with tools of its own (see its docstring)."""
    return (sys.executable, "-m", "mcpd.testing.fullserver", *flags)


def _server_config(name: str, argv: tuple[str, ...], settings: dict[str, Any]) -> ServerConfig:
    command, *args = argv
    settings.setdefault("restart", FAST_RESTARTS)
    return ServerConfig(name=name, command=command, args=tuple(args), **settings)


def fixture_server(name: str, *flags: str, **settings: Any) -> ServerConfig:
    """A ``ServerConfig`` for a stdio fixture server; ``settings`` override config fields."""
    return _server_config(name, fixture_command(name, *flags), settings)


def fullserver_config(name: str, *flags: str, **settings: Any) -> ServerConfig:
    """A ``ServerConfig`` for ``mcpd.testing.fullserver`` with ``flags`` (see ``fullserver_command``)."""
    return _server_config(name, fullserver_command(*flags), settings)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value)  # strings and numbers are written the same in JSON and TOML


def _server_toml(name: str, argv: tuple[str, ...], settings: dict[str, Any]) -> str:
    command, *args = argv
    lines = [f"[servers.{name}]", f"command = {json.dumps(command)}", f"args = {_toml_value(args)}"]
    lines += [f"{key} = {_toml_value(value)}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def fixture_toml(name: str, *flags: str, **settings: Any) -> str:
    """A ``[servers.NAME]`` section running the fixture server; ``settings`` become its keys."""
    return _server_toml(name, fixture_command(name, *flags), settings)


def fullserver_toml(name: str, *flags: str, **settings: Any) -> str:
    """A ``[servers.NAME]`` section running ``mcpd.testing.fullserver`` with ``flags`` (see
    ``fullserver_command``)."""
    return _server_toml(name, fullserver_command(*flags), settings)


def rss_mib(pid: int | str = "self") -> float:
    """Resident memory of process ``pid`` in MiB (from /proc; Linux only)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise LookupError(f"no VmRSS for process {pid}")


def pids_with_args(*args: str) -> list[int]:
    """Pids of the processes whose argv holds every one of ``args`` (from /proc; Linux only)."""
    wanted = [arg.encode() for arg in args]
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    argv = cmdline.read().split(b"\0")
            except OSError:
                continue
            if all(arg in argv for arg in wanted):
                found.append(int(entry))
    return found


def run_cli(
    *argv: str, env: dict[str, str] | None = None, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """``mcpd ARGV`` as a fresh process, as a user runs it; ``NO_COLOR`` is unset unless ``env`` sets it."""
    environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | (env or {})
    return subprocess.run(
        [sys.executable, "-m", "mcpd", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=environment,
    )


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs. A zombie counts as gone once it is all that is left of
    the process: its parent (or init, for orphans) has yet to collect the status. Its leader turns
    zombie before its other threads have exited, and until the last of them has, the process holds
    its files: writes to its stdin are not refused, and a thread that SIGKILL woke in ``read`` may
    yet take them off the pipe (acting on none)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return True
    except OSError:  # no /proc (macOS): a signal-able pid is taken as running
        return False
    # After the command: the state, and 17 fields on, the threads not yet released (proc(5)).
    return fields[0] == "Z" and fields[17] == "1"


async def open_quiet(argv: Sequence[str], **options: Any) -> Process:
    """``argv`` started with none of its standard streams piped: asyncio's transport of it closes
    once it has exited. (A piped stdin left open kept it; collected after the test's event loop had
    closed, it raised in whatever test ran then.)"""
    devnull = subprocess.DEVNULL
    return await anyio.open_process(list(argv), stdin=devnull, stdout=devnull, stderr=devnull, **options)
