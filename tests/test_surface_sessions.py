"""Subscriptions, completions and list changes end to end, through the socket client and through
`mcpd bridge` with the MCP SDK's client as the host: server-everything (twice) and the fixture
server behind a real daemon.

server-everything sends ``notifications/resources/updated`` for the URIs it is subscribed to
once its ``toggle-subscriber-updates`` tool is on: at once, then every five seconds.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
import msgspec
import pytest
import structlog
from anyio.streams.text import TextReceiveStream
from mcp.shared.exceptions import MCPError
from test_bridge import LOG_FLOOD, bridge
from test_front import Peer, initialize, peer
from test_surface import everything_daemon

from mcpd.client.aio import AsyncClient, connect
from mcpd.config.model import Config
from mcpd.errors import TooManyRequests, TransportError, UnknownPrompt, UnknownResource, Unsupported
from mcpd.front.background import Background
from mcpd.front.subscriptions import Subscriptions, covers
from mcpd.model.mcp import (
    RESOURCE_UPDATED,
    RESOURCES_LIST_CHANGED,
    SESSION_NOTIFICATION,
    InitializeParams,
    SessionState,
)
from mcpd.model.resources import PromptRef, TemplateRef
from mcpd.model.servers import ResourceUpdated, SurfaceChanged
from mcpd.model.states import ServerState
from mcpd.supervisor.supervisor import open_supervisor
from mcpd.testing import fullserver_config, fullserver_toml
from mcpd.testing.daemon import DaemonProcess, running_daemon
from mcpd.testing.hostile import hello, request

pytestmark = pytest.mark.anyio
DOC = "demo://resource/static/document/architecture.md"
TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"


@pytest.fixture(scope="module")
async def daemon(tmp_path_factory: pytest.TempPathFactory, npm_bin: Path) -> AsyncIterator[DaemonProcess]:
    """ev sends updates from the start; ev2 only when a test turns them on; fx declares neither
    subscriptions nor completions."""
    async with everything_daemon(tmp_path_factory.mktemp("sessions"), npm_bin) as running:
        async with connect(running.socket) as client:
            await client.call_tool("ev__toggle-subscriber-updates")
        yield running


async def next_update(client: AsyncClient, uri: str) -> ResourceUpdated:
    """The next ``ResourceUpdated`` for ``uri`` on the client's event stream."""
    events = client.events()
    with anyio.fail_after(60):  # a guard against a hang: updates come every five seconds
        async for event in events:
            if isinstance(event, ResourceUpdated) and event.uri == uri:
                return event
    raise AssertionError("the event stream ended")


async def test_socket_subscription_is_shared_and_ends_with_its_last_client(daemon: DaemonProcess) -> None:
    """Two clients subscribed to one URI both get its updates under the qualified URI; the server is
    subscribed once, and unsubscribed only when the last subscriber leaves (by disconnecting)."""
    uri = f"mcpd://ev/{DOC}"
    mark = len(daemon.events)
    async with connect(daemon.socket) as first:
        async with connect(daemon.socket) as second:
            await first.subscribe_resource(uri)
            await second.subscribe_resource(DOC, server="ev")
            updated = await next_update(first, uri)
            assert updated == ResourceUpdated(server="ev", uri=uri)
            await next_update(second, uri)
            assert await first.unsubscribe_resource(uri)
            assert not await first.unsubscribe_resource(uri)
        await daemon.wait_for("resource.unsubscribed", server="ev", uri=DOC, after=mark)
    subscribed = [e for e in daemon.events[mark:] if e.get("event") == "resource.subscribed"]
    assert [e["uri"] for e in subscribed] == [DOC]


async def test_subscriptions_survive_a_restart(daemon: DaemonProcess) -> None:
    """A server that restarts is subscribed again, so its new process sends the updates."""
    uri = f"mcpd://ev2/{DOC}"
    async with connect(daemon.socket) as client:
        await client.subscribe_resource(uri)
        mark = len(daemon.events)
        await client.restart("ev2")
        await daemon.wait_for("resource.resubscribed", server="ev2", uri=DOC, after=mark, timeout=60)
        await client.call_tool("ev2__toggle-subscriber-updates")  # the new process starts with it off
        assert (await next_update(client, uri)).server == "ev2"
        await client.call_tool("ev2__toggle-subscriber-updates")


async def test_subscribe_errors_are_typed(daemon: DaemonProcess) -> None:
    """A server that does not declare resources.subscribe, and an unqualified URI, are refused."""
    async with connect(daemon.socket) as client:
        with pytest.raises(Unsupported):
            await client.subscribe_resource("mcpd://fx/fixture://anything")
        with pytest.raises(UnknownResource):
            await client.subscribe_resource(DOC)


async def test_completions_through_the_socket(daemon: DaemonProcess) -> None:
    """Prompt arguments (with context) and template variables complete by qualified name; a server
    without completions gives an empty completion; an unknown prompt is refused."""
    async with connect(daemon.socket) as client:
        departments = await client.complete(PromptRef("ev__completable-prompt"), "department", "S")
        names = await client.complete(
            PromptRef("ev__completable-prompt"), "name", "", context={"department": "Sales"}
        )
        ids = await client.complete(TemplateRef(f"mcpd://ev2/{TEXT_TEMPLATE}"), "resourceId", "42")
        await client.call_tool("fx__add_prompt", {"name": "plain"})
        await daemon.wait_for("server.surface_changed", server="fx")
        none = await client.complete(PromptRef("fx__plain"), "x", "a")
        with pytest.raises(UnknownPrompt):
            await client.complete(PromptRef("ev__no-such-prompt"), "x", "")
        with pytest.raises(UnknownResource):
            await client.complete(TemplateRef("mcpd://ev/demo://no/{such}"), "such", "")
    assert departments.values == ["Sales", "Support"]
    assert names.values == ["David", "Eve", "Frank"]
    assert ids.values == ["42"]
    assert none.values == []


async def test_list_changes_are_events(daemon: DaemonProcess) -> None:
    """A server's new prompt list reaches event subscribers as a SurfaceChanged event."""
    async with connect(daemon.socket) as client:
        events = await client.subscribe()
        await client.call_tool("fx__add_prompt", {"name": "evented"})
        with anyio.fail_after(60):
            async for event in events:
                if isinstance(event, SurfaceChanged) and event.server == "fx":
                    break
    assert event == SurfaceChanged(server="fx", resources=False, prompts=True)


def is_update(uri: str) -> Any:
    return lambda m: isinstance(m, types.ResourceUpdatedNotification) and str(m.params.uri) == uri


async def test_bridge_host_reads_subscribes_and_completes(daemon: DaemonProcess) -> None:
    """Through `mcpd bridge`, an SDK host sees mcpd's resources, prompts and completions capabilities
    and its connected server's resources and prompts; reads, gets, completes, gets updates of what
    it subscribed to; and its subscription ends with its session."""
    uri = f"mcpd://ev/{DOC}"
    mark = len(daemon.events)
    async with bridge(daemon.socket, "--connect", "ev") as host:
        capabilities = host.session.server_capabilities
        assert capabilities is not None and capabilities.completions is not None
        assert capabilities.resources is not None and capabilities.resources.subscribe
        assert capabilities.prompts is not None and capabilities.prompts.list_changed
        resources = (await host.session.list_resources()).resources
        assert uri in {str(r.uri) for r in resources}
        templates = (await host.session.list_resource_templates()).resource_templates
        assert f"mcpd://ev/{TEXT_TEMPLATE}" in {t.uri_template for t in templates}
        prompts = {p.name for p in (await host.session.list_prompts()).prompts}
        assert "ev__completable-prompt" in prompts
        read = await host.session.read_resource(uri)
        assert str(read.contents[0].uri) == uri
        got = await host.session.get_prompt("ev__args-prompt", {"city": "Lyon"})
        assert "Lyon" in str(got.messages[0].content)
        completed = await host.session.complete(
            types.PromptReference(type="ref/prompt", name="ev__completable-prompt"),
            {"name": "department", "value": "E"},
        )
        assert completed.completion.values == ["Engineering"]
        with pytest.raises(MCPError) as missing:
            await host.session.read_resource("mcpd://ev/demo://no/such/thing")
        # server-everything's own error, as it sent it (mcpd's would be -32002 with its own words)
        assert (missing.value.code, missing.value.error.message) == (
            -32602,
            "MCP error -32602: Resource demo://no/such/thing not found",  # its SDK's words
        )
        await host.session.send_request(
            types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)), types.EmptyResult
        )
        update = await host.wait_received(is_update(uri))
        assert str(update.params.uri) == uri
    await daemon.wait_for("resource.unsubscribed", server="ev", uri=DOC, after=mark)


async def test_a_bridge_host_reads_the_resources_a_tool_or_prompt_names(daemon: DaemonProcess) -> None:
    """The resource links and embedded resources of a tool's result and of a prompt's messages name
    their resource by qualified URI, so the host reads it back through mcpd as it would from the
    server itself (they named the server's own URI, which no server is reached by: -32002)."""
    async with bridge(daemon.socket, "--connect", "ev") as host:
        session = host.session
        with anyio.fail_after(60):  # a guard against a hang, not a bound
            links = await session.call_tool("ev__get-resource-links", {"count": 2})
            embedded = await session.call_tool(
                "ev__get-resource-reference", {"resourceType": "Blob", "resourceId": 3}
            )
            prompt = await session.get_prompt(
                "ev__resource-prompt", {"resourceType": "Text", "resourceId": "2"}
            )
            uris = [str(b.uri) for b in links.content if isinstance(b, types.ResourceLink)]
            uris += [str(b.resource.uri) for b in embedded.content if isinstance(b, types.EmbeddedResource)]
            uris += [
                str(m.content.resource.uri)
                for m in prompt.messages
                if isinstance(m.content, types.EmbeddedResource)
            ]
            read = [await session.read_resource(uri) for uri in uris]
    assert uris == [
        "mcpd://ev/demo://resource/dynamic/blob/1",
        "mcpd://ev/demo://resource/dynamic/text/2",
        "mcpd://ev/demo://resource/dynamic/blob/3",
        "mcpd://ev/demo://resource/dynamic/text/2",
    ]
    assert [str(r.contents[0].uri) for r in read] == uris


async def test_two_sessions_see_only_their_servers(daemon: DaemonProcess) -> None:
    """Each host session lists the resources and prompts of the servers it connected, not those of
    another session; connecting one more server tells the host that both lists changed."""
    async with bridge(daemon.socket, "--connect", "ev") as one, bridge(daemon.socket) as two:
        assert {str(r.uri).split("/")[2] for r in (await one.session.list_resources()).resources} == {"ev"}
        assert (await two.session.list_resources()).resources == []
        assert (await two.session.list_prompts()).prompts == []
        mark = len(two.received)
        await two.call("mcpd_connect_server", {"server": "ev2"})
        await two.wait_received(lambda m: isinstance(m, types.ResourceListChangedNotification), mark)
        await two.wait_received(lambda m: isinstance(m, types.PromptListChangedNotification), mark)
        servers_two = {str(r.uri).split("/")[2] for r in (await two.session.list_resources()).resources}
        servers_one = {str(r.uri).split("/")[2] for r in (await one.session.list_resources()).resources}
        prompts_two = {p.name.split("__")[0] for p in (await two.session.list_prompts()).prompts}
    assert servers_two == {"ev2"} and servers_one == {"ev"} and prompts_two == {"ev2"}


async def test_bridge_host_hears_of_new_prompts(daemon: DaemonProcess) -> None:
    """A connected server's prompts/list_changed reaches the host, and its list then has the prompt."""
    async with bridge(daemon.socket, "--connect", "fx") as host:
        before = {p.name for p in (await host.session.list_prompts()).prompts}
        mark = len(host.received)
        await host.call("fx__add_prompt", {"name": "hosted"})
        await host.wait_received(lambda m: isinstance(m, types.PromptListChangedNotification), mark)
        after = {p.name for p in (await host.session.list_prompts()).prompts}
    assert after - before == {"fx__hosted"}


async def test_a_host_is_told_only_of_the_list_that_changed(daemon: DaemonProcess) -> None:
    """A server's new prompt tells the host its prompts changed, not its resources too: the server
    sent only prompts/list_changed (a host that had never listed resources was told they changed)."""
    async with bridge(daemon.socket, "--all") as host:
        mark = len(host.received)
        await host.call("fx__add_prompt", {"name": "told"})
        await host.wait_received(lambda m: isinstance(m, types.PromptListChangedNotification), mark)
    # Announced together, resources first: one would have arrived by now.
    assert not [m for m in host.received[mark:] if isinstance(m, types.ResourceListChangedNotification)]


async def test_a_new_tool_tells_the_host_of_no_other_list(daemon: DaemonProcess) -> None:
    """A server's tools changing is no news of its resources and prompts: a host that had never
    listed them was sent resources/list_changed and prompts/list_changed (they compared as changed
    from an empty list)."""
    async with bridge(daemon.socket, "--all") as host:
        mark, logged = len(host.received), len(daemon.events)
        await host.call("fx__add_tool", {"name": "unheralded"})
        await daemon.wait_for("server.tools_changed", server="fx", after=logged)
        # Told after the tools' change was: the prompts' own news comes after any the tools' made.
        await host.call("fx__add_prompt", {"name": "heralded"})
        await host.wait_received(lambda m: isinstance(m, types.PromptListChangedNotification), mark)
    told = [
        type(m).__name__ for m in host.received[mark:] if not isinstance(m, types.ToolListChangedNotification)
    ]
    assert told == ["PromptListChangedNotification"]


async def test_cli_read_follow_reads_again_at_each_update(daemon: DaemonProcess) -> None:
    """`mcpd read URI --follow --json` writes the contents, then again after each update."""
    uri = f"mcpd://ev/{DOC}"
    argv = [sys.executable, "-m", "mcpd", "read", uri, "--follow", "--json", "--socket", str(daemon.socket)]
    async with await anyio.open_process(argv) as process:
        assert process.stdout is not None
        documents: list[dict[str, Any]] = []
        buffer = ""
        with anyio.fail_after(60):
            async for chunk in TextReceiveStream(process.stdout):
                *lines, buffer = (buffer + chunk).split("\n")
                documents += [json.loads(line) for line in lines]
                if len(documents) >= 2:
                    break
        process.terminate()
    assert all(d["contents"][0]["uri"] == uri for d in documents[:2])


async def test_a_resumed_host_session_subscribes_again(daemon: DaemonProcess) -> None:
    """A host session resumed from its relay's state (as after a daemon restart under a bridge) takes
    its subscriptions again: updates reach the host, and the state it reports still holds them."""
    uri = f"mcpd://ev/{DOC}"
    host = await peer(daemon, SessionState(initialize=InitializeParams(), subscribed=[uri]))

    def run() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        updates: list[dict[str, Any]] = []
        states: list[dict[str, Any]] = []

        def take(message: dict[str, Any]) -> None:
            if message.get("method") == RESOURCE_UPDATED:
                updates.append(message)
            elif message.get("method") == SESSION_NOTIFICATION:
                states.append(message["params"])

        # What came with the hello's answer first: the state may have said so by then (it hung when
        # that state was looked for only among the messages after it).
        for message in host.seen:
            take(message)
        deadline = time.monotonic() + 60  # a guard against a hang: updates come every five seconds
        while not updates or not any(s["subscribed"] == [uri] for s in states):
            assert time.monotonic() < deadline, (updates, states)
            for frame in host.receive():
                take(json.loads(frame))
        return updates[0], states

    try:
        update, _ = await anyio.to_thread.run_sync(run)
    finally:
        host.channel.close()
    assert update["params"] == {"uri": uri}


def test_an_update_reaches_the_subscribers_of_what_it_lies_under() -> None:
    """An update for a sub-resource reaches the subscribers of the URI above it, never of a sibling
    that merely shares a prefix."""
    assert covers("file:///d/a", "file:///d/a")
    assert covers("file:///d/", "file:///d/a")
    assert covers("file:///d", "file:///d/a")
    assert covers("db://t", "db://t?row=3")
    assert not covers("file:///d", "file:///dx")
    assert not covers("file:///d/a", "file:///d")


async def test_a_subscriber_of_thousands_of_uris_leaves_without_stalling_the_daemon() -> None:
    """A client subscribed to 3,000 URIs leaves: they are all unsubscribed, and meanwhile no loop
    iteration takes long (other clients are answered). A task per URI ran its first step all in one
    iteration: 1 s here, during which nothing else ran."""
    count = 3000
    async with open_supervisor(Config(source="<test>", servers=(fullserver_config("full"),))) as sup:
        await sup.actor("full").wait_state(ServerState.RUNNING, timeout=60)
        subscriptions = Subscriptions(sup)
        async with anyio.create_task_group() as tg:
            await tg.start(subscriptions.run)
            owner = object()
            subscriptions.register(owner, lambda server, uri, meta: None)
            for index in range(count):
                await subscriptions.subscribe(owner, "full", f"full://r/{index}")
            with structlog.testing.capture_logs() as logged:
                longest, unsubscribed, seen = 0.0, 0, 0
                subscriptions.drop(owner)
                with anyio.fail_after(120):
                    while unsubscribed < count:
                        # The loop's own CPU (this thread's), not the wall clock: a loaded machine
                        # that takes the core away mid-iteration is no stall of the daemon's.
                        before = time.thread_time()
                        await anyio.lowlevel.checkpoint()  # one loop iteration, whatever else it runs
                        longest = max(longest, time.thread_time() - before)
                        unsubscribed += sum(e["event"] == "resource.unsubscribed" for e in logged[seen:])
                        seen = len(logged)
            tg.cancel_scope.cancel()
    assert longest < 0.25, f"a loop iteration took {longest:.3f} s of CPU"


async def test_background_work_that_fails_unexpectedly_ends_only_itself() -> None:
    """A piece of the daemon's background work (an unsubscription, a log-level request) that fails
    with what nobody expected (a bug, an OSError) is logged and ends only itself: the task group it
    runs in, the daemon's, goes on, and later work still runs. It used to end that group, and the
    daemon with it."""
    background = Background()
    done = anyio.Event()

    async def fails() -> None:
        raise OSError("no space left on device")

    async def works() -> None:
        done.set()

    with structlog.testing.capture_logs() as logged:
        async with anyio.create_task_group() as tg:
            tg.start_soon(background.run)
            await anyio.wait_all_tasks_blocked()
            assert background.start(fails)
            await anyio.wait_all_tasks_blocked()
            assert background.start(works)
            with anyio.fail_after(5):
                await done.wait()
            tg.cancel_scope.cancel()
    (failed,) = [entry for entry in logged if entry["event"] == "background.failed"]
    assert failed["work"].endswith("fails") and failed["log_level"] == "error"


def note(log: list[tuple[str, str]], server: str, uri: str, meta: dict[str, Any] | None) -> None:
    log.append((server, uri))


async def test_a_subscriber_holds_at_most_its_limit_and_hears_only_its_servers_updates() -> None:
    """A client may hold ``limit`` subscriptions (it could grow the daemon without bound): one more
    is refused with a typed error and not taken, one it holds already or one that replaces a dropped
    one is fine, another client is not held back; an update reaches the subscribers of that server's
    URIs only (they are looked up by server)."""
    config = Config(source="<test>", servers=(fullserver_config("full"), fullserver_config("other")))
    async with open_supervisor(config) as sup:
        for name in ("full", "other"):
            await sup.actor(name).wait_state(ServerState.RUNNING, timeout=60)
        subscriptions = Subscriptions(sup, limit=2)
        async with anyio.create_task_group() as tg:
            await tg.start(subscriptions.run)
            heard: dict[str, list[tuple[str, str]]] = {"first": [], "second": []}
            for owner, log in heard.items():
                subscriptions.register(owner, functools.partial(note, log))
            await subscriptions.subscribe("first", "full", "full://r/0")
            await subscriptions.subscribe("first", "full", "full://r/1")
            with pytest.raises(TooManyRequests, match="holds 2 subscriptions"):
                await subscriptions.subscribe("first", "full", "full://r/2")
            assert [subscriptions.held("first", "full", f"full://r/{i}") for i in range(3)] == [
                True,
                True,
                False,
            ]
            await subscriptions.subscribe("first", "full", "full://r/1")
            await subscriptions.subscribe("second", "other", "full://r/0")
            assert await subscriptions.unsubscribe("first", "full", "full://r/1")
            await subscriptions.subscribe("first", "full", "full://r/2")
            subscriptions.on_event(ResourceUpdated(server="full", uri="full://r/0"))
            subscriptions.on_event(ResourceUpdated(server="nobody", uri="full://r/0"))
            tg.cancel_scope.cancel()
    assert heard == {"first": [("full", "full://r/0")], "second": []}


FLOOD_COUNT, FLOOD_URIS = 40_000, 3
FLOODED = {f"mcpd://lf/lf://r/{i}": max(range(i, FLOOD_COUNT, FLOOD_URIS)) for i in range(FLOOD_URIS)}
"""The last ``n`` in the ``_meta`` of each URI's updates in ``flood``."""


@contextlib.asynccontextmanager
async def flood_daemon(tmp_path: Path) -> AsyncIterator[DaemonProcess]:
    """A daemon running ``lf``, which floods updates on demand (``test_bridge.LOG_FLOOD``), and waiting
    long for clients that do not read."""
    script = tmp_path / "flood.py"
    script.write_text(LOG_FLOOD)
    config = tmp_path / "config.toml"
    flooder = f"command = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(script))}]\n"
    # A client that stops reading through the flood is not dropped, even on a loaded machine.
    config.write_text("[daemon]\nclient_write_timeout = 120\n[servers.lf]\n" + flooder)
    async with running_daemon(config) as running:
        await running.wait_for("server.state", server="lf", new="running", timeout=60)
        yield running


async def flood(daemon: DaemonProcess, *, then_remove: bool = False) -> None:
    """40 MB of updates of lf://r/0, /1 and /2 in turn, the n-th with n in its ``_meta``; then, if
    ``then_remove``, lf://r leaves the server's list (its ``resources/list_changed``)."""
    async with connect(daemon.socket) as client:
        arguments = {"messages": FLOOD_COUNT, "updates": FLOOD_URIS, "then_remove": then_remove}
        await client.call_tool("lf__flood", arguments)


def _relay_subscribed(host: Peer) -> None:
    """``host`` initialized as an MCP host and subscribed to the flooded resource."""
    host.request(1, "initialize", initialize("2025-06-18"))
    host.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
    host.request(2, "resources/subscribe", {"uri": "mcpd://lf/lf://r"})


def _subscribed(sock: socket.socket, running: DaemonProcess, events: bool) -> Iterator[list[Any]]:
    """``sock`` connected to ``running`` as a raw client, subscribed to the flooded resource (and to
    events if ``events``), every answer read: the daemon's messages from then on."""
    sock.settimeout(10)
    sock.connect(str(running.socket))
    frames = _frames(sock)
    sock.sendall(hello())
    sock.sendall(request(2, "resources.subscribe", {"uri": "mcpd://lf/lf://r"}))
    if events:
        sock.sendall(request(3, "subscribe", {}))
    answered = [m[1] for m in itertools.islice((m for m in frames if m[0] != 2), 3 if events else 2)]
    assert sorted(answered) == ([1, 2, 3] if events else [1, 2])
    return frames


def _frames(sock: socket.socket) -> Iterator[list[Any]]:
    """The daemon's messages on a raw socket client's ``sock``, read whole (decoded msgpack)."""

    def exactly(size: int) -> bytes:
        # MSG_WAITALL does not wait on a socket with a timeout (non-blocking underneath).
        data = b""
        while len(data) < size:
            chunk = sock.recv(size - len(data))
            if not chunk:
                raise EOFError("the daemon closed the connection")
            data += chunk
        return data

    while True:
        yield msgspec.msgpack.decode(exactly(int.from_bytes(exactly(4), "big")))


def assert_nothing_dropped(daemon: DaemonProcess) -> None:
    """The daemon's log tells of no notification dropped: updates held are not (before, the first
    look at a client that was behind warned ``client.behind dropping=...`` and counted a drop at
    each look, every update and every 0.25 s, while all were held and sent)."""
    assert [e for e in daemon.events if e.get("event") == "client.behind"] == []


async def test_a_relay_that_falls_behind_gets_the_last_update_of_each_uri_once_it_reads(
    tmp_path: Path,
) -> None:
    """A relay (a bridge, here a raw session) subscribed to a resource stops reading while its
    server floods 40 MB of updates of three resources under it: past the daemon's advisory backlog
    the session holds them, the latest per URI, and sends them once the relay reads again; its last
    update of each URI is the server's last. Before, the session dropped them: the host never heard
    of the last changes."""
    async with flood_daemon(tmp_path) as running:
        host = await peer(running, SessionState(subscription_deltas=True))
        try:
            await anyio.to_thread.run_sync(_relay_subscribed, host)
            await flood(running)  # while the relay reads nothing

            def read_until_final() -> tuple[dict[str, int], int]:
                last: dict[str, int] = {}
                got = 0
                deadline = time.monotonic() + 30
                # Its receive times out once nothing more comes: the updates then are all it got.
                with contextlib.suppress(TransportError):
                    while last != FLOODED and time.monotonic() < deadline:
                        for frame in host.receive():
                            message = json.loads(frame)
                            if message.get("method") == RESOURCE_UPDATED:
                                last[message["params"]["uri"]] = message["params"]["_meta"]["n"]
                                got += 1
                return last, got

            last, got = await anyio.to_thread.run_sync(read_until_final)
        finally:
            host.channel.close()
    assert last == FLOODED
    assert got < FLOOD_COUNT  # it was behind indeed: held updates were replaced by later ones
    assert_nothing_dropped(running)


async def test_a_socket_client_that_falls_behind_gets_the_last_update_of_each_uri_once_it_reads(
    tmp_path: Path,
) -> None:
    """A socket client subscribed to a resource stops reading while its server floods 40 MB of
    updates of three resources under it: past the client's advisory backlog the daemon holds its
    ``ResourceUpdated`` events, the latest per URI, and sends them once it reads again. Before, they
    were dropped."""
    async with flood_daemon(tmp_path) as running:
        with socket.socket(socket.AF_UNIX) as sock:
            frames = await anyio.to_thread.run_sync(_subscribed, sock, running, False)
            await flood(running)  # while the client reads nothing

            def read_until_final() -> tuple[dict[str, int], int]:
                last: dict[str, int] = {}
                got = 0
                deadline = time.monotonic() + 30
                with contextlib.suppress(TimeoutError):  # nothing more came: that was all
                    for message in frames:
                        if message[0] == 2 and message[2].get("type") == "resource":
                            last[message[2]["uri"]] = message[2]["meta"]["n"]
                            got += 1
                        if last == FLOODED or time.monotonic() > deadline:
                            break
                return last, got

            last, got = await anyio.to_thread.run_sync(read_until_final)
    assert last == FLOODED
    assert got < FLOOD_COUNT  # it was behind indeed: held updates were replaced by later ones
    assert_nothing_dropped(running)


async def test_a_relay_that_falls_behind_gets_the_held_updates_before_the_list_changed_after_them(
    tmp_path: Path,
) -> None:
    """The server sends its updates, then a ``resources/list_changed`` that removes their resource,
    while the relay reads nothing: the relay gets every URI's last update before the
    ``list_changed``, as the server sent them. Before, the ``list_changed`` went at once, ahead of
    the updates held for the relay: they came after it, of a resource its new list no longer has."""
    async with flood_daemon(tmp_path) as running:
        host = await peer(running, SessionState(subscription_deltas=True, expose_all=True))
        try:
            await anyio.to_thread.run_sync(_relay_subscribed, host)
            await flood(running, then_remove=True)  # while the relay reads nothing

            def read_until_list_changed() -> dict[str, int] | None:
                last: dict[str, int] = {}
                deadline = time.monotonic() + 30
                with contextlib.suppress(TransportError):
                    while time.monotonic() < deadline:
                        for frame in host.receive():
                            message = json.loads(frame)
                            if message.get("method") == RESOURCE_UPDATED:
                                last[message["params"]["uri"]] = message["params"]["_meta"]["n"]
                            elif message.get("method") == RESOURCES_LIST_CHANGED:
                                return last
                return None

            before_list_changed = await anyio.to_thread.run_sync(read_until_list_changed)
        finally:
            host.channel.close()
    assert before_list_changed == FLOODED


async def test_a_socket_client_that_falls_behind_gets_the_held_updates_before_the_surface_event(
    tmp_path: Path,
) -> None:
    """As for a relay: a socket client subscribed to updates and to events that reads nothing while
    the server sends updates and then removes their resource gets every URI's last update before
    the ``surface`` event of that change. Before, the event went ahead of the updates held."""
    async with flood_daemon(tmp_path) as running:
        with socket.socket(socket.AF_UNIX) as sock:
            frames = await anyio.to_thread.run_sync(_subscribed, sock, running, True)
            await flood(running, then_remove=True)  # while the client reads nothing

            def read_until_surface() -> dict[str, int] | None:
                last: dict[str, int] = {}
                deadline = time.monotonic() + 30
                with contextlib.suppress(TimeoutError):
                    for message in frames:
                        if message[0] == 2 and message[2].get("type") == "resource":
                            last[message[2]["uri"]] = message[2]["meta"]["n"]
                        elif message[0] == 2 and message[2].get("type") == "surface":
                            return last
                        if time.monotonic() > deadline:
                            break
                return None

            before_surface = await anyio.to_thread.run_sync(read_until_surface)
    assert before_surface == FLOODED


async def test_a_socket_client_that_falls_behind_gets_the_held_updates_before_their_servers_stop(
    tmp_path: Path,
) -> None:
    """A socket client subscribed to updates and to events reads nothing while the server floods
    updates and is then stopped: the client gets every URI's last update before the event of the
    stop, none after it. Before, the event went ahead of the updates held, which came once the
    client had room: news of resources it could no longer read, after it was told so."""
    async with flood_daemon(tmp_path) as running:
        with socket.socket(socket.AF_UNIX) as sock:
            frames = await anyio.to_thread.run_sync(_subscribed, sock, running, True)
            await flood(running)  # while the client reads nothing
            async with connect(running.socket) as other:
                await other.stop("lf")

            def read_until_quiet() -> tuple[dict[str, int] | None, int]:
                last: dict[str, int] = {}
                before_stop: dict[str, int] | None = None
                after_stop = 0
                deadline = time.monotonic() + 30
                with contextlib.suppress(TimeoutError):  # nothing more came: that was all
                    for message in frames:
                        event = message[2] if message[0] == 2 else {}
                        if event.get("type") == "resource":
                            last[event["uri"]] = event["meta"]["n"]
                            after_stop += before_stop is not None
                        elif event.get("type") == "state" and event["new"] == "stopped":
                            before_stop = dict(last)
                            sock.settimeout(1)  # what was held went a look (0.25 s) after there was room
                        if time.monotonic() > deadline:
                            break
                return before_stop, after_stop

            before_stop, after_stop = await anyio.to_thread.run_sync(read_until_quiet)
    assert (before_stop, after_stop) == (FLOODED, 0)


async def test_a_client_that_leaves_while_its_subscribe_is_at_the_server_leaves_it_unsubscribed(
    tmp_path: Path,
) -> None:
    """A socket client disconnects while its ``resources.subscribe`` is at the server, which takes it
    once released: the server is then unsubscribed, nobody holding it. Before, the cancelled request
    released it on the daemon's side only, and the server went on sending its updates."""
    gate = tmp_path / "gate"
    config = tmp_path / "config.toml"
    config.write_text(fullserver_toml("full", "--hold", str(gate)))
    async with running_daemon(config) as running:
        await running.wait_for("server.state", server="full", new="running", timeout=60)
        async with connect(running.socket) as watcher:

            async def server_says(uri: str) -> Any:
                return json.loads((await watcher.read_resource(f"mcpd://full/{uri}")).contents[0].text or "")

            gate.touch()
            async with connect(running.socket) as leaving, anyio.create_task_group() as tg:

                async def subscribe() -> None:
                    await leaving.subscribe_resource("mcpd://full/full://r/0")

                tg.start_soon(subscribe)
                with anyio.fail_after(30):
                    while await server_says("full://held") != 1:
                        await anyio.sleep(0.02)
                tg.cancel_scope.cancel()
            gate.unlink()
            with anyio.fail_after(30):
                while await server_says("full://held") != 0:  # the server took it
                    await anyio.sleep(0.02)
            with anyio.move_on_after(5):  # the daemon's unsubscribe follows the server's answer
                while await server_says("full://subscribed") != []:
                    await anyio.sleep(0.05)
            assert await server_says("full://subscribed") == []
