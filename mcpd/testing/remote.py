"""A fixture server on streamable HTTP at a loopback port, for tests and benchmarks of remote servers."""

from __future__ import annotations

import contextlib
import socket
import subprocess
from collections.abc import AsyncIterator, Sequence

import anyio

from mcpd.testing import fixture_command


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def running_http_fixture(name: str, port: int, *flags: str) -> AsyncIterator[str]:
    """Run the fixture server ``name`` on ``port``; yield its URL once it accepts connections.

    On exit the server is terminated (killed if it does not go), so the same port can serve
    the next one: a remote server's outage and return.
    """
    command = fixture_command(name, "--transport", "http", "--port", str(port), *flags)
    async with running_http_server(command, port) as url:
        yield url


@contextlib.asynccontextmanager
async def running_http_server(command: Sequence[str], port: int) -> AsyncIterator[str]:
    """Run ``command``, a server that listens on ``port``, as ``running_http_fixture`` runs the fixture
    (``python -m mcpd.testing.fullserver --transport http --port P``, say)."""
    process = await anyio.open_process(
        [*command],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with anyio.fail_after(60):
            while True:
                try:
                    stream = await anyio.connect_tcp("127.0.0.1", port)
                except OSError:
                    await anyio.sleep(0.05)  # nothing to wait on but the port itself
                    continue
                await stream.aclose()
                break
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        with anyio.CancelScope(shield=True):
            process.terminate()
            with anyio.move_on_after(5):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
