"""The async client's opt-in reconnect: it outlives the daemon and carries its session on."""

from __future__ import annotations

import signal
from pathlib import Path

import anyio
import pytest

from mcpd.client.aio import connect
from mcpd.errors import TransportError
from mcpd.model.protocol import Progress
from mcpd.model.servers import StateChanged
from mcpd.testing import fixture_toml
from mcpd.testing.daemon import running_daemon

pytestmark = pytest.mark.anyio


async def test_a_reconnecting_client_outlives_the_daemon(tmp_path: Path) -> None:
    """kill -9 of the daemon: the call it was running fails as "may or may not have run", a client
    without reconnect just reports the loss; once a new daemon listens on the socket, reads succeed
    and the connected server and the event subscription are back."""
    config = tmp_path / "config.toml"
    config.write_text(fixture_toml("tools"))
    held: list[TransportError] = []
    async with running_daemon(config) as first, connect(first.socket, reconnect=True) as client:
        events = await client.subscribe()
        await client.connect_server("tools")
        async with connect(first.socket) as plain:
            running = anyio.Event()

            def on_progress(update: Progress) -> None:
                running.set()

            async def held_call() -> None:
                try:
                    await client.call_tool("tools__progress", {"steps": 3000}, on_progress=on_progress)
                except TransportError as exc:
                    held.append(exc)

            async with anyio.create_task_group() as tg:
                tg.start_soon(held_call)
                with anyio.fail_after(60):
                    await running.wait()
                first.signal(signal.SIGKILL)
                await first.wait_exit()
            with pytest.raises(TransportError):
                await plain.status()
        async with running_daemon(config, socket=first.socket):
            statuses = await client.status()
            restored = await client.session_tools()
            await client.restart("tools")
            seen: list[str] = []
            with anyio.fail_after(60):
                async for event in events:
                    if isinstance(event, StateChanged) and event.server == "tools":
                        seen.append(event.new)
                        if event.new == "running":
                            break
    assert held and "may or may not have run" in str(held[0])
    assert [s.name for s in statuses] == ["tools"]
    assert restored.servers == ["tools"]
    assert seen[0] == "starting" and seen[-1] == "running"
