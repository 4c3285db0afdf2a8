"""The async client's opt-in reconnect: it outlives the daemon and carries its session on."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream

from mcpd.client import _wire
from mcpd.client.aio import connect
from mcpd.errors import TransportError
from mcpd.ipc.endpoint import lock_path
from mcpd.model.protocol import ErrorInfo, Progress, Request, Response
from mcpd.model.requests import ServerAsk
from mcpd.model.servers import SUBSCRIPTION_ENDED, Event, ResourceUpdated, ServerStatus, StateChanged
from mcpd.testing import fixture_toml, fullserver_toml
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
            while not restored.servers:  # still starting when the client came back: connected again soon
                await anyio.sleep(0.05)
                restored = await client.session_tools()
            # A stop is an event too, and unlike a restart it starts no new server process.
            await client.stop("tools")
            seen: list[str] = []
            with anyio.fail_after(60):
                async for event in events:
                    if isinstance(event, StateChanged) and event.server == "tools":
                        seen.append(event.new)
                        if event.new == "stopped":
                            break
    assert held and "may or may not have run" in str(held[0])
    assert [s.name for s in statuses] == ["tools"]
    assert restored.servers == ["tools"]
    assert seen[-1] == "stopped"


async def wait_for_state(events: MemoryObjectReceiveStream[Event], server: str, state: str) -> None:
    """Read ``events`` until ``server`` reaches ``state``."""
    with anyio.fail_after(30):
        async for event in events:
            if isinstance(event, StateChanged) and event.server == server and event.new == state:
                return


async def test_a_client_that_only_reads_events_reconnects(tmp_path: Path) -> None:
    """A reconnecting client that makes no request after the daemon died still connects to the next
    one and subscribes again: the events of the new daemon reach its stream."""
    config = tmp_path / "config.toml"
    config.write_text("")  # the first daemon's only part is to die under the subscription
    async with (
        running_daemon(config) as first,
        connect(first.socket, reconnect=True, name="reader") as client,
    ):
        events = await client.subscribe()
        first.signal(signal.SIGKILL)
        await first.wait_exit()
        config.write_text(fullserver_toml("tools"))
        async with running_daemon(config, socket=first.socket) as second:
            await second.wait_for("client.connected", client="reader")
            async with connect(second.socket) as other:
                await other.stop("tools")  # an event that starts no new server process
            await wait_for_state(events, "tools", "stopped")


async def test_a_refused_restore_spares_the_rest_of_the_session(tmp_path: Path) -> None:
    """The next daemon refuses part of the session (a connected server that is now disabled): the
    rest of it (the subscription after it) is restored all the same, and an unrelated read succeeds."""
    config = tmp_path / "config.toml"
    # Only the server the session connects to runs under the first daemon.
    config.write_text(fullserver_toml("tools") + fullserver_toml("other", enabled=False))
    async with (
        running_daemon(config) as first,
        connect(first.socket, reconnect=True, name="restorer") as client,
    ):
        await client.connect_server("tools")
        events = await client.subscribe()
        first.signal(signal.SIGKILL)
        await first.wait_exit()
        config.write_text(fullserver_toml("tools", enabled=False) + fullserver_toml("other"))
        async with running_daemon(config, socket=first.socket) as second:
            statuses = await client.status()  # returns once the session was restored
            async with connect(second.socket) as other:
                await other.stop("other")  # an event that starts no new server process
            await wait_for_state(events, "other", "stopped")
    assert [s.name for s in statuses] == ["other", "tools"]


async def test_each_request_waits_for_the_reconnect_within_its_own_deadline(tmp_path: Path) -> None:
    """What listens next accepts but does not answer hello: a request with a short deadline fails
    with TransportError (never a builtin TimeoutError) and leaves the one beside it, with a longer
    deadline, waiting until a daemon answers."""
    config = tmp_path / "config.toml"
    config.write_text(fixture_toml("tools", enabled=False))  # listed by status, never started
    answered: list[ServerStatus] = []
    done = anyio.Event()
    async with running_daemon(config) as first, connect(first.socket, reconnect=True) as client:

        async def patient() -> None:
            answered.extend(await client.status())  # its own 30 s
            done.set()

        first.signal(signal.SIGKILL)
        await first.wait_exit()
        first.socket.unlink(missing_ok=True)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as mute:
            mute.bind(str(first.socket))
            mute.listen(8)  # connections wait in its backlog: never accepted, never answered
            async with anyio.create_task_group() as tg:
                tg.start_soon(patient)
                with pytest.raises(TransportError):
                    await client.request(msgspec.structs.replace(_wire.status(), timeout=1.0))
                mute.settimeout(5)
                mute.accept()[0].close()  # the client's hello goes unanswered: it tries anew
                mute.close()
                first.socket.unlink()
                async with running_daemon(config, socket=first.socket):
                    with anyio.fail_after(30):
                        await done.wait()
    assert [s.name for s in answered] == ["tools"]


async def test_closing_a_reconnecting_client_stops_its_reconnect(tmp_path: Path) -> None:
    """A client closed while its daemon is gone leaves no task of its behind (one that went on to
    connect to the next daemon, say hello and hold a connection for nobody)."""
    config = tmp_path / "config.toml"
    config.write_text("")  # no server: the client only subscribes
    async with running_daemon(config) as daemon:
        async with connect(daemon.socket, reconnect=True) as client:
            await client.subscribe()
            daemon.signal(signal.SIGKILL)
            await daemon.wait_exit()
            with anyio.move_on_after(0.3):
                await client.status()  # gives up: the reconnect it waited for is underway
        left = [t for t in asyncio.all_tasks() if "AsyncClient" in repr(t.get_coro())]
    assert left == []


async def test_a_question_of_a_lost_daemon_is_not_answered_to_the_next(tmp_path: Path) -> None:
    """An elicitation being answered when the daemon is killed is withdrawn (its callback cancelled):
    the answering task used to carry on and send its answer on the next connection, where the next
    daemon, counting its questions from 1 again, took it for the answer to its own question."""
    config = tmp_path / "config.toml"
    config.write_text(fixture_toml("fx"))
    old_asked, old_done, release = anyio.Event(), anyio.Event(), anyio.Event()
    withdrawn: list[str] = []

    async def elicit(ask: ServerAsk) -> dict[str, Any]:
        if ask.params["message"] == "old question":
            old_asked.set()
            try:
                await release.wait()  # the user takes their time
            except asyncio.CancelledError:
                withdrawn.append(ask.params["message"])
                raise
            finally:
                old_done.set()
            return {"action": "accept", "content": {"answer": "yes to the old question"}}
        release.set()
        await old_done.wait()
        await anyio.sleep(0.2)  # room for an old answer to arrive first, as it did
        return {"action": "decline"}

    async with (
        running_daemon(config) as first,
        connect(first.socket, reconnect=True, on_elicitation=elicit) as client,
    ):
        await first.wait_for("server.state", server="fx", new="running", timeout=60)
        async with anyio.create_task_group() as tg:

            async def old_call() -> None:
                with pytest.raises(TransportError):
                    await client.call_tool("fx__ask", {"kind": "elicitation", "text": "old question"})

            tg.start_soon(old_call)
            with anyio.fail_after(60):
                await old_asked.wait()
            first.signal(signal.SIGKILL)
            await first.wait_exit()
        async with running_daemon(config, socket=first.socket) as second:
            await second.wait_for("server.state", server="fx", new="running", timeout=60)
            new = await client.call_tool("fx__ask", {"kind": "elicitation", "text": "new question"})
    assert new.content[0]["text"] == "elicited: decline null"
    assert withdrawn == ["old question"]


async def test_a_reconnecting_reader_of_events_leaves_a_daemon_that_stopped_answering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon that stops answering (SIGSTOP) under a client that only reads events is left like one
    that died: the client connects again, so once another daemon listens on the socket (as after a
    service manager replaced the hung one) its events reach the stream. The client used to wait on
    the frozen connection for ever (its watchdog pinged only for waiting requests)."""
    monkeypatch.setattr(_wire, "PROBE_AFTER", 0.5)
    monkeypatch.setattr(_wire, "PROBE_WAIT", 2.0)
    config = tmp_path / "config.toml"
    config.write_text(fullserver_toml("tools"))
    async with (
        running_daemon(config) as first,
        connect(first.socket, reconnect=True, name="reader") as client,
    ):
        events = await client.subscribe()
        first.signal(signal.SIGSTOP)
        try:
            # The frozen daemon listens on, where no client finds it, and holds a lock no daemon meets.
            first.socket.unlink()
            lock_path(first.socket).unlink()
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait_for_state, events, "tools", "stopped")  # the reader, waiting
                async with running_daemon(config, socket=first.socket) as second:
                    await second.wait_for("client.connected", client="reader")
                    async with connect(second.socket) as other:
                        await other.stop("tools")  # an event that starts no new server process
        finally:
            first.signal(signal.SIGCONT)


@contextlib.asynccontextmanager
async def in_the_daemons_place(tmp_path: Path) -> AsyncIterator[tuple[Path, Path, socket.socket]]:
    """A daemon killed under a reconnecting client ("reader"), and a listener of the test's at its
    socket: the config, the socket path (free again) and the keeper's connection to that listener."""
    config = tmp_path / "config.toml"
    config.write_text(fixture_toml("tools"))
    async with running_daemon(config) as first, connect(first.socket, reconnect=True, name="reader"):
        first.signal(signal.SIGKILL)
        await first.wait_exit()
        first.socket.unlink()
        lock_path(first.socket).unlink(missing_ok=True)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(str(first.socket))
            listener.listen()
            listener.setblocking(False)
            with anyio.fail_after(10):
                while True:  # the keeper's next try connects here
                    try:
                        held, _ = listener.accept()
                        break
                    except BlockingIOError:
                        await anyio.sleep(0.05)
            first.socket.unlink()
        with held:
            yield config, first.socket, held


async def test_a_reconnect_leaves_a_daemon_that_does_not_answer_its_hello(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keeper's hello to a daemon that accepts but never answers (frozen: SIGSTOP, a hung loop;
    here a listener of the test's that reads nothing) is given up once a ping goes unanswered, as any
    request is, so the client finds the daemon that replaced it within seconds. The watchdog used to
    skip a connection being restored, and the hello waited out its whole 30 s."""
    monkeypatch.setattr(_wire, "PROBE_AFTER", 0.5)
    monkeypatch.setattr(_wire, "PROBE_WAIT", 2.0)
    async with (
        in_the_daemons_place(tmp_path) as (config, path, _silent),
        running_daemon(config, socket=path) as second,
    ):
        await second.wait_for("client.connected", client="reader", timeout=15)


async def test_a_reconnect_refused_at_the_hello_leaves_no_connection_open(tmp_path: Path) -> None:
    """The next daemon refuses the keeper's hello (another protocol version, after an upgrade): the
    client stops reconnecting, and closes that connection (it stayed open, with its reader, for as
    long as the client lived)."""
    async with in_the_daemons_place(tmp_path) as (_config, _path, held):
        held.settimeout(10)

        def refuse_then_read() -> bytes:
            size = int.from_bytes(held.recv(4, socket.MSG_WAITALL), "big")
            hello = msgspec.msgpack.decode(held.recv(size, socket.MSG_WAITALL), type=Request)
            no = msgspec.msgpack.encode(Response(hello.id, error=ErrorInfo(1002, "protocol 9 only")))
            held.sendall(len(no).to_bytes(4, "big") + no)
            return held.recv(1)  # b"": the client closed it

        assert await anyio.to_thread.run_sync(refuse_then_read) == b""


async def test_a_subscription_that_ended_is_not_restored_after_a_reconnect(tmp_path: Path) -> None:
    """A reconnecting client's subscription ends (a reload removed its server; the client hears a
    last update saying so): once the daemon died, the next one, where a server of that name runs
    again, is not asked to subscribe it. Before, the client kept it in the session it restores, and
    the new server was subscribed for it."""
    uri = "mcpd://full/full://r/0"
    config = tmp_path / "config.toml"
    config.write_text(fullserver_toml("full"))
    async with (
        running_daemon(config) as first,
        connect(first.socket, reconnect=True, name="restorer") as client,
    ):
        await first.wait_for("server.state", server="full", new="running", timeout=60)
        events = client.events()
        await client.subscribe_resource(uri)
        config.write_text("")
        await client.reload()
        with anyio.fail_after(10):
            ended = await events.receive()
        assert isinstance(ended, ResourceUpdated) and ended.meta and SUBSCRIPTION_ENDED in ended.meta
        first.signal(signal.SIGKILL)
        await first.wait_exit()
        config.write_text(fullserver_toml("full"))
        async with running_daemon(config, socket=first.socket) as second:
            await second.wait_for("server.state", server="full", new="running", timeout=60)
            await client.status()  # returns once the session was restored

            async def subscribed() -> Any:
                return json.loads(
                    (await client.read_resource("mcpd://full/full://subscribed")).contents[0].text or ""
                )

            with anyio.move_on_after(1):  # a restore refused while the server started is sent again
                while await subscribed() == []:
                    await anyio.sleep(0.05)
            assert await subscribed() == []
