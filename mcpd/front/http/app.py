"""The ASGI app of the HTTP front end (starlette): who may ask, then ``POST``, ``GET``, ``DELETE /mcp``.

Every request first passes ``Guard``: the bearer token, compared in constant time (else 401
with ``WWW-Authenticate: Bearer`` and nothing else); a Host header naming loopback (else 421;
not checked when remote use is allowed); an Origin, when there is one, naming loopback (else
403): a web page must not reach the daemon by DNS rebinding. Then, as MCP Streamable HTTP
(2025-06-18) has it:

``POST /mcp``
    One JSON-RPC message (batches are refused). A notification or a response: 202. A request:
    its answer as ``application/json``; or, when the request asks for progress
    (``_meta.progressToken``) and the host accepts ``text/event-stream``, an event stream of
    its progress notifications and then its answer; a host that accepts one gets one too when
    the server of its call asks it something or logs during the call (then the answer).
    ``initialize`` opens a session, whose id comes back in ``Mcp-Session-Id`` (``?connect=SERVER``
    and ``?all=1`` on the URL are the bridge's ``--connect`` and ``--all``); every other request
    must carry it (400 without it, 404 once the session has ended). A host that hangs up does
    not cancel its request (the spec's rule): ``notifications/cancelled`` does.
``GET /mcp``
    The session's event stream: what the daemon sends unasked (``list_changed``, log
    messages of no call of this host's; a server's requests to the host during a call whose
    POST takes no event stream, their answers coming back as POSTs). One per session (409 for
    a second). Its events carry ids: a GET with ``Last-Event-ID`` first gets again the events
    after that one that the session still keeps (``EventLog``), so a stream that broke loses
    nothing.
``DELETE /mcp``
    Ends the session and cancels its calls.

A session outlives a daemon restart: a request naming a session this daemon does not hold
resumes it from the usage store (``mcpd.front.http.sessions``).

An ``MCP-Protocol-Version`` header naming a revision mcpd does not speak gets 400.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import msgspec
import structlog
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcpd.config.model import is_loopback
from mcpd.errors import DECODE_FAILURES
from mcpd.front.http.listener import MCP_PATH
from mcpd.front.http.protocol import ABORT
from mcpd.front.http.sessions import (
    DuplicateRequest,
    EventLog,
    HttpSession,
    HttpSessions,
    Outbox,
    SessionRefused,
)
from mcpd.front.http.token import bearer_matches
from mcpd.model import mcp
from mcpd.readsize import read_at_most

log = structlog.get_logger("mcpd.front")

SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
LAST_EVENT_HEADER = "last-event-id"
PING_INTERVAL = 30.0
"""Seconds between comments on a quiet event stream, so proxies keep it and a dead peer shows."""

_JSON = "application/json"
_SSE = "text/event-stream"
_PING = b": ping\n\n"
RECONNECT_AFTER_MS = 10_000
"""The ``retry`` a GET stream tells hosts: how long to wait before opening it again once it breaks.
The SDK's host tries again only once or twice, 1 s apart unless told, so a daemon restarted by its
service (systemd waits 2 s, then ~1.5 s to listen, several on a loaded machine) left it deaf to
notifications for the rest of the session; 5 s was not always enough under load."""
_RETRY = b"retry: %d\n\n" % RECONNECT_AFTER_MS
_incoming = msgspec.json.Decoder(mcp.Incoming)


class _Meta(msgspec.Struct, frozen=True):
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


_meta = msgspec.json.Decoder(_Meta)
_cancelled = msgspec.json.Decoder(mcp.CancelledParams)
_encoder = msgspec.json.Encoder()


@dataclass(frozen=True)
class HttpLimits:
    max_body: int
    """Largest request body (the socket's frame limit): 413 beyond it."""
    io_timeout: float
    """A host that takes longer to send a request body, or to take a piece of an answer, is cut off."""


def _hostname(value: str | None) -> str | None:
    if not value:
        return None
    try:
        return urlsplit(value if "//" in value else f"//{value}").hostname
    except ValueError:
        return None


class Guard:
    """Token, Host and Origin checks in front of everything (unknown paths included)."""

    def __init__(self, app: ASGIApp, token: str, *, check_host: bool) -> None:
        self._app = app
        self._token = token.encode()
        self._check_host = check_host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan is off and websockets are not served
        headers = Headers(scope=scope)
        if not bearer_matches(headers.get("authorization"), self._token):
            # Said closed: the connection is (``protocol.limited_protocol``), and a client that reused
            # it would meet the close as an error.
            refusal = Response(status_code=401, headers={"WWW-Authenticate": "Bearer", "Connection": "close"})
        elif self._check_host and not is_loopback(_hostname(headers.get("host")) or ""):
            refusal = Response(status_code=421)
        elif "origin" in headers and not _local_origin(headers["origin"]):
            refusal = Response(status_code=403)
        else:
            await self._app(scope, receive, send)
            return
        await refusal(scope, receive, send)


def _local_origin(origin: str) -> bool:
    return origin.startswith(("http://", "https://")) and is_loopback(_hostname(origin) or "")


def _error(
    status: int, code: int, message: str, request_id: mcp.RequestId | None = None, session: str | None = None
) -> Response:
    """An HTTP error whose body is a JSON-RPC error (the SDK's client shows its message)."""
    body = _encoder.encode(mcp.ErrorResponse(request_id, mcp.ErrorObject(code, message)))
    headers = {SESSION_HEADER: session} if session else None
    return Response(body, status_code=status, media_type=_JSON, headers=headers)


def _accepts(headers: Headers) -> tuple[bool, bool]:
    """Whether the client takes JSON, and an event stream (no Accept: anything)."""
    kinds = {part.split(";")[0].strip().lower() for part in headers.get("accept", "*/*").split(",")}
    anything = "*/*" in kinds
    json = anything or _JSON in kinds or "application/*" in kinds
    return json, anything or _SSE in kinds or "text/*" in kinds


def _event(data: bytes, event_id: str | None = None) -> bytes:
    # msgspec's JSON holds no raw newline, so one `data:` line carries the whole message.
    head = b"id: " + event_id.encode() + b"\n" if event_id else b""
    return head + b"event: message\ndata: " + data + b"\n\n"


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


def _abort(scope: Scope) -> None:
    """Drop the connection mid-answer (``protocol.ABORT``; nothing without it)."""
    extension = scope.get("extensions", {}).get(ABORT)
    if extension is not None:
        extension["abort"]()


class _Sender:
    """``send`` with a deadline per message: a host that does not take a piece of its stream within
    ``timeout`` is given up on (what is left is not sent; the connection is dropped)."""

    def __init__(self, send: Send, timeout: float, session: HttpSession, scope: Scope) -> None:
        self._send = send
        self._timeout = timeout
        self._session = session
        self._scope = scope
        self.stalled = False

    async def __call__(self, message: Message) -> None:
        if self.stalled:
            return
        with anyio.move_on_after(self._timeout) as waited:
            await self._send(message)
        if waited.cancelled_caught:
            self.stalled = True
            log.warning("http.host_stalled", session=self._session.label, timeout_s=self._timeout)
            _abort(self._scope)


async def _stream(
    outbox: Outbox,
    session: HttpSession,
    scope: Scope,
    receive: Receive,
    send: Send,
    *,
    timeout: float,
    unanswered: bytes = b"",
    event_log: EventLog | None = None,
    replay: list[tuple[str, bytes]] | None = None,
    first: list[bytes] | None = None,
    first_ends: bool = False,
) -> None:
    """Send ``outbox`` as an event stream until it ends, the host hangs up or stops reading;
    ``unanswered`` is the last event when the stream closes without its answer. With
    ``event_log`` (the GET stream) events carry ids, and ``replay`` goes first; ``first``: what
    was taken from ``outbox`` already, the answer among it if ``first_ends``."""
    headers = [
        (b"content-type", _SSE.encode()),
        (b"cache-control", b"no-cache"),
        (SESSION_HEADER.encode(), session.id.encode()),
    ]
    sender = _Sender(send, timeout, session, scope)
    await sender({"type": "http.response.start", "status": 200, "headers": headers})
    if event_log is not None:
        await sender({"type": "http.response.body", "body": _RETRY, "more_body": True})
    async with anyio.create_task_group() as tg:
        tg.start_soon(_cancel_on_disconnect, receive, tg.cancel_scope)
        done = first_ends  # as taken: an answer that came since is the next take's
        if replay:
            await sender({"type": "http.response.body", "body": _events(replay), "more_body": True})
        if first:
            body = b"".join(_event(item) for item in first)
            await sender({"type": "http.response.body", "body": body, "more_body": not done})
        while not (done or sender.stalled):
            chunk = _PING
            with anyio.move_on_after(PING_INTERVAL):
                items, done = await outbox.take()
                if done and outbox.answer is None and unanswered:
                    items.append(unanswered)
                if event_log is not None:
                    chunk = _events(event_log.stamp(items))
                else:
                    chunk = b"".join(_event(item) for item in items)
            await sender({"type": "http.response.body", "body": chunk, "more_body": not done})
        tg.cancel_scope.cancel()


def _events(stamped: list[tuple[str, bytes]]) -> bytes:
    return b"".join(_event(item, event_id) for event_id, item in stamped)


SMALL_BODY = 64 * 1024
"""Bodies up to this size are read without asking ``BodyBudget`` (most are; each connection has one)."""
BODY_BUDGET_BODIES = 4
"""Largest bodies (``max_body``) that may be read at once: others wait their turn."""


class BodyBudget:
    """Bytes of request bodies being read at once, across every connection: 30 hosts sending
    16 MB bodies together took the daemon to 571 MB. A body beyond ``SMALL_BODY`` reserves its
    declared size (``max_body`` when chunked) before it is read, and gives it back once read;
    one that finds no room waits for some, for at most ``timeout`` (503 beyond)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._used = 0
        self._freed: asyncio.Event | None = None

    async def take(self, size: int, timeout: float) -> bool:
        try:
            async with asyncio.timeout(timeout):
                while self._used and self._used + size > self._limit:
                    if self._freed is None:
                        self._freed = asyncio.Event()
                    await self._freed.wait()
        except TimeoutError:
            return False
        self._used += size
        return True

    def give(self, size: int) -> None:
        self._used -= size
        if self._freed is not None:
            self._freed.set()  # every waiter looks again; one that still finds no room waits anew
            self._freed = None


async def _read_body(request: Request, limit: int) -> bytes | None:
    """The whole body, or None beyond ``limit`` bytes (read no further)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    return await read_at_most(request.stream(), limit)


@dataclass(frozen=True)
class _Message:
    """A POST's JSON-RPC message, and how it is to be answered."""

    body: bytes
    request_id: mcp.RequestId | None
    """None for a notification or a response (answered 202)."""
    initialize: bool
    progress_token: mcp.RequestId | None
    stream: bool
    """Answer with an event stream (progress, then the answer) rather than JSON."""
    may_stream: bool = False
    """The host takes an event stream: the answer becomes one if the server asks it something first."""
    cancels: mcp.RequestId | None = None
    """The request a ``notifications/cancelled`` withdraws."""
    answers: mcp.RequestId | None = None
    """The id a response answers."""


def _parse(body: bytes, headers: Headers) -> _Message | Response:
    try:
        message = _incoming.decode(body)
    except msgspec.ValidationError as exc:
        # Not "no batches" for every message of a wrong shape (an id of 1.5, a method of 5): that
        # sent hosts looking for a batch they never sent. What is wrong, as the socket says it.
        batch = body.lstrip().startswith(b"[")
        why = "one JSON-RPC message per POST (no batches)" if batch else f"not a JSON-RPC message: {exc}"
        return _error(400, mcp.INVALID_REQUEST, why)
    except DECODE_FAILURES as exc:
        return _error(400, mcp.PARSE_ERROR, f"parse error: {exc}")
    if isinstance(message.method, msgspec.UnsetType) or isinstance(message.id, msgspec.UnsetType):
        cancels = _cancelled_id(message.params) if message.method == mcp.CANCELLED else None
        a_response = isinstance(message.method, msgspec.UnsetType)
        answers = message.id if a_response and isinstance(message.id, int | str) else None
        return _Message(
            body, None, initialize=False, progress_token=None, stream=False, cancels=cancels, answers=answers
        )
    if message.id is None:
        return _error(400, mcp.INVALID_REQUEST, "a request id must be a string or a number")
    takes_json, takes_stream = _accepts(headers)
    token = _progress_token(message.params) if takes_stream else None
    stream = takes_stream and (token is not None or not takes_json)
    initialize = message.method == "initialize"
    return _Message(body, message.id, initialize, token if stream else None, stream, takes_stream)


class Endpoint:
    """``/mcp``: the three methods of Streamable HTTP over the session table."""

    def __init__(self, sessions: HttpSessions, limits: HttpLimits) -> None:
        self._sessions = sessions
        self._limits = limits
        self._budget = BodyBudget(BODY_BUDGET_BODIES * limits.max_body)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        version = request.headers.get(VERSION_HEADER)
        try:
            if version is not None and version not in mcp.PROTOCOL_VERSIONS:
                await _error(400, mcp.INVALID_REQUEST, f"unsupported MCP-Protocol-Version {version}")(
                    scope, receive, send
                )
            elif request.method == "POST":
                await self._post(request, send)
            elif request.method == "GET":
                await self._get(request, send)
            elif request.method == "DELETE":
                await self._delete(request, send)
            else:
                await Response(status_code=405, headers={"Allow": "GET, POST, DELETE"})(scope, receive, send)
        except ClientDisconnect:
            pass  # gone while sending its body: nobody to answer

    async def _session(self, request: Request) -> HttpSession | Response:
        """The request's session (resumed if an earlier daemon held it), or the error to answer with."""
        session_id = request.headers.get(SESSION_HEADER)
        if not session_id:
            return _error(400, mcp.INVALID_REQUEST, "Mcp-Session-Id is required after initialize")
        try:
            session = await self._sessions.find(session_id)
        except SessionRefused as exc:
            return _error(503, mcp.INTERNAL_ERROR, exc.message)
        if session is None:
            return _error(404, mcp.INVALID_REQUEST, "no such session (it ended): initialize a new one")
        return session

    async def _read(self, request: Request) -> _Message | Response:
        """The POST's message, or the error to answer with."""
        headers = request.headers
        if headers.get("content-type", "").partition(";")[0].strip().lower() != _JSON:
            return _error(415, mcp.INVALID_REQUEST, "Content-Type must be application/json")
        if not any(_accepts(headers)):
            return _error(406, mcp.INVALID_REQUEST, "Accept must allow application/json")
        declared = headers.get("content-length", "")
        size = int(declared) if declared.isdigit() else self._limits.max_body
        reserved = size if SMALL_BODY < size <= self._limits.max_body else 0  # beyond: 413 at once
        if reserved and not await self._budget.take(reserved, self._limits.io_timeout):
            return _error(503, mcp.INTERNAL_ERROR, "too many large request bodies at once: try again")
        try:
            # asyncio's own timeout on the per-call path: an anyio cancel scope costs several times more.
            async with asyncio.timeout(self._limits.io_timeout):
                body = await _read_body(request, self._limits.max_body)
        except TimeoutError:
            return _error(408, mcp.INVALID_REQUEST, f"no whole body within {self._limits.io_timeout:g}s")
        finally:
            if reserved:
                self._budget.give(reserved)
        if body is None:
            return _error(413, mcp.INVALID_REQUEST, f"body over {self._limits.max_body} bytes")
        return _parse(body, headers)

    async def _open(self, request: Request) -> HttpSession | Response:
        try:
            return await self._sessions.open(state=_options(request))
        except SessionRefused as exc:
            return _error(503, mcp.INTERNAL_ERROR, exc.message)

    async def _post(self, request: Request, send: Send) -> None:
        scope, receive = request.scope, request.receive
        message = await self._read(request)
        if isinstance(message, Response):
            await message(scope, receive, send)
            return
        session = await self._open(request) if message.initialize else await self._session(request)
        if isinstance(session, Response):
            await session(scope, receive, send)
            return
        session.active += 1
        try:
            if message.answers is not None and not session.host.answers.awaits(message.answers):
                why = f"no request of mcpd's waits for an answer with id {message.answers!r}"
                await _error(400, mcp.INVALID_REQUEST, why, None, session.id)(scope, receive, send)
            elif message.request_id is None:  # a notification, or a response to a request of the daemon's
                session.host.receive(message.body)
                if message.cancels is not None:
                    session.cancelled(message.cancels)
                await Response(status_code=202, headers={SESSION_HEADER: session.id})(scope, receive, send)
            else:
                await self._answer(session, message, message.request_id, request, send)
        finally:
            session.active -= 1
            session.last_seen = time.monotonic()

    async def _answer(
        self, session: HttpSession, message: _Message, request_id: mcp.RequestId, request: Request, send: Send
    ) -> None:
        """Hand the request to the session and send its answer: JSON, or a stream with its progress."""
        scope, receive = request.scope, request.receive
        try:
            outbox = session.expect(request_id, message.progress_token, may_stream=message.may_stream)
        except DuplicateRequest as exc:
            await _error(409, mcp.INVALID_REQUEST, exc.message, request_id, session.id)(scope, receive, send)
            return
        try:
            session.host.receive(message.body)
            # A streaming request's answer is a stream anyway; another's becomes one if its server
            # asks the host something first (sampling, a form): the stream carries the question.
            items, done = ([], False) if message.stream else await outbox.take()
            if message.stream or len(items) > (1 if done else 0):
                ended = _encoder.encode(mcp.ErrorResponse(request_id, _ended(request_id)))
                timeout = self._limits.io_timeout
                await _stream(
                    outbox,
                    session,
                    scope,
                    receive,
                    send,
                    timeout=timeout,
                    unanswered=ended,
                    first=items,
                    first_ends=done,
                )
                return
            if outbox.answer is None:
                error = _ended(request_id)
                reply = _error(404, error.code, error.message, request_id, session.id)
            else:
                reply = Response(outbox.answer, media_type=_JSON, headers={SESSION_HEADER: session.id})
            try:
                async with asyncio.timeout(self._limits.io_timeout):
                    await reply(scope, receive, send)
            except TimeoutError:  # what is left is not sent
                log.warning("http.host_stalled", session=session.label, timeout_s=self._limits.io_timeout)
                _abort(scope)
        finally:
            session.forget(request_id, message.progress_token, outbox)

    async def _get(self, request: Request, send: Send) -> None:
        scope, receive = request.scope, request.receive
        found = await self._session(request)
        if isinstance(found, HttpSession):
            session = found
            if not _accepts(request.headers)[1]:
                why = (406, "Accept must allow text/event-stream")
            elif session.streaming:
                why = (409, "the session has a GET stream already")
            else:
                session.streaming = True
                last = request.headers.get(LAST_EVENT_HEADER)
                try:
                    await _stream(
                        session.events,
                        session,
                        scope,
                        receive,
                        send,
                        timeout=self._limits.io_timeout,
                        event_log=session.event_log,
                        replay=session.event_log.since(last) if last else None,
                    )
                finally:
                    session.streaming = False
                    session.last_seen = time.monotonic()
                return
            found = _error(why[0], mcp.INVALID_REQUEST, why[1], None, session.id)
        await found(scope, receive, send)

    async def _delete(self, request: Request, send: Send) -> None:
        found = await self._session(request)
        if isinstance(found, HttpSession):
            self._sessions.end(found, "deleted by the host")
            found = Response(status_code=200)
        await found(request.scope, request.receive, send)


def _options(request: Request) -> mcp.SessionState:
    """A new session's options from the URL, as ``mcpd bridge`` takes them from its command line:
    ``?connect=SERVER`` (repeatable) connects a server as soon as it runs, ``?all=1`` exposes every
    tool (for hosts that ignore ``list_changed``)."""
    query = request.query_params
    return mcp.SessionState(
        preconnect=sorted(set(query.getlist("connect"))),
        expose_all=query.get("all", "").lower() in ("1", "true", "yes"),
    )


def _ended(request_id: mcp.RequestId) -> mcp.ErrorObject:
    # Not -32600 (a malformed request: the host's own fault); as the bridge says when the daemon
    # goes away, the request may or may not have run.
    return mcp.ErrorObject(
        mcp.SESSION_ENDED,
        f"the session ended before request {request_id!r} was answered; it may or may not have run",
    )


def _cancelled_id(params: msgspec.Raw) -> mcp.RequestId | None:
    try:
        return _cancelled.decode(params).request_id
    except DECODE_FAILURES:
        return None


def _progress_token(params: msgspec.Raw) -> mcp.RequestId | None:
    try:
        meta = _meta.decode(params).meta
    except DECODE_FAILURES:
        return None  # the session answers malformed params itself
    return mcp.progress_token(meta)


def build_app(sessions: HttpSessions, token: str, limits: HttpLimits, *, check_host: bool) -> ASGIApp:
    endpoint = Endpoint(sessions, limits)
    route = Route(MCP_PATH, endpoint, methods=["GET", "POST", "DELETE"])
    return Guard(Router(routes=[route], redirect_slashes=False), token, check_host=check_host)
