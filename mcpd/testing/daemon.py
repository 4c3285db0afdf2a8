"""A real ``mcpd serve`` process in a temporary directory, for end-to-end tests.

``async with running_daemon(config_path) as daemon:`` starts the daemon on a private
socket, reads its JSON log lines as events (so tests wait on what the daemon says, not
on sleeps), and on exit stops it with SIGTERM (SIGKILL if it does not go).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream


class DaemonProcess:
    """The daemon child, its socket, and every log event it has written so far."""

    def __init__(self, process: Process, socket: Path) -> None:
        self.process = process
        self.socket = socket
        self.events: list[dict[str, Any]] = []
        self.stderr_text: list[str] = []
        self._arrived = anyio.Event()

    async def _drain(self) -> None:
        # Always read stderr to the end: a daemon blocked on a full pipe would look hung.
        assert self.process.stderr is not None
        buffer = ""
        async for chunk in TextReceiveStream(self.process.stderr):
            buffer += chunk
            *lines, buffer = buffer.split("\n")
            for line in lines:
                try:
                    self.events.append(json.loads(line))
                except json.JSONDecodeError:
                    self.stderr_text.append(line)
            arrived, self._arrived = self._arrived, anyio.Event()
            arrived.set()
        self._arrived.set()

    async def wait_for(
        self, name: str, timeout: float = 30.0, after: int = 0, **fields: Any
    ) -> dict[str, Any]:
        """The first event ``name`` (matching ``fields``) at index >= ``after``; waits for it if need be."""
        with anyio.fail_after(timeout):
            index = after
            while True:
                while index < len(self.events):
                    event = self.events[index]
                    index += 1
                    if event.get("event") == name and all(event.get(k) == v for k, v in fields.items()):
                        return event
                if self.process.returncode is not None and index >= len(self.events):
                    raise RuntimeError(f"daemon exited ({self.process.returncode}) before logging {name}")
                await self._arrived.wait()

    def pids(self) -> dict[str, int]:
        """The latest pid of each server, from its state events."""
        found: dict[str, int] = {}
        for event in self.events:
            if event.get("event") == "server.state" and event.get("pid") and event.get("new") == "running":
                found[event["server"]] = event["pid"]
        return found

    def signal(self, signum: signal.Signals) -> None:
        self.process.send_signal(signum)

    async def wait_exit(self, timeout: float = 20.0) -> int:
        with anyio.fail_after(timeout):
            return await self.process.wait()


@contextlib.asynccontextmanager
async def running_daemon(
    config: Path | None,
    *,
    socket: Path | None = None,
    env: dict[str, str] | None = None,
    wait_ready: bool = True,
    wrapper: Sequence[str] = (),
) -> AsyncIterator[DaemonProcess]:
    """Run ``mcpd serve`` on ``config``; yields once it logged ``daemon.ready`` (unless told not to wait).

    ``wrapper``: a command that execs the daemon (e.g. ``setpriv`` dropping root's file-permission
    override, so that modes apply to it)."""
    # Unix socket paths are limited to ~104 bytes, so the socket lives in a short /tmp directory.
    workdir = Path(tempfile.mkdtemp(prefix="mcpd-", dir="/tmp"))
    socket = socket or workdir / "mcpd.sock"
    argv = [*wrapper, sys.executable, "-m", "mcpd", "serve", "--log-format", "json", "--socket", str(socket)]
    if config is not None:
        argv += ["--config", str(config)]
    # The usage store goes to the temporary directory too, never the user's own state dir.
    environment = {**os.environ, "XDG_STATE_HOME": str(workdir / "state"), **(env or {})}
    process = await anyio.open_process(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=environment
    )
    daemon = DaemonProcess(process, socket)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon._drain)
            try:
                if wait_ready:
                    await daemon.wait_for("daemon.ready", timeout=60)
                yield daemon
            finally:
                with anyio.CancelScope(shield=True):
                    await _stop(process)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def _stop(process: Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        with anyio.move_on_after(20):
            await process.wait()
    if process.returncode is None:
        process.kill()
        with anyio.move_on_after(5):
            await process.wait()
