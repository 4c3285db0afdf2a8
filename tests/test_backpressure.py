"""A client that falls behind: advisory notifications are dropped, answers are not.

A server may report progress (or resource updates) far faster than a client reads them. The
daemon must not buffer all of them for that client, on the plain socket or on a host session
the bridge relays: past the client's unread-bytes limit they are dropped, and the answer to the
call still arrives whole.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import msgspec
import pytest
from anyio.abc import SocketStream

from mcpd.client.aio import connect
from mcpd.ipc.framing import MAX_CLIENT_FRAME, FrameBuffer
from mcpd.model.protocol import (
    PROGRESS_NOTIFICATION,
    PROTOCOL_VERSION,
    HelloParams,
    Message,
    Notification,
    Response,
)
from mcpd.testing import fixture_toml
from mcpd.testing.daemon import DaemonProcess, running_daemon
from mcpd.testing.hostile import frame, hello, request

STEPS = 5000
PAD = 2000
"""5,000 progress messages of ~2 KB: ~10 MB, ten times what a client may fall behind by."""

pytestmark = pytest.mark.anyio

_messages = msgspec.msgpack.Decoder(Message)


@pytest.fixture(scope="module")
async def daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DaemonProcess]:
    path = tmp_path_factory.mktemp("backpressure") / "config.toml"
    path.write_text(fixture_toml("fx"))
    async with running_daemon(path) as running:
        yield running


async def reported(daemon: DaemonProcess) -> int:
    """How many progress calls the fixture has finished, by its stderr (another client asks)."""
    async with connect(daemon.socket) as client:
        return sum(e.text.startswith("progress: reported") for e in await client.logs("fx"))


async def until_reported(daemon: DaemonProcess, before: int) -> None:
    """Until the fixture says on stderr that it sent every progress message of one more call."""
    with anyio.fail_after(120):
        while await reported(daemon) <= before:
            await anyio.sleep(0.05)


async def read_frames(stream: SocketStream, until: bytes) -> list[bytes]:
    """Frames from ``stream`` up to and including the first that contains ``until``."""
    buffer = FrameBuffer(MAX_CLIENT_FRAME)
    frames: list[bytes] = []
    with anyio.fail_after(60):
        while not frames or until not in frames[-1]:
            frames.extend(buffer.feed(await stream.receive(1 << 20)))
    return frames


async def test_a_socket_client_far_behind_loses_progress_not_the_answer(daemon: DaemonProcess) -> None:
    """A socket client asks for progress and reads nothing until the server is done: it gets the
    answer, after far fewer progress notifications than the server sent."""
    arguments = {"steps": STEPS, "pause": 0, "pad": PAD}
    params = {"tool": "fx__progress", "arguments": arguments, "progress": True}
    before = await reported(daemon)
    async with await anyio.connect_unix(daemon.socket) as stream:
        await stream.send(hello() + request(2, "tools.call", params))
        await until_reported(daemon, before)
        messages = [_messages.decode(data) for data in await read_frames(stream, b"done %d steps" % STEPS)]
    answer = messages[-1]
    assert isinstance(answer, Response) and answer.id == 2 and answer.error is None
    progress = [m for m in messages if isinstance(m, Notification) and m.method == PROGRESS_NOTIFICATION]
    assert 0 < len(progress) < STEPS // 2


async def test_a_host_far_behind_loses_progress_not_the_answer(daemon: DaemonProcess) -> None:
    """The same through a host session (what `mcpd bridge` relays): the host's call with a progress
    token gets its result after far fewer `notifications/progress` than the server sent."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "slow"}},
    }
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {
            "name": "fx__progress",
            "arguments": {"steps": STEPS, "pause": 0, "pad": PAD},
            "_meta": {"progressToken": "p"},
        },
    }
    upgrade = request(1, "hello", HelloParams(protocol=PROTOCOL_VERSION, client="slow", mode="mcp"))
    host = [initialize, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call]
    before = await reported(daemon)
    async with await anyio.connect_unix(daemon.socket) as stream:
        await stream.send(upgrade + b"".join(frame(msgspec.json.encode(m)) for m in host))
        await until_reported(daemon, before)
        frames = await read_frames(stream, b'"done %d steps' % STEPS)
    messages = [msgspec.json.decode(data) for data in frames[1:]]
    assert messages[-1]["id"] == 2 and "result" in messages[-1]
    progress = [m for m in messages if m.get("method") == "notifications/progress"]
    assert 0 < len(progress) < STEPS // 2
