"""The raw JSON-RPC call path on its own: framing, id routing, progress, backpressure, withdrawal.

``RawRpc`` takes its write and whether the server reads as callables, so these tests drive it with a list
of written lines and a flag, without processes or pipes.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest

from mcpd.supervisor.rawrpc import NotReading, RawRpc, Reply
from mcpd.supervisor.session import ConnectionLost, Malformed, NotDelivered

pytestmark = pytest.mark.anyio


class Pipe:
    """What the server side of the stream would see: every line written, and whether it reads."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.ends: list[int] = []
        """The stream offset just past each line."""
        self.reading = True
        self.refuse = False
        self._written = anyio.Event()

    def write(self, data: bytes) -> int:
        if self.refuse:
            raise BrokenPipeError("the pipe refused the bytes")
        assert data.endswith(b"\n") and data.count(b"\n") == 1, "one message per line"
        self.lines.append(json.loads(data))
        self.ends.append((self.ends[-1] if self.ends else 0) + len(data))
        written, self._written = self._written, anyio.Event()
        written.set()
        return self.ends[-1]

    async def wait_lines(self, count: int) -> list[dict[str, Any]]:
        while len(self.lines) < count:
            await self._written.wait()
        return self.lines

    def rpc(self) -> RawRpc:
        return RawRpc(self.write, lambda: not self.reading)


def reply(request_id: str, result: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode() + b"\n"


def progress(token: str, value: float, message: str = "") -> bytes:
    params = {"progressToken": token, "progress": value, "total": 2, "message": message}
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}).encode()


async def run_request(
    rpc: RawRpc, results: dict[str, Any], key: str, on_progress: Callable[..., None] | None = None
) -> None:
    deadline = anyio.current_time() + 60
    try:
        results[key] = await rpc.request("tools/call", {"name": key}, deadline, on_progress)
    except Exception as exc:
        results[key] = exc


@contextlib.asynccontextmanager
async def in_flight(
    pipe: Pipe,
    rpc: RawRpc,
    results: dict[str, Any],
    *keys: str,
    on_progress: Callable[..., None] | None = None,
) -> AsyncIterator[list[dict[str, Any]]]:
    """Requests ``keys`` written in that order; yields their lines; on exit waits for them to end."""
    async with anyio.create_task_group() as tg:
        for key in keys:
            tg.start_soon(run_request, rpc, results, key, on_progress)
            await pipe.wait_lines(len(pipe.lines) + 1)
        yield pipe.lines[-len(keys) :]


async def test_a_request_is_one_json_rpc_line_with_our_id_space() -> None:
    """The request goes out as one JSON line: jsonrpc 2.0, a string id in the mcpd- space, the params."""
    pipe = Pipe()
    rpc = pipe.rpc()
    results: dict[str, Any] = {}
    async with in_flight(pipe, rpc, results, "echo") as (line,):
        assert rpc.route(reply(line["id"], {"content": []}))
    assert line["jsonrpc"] == "2.0" and line["method"] == "tools/call"
    assert line["params"] == {"name": "echo"}
    assert isinstance(line["id"], str) and line["id"].startswith("mcpd-")
    assert isinstance(results["echo"], Reply)


async def test_replies_are_routed_by_id_in_any_order() -> None:
    """Two requests in flight each get their own reply, whatever order the replies come in."""
    pipe = Pipe()
    rpc = pipe.rpc()
    results: dict[str, Any] = {}
    async with in_flight(pipe, rpc, results, "first", "second") as (first, second):
        assert rpc.route(reply(second["id"], "for second"))
        assert rpc.route(reply(first["id"], "for first"))
    assert bytes(results["first"].result) == b'"for first"'
    assert bytes(results["second"].result) == b'"for second"'


async def test_lines_that_are_not_our_replies_are_left_to_the_sdk() -> None:
    """Integer ids (the SDK's), unknown ids, server requests and non-JSON are never taken."""
    pipe = Pipe()
    rpc = pipe.rpc()
    results: dict[str, Any] = {}
    async with in_flight(pipe, rpc, results, "x") as (line,):
        assert not rpc.route(b'{"jsonrpc": "2.0", "id": 7, "result": "mcpd-1"}')
        assert not rpc.route(reply("mcpd-999", "nobody asked"))
        assert not rpc.route(b'{"jsonrpc": "2.0", "id": "mcpd-1", "method": "sampling/createMessage"}')
        assert not rpc.route(b"mcpd- not json at all")
        assert rpc.route(reply(line["id"], "mine"))
    assert isinstance(results["x"], Reply)


async def test_a_reply_mentioning_progress_is_still_delivered() -> None:
    """The routing bug: a reply whose text contains "notifications/progress", to a call that asked for
    progress, is a reply (routed by id), not a progress notification."""
    pipe = Pipe()
    rpc = pipe.rpc()
    results: dict[str, Any] = {}
    seen: list[tuple[float, float | None, str | None, dict[str, Any] | None]] = []
    async with in_flight(pipe, rpc, results, "p", on_progress=lambda *a: seen.append(a)) as (line,):
        assert rpc.route(reply(line["id"], {"content": [{"type": "text", "text": "notifications/progress"}]}))
    assert isinstance(results["p"], Reply)
    assert seen == []


async def test_progress_reaches_the_caller_that_asked() -> None:
    """The request id doubles as the progress token; progress lines go to that call's callback only."""
    pipe = Pipe()
    rpc = pipe.rpc()
    results: dict[str, Any] = {}
    seen: list[tuple[float, float | None, str | None, dict[str, Any] | None]] = []
    async with in_flight(pipe, rpc, results, "p", on_progress=lambda *a: seen.append(a)) as (line,):
        token = line["params"]["_meta"]["progressToken"]
        assert token == line["id"]
        assert rpc.route(progress(token, 1, "half"))
        assert not rpc.route(progress("mcpd-12345", 1))  # someone else's token
        assert rpc.route(reply(line["id"], "done"))
    assert seen == [(1, 2, "half", None)]
    assert not rpc.route(progress(token, 2))  # the call is over: nobody listens


async def test_backlog_over_the_limit_refuses_without_writing() -> None:
    """A server that leaves its input unread gets no more requests: NotReading, nothing written."""
    pipe = Pipe()
    pipe.reading = False
    with pytest.raises(NotReading):
        await pipe.rpc().request("tools/call", {}, anyio.current_time() + 60)
    assert pipe.lines == []


async def test_timeout_withdraws_the_request() -> None:
    """Past its deadline a request raises TimeoutError and tells the server with notifications/cancelled;
    a late reply is then not taken."""
    pipe = Pipe()
    rpc = pipe.rpc()
    with pytest.raises(TimeoutError):
        await rpc.request("tools/call", {}, anyio.current_time() + 0.05)
    request, cancel = pipe.lines
    assert cancel["method"] == "notifications/cancelled"
    assert cancel["params"]["requestId"] == request["id"]
    assert not rpc.route(reply(request["id"], "too late"))


async def test_a_request_already_past_its_deadline_is_not_sent() -> None:
    """A caller whose scope is cancelled already (its effective deadline is -inf) gets its cancellation,
    one whose deadline has passed gets TimeoutError, and the server is sent nothing: it would have
    started on the request (a tool call's side effects) only to be told at once to drop it."""
    pipe = Pipe()
    rpc = pipe.rpc()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await rpc.request("tools/call", {}, anyio.current_effective_deadline())
    assert scope.cancelled_caught
    with pytest.raises(TimeoutError):
        await rpc.request("tools/call", {}, anyio.current_time() - 1)
    assert pipe.lines == []


async def test_each_request_expires_at_its_own_deadline() -> None:
    """Deadlines share one timer: a request sent after another with an earlier deadline still expires
    at its own, one answered in time never expires, and the rest wait for theirs. Thousands of answered
    requests before them (whose deadlines are still ahead) change none of that."""
    pipe = Pipe()
    rpc = pipe.rpc()
    now = anyio.current_time()
    for number in range(3000):  # answered at once: their deadlines stay ahead, their requests gone
        async with anyio.create_task_group() as tg:
            tg.start_soon(rpc.request, "tools/call", {}, now + 30)
            await pipe.wait_lines(number + 1)
            assert rpc.route(reply(pipe.lines[-1]["id"], number))
    ended: dict[str, float] = {}

    async def call(name: str, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await rpc.request("tools/call", {"name": name}, anyio.current_time() + timeout)
            ended[name] = -1  # answered
            return
        ended[name] = anyio.current_time() - start

    start = anyio.current_time()
    async with anyio.create_task_group() as tg:
        tg.start_soon(call, "late", 0.6)
        tg.start_soon(call, "answered", 0.2)
        tg.start_soon(call, "early", 0.2)
        sent = await pipe.wait_lines(3003)
        answered = next(line for line in sent[3000:] if line["params"]["name"] == "answered")
        assert rpc.route(reply(answered["id"], "in time"))
    assert ended["answered"] == -1
    assert 0.2 <= ended["early"] < 0.5
    assert 0.6 <= ended["late"] < 0.9


async def test_cancelled_caller_withdraws_the_request() -> None:
    """A caller that is cancelled (the client went away) withdraws its request the same way."""
    pipe = Pipe()
    rpc = pipe.rpc()
    results: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_request, rpc, results, "gone")
        await pipe.wait_lines(1)
        tg.cancel_scope.cancel()
    request, cancel = pipe.lines
    assert cancel["method"] == "notifications/cancelled"
    assert cancel["params"]["requestId"] == request["id"]


async def test_close_fails_requests_in_flight_and_refuses_new_ones() -> None:
    """When the stream ends, calls already written get ConnectionLost (the server may have seen them);
    calls made afterwards get NotDelivered (it cannot have)."""
    pipe = Pipe()
    rpc = pipe.rpc()
    results: dict[str, Any] = {}
    async with in_flight(pipe, rpc, results, "in_flight"):
        rpc.close(None)
    assert isinstance(results["in_flight"], ConnectionLost)
    with pytest.raises(NotDelivered):
        await rpc.request("tools/call", {}, anyio.current_time() + 60)


@pytest.mark.parametrize(("short", "middle"), [(0, ConnectionLost), (1, ConnectionLost), (2, NotDelivered)])
async def test_close_tells_the_requests_the_server_never_read_whole(short: int, middle: type) -> None:
    """Given how many bytes the server read, a request whose last byte it never read is NotDelivered
    (it cannot have acted on it); one it read up to its newline, or further, is ConnectionLost.
    Here it read the middle one of three requests all but ``short`` bytes (its newline is 1)."""
    pipe = Pipe()
    rpc = pipe.rpc()
    results: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:
        for key in ("first", "middle", "last"):
            tg.start_soon(run_request, rpc, results, key)
            await pipe.wait_lines(len(pipe.lines) + 1)
        rpc.close(pipe.ends[1] - short)
    assert isinstance(results["first"], ConnectionLost)
    assert isinstance(results["middle"], middle)
    assert isinstance(results["last"], NotDelivered)


async def test_refused_write_is_not_sent() -> None:
    """A pipe that refuses the bytes (the server is gone) means NotDelivered, and nothing is left waiting."""
    pipe = Pipe()
    pipe.refuse = True
    rpc = pipe.rpc()
    with pytest.raises(NotDelivered):
        await rpc.request("tools/call", {}, anyio.current_time() + 60)
    pipe.refuse = False
    assert not rpc.route(reply("mcpd-1", "nobody waits"))


async def test_an_unreadable_line_ends_only_the_request_its_head_names() -> None:
    """A line too deep to read even its id: a reply that names one of ours at its head ends that
    request at once (Malformed); a notification that only echoes our id deep in its params ends
    nothing (the real reply still comes)."""
    pipe = Pipe()
    rpc = pipe.rpc()
    results: dict[str, Any] = {}
    deep = b"[" * 3000 + b"]" * 3000
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_request, rpc, results, "a")
        tg.start_soon(run_request, rpc, results, "b")
        first, second = [line["id"] for line in await pipe.wait_lines(2)]
        echo = b'{"jsonrpc": "2.0", "method": "notifications/message", "params": {"x": ' + deep
        echo += b', "echo": {"id": "' + first.encode() + b'"}}}\n'
        assert not rpc.route(echo)
        assert rpc.route(b'{"jsonrpc": "2.0", "id": "' + second.encode() + b'", "result": ' + deep + b"}\n")
        assert rpc.route(reply(first, {"ok": True}))
    assert isinstance(results["a"], Reply) and isinstance(results["b"], Malformed)
