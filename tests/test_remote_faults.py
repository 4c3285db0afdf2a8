"""Remote (streamable HTTP) servers that misbehave at the HTTP level (mcpd.testing.hostile_http): a
call that gives up closes its own request, answers are capped while read, HTTP failures are typed
errors, requests the server refused before running them run after the reconnect, a refused
login says so, a gateway's blip costs seconds, and hung remotes leave the start gate alone."""

from __future__ import annotations

import email.utils
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest

from mcpd.config.model import Config, RestartPolicy, ServerConfig
from mcpd.errors import CallTimeout, TransportError, UnknownResource
from mcpd.model.states import ServerState
from mcpd.supervisor.actor import ServerActor
from mcpd.supervisor.gate import StartGate
from mcpd.supervisor.sdk import retry_after
from mcpd.supervisor.supervisor import open_supervisor
from mcpd.supervisor.surface_requests import read_resource
from mcpd.testing.hostile_http import command, control
from mcpd.testing.remote import free_port, running_http_server

pytestmark = pytest.mark.anyio
S = ServerState
TINY_CAP = RestartPolicy(initial_delay=0.01, max_delay=0.1, jitter=0.0)


@asynccontextmanager
async def hostile(*flags: str, **config: object) -> AsyncIterator[tuple[ServerActor, str]]:
    """A hostile server and a supervisor of it as ``r`` (running unless the server starts refusing)."""
    port = free_port()
    async with running_http_server(command(port, *flags), port) as url:
        settings: dict[str, object] = {"ping_interval": 3600.0, "restart": TINY_CAP, **config}
        remote = ServerConfig(name="r", url=url, **settings)  # type: ignore[arg-type]
        async with open_supervisor(Config(source="<test>", servers=(remote,))) as sup:
            yield sup.actor("r"), url


async def open_connections(url: str, at_most: int, timeout: float = 10.0) -> int:
    """The server's open connections once they are ``at_most`` (or what they are after ``timeout``)."""
    with anyio.move_on_after(timeout):
        while (await control(url))["open"] > at_most + 1:  # + the control request's own
            await anyio.sleep(0.1)
    return int((await control(url))["open"]) - 1


async def test_calls_that_time_out_close_their_http_requests() -> None:
    """A server that never answers calls (and ignores notifications/cancelled): each call that times
    out closes its request, so the pool is not used up and the server is usable the moment it
    answers again (before: one open connection per timed-out call, 17 -> 115 fds for 100)."""
    async with hostile() as (actor, url):
        await actor.wait_state(S.RUNNING, timeout=60)
        await actor.call_tool("echo", {"text": "warm"}, timeout=30)
        before = await open_connections(url, at_most=100, timeout=0)
        await control(url, mode="hang", methods=["tools/call"])
        for _ in range(20):
            with pytest.raises(CallTimeout):
                await actor.call_tool("echo", {"text": "x"}, timeout=0.2)
        assert await open_connections(url, at_most=before) <= before
        await control(url, mode="ok")
        started = time.monotonic()
        result = await actor.call_tool("echo", {"text": "answered"}, timeout=30)
        assert result.content[0]["text"] == "answered" and time.monotonic() - started < 5
        assert actor.state is S.RUNNING


async def test_a_remote_tools_list_whose_pages_never_end_is_cut_and_status_says_so() -> None:
    """A remote server's tools/list whose pages never end is cut at 100 pages by the SDK's session as
    by the stdio one, and its status says so: before, only the daemon's log did."""
    async with hostile("--endless-pages") as (actor, _):
        await actor.wait_state(S.RUNNING, timeout=60)
        status = actor.status()
    assert status.last_error == "tools/list cut at 2 items after 100 pages: its pages did not end"
    assert status.state is S.RUNNING and status.tools == 2


async def test_an_endless_event_stream_is_closed_when_its_call_times_out() -> None:
    """A call answered by an event stream of notifications that never ends: once the call has timed
    out, mcpd stops reading it and closes it (before: read on, half a core, for good)."""
    async with hostile() as (actor, url):
        await actor.wait_state(S.RUNNING, timeout=60)
        await actor.call_tool("echo", {"text": "warm"}, timeout=30)
        await control(url, mode="endless_sse", methods=["tools/call"], count=1)
        with pytest.raises(CallTimeout):
            await actor.call_tool("echo", {"text": "x"}, timeout=1)
        await anyio.sleep(0.5)
        sent = (await control(url))["events"]
        await anyio.sleep(1.0)
        assert (await control(url))["events"] == sent


async def test_a_json_answer_over_the_limit_fails_its_call_naming_the_limit() -> None:
    """A 40 MiB JSON answer: reading stops at 32 MiB and the call fails saying so; the server stays
    usable (before: read whole, the result relayed)."""
    async with hostile() as (actor, url):
        await actor.wait_state(S.RUNNING, timeout=60)
        await control(url, mode="huge_json", methods=["tools/call"], count=1, arg=40 * 2**20)
        with pytest.raises(TransportError, match="32 MiB"):
            await actor.call_tool("echo", {"text": "x"}, timeout=60)
        result = await actor.call_tool("echo", {"text": "after"}, timeout=30)
        assert result.content[0]["text"] == "after"


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("status:500", "HTTP 500 Internal Server Error"),
        ("status:504", "HTTP 504 Gateway Timeout"),
        ("wrong_ct", "text/html"),
        ("bad_json", "not a JSON-RPC message"),
    ],
)
async def test_http_failures_of_a_call_are_transport_errors(mode: str, words: str) -> None:
    """An HTTP failure of a call the server may have run is a ``TransportError`` naming it, not a
    tool's error result (before: is_error "Server returned an error response"); not resent."""
    async with hostile() as (actor, url):
        await actor.wait_state(S.RUNNING, timeout=60)
        await control(url, mode=mode, methods=["tools/call"], count=1)
        with pytest.raises(TransportError, match=words):
            await actor.call_tool("echo", {"text": "x"}, timeout=30)
        result = await actor.call_tool("echo", {"text": "after"}, timeout=30)
        assert result.content[0]["text"] == "after" and not result.is_error


@pytest.mark.parametrize("end", ["\r", "\n", "\r\n"])
async def test_a_servers_own_minus_32000_on_any_event_stream_framing_is_its_answer(end: str) -> None:
    """The server's own -32000 (which the SDK also gives its made-up "connection closed") answers the
    call, whatever the event stream's line ends (CR alone too), with its JSON over several data
    lines and every line end cut between two reads: it was taken for the connection lost when the
    lines ended in CR or the JSON spread over lines."""
    async with hostile() as (actor, url):
        await actor.wait_state(S.RUNNING, timeout=60)
        await control(url, mode="sse_error", arg=end, methods=["tools/call"], count=1)
        result = await actor.call_tool("echo", {"text": "x"}, timeout=30)
        assert result.is_error and result.refusal is not None
        assert (result.refusal.code, result.refusal.message) == (-32000, "busy")
        assert actor.restarts == 0


async def test_an_error_under_another_event_type_is_no_answer() -> None:
    """The server's -32000 as an event whose type is not ``message``, then the stream closed: the
    SDK ignores such an event and makes up its own -32000 for the stream that ended, which is the
    connection lost, not the server's answer (it was taken for the server's "busy")."""
    async with hostile() as (actor, url):
        await actor.wait_state(S.RUNNING, timeout=60)
        await control(url, mode="sse_other", methods=["tools/call"], count=1)
        with pytest.raises(TransportError, match="closed the connection during echo"):
            await actor.call_tool("echo", {"text": "x"}, timeout=30)


async def test_a_servers_own_minus_32000_on_a_resumed_event_stream_is_its_answer() -> None:
    """The call's event stream closes before its answer and the SDK resumes it (a GET with
    Last-Event-ID), on which the server answers with its own -32000: the server's refusal, not the
    connection lost (the resumed stream was scanned for no request id, so the error went unseen)."""
    async with hostile() as (actor, url):
        await actor.wait_state(S.RUNNING, timeout=60)
        await control(url, mode="sse_drop", methods=["tools/call"], count=1, resume="error")
        result = await actor.call_tool("echo", {"text": "x"}, timeout=30)
        assert result.is_error and result.refusal is not None
        assert (result.refusal.code, result.refusal.message) == (-32000, "busy")
        assert (await control(url))["resumes"] == 1
        assert actor.restarts == 0


async def test_a_servers_own_minus_32000_on_a_gzipped_event_stream_is_its_answer() -> None:
    """A gateway that gzips the event stream (Content-Encoding: gzip): the server's own -32000 on it
    is still its answer (the stream was scanned before it was decoded, so the error went unseen)."""
    async with hostile() as (actor, url):
        await actor.wait_state(S.RUNNING, timeout=60)
        await control(url, mode="sse_gzip", methods=["tools/call"], count=1)
        result = await actor.call_tool("echo", {"text": "x"}, timeout=30)
        assert result.is_error and result.refusal is not None
        assert (result.refusal.code, result.refusal.message) == (-32000, "busy")
        assert actor.restarts == 0


@pytest.mark.parametrize("status", [401, 403])
async def test_a_call_refused_before_it_ran_is_sent_again_once(status: int) -> None:
    """A 401/403 to one call: the tool never ran, so the call is sent again (once) and runs there, on
    the same connection (before: an is_error result)."""
    async with hostile() as (actor, url):
        await actor.wait_state(S.RUNNING, timeout=60)
        calls = (await control(url, mode=f"status:{status}", methods=["tools/call"], count=1))["calls"]
        result = await actor.call_tool("echo", {"text": "ran"}, timeout=30)
        assert result.content[0]["text"] == "ran" and not result.is_error
        assert (await control(url))["calls"] == calls + 1
        assert actor.restarts == 0


@pytest.mark.parametrize("mode", ["status:502", "status:503", "ran_502"])
async def test_a_gateway_502_to_a_call_fails_it_naming_the_status(mode: str) -> None:
    """A gateway's 502/503 to a tools/call may come after its upstream ran the call (nginx's
    "upstream prematurely closed"): the call fails naming the status, it is not sent again
    (before: ran twice on the server after a 502 of ``ran_502``)."""
    async with hostile() as (actor, url):
        await actor.wait_state(S.RUNNING, timeout=60)
        stats = await control(url, mode=mode, methods=["tools/call"], count=1)
        status = mode.rpartition(":")[2] if mode.startswith("status:") else "502"
        with pytest.raises(TransportError, match=f"HTTP {status}"):
            await actor.call_tool("echo", {"text": "once"}, timeout=30)
        after = await control(url)
        assert after["m:tools/call"] == stats.get("m:tools/call", 0) + 1
        assert after["calls"] == stats["calls"] + (1 if mode == "ran_502" else 0)


async def test_a_read_refused_by_a_gateway_is_sent_again() -> None:
    """A 503 to a request that is safe to repeat (resources/read): sent again, once; the server's
    own answer (here: no such method) is what the caller gets."""
    async with hostile() as (actor, url):
        await actor.wait_state(S.RUNNING, timeout=60)
        await control(url, mode="status:503", methods=["resources/read"], count=1)
        with pytest.raises(UnknownResource):
            await read_resource(actor, "file:///x", timeout=30)
        assert (await control(url))["m:resources/read"] == 2


async def test_one_forbidden_tool_fails_alone_without_reconnects() -> None:
    """A tool the server refuses with 403 every time (MCP's insufficient_scope): the call is sent
    twice, then fails saying the server refused it; the connection stays up and a call in flight
    meanwhile is answered (before: a reconnect per refusal, 59 in 8 s, the refused call ended
    "still starting", the other call failed "closed the connection")."""
    async with hostile() as (actor, url):
        await actor.wait_state(S.RUNNING, timeout=60)
        await actor.call_tool("echo", {"text": "warm"}, timeout=30)
        before = await control(url, mode="status:403", methods=["tools/call"], tools=["echo"])
        answered: list[str] = []

        async def innocent() -> None:
            result = await actor.call_tool("sleep", {"s": 1.5}, timeout=30)
            answered.append(str(result.content[0]["text"]))

        async with anyio.create_task_group() as tg:
            tg.start_soon(innocent)
            with pytest.raises(TransportError, match="refused tools/call: HTTP 403 Forbidden"):
                await actor.call_tool("echo", {"text": "x"}, timeout=8)
        after = await control(url)
        assert answered == ["ok"]
        assert after["refused"] == before.get("refused", 0) + 2
        assert after["m:initialize"] == before["m:initialize"] and actor.restarts == 0
        assert actor.state is S.RUNNING


async def test_a_forgotten_session_is_renewed_and_the_call_runs() -> None:
    """The server forgot our session (HTTP 404) with its event stream still open: the call that finds
    out runs on a new session (MCP: the client must start one), once (before: is_error "Session not
    found", the call never run)."""
    async with hostile() as (actor, url):
        await actor.wait_state(S.RUNNING, timeout=60)
        for attempt in range(3):
            calls = (await control(url, forget=True))["calls"]
            result = await actor.call_tool("echo", {"text": f"run {attempt}"}, timeout=30)
            assert result.content[0]["text"] == f"run {attempt}" and not result.is_error
            assert (await control(url))["calls"] == calls + 1


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_login_says_so_and_is_retried_with_backoff(status: int) -> None:
    """Every request refused with 401/403 from the start: last_error names the status and says the
    credentials were refused (before: "MCP error -32603: Server returned an error response"); once
    the server accepts them the server runs."""
    port = free_port()
    async with running_http_server(command(port), port) as url:
        await control(url, mode=f"status:{status}")
        remote = ServerConfig(name="r", url=url, ping_interval=3600.0, restart=TINY_CAP)
        async with open_supervisor(Config(source="<test>", servers=(remote,))) as sup:
            actor = sup.actor("r")
            await actor.wait_state(S.BACKOFF, timeout=60)
            last_error = actor.status().last_error or ""
            assert f"HTTP {status}" in last_error and "authentication refused" in last_error
            await control(url, mode="ok")
            await actor.wait_state(S.RUNNING, timeout=60)


def test_retry_after_is_read_as_seconds_or_a_date() -> None:
    """``Retry-After`` is delay-seconds or an HTTP-date (RFC 9110); what is neither asks for nothing."""
    now = 1_700_000_000.0
    assert retry_after("30", now) == 30.0
    assert retry_after(email.utils.formatdate(now + 90, usegmt=True), now) == 90.0
    assert retry_after(email.utils.formatdate(now - 90, usegmt=True), now) == 0.0
    assert retry_after("soon", now) is None and retry_after(None, now) is None
    # Digits to str.isdigit, not to float() nor to RFC 9110's DIGIT: asked for nothing.
    assert retry_after("\u00b2", now) is None and retry_after("\u0663", now) is None


async def test_a_429_with_an_unreadable_retry_after_leaves_the_connection_up() -> None:
    """A tool call answered 429 with ``Retry-After: \u00b2`` (a superscript two): the call fails with
    the status and the server stays running (before: the header's ValueError came out of the HTTP transport,
    the connection dropped, the call failed as 'Connection closed' and the run ended)."""
    async with hostile() as (actor, url):
        await actor.wait_state(S.RUNNING, timeout=60)
        await control(url, mode="status:429", methods=["tools/call"], arg="\u00b2")
        with pytest.raises(TransportError, match="HTTP 429"):
            await actor.call_tool("echo", {"text": "x"}, timeout=30)
        assert actor.status().state is S.RUNNING
        assert all(change.new is not S.BACKOFF for change in actor.history)


@pytest.mark.parametrize("status", [429, 503])
async def test_a_server_that_asks_to_be_left_alone_is_left_alone(status: int) -> None:
    """A handshake refused with a ``Retry-After`` of 30 s: the next run waits that long (before: the
    backoff's 0.01 s, and for a 503 at most two seconds between reconnects, however long it asked)."""
    async with hostile() as (actor, url):
        await actor.wait_state(S.RUNNING, timeout=60)
        await control(url, mode=f"status:{status}", arg=30)
        actor.restart()
        await actor.wait_state(S.BACKOFF, timeout=60)
        status_now = actor.status()
        assert status_now.next_retry_at is not None and status_now.next_retry_at - time.time() > 25
        assert f"HTTP {status}" in (status_now.last_error or "")


async def test_a_gateway_blip_after_an_outage_costs_seconds_not_the_outage_backoff() -> None:
    """An outage (attempts pile up), the server back for longer than RECOVERED_AFTER, then a 0.3 s
    burst of 502s (event stream too): the server runs again within seconds (before: three failed
    pings counted within milliseconds, a crash, the outage's attempt count, a 16-60 s backoff)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    policy = RestartPolicy(initial_delay=1.0, max_delay=60.0, jitter=0.0)
    remote = ServerConfig(name="r", url=url, ping_interval=3600.0, restart=policy)
    async with open_supervisor(Config(source="<test>", servers=(remote,))) as sup:
        actor = sup.actor("r")
        await actor.wait_state(S.BACKOFF, timeout=60)
        with anyio.fail_after(60):
            while actor.status().attempt < 4:
                await anyio.sleep(0.1)
        async with running_http_server(command(port), port):
            await actor.wait_state(S.RUNNING, timeout=60)
            await anyio.sleep(6.0)
            await control(url, mode="status:502", get="502")
            await anyio.sleep(0.3)
            await control(url, mode="ok", get="ok")
            back = time.monotonic()
            result = await actor.call_tool("echo", {"text": "after the blip"}, timeout=60)
            assert result.content[0]["text"] == "after the blip"
            assert time.monotonic() - back < 8
            assert actor.status().attempt <= 2


async def test_failed_pings_are_spaced_however_fast_trouble_is_reported() -> None:
    """Pings answered 504 (each a trouble report, which wakes the health watcher at once): the three
    failures that end the run take two ping gaps at least (before: counted within milliseconds)."""
    async with hostile(ping_timeout=1.0) as (actor, url):
        await actor.wait_state(S.RUNNING, timeout=60)
        await control(url, mode="status:504", methods=["ping"], get="502")
        await actor.wait_state(S.BACKOFF, timeout=60)
    history = actor.history
    first = next(change.ts for change in history if change.new is S.DEGRADED)
    ended = next(change for change in history if change.new is S.BACKOFF)
    assert "3 pings failed" in ended.reason and ended.ts - first >= 1.9  # 2 gaps of 1 s


async def test_hung_remote_handshakes_leave_the_start_gate_alone() -> None:
    """A remote server whose handshake times out neither holds a place in the start gate nor narrows
    it: its slowness says nothing about this machine's load (before: each timeout halved the window
    that local servers share, `restart local` 8-12 s instead of 3 s with six hung remotes)."""
    port = free_port()
    gate = StartGate(16)
    async with running_http_server(command(port, "--hang-connections"), port) as url:
        remote = ServerConfig(name="r", url=url, connect_timeout=0.3, restart=TINY_CAP)
        async with open_supervisor(Config(source="<test>", servers=(remote,)), start_gate=gate) as sup:
            actor = sup.actor("r")
            timeouts = 0
            with anyio.fail_after(60):
                while timeouts < 3:
                    await actor.wait_state(S.STARTING, timeout=30)
                    assert gate._in_flight == 0
                    await actor.wait_state(S.BACKOFF, timeout=30)
                    timeouts += 1
            assert gate.window == gate.slots


@pytest.mark.parametrize("resume", ["503", "404"])
async def test_a_call_whose_stream_resume_is_refused_is_not_run_twice(resume: str) -> None:
    """The call's event stream closes before its answer, and the SDK's resume (a GET with
    Last-Event-ID) is answered 503 or 404: the server took the call (a 2xx to its POST), so the call
    fails, it is not sent again (before: run twice on the server)."""
    async with hostile() as (actor, url):
        await actor.wait_state(S.RUNNING, timeout=60)
        await actor.call_tool("echo", {"text": "warm"}, timeout=30)
        wish = {"mode": "sse_drop", "methods": ["tools/call"], "count": 1, "resume": resume}
        calls = (await control(url, **wish))["calls"]
        with pytest.raises(TransportError):
            await actor.call_tool("echo", {"text": "once"}, timeout=30)
        assert (await control(url))["calls"] == calls + 1


async def test_the_servers_event_stream_is_resumed_after_a_close() -> None:
    """The session's own event stream (GET) carries event ids and is closed (by a proxy, say): the
    SDK resumes it with Last-Event-ID, and that GET reaches the server (before: taken for the
    finished handshake's request and answered with a stand-in, the stream lost for the run)."""
    port = free_port()
    async with running_http_server(command(port), port) as url:
        await control(url, get="prime_close", resume="200")
        remote = ServerConfig(name="r", url=url, ping_interval=3600.0, restart=TINY_CAP)
        async with open_supervisor(Config(source="<test>", servers=(remote,))) as sup:
            await sup.actor("r").wait_state(S.RUNNING, timeout=60)
            with anyio.fail_after(20):
                while (await control(url)).get("resumes", 0) < 1:
                    await anyio.sleep(0.2)


async def test_a_hung_request_the_client_closes_leaves_the_open_count() -> None:
    """The hostile server's own bookkeeping, which the tests above count on: a request hung in
    ``hang`` mode whose client closes the connection is no longer counted open (before: counted
    until the server's garbage collector freed its handler)."""
    port = free_port()
    async with running_http_server(command(port), port) as url:
        before = await open_connections(url, at_most=100, timeout=0)
        await control(url, mode="hang", methods=["initialize"])
        message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        headers = {"accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient(timeout=0.5) as client:
            with pytest.raises(httpx2.ReadTimeout):
                await client.post(url, json=message, headers=headers)
        assert await open_connections(url, at_most=before, timeout=3) <= before
