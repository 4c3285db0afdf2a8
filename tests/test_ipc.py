"""The socket API against a real daemon: methods, concurrency, hostile clients, the socket file."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import msgspec
import pytest

from mcpd.client import Client, _wire
from mcpd.client.aio import connect
from mcpd.errors import (
    CallTimeout,
    DaemonNotRunning,
    DaemonStopped,
    InvalidParams,
    McpdError,
    PeerRejected,
    ProtocolError,
    ServerNotRunning,
    TooManyRequests,
    TransportError,
    UnknownMethod,
    UnknownServer,
    UnknownTool,
)
from mcpd.ipc.endpoint import connect_now, connect_within, peer_uid
from mcpd.ipc.framing import LARGE, FrameBuffer
from mcpd.ipc.framing import frame as framed
from mcpd.ipc.stream import FrameStream
from mcpd.model.protocol import (
    MAX_SERVER_CALL_TIMEOUT,
    PROTOCOL_VERSION,
    CancelParams,
    HelloParams,
    NoParams,
    Progress,
    Request,
    ToolsCallParams,
)
from mcpd.model.servers import CallActivity, StateChanged
from mcpd.model.tools import ToolResult
from mcpd.testing import fixture_toml, fullserver_toml, process_gone, run_cli
from mcpd.testing.daemon import DaemonProcess, running_daemon

pytestmark = pytest.mark.anyio

encoder = msgspec.msgpack.Encoder()


@pytest.fixture(scope="module")
async def daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DaemonProcess]:
    """One daemon for the module: two fixture servers and a disabled one, small client limits."""
    path = tmp_path_factory.mktemp("ipc") / "config.toml"
    path.write_text(
        "[daemon]\nmax_frame_bytes = 65536\nclient_write_timeout = 1.0\n"
        + fixture_toml("alpha")
        + fixture_toml("beta", "--tools", "2")
        + fixture_toml("off", enabled=False)
    )
    async with running_daemon(path) as running:
        yield running


def frame(message: object) -> bytes:
    payload = encoder.encode(message)
    return len(payload).to_bytes(4, "big") + payload


def hello_frame(request_id: int = 1) -> bytes:
    params = msgspec.Raw(encoder.encode(HelloParams(protocol=PROTOCOL_VERSION, client="raw")))
    return frame(Request(request_id, "hello", params))


def raw_socket(daemon: DaemonProcess) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5)
    sock.connect(str(daemon.socket))
    return sock


def greeted_socket(daemon: DaemonProcess) -> socket.socket:
    """``raw_socket``, its hello answered."""
    sock = raw_socket(daemon)
    sock.sendall(hello_frame())
    assert read_response(sock)[1] == 1
    return sock


def read_response(sock: socket.socket) -> list[object]:
    header = sock.recv(4, socket.MSG_WAITALL)
    size = int.from_bytes(header, "big")
    decoded: list[object] = msgspec.msgpack.decode(sock.recv(size, socket.MSG_WAITALL))
    return decoded


async def assert_healthy(daemon: DaemonProcess) -> None:
    """Another client is served normally: the hostile one disturbed nobody."""
    async with connect(daemon.socket, name="bystander") as client:
        names = [s.name for s in await client.status()]
    assert names == ["alpha", "beta", "off"]


# -- methods ----------------------------------------------------------------------------------


async def test_status_lists_servers_in_name_order(daemon: DaemonProcess) -> None:
    """status returns every configured server with the fields scripts rely on."""
    async with connect(daemon.socket) as client:
        servers = {s.name: s for s in await client.status()}
        assert client.hello_result is not None
        assert client.hello_result.pid == daemon.process.pid
    assert servers["alpha"].state == "running" and servers["alpha"].pid
    assert servers["off"].state == "disabled" and servers["off"].pid is None


async def test_tools_list_is_qualified_and_sorted(daemon: DaemonProcess) -> None:
    """Tools of live servers under server__tool names, sorted by server then tool; filter by server."""
    async with connect(daemon.socket) as client:
        tools = await client.tools()
        beta = await client.tools(["beta"])
        with pytest.raises(UnknownServer):
            await client.tools(["nope"])
    names = [t.name for t in tools]
    assert names == sorted(names, key=lambda n: tuple(n.split("__", 1)))
    assert "alpha__echo" in names and "beta__tool_1" in names
    assert {t.server for t in beta} == {"beta"}
    assert all(t.input_schema.get("type") == "object" for t in tools)


async def test_tools_call_by_qualified_and_plain_name(daemon: DaemonProcess) -> None:
    """tools.call reaches the server's tool, by qualified name or by server + tool."""
    async with connect(daemon.socket) as client:
        by_qualified = await client.call_tool("alpha__echo", {"text": "q"})
        by_plain = await client.call_tool("echo", {"text": "p"}, server="beta")
        failed = await client.call_tool("alpha__fail", {"message": "boom"})
        with pytest.raises(UnknownTool):
            await client.call_tool("alpha__missing")
        with pytest.raises(UnknownServer):
            await client.call_tool("x", server="ghost")
        with pytest.raises(CallTimeout):
            await client.call_tool("alpha__sleep", {"seconds": 3}, timeout=0.2)
        with pytest.raises(ServerNotRunning) as info:
            await client.call_tool("echo", {"text": "x"}, server="off")
    assert by_qualified.content[0]["text"] == "q"
    assert by_plain.content[0]["text"] == "p"
    assert failed.is_error
    assert info.value.data["state"] == "disabled"


async def test_requests_on_one_connection_run_concurrently(daemon: DaemonProcess) -> None:
    """A slow call does not hold up a fast request behind it: answers come out of order."""
    finished: list[str] = []
    async with connect(daemon.socket) as client:

        async def slow() -> None:
            await client.call_tool("alpha__sleep", {"seconds": 1.0})
            finished.append("slow")

        async def fast() -> None:
            await anyio.sleep(0.1)
            await client.status()
            finished.append("fast")

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            tg.start_soon(fast)
    assert finished == ["fast", "slow"]


async def test_a_request_cancelled_before_it_started_frees_its_slot(tmp_path: Path) -> None:
    """With ``max_in_flight = 1``, a request and its ``cancel`` read together (the request's task
    cancelled before its first step) leave the slot free: the next request is answered."""
    config = tmp_path / "config.toml"
    config.write_text("[daemon]\nmax_in_flight = 1\n")
    async with running_daemon(config) as running:
        with contextlib.closing(greeted_socket(running)) as sock:
            status = Request(2, "status", msgspec.Raw(encoder.encode(NoParams())))
            cancel = Request(3, "cancel", msgspec.Raw(encoder.encode(CancelParams(id=2))))
            sock.sendall(frame(status) + frame(cancel))
            assert read_response(sock)[1:3] == [3, {"ok": True}]
            sock.sendall(frame(Request(4, "status", msgspec.Raw(encoder.encode(NoParams())))))
            assert read_response(sock)[1] == 4


async def test_a_full_connection_still_reads_its_cancels_and_refuses_the_excess(tmp_path: Path) -> None:
    """With ``max_in_flight = 1``, one call runs, the next waits for the slot and a third is refused
    at once (``TooManyRequests``); the ``cancel``s read after them are still answered (the waiting
    call is dropped, the running one stopped) and so is a request after them. A call that waits
    starts once the slot frees."""

    def request(request_id: int, method: str, params: msgspec.Struct) -> bytes:
        return frame(Request(request_id, method, msgspec.Raw(encoder.encode(params))))

    def sleep(request_id: int, seconds: float) -> bytes:
        return request(
            request_id, "tools.call", ToolsCallParams(tool="fx__sleep", arguments={"seconds": seconds})
        )

    config = tmp_path / "config.toml"
    config.write_text("[daemon]\nmax_in_flight = 1\n\n" + fixture_toml("fx"))
    async with running_daemon(config) as running:
        await running.wait_for("server.state", server="fx", new="running", timeout=120)
        with contextlib.closing(greeted_socket(running)) as sock:
            cancels = request(5, "cancel", CancelParams(id=3)) + request(6, "cancel", CancelParams(id=2))
            sock.sendall(
                sleep(2, 60) + sleep(3, 60) + sleep(4, 60) + cancels + request(7, "status", NoParams())
            )
            answers = {answer[1]: answer for answer in (read_response(sock) for _ in range(4))}
            assert set(answers) == {4, 5, 6, 7}
            refused = answers[4][3]
            assert isinstance(refused, dict) and refused["code"] == TooManyRequests.code
            assert answers[5][2] == answers[6][2] == {"ok": True}
            assert answers[7][3] is None
            sock.sendall(sleep(8, 0.2) + request(9, "status", NoParams()))
            assert [read_response(sock)[1] for _ in range(2)] == [8, 9]


async def test_a_cancel_stops_every_request_of_its_id(daemon: DaemonProcess) -> None:
    """A client that reuses an id while the first request with it still runs has both served; a
    ``cancel`` of that id stops the one still running, though the later one has ended (it stopped
    only the latest, and once that had ended the earlier could no longer be stopped: ``ok: false``
    while it ran, and its answer came 30 s later)."""

    def call(request_id: int, seconds: float) -> bytes:
        params = ToolsCallParams(tool="alpha__sleep", arguments={"seconds": seconds})
        return frame(Request(request_id, "tools.call", msgspec.Raw(encoder.encode(params))))

    with contextlib.closing(greeted_socket(daemon)) as sock:
        sock.settimeout(10)
        sock.sendall(call(2, 30) + call(2, 0.1))
        quick = read_response(sock)
        assert quick[1] == 2 and quick[3] is None
        sock.sendall(frame(Request(3, "cancel", msgspec.Raw(encoder.encode(CancelParams(id=2))))))
        assert read_response(sock)[1:3] == [3, {"ok": True}]
        sock.sendall(frame(Request(4, "status", msgspec.Raw(encoder.encode(NoParams())))))
        assert read_response(sock)[1] == 4


async def test_many_clients_at_once(daemon: DaemonProcess) -> None:
    """Forty clients with concurrent calls all get their own answers."""

    async def one(index: int) -> None:
        async with connect(daemon.socket, name=f"c{index}") as client:
            for round_ in range(5):
                text = f"{index}-{round_}"
                result = await client.call_tool("beta__echo", {"text": text})
                assert result.content[0]["text"] == text

    async with anyio.create_task_group() as tg:
        for index in range(40):
            tg.start_soon(one, index)


async def test_subscribe_pushes_state_changes(daemon: DaemonProcess) -> None:
    """A subscriber sees a restart as state events, ending in running."""
    async with connect(daemon.socket) as watcher, connect(daemon.socket) as actor:
        events = await watcher.subscribe()
        status = await actor.restart("beta")
        assert status.state == "running"
        seen: list[str] = []
        with anyio.fail_after(10):
            async for event in events:
                if isinstance(event, StateChanged) and event.server == "beta":
                    seen.append(event.new)
                    if event.new == "running":
                        break
    assert seen[0] == "starting" and seen[-1] == "running"


async def test_subscribers_hear_call_activity(daemon: DaemonProcess) -> None:
    """Calls are summed per server and told to subscribers once per interval (what `mcpd top` shows)."""
    calls, errors = 0, 0
    async with connect(daemon.socket) as watcher, connect(daemon.socket) as caller:
        events = await watcher.subscribe()
        await caller.call_tool("alpha__echo", {"text": "x"})
        await caller.call_tool("alpha__fail", {})
        with anyio.fail_after(10):
            # Other tests' calls may share an interval: add up until ours are all counted.
            async for event in events:
                if isinstance(event, CallActivity):
                    calls += event.calls.get("alpha", 0)
                    errors += event.errors.get("alpha", 0)
                    if calls >= 2 and errors >= 1:
                        break
    assert calls >= 2 and errors >= 1


async def test_the_blocking_client_follows_events_and_progress(daemon: DaemonProcess) -> None:
    """The blocking client streams events and relays a call's progress to its callback."""
    updates: list[float] = []

    def use_blocking_client() -> tuple[ToolResult, CallActivity]:
        with Client(daemon.socket) as client:
            result = client.call_tool(
                "alpha__progress", {"steps": 3}, on_progress=lambda p: updates.append(p.progress)
            )
            events = client.events()
            with Client(daemon.socket) as other:
                other.call_tool("alpha__echo", {"text": "x"})
            return result, next(e for e in events if isinstance(e, CallActivity))

    with anyio.fail_after(30):
        result, event = await anyio.to_thread.run_sync(use_blocking_client)
    assert result.content[0]["text"] == "done 3 steps" and updates == [1, 2, 3]
    assert event.calls.get("alpha", 0) >= 1


class CallbackBug(Exception):
    """What a caller's buggy progress callback raises."""


async def test_a_failing_progress_callback_ends_only_its_own_call(daemon: DaemonProcess) -> None:
    """An exception from a caller's on_progress reaches that caller; the call beside it on the
    same connection, and the ones after, are answered as usual (the reader lives on)."""

    def buggy(update: Progress) -> None:
        raise CallbackBug(update.progress)

    async with connect(daemon.socket) as client:
        async with anyio.create_task_group() as tg:
            beside: list[ToolResult] = []

            async def slow_call() -> None:
                beside.append(await client.call_tool("beta__sleep", {"seconds": 0.5}))

            tg.start_soon(slow_call)
            with pytest.raises(CallbackBug):
                await client.call_tool("alpha__progress", {"steps": 20}, on_progress=buggy)
        later = await client.call_tool("alpha__echo", {"text": "still here"})
    assert not beside[0].is_error
    assert later.content[0]["text"] == "still here"


async def test_a_blocking_client_connected_again_starts_clean(daemon: DaemonProcess) -> None:
    """A call left in the middle of large progress updates (its callback raised) leaves part of the
    next one read; connect() again after close() begins afresh, without that half frame."""

    def buggy_when_behind(update: Progress) -> None:
        if update.progress == 1:
            time.sleep(0.3)  # the updates pile up meanwhile: the next read ends inside one
            return
        raise CallbackBug(update.progress)

    def use_blocking_client() -> list[str]:
        with Client(daemon.socket) as client:
            arguments = {"steps": 20, "pause": 0, "pad": 40_000}  # each 40 KB, a read 64 KiB
            with pytest.raises(CallbackBug):
                client.call_tool("alpha__progress", arguments, on_progress=buggy_when_behind)
            client.close()
            client.connect(timeout=5)
            return [s.name for s in client.status()]

    with anyio.fail_after(30):
        assert await anyio.to_thread.run_sync(use_blocking_client) == ["alpha", "beta", "off"]


async def test_arguments_too_deep_to_encode_are_refused_before_sending(daemon: DaemonProcess) -> None:
    """Arguments nested past what the encoder can recurse into: both clients raise InvalidParams
    (not a RecursionError) and their connection goes on."""
    deep: object = "x"
    for _ in range(5000):
        deep = [deep]
    async with connect(daemon.socket) as client:
        with pytest.raises(InvalidParams):
            await client.call_tool("alpha__echo", {"text": "a", "deep": deep})
        assert len(await client.status()) == 3
    with Client(daemon.socket) as blocking:
        with pytest.raises(InvalidParams):
            blocking.call_tool("alpha__echo", {"text": "a", "deep": deep})
        assert len(blocking.status()) == 3


async def test_events_that_arrive_during_a_request_are_kept_for_the_blocking_iterator(
    daemon: DaemonProcess,
) -> None:
    """A blocking client subscribed to events makes a call, meanwhile a server restarts: the state
    changes that arrived while it waited for its answer come out of events() afterwards, in order."""

    def use_blocking_client() -> list[tuple[str, str]]:
        with Client(daemon.socket) as client, Client(daemon.socket) as other:
            client.request(_wire.subscribe())

            def restart_beta(update: Progress) -> None:
                if update.progress == 1:
                    other.restart("beta")  # its events arrive while the call below still runs

            client.call_tool("alpha__progress", {"steps": 3, "pause": 0.5}, on_progress=restart_beta)
            other.restart("alpha")  # the end mark
            seen: list[tuple[str, str]] = []
            for event in client.events(everything=False):
                if isinstance(event, StateChanged):
                    seen.append((event.server, event.new))
                    if seen[-1] == ("alpha", "running"):
                        return seen
        raise AssertionError("unreachable")

    with anyio.fail_after(60):
        seen = await anyio.to_thread.run_sync(use_blocking_client)
    beta = [state for server, state in seen if server == "beta"]
    assert beta[-2:] == ["starting", "running"], seen
    assert seen.index(("beta", "running")) < seen.index(("alpha", "starting"))


async def test_call_waits_for_a_restarting_server(daemon: DaemonProcess) -> None:
    """A call that arrives while the server restarts waits for it, then runs."""
    async with connect(daemon.socket) as client:
        pid = await client.call_tool("alpha__pid")
        # Crash it: the next call arrives while it is in backoff or starting.
        with pytest.raises(TransportError):
            await client.call_tool("alpha__crash")
        result = await client.call_tool("alpha__echo", {"text": "back"}, timeout=30)
        new_pid = await client.call_tool("alpha__pid")
    assert result.content[0]["text"] == "back"
    assert new_pid.content[0]["text"] != pid.content[0]["text"]


async def test_start_stop_restart_one_server(daemon: DaemonProcess) -> None:
    """servers.stop/start/restart act on one server and report its status."""
    async with connect(daemon.socket) as client:
        before = {s.name: s.pid for s in await client.status()}
        stopped = await client.stop("beta")
        assert stopped.state == "stopped"
        started = await client.start("beta")
        assert started.state == "running"
        enabled = await client.start("off")
        assert enabled.state == "running"
        await client.stop("off")
        after = {s.name: s.pid for s in await client.status()}
    assert after["alpha"] == before["alpha"]
    assert after["beta"] != before["beta"]


# -- protocol errors and hostile clients -----------------------------------------------------------


async def test_hello_is_required_and_versioned(daemon: DaemonProcess) -> None:
    """Requests before hello are refused; a protocol mismatch is a clear ProtocolError."""
    with raw_socket(daemon) as sock:
        sock.sendall(frame(Request(1, "status", msgspec.Raw(encoder.encode(NoParams())))))
        tag, request_id, _result, error = read_response(sock)
        assert (tag, request_id) == (1, 1)
        assert isinstance(error, dict) and error["code"] == ProtocolError.code
        params = msgspec.Raw(encoder.encode(HelloParams(protocol=PROTOCOL_VERSION + 1)))
        sock.sendall(frame(Request(2, "hello", params)))
        _tag, _id, _result, error = read_response(sock)
        assert isinstance(error, dict) and "protocol mismatch" in error["message"]


async def test_unknown_method_and_invalid_params(daemon: DaemonProcess) -> None:
    """Unknown methods and params of the wrong type get typed errors; the connection stays usable."""
    with Client(daemon.socket) as client:
        with pytest.raises(UnknownMethod):
            client.request(_wire.Call("no.such.method", NoParams(), dict))
        with pytest.raises(InvalidParams):
            client.request(_wire.Call("servers.start", HelloParams(protocol=1), dict))
        with pytest.raises(InvalidParams):
            client.request(_wire.Call("tools.call", NoParams(), dict))
        # Arguments no server takes (the SDK's drop them: the call would wait out its deadline).
        nested: dict[str, object] = {"text": "x"}
        for _ in range(100):
            nested = {"inner": nested}
        with pytest.raises(InvalidParams, match="nested deeper than 64"):
            client.call_tool("alpha__echo", nested, timeout=30)
        assert [s.name for s in client.status()] == ["alpha", "beta", "off"]


async def test_undecodable_message_gets_an_error_and_the_stream_continues(daemon: DaemonProcess) -> None:
    """A well-framed but undecodable message is answered with an error; later requests still work."""
    with raw_socket(daemon) as sock:
        sock.sendall(frame(["not", "a", "request"]) + b"\x00\x00\x00\x02\xc1\xc1" + hello_frame(7))
        first = read_response(sock)
        second = read_response(sock)
        third = read_response(sock)
    assert first[1] is None and isinstance(first[3], dict) and first[3]["code"] == ProtocolError.code
    assert second[1] is None
    assert third[1] == 7 and third[3] is None
    await assert_healthy(daemon)


async def test_garbage_bytes_close_only_that_connection(daemon: DaemonProcess) -> None:
    """Random bytes read as a huge length: an error frame, then that connection is closed."""
    with raw_socket(daemon) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        response = read_response(sock)
        assert response[3] is not None and "exceeds the limit" in response[3]["message"]  # type: ignore[index]
        assert sock.recv(1) == b""
    await assert_healthy(daemon)


async def test_huge_length_then_hang_up(daemon: DaemonProcess) -> None:
    """An absurd length followed by an immediate close (the error reply cannot be delivered)."""
    for _ in range(3):
        with raw_socket(daemon) as sock:
            sock.sendall(b"\xff\xff\xff\xff")
    await assert_healthy(daemon)


async def test_subscriber_that_vanishes_mid_broadcast(daemon: DaemonProcess) -> None:
    """Events pushed to a subscriber that has hung up are dropped with it; the daemon carries on."""
    with raw_socket(daemon) as sock:
        sock.sendall(hello_frame() + frame(Request(2, "subscribe", msgspec.Raw(encoder.encode({})))))
        read_response(sock)
        read_response(sock)
    async with connect(daemon.socket) as client:
        await client.restart("beta")
    await assert_healthy(daemon)


async def test_unencodable_result_is_an_error_not_a_hang(daemon: DaemonProcess) -> None:
    """A tool result msgpack cannot carry (a 70-bit integer) comes back as TransportError at once."""
    async with connect(daemon.socket) as client:
        with anyio.fail_after(10), pytest.raises(TransportError, match="cannot be sent"):
            await client.call_tool("alpha__huge")


async def test_bad_timeout_and_arguments_are_invalid_params(daemon: DaemonProcess) -> None:
    """A NaN or negative timeout, or arguments JSON cannot express, are InvalidParams."""
    async with connect(daemon.socket) as client:
        for timeout in (float("nan"), -1.0, 0.0):
            with pytest.raises(InvalidParams):  # refused by the client library
                await client.call_tool("alpha__echo", {"text": "x"}, timeout=timeout)
            # and by the daemon, for clients that do not check
            params = ToolsCallParams(tool="alpha__echo", arguments={"text": "x"}, timeout=timeout)
            with pytest.raises(InvalidParams):
                await client.request(_wire.Call("tools.call", params, dict))
        with pytest.raises(InvalidParams):
            await client.call_tool("alpha__echo", {"text": msgspec.msgpack.Ext(1, b"x")})
        assert (await client.call_tool("alpha__echo", {"text": "still"})).content[0]["text"] == "still"


async def test_errors_leave_the_async_client_block_unwrapped(daemon: DaemonProcess) -> None:
    """An error raised inside `async with connect()` reaches the caller as itself, not a group."""
    with pytest.raises(UnknownTool):
        async with connect(daemon.socket) as client:
            await client.call_tool("alpha__missing")


async def test_oversized_frame_is_refused(daemon: DaemonProcess) -> None:
    """A frame over max_frame_bytes (64 KiB here) closes that connection before it is read."""
    with greeted_socket(daemon) as sock:
        sock.sendall((1 << 20).to_bytes(4, "big") + b"x" * 1000)
        response = read_response(sock)
        assert response[3] is not None and response[3]["code"] == ProtocolError.code  # type: ignore[index]
    await assert_healthy(daemon)


async def test_a_frame_over_a_small_max_frame_is_refused_when_it_arrives_alone(tmp_path: Path) -> None:
    """``max_frame_bytes`` may be set below the largest frame ``FrameStream.express`` takes (16 KiB):
    a frame over it is refused and its connection closed even when it arrives alone in a read from
    an established client, as when it arrives with others (the express path had answered it)."""
    config = tmp_path / "config.toml"
    config.write_text("[daemon]\nmax_frame_bytes = 1024\n")
    async with running_daemon(config) as running:
        with contextlib.closing(greeted_socket(running)) as sock:
            await anyio.sleep(0.1)  # the daemon's reader waits for the next read
            sock.sendall(frame(Request(2, "status", msgspec.Raw(encoder.encode({"pad": "x" * 2000})))))
            response = read_response(sock)
            assert response[1] is None
            assert response[3] is not None and response[3]["code"] == ProtocolError.code  # type: ignore[index]
            assert sock.recv(1) == b""  # closed: the stream cannot be trusted past such a frame


async def test_truncated_frame_and_disconnect_mid_request(daemon: DaemonProcess) -> None:
    """Half a frame then EOF, or leaving while a call runs, disturbs nobody."""
    with raw_socket(daemon) as sock:
        sock.sendall(hello_frame()[:-3])
    with greeted_socket(daemon) as sock:
        call = {"tool": "alpha__sleep", "arguments": {"seconds": 2}}
        sock.sendall(frame(Request(2, "tools.call", msgspec.Raw(encoder.encode(call)))))
    await assert_healthy(daemon)
    async with connect(daemon.socket) as client:
        assert (await client.call_tool("alpha__echo", {"text": "ok"})).content[0]["text"] == "ok"


async def test_requests_in_pieces_and_alone_in_a_read_are_answered(daemon: DaemonProcess) -> None:
    """A request read in pieces is answered once whole (its last piece is read as the rest of the
    frame begun before it, not offered alone to ``FrameStream.express``), and so are requests that
    arrive alone in a read, one per read, which ``express`` starts."""
    with greeted_socket(daemon) as sock:
        whole = frame(Request(2, "status", msgspec.Raw(encoder.encode(NoParams()))))
        for piece in (whole[:3], whole[3:9], whole[9:]):
            sock.sendall(piece)
            await anyio.sleep(0.1)  # each piece is read on its own
        assert read_response(sock)[1:4:2] == [2, None]
        for request_id in range(3, 6):
            sock.sendall(frame(Request(request_id, "status", msgspec.Raw(encoder.encode(NoParams())))))
            assert read_response(sock)[1:4:2] == [request_id, None]


async def test_client_that_never_reads_is_dropped(daemon: DaemonProcess) -> None:
    """A client that floods requests and reads nothing is disconnected; others are served throughout."""
    sock = raw_socket(daemon)
    try:
        sock.sendall(hello_frame())
        request = frame(Request(2, "tools.list", msgspec.Raw(encoder.encode({}))))
        sock.setblocking(False)
        sent = 0
        with anyio.fail_after(30):
            while True:
                try:
                    sent += sock.send(request * 64)
                except BlockingIOError:
                    await assert_healthy(daemon)
                    await anyio.sleep(0.05)
                except (BrokenPipeError, ConnectionResetError):
                    break
        assert sent > 0
    finally:
        sock.close()
    await daemon.wait_for("client.dropped", reason="not reading")
    await assert_healthy(daemon)


# -- the socket file -----------------------------------------------------------------------------


async def test_socket_and_directory_permissions(daemon: DaemonProcess, tmp_path: Path) -> None:
    """The socket is 0600; a directory the daemon creates is 0700."""
    assert stat.S_IMODE(daemon.socket.stat().st_mode) == 0o600
    nested = Path(f"/tmp/mcpd-perm-{os.getpid()}") / "run"
    empty = tmp_path / "config.toml"
    empty.write_text("")  # no server to start (with no config at all, the demo server would run)
    try:
        async with running_daemon(empty, socket=nested / "mcpd.sock") as other:
            assert stat.S_IMODE(nested.stat().st_mode) == 0o700
            assert other.socket.exists()
        # The socket goes with the daemon; the lock file stays (removing it would race a new daemon).
        assert sorted(p.name for p in nested.iterdir()) == ["mcpd.sock.lock"]
    finally:
        shutil.rmtree(nested.parent, ignore_errors=True)


async def test_second_daemon_is_refused_and_first_keeps_running(daemon: DaemonProcess) -> None:
    """`mcpd serve` on a socket in use exits 4 with one clear line; the first daemon is untouched."""
    result = subprocess.run(
        [sys.executable, "-m", "mcpd", "serve", "--socket", str(daemon.socket), "--log-format", "json"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, "XDG_CONFIG_HOME": "/nonexistent"},
    )
    assert result.returncode == 4
    assert "already serving" in result.stderr and "Traceback" not in result.stderr
    await assert_healthy(daemon)


async def test_threads_sharing_a_blocking_client_see_the_daemon_die_as_mcpd_errors(tmp_path: Path) -> None:
    """Threads share one blocking client: one call runs, the others wait their turn; kill -9 of the
    daemon ends every one of them with an mcpd error (never the socket's own OSError)."""
    config = tmp_path / "c.toml"
    config.write_text(fixture_toml("solo"))
    async with running_daemon(config) as daemon:
        client = Client(daemon.socket).connect()
        running = threading.Event()
        outcomes: list[BaseException] = []

        def call() -> None:
            try:
                client.call_tool("solo__progress", {"steps": 3000}, on_progress=lambda _: running.set())
            except BaseException as exc:  # what each thread got is the point
                outcomes.append(exc)

        threads = [threading.Thread(target=call) for _ in range(6)]
        for thread in threads:
            thread.start()
        with anyio.fail_after(30):
            await anyio.to_thread.run_sync(running.wait)
        daemon.signal(signal.SIGKILL)
        await daemon.wait_exit()
        for thread in threads:
            await anyio.to_thread.run_sync(thread.join, 30)
        client.close()
    assert len(outcomes) == 6 and all(isinstance(exc, McpdError) for exc in outcomes), outcomes


async def test_connect_timeout_bounds_the_hello(daemon: DaemonProcess) -> None:
    """A daemon that accepts but does not answer (stopped): both clients' connect(timeout=1) give
    up within about that second, not the 30 s of any other answer: the blocking client saying the
    daemon is stopped (it looks once the hello has waited ``LOOK_AFTER``), the async client with
    CallTimeout."""

    def blocking_connect() -> None:
        Client(daemon.socket).connect(timeout=1)

    daemon.signal(signal.SIGSTOP)
    try:
        started = anyio.current_time()
        with pytest.raises(DaemonStopped):
            await anyio.to_thread.run_sync(blocking_connect)
        with pytest.raises(CallTimeout):
            async with connect(daemon.socket, timeout=1):
                pass
        took = anyio.current_time() - started
    finally:
        daemon.signal(signal.SIGCONT)
    assert took < 10
    await assert_healthy(daemon)


async def test_a_stopped_daemon_is_said_at_once_with_how_to_resume_it(
    daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CLI command to a daemon stopped by SIGSTOP fails within seconds saying so, its pid and how to
    resume it, as does the blocking client's request on a connection made before the stop
    (``DaemonStopped``); the async client says it too once its ping goes unanswered. Each CLI
    command took 20 s (10 of silence, 10 waiting for a ping), then said only that the daemon
    stopped answering."""
    _probing(monkeypatch)
    pid = daemon.process.pid
    said = f"the mcpd daemon (pid {pid}) is stopped (SIGSTOP); `kill -CONT {pid}` resumes it"
    command = functools.partial(run_cli, "status", env={"MCPD_SOCKET": str(daemon.socket)}, timeout=60)
    with Client(daemon.socket) as blocking:
        async with connect(daemon.socket) as client:
            daemon.signal(signal.SIGSTOP)
            try:
                started = anyio.current_time()
                cli = await anyio.to_thread.run_sync(command)
                took = anyio.current_time() - started
                with pytest.raises(DaemonStopped) as request:
                    await anyio.to_thread.run_sync(blocking.status)
                with anyio.fail_after(30), pytest.raises(DaemonStopped, match=re.escape(said)):
                    await client.status()
            finally:
                daemon.signal(signal.SIGCONT)
    assert cli.returncode != 0 and said in cli.stderr and took < 10, (cli, took)
    assert said in str(request.value) and request.value.data == {"pid": pid}
    await assert_healthy(daemon)


def test_a_call_without_a_timeout_outlasts_every_call_timeout_a_config_may_give() -> None:
    """The daemon applies the server's call_timeout, which the client does not know: it must not
    give up first (it gave up at 605 s, where a server may be allowed 3,600)."""
    for call in (_wire.tools_call("t"), _wire.read_resource("r://x"), _wire.get_prompt("p")):
        assert call.timeout > MAX_SERVER_CALL_TIMEOUT


def _probing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pings after 0.5 s of silence; room for a loaded machine: a healthy daemon must answer in 2 s."""
    monkeypatch.setattr(_wire, "PROBE_AFTER", 0.5)
    monkeypatch.setattr(_wire, "PROBE_WAIT", 2.0)


async def test_a_call_through_several_pings_is_answered(
    daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client asks the daemon whether it is there whenever a request has heard nothing for
    PROBE_AFTER: a call that runs through several of those is answered, in both clients."""
    _probing(monkeypatch)
    slept = [{"type": "text", "text": "slept 1.5"}]
    async with connect(daemon.socket) as client:
        with anyio.fail_after(30):
            assert (await client.call_tool("alpha__sleep", {"seconds": 1.5})).content == slept
    with Client(daemon.socket) as blocking:
        assert blocking.call_tool("alpha__sleep", {"seconds": 1.5}).content == slept


@pytest.mark.parametrize("size", [1, 3 * 1024 * 1024])
async def test_a_call_ends_soon_once_the_daemon_stops_answering(
    daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    """A tool call without a timeout of its own to a daemon that is stopped (SIGSTOP) ends with
    TransportError once a ping goes unanswered for PROBE_WAIT, in both clients (each used to wait
    605 s); so does one too large for the socket's buffer, which the daemon never takes (the async
    client waited for it for ever, its timeout or not)."""
    _probing(monkeypatch)
    echo = {"text": "x" * size}
    with Client(daemon.socket) as blocking:
        blocking.status()  # connected before the daemon stops
        async with connect(daemon.socket) as client:
            daemon.signal(signal.SIGSTOP)
            try:
                with anyio.fail_after(30):
                    with pytest.raises(TransportError, match="stopped answering"):
                        await client.call_tool("alpha__echo", echo)
                    with pytest.raises(TransportError, match="stopped answering"):
                        await anyio.to_thread.run_sync(blocking.call_tool, "alpha__echo", echo)
            finally:
                daemon.signal(signal.SIGCONT)
    await assert_healthy(daemon)


async def test_a_blocking_follow_of_events_goes_on_through_silences_a_healthy_daemon_answers(
    daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Silence alone does not end a follow: during a 3 s call (no event meanwhile; PROBE_AFTER 0.5 s,
    PROBE_WAIT 2 s) the follow's pings are answered and it goes on to the call's activity event."""
    _probing(monkeypatch)
    got: list[object] = []
    blocking = Client(daemon.socket).connect()
    blocking.request(_wire.subscribe())

    def follow() -> None:
        try:
            for event in blocking.events(everything=False):
                if isinstance(event, CallActivity) and "alpha" in event.calls:
                    got.append(event)
                    return
        except BaseException as exc:  # what the thread got is the point
            got.append(exc)

    thread = threading.Thread(target=follow)
    thread.start()
    try:
        async with connect(daemon.socket) as client:
            await client.call_tool("alpha__sleep", {"seconds": 3})
        await anyio.to_thread.run_sync(thread.join, 30)
    finally:
        blocking.close()
        await anyio.to_thread.run_sync(thread.join, 10)
    assert [type(item) for item in got] == [CallActivity], got


async def test_a_blocking_follow_of_events_ends_soon_once_the_daemon_stops_answering(
    daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blocking client's events() waits for the next event without a deadline, but asks the daemon
    whether it is there after PROBE_AFTER of silence, as a call does: a stopped daemon (SIGSTOP) ends
    the follow with TransportError once the ping goes unanswered (it used to block for ever)."""
    _probing(monkeypatch)
    outcomes: list[BaseException] = []
    blocking = Client(daemon.socket).connect()
    blocking.request(_wire.subscribe())  # before the daemon stops, so the follow only reads

    def follow() -> None:
        try:
            for _ in blocking.events(everything=False):
                pass
        except BaseException as exc:  # what the thread got is the point
            outcomes.append(exc)

    thread = threading.Thread(target=follow)
    daemon.signal(signal.SIGSTOP)
    try:
        thread.start()
        await anyio.to_thread.run_sync(thread.join, 30)
        ended = not thread.is_alive()
    finally:
        daemon.signal(signal.SIGCONT)
        blocking.close()  # frees the thread if it was still blocked
        await anyio.to_thread.run_sync(thread.join, 10)
    assert ended, "the follow was still blocked 30 s after the daemon stopped"
    (outcome,) = outcomes
    assert isinstance(outcome, TransportError) and "stopped answering" in str(outcome)
    await assert_healthy(daemon)


async def test_an_async_follow_of_events_goes_on_through_silences_a_healthy_daemon_answers(
    daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The async client's event stream, read with nothing else waiting, is not ended by silence: during
    a 3 s call of another client (no event meanwhile) its pings are answered and the call's activity
    event arrives."""
    _probing(monkeypatch)
    async with connect(daemon.socket) as follower, connect(daemon.socket) as caller:
        events = await follower.subscribe()
        got: list[CallActivity] = []

        async def follow() -> None:
            async for event in events:
                if isinstance(event, CallActivity) and "alpha" in event.calls:
                    got.append(event)
                    return

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(follow)
                await caller.call_tool("alpha__sleep", {"seconds": 3})
        assert (await follower.status())[0].name == "alpha"  # the connection went on throughout
    assert len(got) == 1


@pytest.mark.parametrize("reading", ["events", "a log"])
async def test_an_async_follow_ends_soon_once_the_daemon_stops_answering(
    daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch, reading: str
) -> None:
    """The async client's event stream, or a followed log, read with no request waiting, ends once a
    stopped daemon (SIGSTOP) leaves a ping unanswered, as a request does; the next request says why.
    The watchdog pinged only for waiting requests: the reader was blocked for ever."""
    _probing(monkeypatch)
    async with connect(daemon.socket) as client, contextlib.AsyncExitStack() as follows:
        stream: AsyncIterator[object] = (
            await client.subscribe()
            if reading == "events"
            else await follows.enter_async_context(client.follow_logs("alpha", limit=0))
        )
        daemon.signal(signal.SIGSTOP)
        try:
            with anyio.fail_after(30):
                async for _ in stream:
                    pass
            with pytest.raises(TransportError, match="stopped answering"):
                await client.status()
        finally:
            daemon.signal(signal.SIGCONT)
    await assert_healthy(daemon)


def _reading(thread: threading.Thread) -> bool:
    """Whether ``thread`` waits in the blocking client's read."""
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None and frame.f_code.co_name != "_recv":
        frame = frame.f_back
    return frame is not None


async def test_a_follow_ended_by_close_ends_at_once_and_leaves_the_next_connection_alone(
    daemon: DaemonProcess,
) -> None:
    """close() then connect() while a thread reads events(): the follow ends at once with
    TransportError, and the new connection works. The follow waits with a timeout (its pings), so
    closing its socket under it let the number go to the new connection before it waited again:
    it then waited there until its ping failed, 10 s (half the rounds)."""

    def rounds() -> list[str]:
        failures = []
        blocking = Client(daemon.socket).connect()
        try:
            for round_ in range(10):
                blocking.request(_wire.subscribe())
                ended = threading.Event()

                def follow(ended: threading.Event) -> None:
                    with contextlib.suppress(TransportError):
                        for _ in blocking.events(everything=False):
                            pass
                    ended.set()

                thread = threading.Thread(target=follow, args=(ended,))
                thread.start()
                while not _reading(thread):
                    time.sleep(0.001)
                blocking.close()
                blocking.connect()
                if not ended.wait(5):
                    failures.append(f"round {round_}: the follow still blocked 5 s after close()")
                thread.join(15)
                try:
                    blocking.request(_wire.subscribe())
                except McpdError as exc:
                    failures.append(f"round {round_}: the new connection: {exc!r}")
                    blocking.connect()
        finally:
            blocking.close()
        return failures

    assert await anyio.to_thread.run_sync(rounds) == []


async def test_stale_socket_of_a_killed_daemon_is_replaced(tmp_path: Path) -> None:
    """After kill -9 the socket file stays behind; the next daemon takes the path over."""
    config = tmp_path / "c.toml"
    config.write_text(fullserver_toml("solo"))
    async with running_daemon(config) as first:
        socket_path = first.socket
        pid = first.pids()["solo"]
        first.process.kill()
        await first.wait_exit()
        assert socket_path.exists()
        with pytest.raises(DaemonNotRunning):
            Client(socket_path).connect()
        with anyio.fail_after(10):
            while not process_gone(pid):
                await anyio.sleep(0.05)
        async with running_daemon(config, socket=socket_path) as second:
            with Client(second.socket) as client:
                assert [s.state for s in client.status()] == ["running"]


# The client runs as `nobody`, so it needs an interpreter that user may execute (not one under /root).
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")


@pytest.mark.skipif(os.getuid() != 0 or SYSTEM_PYTHON is None, reason="needs root and a system python3")
async def test_other_uid_is_refused(daemon: DaemonProcess) -> None:
    """A peer with another uid is refused by the kernel-reported credentials, even if it can connect."""
    # Open up what normally keeps other users out (the 0700 directory, the 0600 socket) so that
    # only the daemon's own credential check stands in the way.
    os.chmod(daemon.socket.parent, 0o755)
    os.chmod(daemon.socket, 0o666)
    try:
        code = (
            "import socket,sys;s=socket.socket(socket.AF_UNIX);s.connect(sys.argv[1]);"
            "h=s.recv(4,socket.MSG_WAITALL);sys.stdout.buffer.write(s.recv(int.from_bytes(h,'big'),socket.MSG_WAITALL))"
        )
        out = subprocess.run(
            [str(SYSTEM_PYTHON), "-c", code, str(daemon.socket)],
            capture_output=True,
            timeout=10,
            check=True,
            user=65534,
        ).stdout
    finally:
        os.chmod(daemon.socket, 0o600)
        os.chmod(daemon.socket.parent, 0o700)
    message = msgspec.msgpack.decode(out)
    assert "permission denied" in message[3]["message"]
    assert message[3]["code"] == PeerRejected.code
    await assert_healthy(daemon)


async def test_client_library_does_not_import_the_sdk() -> None:
    """`import mcpd.client` (and the bridge) loads neither the mcp SDK nor the daemon, so CLI calls
    start fast; nor OpenSSL (hashlib, ssl), ~4 MiB of every bridge process's RSS."""
    code = (
        "import sys, mcpd.client, mcpd.cli, mcpd.bridge, mcpd.cli.bridge; "
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('mcp', 'mcp_types', 'pydantic', 'anyio', 'hashlib', '_hashlib', 'ssl', '_ssl') "
        "or m.startswith(('mcpd.daemon', 'mcpd.supervisor.actor'))]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30)
    assert out.stdout.strip() == "[]"


async def test_async_client_reports_a_dead_daemon(tmp_path: Path) -> None:
    """Connecting to nothing is DaemonNotRunning, with the socket path in the message."""
    with pytest.raises(DaemonNotRunning, match="mcpd serve"):
        async with connect(tmp_path / "none.sock"):
            pass


async def test_a_connect_that_times_out_says_so(tmp_path: Path) -> None:
    """A connect that runs out of time (here at once, a zero timeout, on a real listener) is a
    TransportError saying it timed out: not "choose a shorter socket path" (a ConfigError, exit 2:
    it has no errno either), nor advice to start a daemon. (The sync client's socket.timeout is the
    same TimeoutError.)"""
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen()
        with pytest.raises(TransportError, match="timed out"):
            async with connect(path, timeout=0):
                pass


# -- answers the clients cannot decode ------------------------------------------------------------

BAD_ANSWERS = {
    # [1, 1, nil, {"code": 1002, "message": <not UTF-8>}]
    "invalid UTF-8 in an error": b"\x94\x01\x01\xc0\x82\xa4code\xcd\x03\xea\xa7message\xa2\xe4\x00",
    # [1, 1, <nested past the recursion limit>, nil]
    "nesting past the recursion limit": b"\x94\x01\x01" + b"\x91" * 5000 + b"\xc0\xc0",
    # [1, 1, {"protocol": 1, "version": <not UTF-8>, "pid": 1}, nil]
    "invalid UTF-8 in a result": b"\x94\x01\x01\x83\xa8protocol\x01\xa7version\xa2\xe4\x00\xa3pid\x01\xc0",
    "not msgpack at all": b"\xc1\xc1\xc1",
}


@pytest.fixture
def fake_daemon(tmp_path: Path) -> Iterator[tuple[Path, list[bytes]]]:
    """A listener of this uid that answers every connection's first request with the next of a
    list of raw answers (each framed), then waits for the client to hang up."""
    path = Path(f"/tmp/mcpd-fake-{os.getpid()}.sock")
    answers: list[bytes] = []
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                with conn:
                    conn.recv(65536)
                    conn.sendall(len(answers[0]).to_bytes(4, "big") + answers.pop(0))
                    conn.recv(65536)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield path, answers
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        path.unlink()
        thread.join(5)


@pytest.mark.parametrize("answer", BAD_ANSWERS, ids=list(BAD_ANSWERS))
async def test_clients_turn_every_undecodable_answer_into_a_typed_error(
    fake_daemon: tuple[Path, list[bytes]], answer: str
) -> None:
    """Whatever the daemon's answer fails to decode on (bad UTF-8, deep nesting, garbage), both
    clients raise TransportError, never a decoder's own exception."""
    path, answers = fake_daemon
    answers += [BAD_ANSWERS[answer], BAD_ANSWERS[answer]]
    with pytest.raises(TransportError):
        Client(path).connect(timeout=5)
    with pytest.raises(TransportError):
        async with connect(path, timeout=5):
            pass


def test_a_large_frame_fed_in_pieces_comes_out_whole() -> None:
    """A frame over LARGE, fed in uneven pieces between two small frames, comes out whole and in
    order; ``pending`` counts what of it has arrived so far."""
    big = bytes(range(256)) * (LARGE // 256 + 1000)
    stream = framed(b"a") + framed(big) + framed(b"b")
    buffer = FrameBuffer()
    out: list[bytes] = []
    fed = 0
    for start in range(0, len(stream), 70_001):
        piece = stream[start : start + 70_001]
        out += buffer.feed(piece)
        fed += len(piece)
        assert buffer.pending == fed - sum(4 + len(f) for f in out)
    assert [bytes(f) for f in out] == [b"a", big, b"b"]


async def test_closing_a_blocking_client_ends_the_thread_that_follows_its_events(
    daemon: DaemonProcess,
) -> None:
    """A thread blocked in `events()` (or `follow_logs()`) ends with TransportError when another
    thread closes the client (a close alone left its read blocked for good)."""
    client = Client(daemon.socket).connect()
    outcomes: list[BaseException] = []

    def follow() -> None:
        try:
            for _ in client.events():
                pass
        except BaseException as exc:  # what the thread got is the point
            outcomes.append(exc)

    thread = threading.Thread(target=follow)
    thread.start()
    await anyio.sleep(1.0)  # subscribed, in its blocking read (a close before that ends it too)
    client.close()
    await anyio.to_thread.run_sync(thread.join, 10)
    assert not thread.is_alive() and len(outcomes) == 1 and isinstance(outcomes[0], TransportError), outcomes


async def test_a_full_listen_queue_is_waited_out_not_taken_for_another_user(tmp_path: Path) -> None:
    """A daemon busy accepting a crowd has a full listen queue: a Unix socket then refuses to
    connect (EAGAIN) rather than wait. Both clients wait their turn and get a real connection; the
    async one was handed a socket connected to nothing ("served by uid -1": PeerRejected)."""
    path = str(tmp_path / "busy.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(0)
    queued = []
    while (waiting := connect_now(path)) is not None:  # fill the queue
        queued.append(waiting)
    accepted: list[socket.socket] = []

    def accept_later() -> None:
        time.sleep(0.3)
        listener.settimeout(10)  # a client that never connected must not keep this thread
        with contextlib.suppress(TimeoutError):
            for _ in range(len(queued) + 2):
                accepted.append(listener.accept()[0])

    acceptor = threading.Thread(target=accept_later, daemon=True)
    acceptor.start()
    try:
        with anyio.fail_after(10):
            stream = await FrameStream.connect(path)
        assert peer_uid(stream.socket) == os.getuid()
        stream.close()
        sync = connect_within(path, 10)
        assert peer_uid(sync) == os.getuid()
        sync.close()
    finally:
        acceptor.join(10)
        for sock in (*queued, *accepted, listener):
            sock.close()
