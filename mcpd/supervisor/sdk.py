"""The one module that talks to the MCP SDK's client side: the session to a remote (streamable
HTTP) server, kept to the contract of ``session.Session``.

Stdio children have a session of mcpd's own (``stdio_session``); this module, and so the SDK, is
imported only once a remote server is configured (``sdkload``). An SDK upgrade touches this file
and ``tests/test_sdk.py`` (which fails loudly when the SDK changes what this module relies on).
It imports no private SDK module. It relies on four SDK behaviours beyond the public API. A
request's HTTP POST runs in a copy of the context of the task that sent it (the SDK's context
streams carry it), which is how ``track_call`` learns whether the server could have seen a
request; and a server's request that arrives on that POST's response stream is answered in that
same context, which is how the daemon knows exactly which call a remote server's sampling or
elicitation request belongs to. The session reads its transport's messages only through the read
stream's ``receive`` and ``last_context`` (``_TappedStream``), where the server's progress
notifications are picked up as it sent them. And it writes the cancellation of a request its caller
cancelled in the caller's task, while handling that cancellation (``_ReasonedWrites`` gives it the
caller's reason).

The HTTP client is ours, wrapped in ``_Watch``: it reports at once what the SDK would only log
or retry quietly (a refused connection, a closed event stream, a session the server no longer
knows, refused credentials), so that the actor reconnects without waiting for the next ping. It
also keeps each request of ours to its caller (the same context): the request is closed when the
caller stops waiting, its JSON answer is read up to ``MAX_ANSWER_BYTES`` only, and what was wrong
at the HTTP level (a status, a content type, a body that is not the answer) is noted on the
request's ``CallMark``, which ``_translated`` turns into the session's errors in place of the
JSON-RPC error the SDK makes up for it; so is an answer that is the server's own JSON-RPC error,
which may have the code the SDK gives what it makes up (-32000).
"""

from __future__ import annotations

import contextlib
import contextvars
import email.utils
import itertools
import re
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, TypeVar, cast

import anyio
import httpx2
import mcp_types
import msgspec
import pydantic
import structlog
from mcp.client.session import ClientRequestContext, ClientSession, LoggingFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

import mcpd
from mcpd.config.model import ServerConfig
from mcpd.errors import DECODE_FAILURES
from mcpd.model import mcp
from mcpd.model.logs import LogMessage
from mcpd.model.requests import ELICITATION, ROOTS, SAMPLING, ServerReply
from mcpd.model.resources import (
    CompleteResult,
    Completion,
    CompletionRef,
    PromptInfo,
    PromptMessage,
    PromptRef,
    PromptResult,
    ReadResult,
    ResourceInfo,
    ResourceTemplateInfo,
    Surface,
)
from mcpd.model.servers import ServerInfo
from mcpd.model.tools import ToolInfo, ToolResult
from mcpd.readsize import read_at_most
from mcpd.supervisor.server_asks import MAX_SERVER_REQUESTS, TOO_MANY_ASKS
from mcpd.supervisor.session import (
    Ask,
    ConnectionLost,
    LogCallback,
    Malformed,
    NotDelivered,
    Paged,
    ProgressCallback,
    ProgressParams,
    Refused,
    RequestFailed,
    SessionHooks,
    StatusRefused,
    TransportFailed,
    cancel_reason,
    carried,
    contents,
    every_page,
    prompt_info,
    resource_info,
    surface_of,
    template_info,
    tool_info,
)
from mcpd.supervisor.stdio import MAX_LINE_BYTES
from mcpd.supervisor.wakeup import Wakeup

__all__ = [
    "HttpWatch",
    "MCPError",
    "SdkSession",
    "describe_mcp_error",
    "is_connection_error",
    "open_http_session",
]

log = structlog.get_logger("mcpd.supervisor")

CONNECTION_CLOSED = mcp_types.CONNECTION_CLOSED
_CLIENT_INFO = mcp_types.Implementation(name="mcpd", version=mcpd.__version__)


def _dump(model: Any) -> dict[str, Any]:
    """A pydantic model of the SDK as the JSON the server sent."""
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def _sent(model: Any) -> dict[str, Any]:
    """A pydantic model of the SDK as the JSON the server sent: the fields it set (the SDK's defaults
    left out), those of the revisions the SDK knows (it drops the others)."""
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return dumped


Item = TypeVar("Item")


def _items(models: Any, made: Callable[[Any], Item], server: str, what: str) -> list[Item]:
    """The items of a list page as the stdio session reads them (``session.split``); one that does
    not fit is left out and logged, as there."""
    valid = []
    for index, model in enumerate(models):
        try:
            valid.append(carried(made(_sent(model))))
        except DECODE_FAILURES as exc:
            log.warning("server.list_item_invalid", server=server, list=what, item=index, error=str(exc))
    return valid


def describe_mcp_error(exc: MCPError) -> str:
    return f"MCP error {exc.code}: {exc.error.message}"


@dataclass(eq=False)
class CallMark:
    """What the HTTP layer saw of one request (and the requests it sends on its behalf)."""

    refused: bool = False
    """The request never reached the server (no connection)."""
    status: int | None = None
    """The HTTP status of an error answer (400 and up)."""
    lost_session: bool = False
    """That status was a 404 to our session id."""
    refusal: bool = False
    """That error answer's body is a JSON-RPC error: the server refused in its own words."""
    failure: str | None = None
    """What was wrong with a 2xx answer, found by the HTTP layer (too large, not JSON, ...)."""
    delivered: bool = False
    """The server took the request (a 2xx answer to its POST): nothing later makes it not delivered."""
    answered_error: bool = False
    """The server's answer to the request, as JSON or on its event stream, is a JSON-RPC error: the
    SDK's error is the server's word, whatever its code (-32000 too, which the SDK also gives the
    errors it makes up itself, "connection closed")."""
    request_id: object = None
    """The id of the request of ours sent last (one at a time per task): a resumed event stream
    (a GET with Last-Event-ID) carries its answer, and the GET itself says no id."""
    over: bool = False
    """The caller has its answer or gave up: what is still open of its request is closed."""
    scopes: set[anyio.CancelScope] = field(default_factory=set)
    """What reads the request's answer now (at most one at a time)."""

    def end(self) -> None:
        self.over = True
        for scope in self.scopes:
            scope.cancel()

    def http_error(self, what: str) -> RequestFailed | None:
        """The session error of an HTTP-level failure of the request (``what``: its method), if any."""
        if self.failure is not None:
            return Malformed(self.failure)
        if self.status is None:
            return None
        reason = f"HTTP {self.status} {_phrase(self.status)}".rstrip()
        if self.lost_session and not self.delivered:
            return NotDelivered(reason)  # the session is gone: a new one is needed
        if self.status in NOT_DELIVERED and not self.delivered:
            if self.status in AFTER_RUN_POSSIBLE and what == "tools/call":
                # A gateway may answer so after its upstream ran the call: at most once for tools.
                return TransportFailed(f"{reason} (from a gateway: the tool may have run)")
            return StatusRefused(reason, self.status, what)
        # The body was the server's JSON-RPC error: a refusal, as on stdio.
        return None if self.refusal else TransportFailed(reason)


_CALL: contextvars.ContextVar[CallMark | None] = contextvars.ContextVar("mcpd_call", default=None)


@contextlib.contextmanager
def track_call() -> Iterator[CallMark]:
    """Mark the requests sent from this task until the block ends (see the module docstring)."""
    mark = CallMark()
    token = _CALL.set(mark)
    try:
        yield mark
    finally:
        _CALL.reset(token)
        # A call that gave up (timed out, cancelled) closes its own HTTP request: a server that
        # ignores notifications/cancelled would otherwise keep it open (and its pool slot, and an
        # endless event stream being read) for as long as it likes.
        mark.end()


class HttpWatch:
    """What the HTTP layer of one connection tells the actor."""

    def __init__(self) -> None:
        self.trouble = Wakeup()
        """Something failed or closed: check the server now rather than at the next ping."""
        self.session_lost = anyio.Event()
        """The server answered 404 to our session id: it restarted and forgot us; reconnect."""
        self.auth_refused = False
        """The server (or a proxy before it) answered 401 or 403: our credentials were refused."""
        self.reason: str | None = None
        """The latest trouble reported, if any."""
        self.back_at: float | None = None
        """When (``time.monotonic()``) the server last asked to be left alone until (``Retry-After`` of
        a 429 or 503)."""

    def report(self, reason: str, *, lost: bool = False, auth: bool = False) -> None:
        self.reason = reason
        self.auth_refused = self.auth_refused or auth
        self.trouble.set()
        if lost:
            self.session_lost.set()


MAX_ANSWER_BYTES = MAX_LINE_BYTES
"""The largest JSON answer (and event of an event stream) read from a remote server, as a stdio
server's line: reading stops there and the request fails, naming the limit."""
ERROR_BODY_BYTES = 64 * 1024
"""Bytes of an HTTP error answer read to find a JSON-RPC error in it; a longer body is not one."""
NOT_DELIVERED = frozenset({401, 403, 502, 503})
"""HTTP statuses that say the request was not run (``StatusRefused``: sent again once, then it fails
naming the status; the connection goes on): 401/403 (refused at the door, perhaps for this request
only: MCP's insufficient_scope) and 502/503 (a gateway found no server behind it, or the server is
not taking requests) to a request that is safe to repeat (any but tools/call: a gateway may also
answer 502 after its upstream ran the call and closed, so a tools/call answered 502/503 fails,
at most once). A 404 to our session id says the server forgot the session (MCP says to start a
new one): the request runs on the new session. Any other error status may come after the server
ran the request (a 500 from its handler, a 504 from a gateway that gave up waiting on it): such a
request fails, it is not resent."""
AFTER_RUN_POSSIBLE = frozenset({502, 503})
"""Of ``NOT_DELIVERED``, the statuses a gateway may also send after its upstream ran the request."""
_LARGE = 1024 * 1024
"""A body larger than this is checked off the event loop."""


ASKS_TO_WAIT = frozenset({429, 503})
"""Statuses whose ``Retry-After`` says when to come back (RFC 9110): the next run waits that long."""


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds a ``Retry-After`` value asks for (delay-seconds, or an HTTP-date; ``now`` is the
    wall clock); None when there is none or it cannot be read."""
    if value is None:
        return None
    value = value.strip()
    # ASCII only: str.isdigit takes a superscript two, which float() refuses, and the ValueError
    # out of the transport dropped the connection.
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now) if when.tzinfo is not None else None


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


class _WatchedStream(httpx2.AsyncByteStream):
    """A response body that reports when it ends or breaks (the server's event stream)."""

    def __init__(self, inner: httpx2.AsyncByteStream, watch: HttpWatch) -> None:
        self._inner = inner
        self._watch = watch

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except httpx2.TransportError as exc:
            self._watch.report(f"event stream broke: {type(exc).__name__}")
            raise
        self._watch.report("event stream closed by the server")

    async def aclose(self) -> None:
        await self._inner.aclose()


class _AnswerStream(httpx2.AsyncByteStream):
    """The event stream that answers one request: it ends when the request's caller is over. It
    notes on the mark an answer that is an error (``CallMark.answered_error``)."""

    def __init__(self, inner: httpx2.AsyncByteStream, mark: CallMark, request_id: object) -> None:
        self._inner = inner
        self._mark = mark
        self._request_id = request_id
        self._line: list[bytes] = []
        """The line still coming, in pieces (joined once it ends: a long event is copied once)."""
        self._data: list[bytes] = []
        """The data lines of the event still coming (an event may spread its JSON over several)."""
        self._after_cr = False
        """The last chunk ended in CR: an LF that starts the next one ends no line."""
        self._erred = False
        """One of them holds ``"error"`` (a JSON string cannot span two lines: checked per line)."""
        self._typed = False
        """The event has a type other than ``message``: the SDK ignores it, so it answers nothing."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self._inner.__aiter__()
        while not self._mark.over:
            # The scope covers the wait for a chunk only, never a yield (the reader's own code).
            with anyio.CancelScope() as scope:
                self._mark.scopes.add(scope)
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    return
                finally:
                    self._mark.scopes.discard(scope)
            if scope.cancelled_caught:
                return
            self._look_for_error(chunk)
            yield chunk

    def _look_for_error(self, chunk: bytes) -> None:
        if not chunk:
            return  # nothing read: a CR just before stays the last thing seen
        # Lines end in CR, LF or CRLF (the event stream's grammar).
        parts = _LINE_END.split(chunk)
        if self._after_cr and chunk.startswith(b"\n"):
            parts = parts[1:]  # the LF of a CRLF cut between two chunks: no (empty) line of its own
        self._after_cr = chunk.endswith(b"\r")
        *ends, rest = parts
        for end in ends:
            line = b"".join([*self._line, end])
            self._line = []
            if not line:
                self._dispatch()
            elif line.startswith(b"data:"):
                self._data.append(line)
                self._erred |= b'"error"' in line
            elif line.startswith(b"event:"):
                self._typed = line[6:].removeprefix(b" ") not in (b"", b"message")
        if rest:
            self._line.append(rest)

    def _dispatch(self) -> None:
        # Only an event that may hold an error is decoded: results and progress are not read twice.
        if self._erred and not self._typed:
            data = b"\n".join(line[5:] for line in self._data)
            self._mark.answered_error |= _check_answer(data, self._request_id)[1]
        self._data, self._erred, self._typed = [], False, False

    async def aclose(self) -> None:
        await self._inner.aclose()


_LINE_END = re.compile(rb"\r\n|\r|\n")


class _Decoded(httpx2.AsyncByteStream):
    """A body sent with a content encoding (a gateway's gzip), decoded as httpx decodes it: through a
    response of its own that holds only that encoding."""

    def __init__(self, inner: httpx2.AsyncByteStream, encodings: list[str]) -> None:
        self._raw = httpx2.Response(200, headers=[("content-encoding", e) for e in encodings], stream=inner)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._raw.aiter_bytes():
            yield chunk

    async def aclose(self) -> None:
        await self._raw.aclose()


NOTICE_WAIT = 2.0
"""Seconds a remote server gets to accept a notification (a cancellation, initialized)."""


_route = msgspec.json.Decoder(mcp.Route)


class _ErrorBody(msgspec.Struct):
    error: mcp.ErrorObject


class _Answer(msgspec.Struct):
    id: mcp.RequestId | None = None
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_error_body = msgspec.json.Decoder(_ErrorBody)
_answer_body = msgspec.json.Decoder(_Answer)


def _message(request: httpx2.Request) -> mcp.Route | None:
    """The JSON-RPC message a POST carries (just its id and method), if it is one."""
    if request.method != "POST":
        return None
    try:
        return _route.decode(request.content)
    except (*DECODE_FAILURES, httpx2.RequestNotRead):
        return None


def _check_answer(body: bytes, request_id: object) -> tuple[str | None, bool]:
    """What is wrong with a JSON answer to the request ``request_id``, if anything, and whether it
    is an error."""
    try:
        answer = _answer_body.decode(body)
    except DECODE_FAILURES as exc:
        return f"an answer that is not a JSON-RPC message: {exc}", False
    mine = str(answer.id) == str(request_id)
    if answer.error is not msgspec.UNSET:
        return None, mine  # one with another id (null: the server could not read ours) is the SDK's to settle
    if not mine:
        return f"an answer to another request (id {answer.id!r}, not {request_id!r})", False
    return None, False


def _stand_in(request: httpx2.Request) -> httpx2.Response:
    """What the SDK is given for an answer mcpd read no further: a 202 (no answer will come), which
    it passes to the request's waiter as an error (if it still waits; the mark says why)."""
    return httpx2.Response(202, request=request)


def _with_body(response: httpx2.Response, body: bytes, request: httpx2.Request) -> httpx2.Response:
    """``response`` with the (decoded) body mcpd read from it."""
    dropped = {"content-encoding", "content-length", "transfer-encoding"}
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in dropped]
    extensions = {k: v for k, v in response.extensions.items() if k in ("http_version", "reason_phrase")}
    return httpx2.Response(
        response.status_code, headers=headers, content=body, request=request, extensions=extensions
    )


async def _close(response: httpx2.Response) -> None:
    # Shielded: a response left half read would keep its connection; closing it is local and quick.
    with anyio.CancelScope(shield=True), anyio.move_on_after(NOTICE_WAIT):
        await response.aclose()


class _Watch(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, watch: HttpWatch) -> None:
        self._inner = inner
        self._watch = watch

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        message = _message(request)
        if message is not None and (message.id is msgspec.UNSET or message.method is msgspec.UNSET):
            # A notification, or an answer to the server's own request (sampling, roots), is
            # accepted at once (202). The SDK posts one inline, holding every later request behind
            # it: a server that stopped answering must not hold them long. Given up on, or refused,
            # it is trouble (the run ends and reconnects); the SDK is told "accepted", as an error
            # here would end its writer with a traceback, and the run with it.
            with anyio.move_on_after(NOTICE_WAIT):
                try:
                    return await self._send(request)
                except httpx2.TransportError:
                    return httpx2.Response(202, request=request)  # reported by ``_send``
            self._watch.report(f"no answer to a notification within {NOTICE_WAIT:g}s")
            return httpx2.Response(202, request=request)
        mark = _CALL.get()
        request_post = (
            message is not None and message.id is not msgspec.UNSET and message.method is not msgspec.UNSET
        )
        resumed = request.method == "GET" and "last-event-id" in request.headers
        if mark is not None and request.method == "GET" and not resumed:
            # The session's own event stream: the SDK starts its task while sending
            # notifications/initialized, so in the handshake's context. It is no request's: its
            # reconnects (with Last-Event-ID, in the same task) must not be taken for the finished
            # handshake's and answered with a stand-in. Set here, this holds for the whole task.
            _CALL.set(None)
            mark = None
        if mark is None or not (request_post or resumed):
            return await self._send(request)
        # A request of ours (or its event stream resumed): it lives only as long as its caller waits.
        if mark.over:
            return _stand_in(request)
        if message is not None:
            mark.request_id = message.id
        with anyio.CancelScope() as scope:
            mark.scopes.add(scope)
            try:
                response = await self._send(request, mark if request_post else None)
                return await self._answer(request, response, mark, mark.request_id)
            finally:
                mark.scopes.discard(scope)
        return _stand_in(request)  # the caller gave up first

    async def _answer(
        self, request: httpx2.Request, response: httpx2.Response, mark: CallMark, request_id: object
    ) -> httpx2.Response:
        """The answer to a request of ours as the SDK is to see it; what is wrong is on ``mark``."""
        try:
            answer = await self._read_answer(request, response, mark, request_id)
        except BaseException:
            await _close(response)
            raise
        if answer is not response:
            await _close(response)
        return answer

    async def _read_answer(
        self, request: httpx2.Request, response: httpx2.Response, mark: CallMark, request_id: object
    ) -> httpx2.Response:
        if response.status_code >= 400:
            # Noted before the body is read: the run may end meanwhile (a 502 to a ping), and the
            # request is then known not to have run all the same.
            mark.status = response.status_code
            mark.lost_session = response.status_code == 404 and "mcp-session-id" in request.headers
            body = await read_at_most(response.aiter_bytes(), ERROR_BODY_BYTES)
            try:
                mark.refusal = body is not None and bool(_error_body.decode(body))
            except DECODE_FAILURES:
                mark.refusal = False
            return _with_body(response, body if mark.refusal and body else b"", request)
        if request.method == "POST" and 200 <= response.status_code < 300:
            mark.delivered = True
        if response.status_code == 202 or not 200 <= response.status_code < 300:
            return response  # accepted (no answer follows), or a redirect: the SDK's own handling
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if kind == "text/event-stream" and isinstance(response.stream, httpx2.AsyncByteStream):
            stream = response.stream
            if "content-encoding" in response.headers:
                # Scanned as the SDK reads it: decoded here, so passed on as plain text.
                stream = _Decoded(stream, response.headers.get_list("content-encoding", split_commas=True))
                for header in ("content-encoding", "content-length"):
                    response.headers.pop(header, None)
            response.stream = _AnswerStream(stream, mark, request_id)
            return response
        if kind != "application/json" or request.method != "POST":
            mark.failure = f"an answer of content type {kind or 'none'!r}, not JSON nor an event stream"
            return _stand_in(request)
        body = await read_at_most(response.aiter_bytes(), MAX_ANSWER_BYTES)
        if body is None:
            mark.failure = f"an answer larger than {MAX_ANSWER_BYTES // 2**20} MiB (the limit)"
            return _stand_in(request)
        # A large body is checked off the event loop: other servers' calls go on meanwhile.
        if len(body) > _LARGE:
            checked = await anyio.to_thread.run_sync(_check_answer, body, request_id)
        else:
            checked = _check_answer(body, request_id)
        mark.failure, mark.answered_error = checked
        return _stand_in(request) if mark.failure else _with_body(response, body, request)

    async def _send(self, request: httpx2.Request, call: CallMark | None = None) -> httpx2.Response:
        """Send ``request``; ``call`` is the mark of the call whose own request it is (not an
        answer to the server's question on its behalf, nor its resumed event stream)."""
        try:
            response = await self._inner.handle_async_request(request)
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
            # No connection, so no byte of this request reached the server: the call may be sent
            # again. Only the call's own request says so of the call.
            if call is not None:
                call.refused = True
            self._watch.report(f"cannot connect: {exc or type(exc).__name__}")
            raise
        except httpx2.TransportError as exc:
            self._watch.report(f"{request.method} failed: {type(exc).__name__}: {exc}")
            raise
        status = response.status_code
        if status in ASKS_TO_WAIT and (wait := retry_after(response.headers.get("retry-after"), time.time())):
            self._watch.back_at = time.monotonic() + wait
        if status == 404 and "mcp-session-id" in request.headers:
            self._watch.report("the server no longer knows our session (HTTP 404)", lost=True)
        elif status in (401, 403):
            self._watch.report(
                f"authentication refused (HTTP {status} {_phrase(status)}): "
                "check the headers configured for this server",
                auth=True,
            )
        elif status in (502, 503, 504):
            self._watch.report(f"HTTP {status} {_phrase(status)} from {request.method}")
        elif request.method == "GET" and isinstance(response.stream, httpx2.AsyncByteStream):
            response.stream = _WatchedStream(response.stream, self._watch)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _logging_callback(on_log: LogCallback) -> LoggingFnT:
    async def on_message(params: mcp_types.LoggingMessageNotificationParams) -> None:
        on_log(LogMessage(level=params.level, data=params.data, logger=params.logger, meta=params.meta))

    return on_message


@contextlib.contextmanager
def _translated(what: str) -> Iterator[None]:
    """The SDK's failures of one request as the errors of ``session``; marks whether it was sent."""
    with track_call() as mark:
        try:
            yield
        except MCPError as exc:
            # What the HTTP layer saw comes first: the SDK turns an HTTP failure into a JSON-RPC
            # error of its own making, which is not the server's word.
            failed = mark.http_error(what)
            if failed is not None:
                raise failed from None
            if exc.code != CONNECTION_CLOSED or mark.answered_error:
                raise Refused(exc.code, exc.error.message, exc.error.data) from None
            if mark.refused:
                raise NotDelivered("the connection was refused") from None
            raise ConnectionLost(describe_mcp_error(exc)) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            # The session was closed before the request could be handed to the transport.
            raise NotDelivered from None
        except (httpx2.TransportError, OSError) as exc:
            raise ConnectionLost(f"{type(exc).__name__}: {exc}") from None
        except pydantic.ValidationError as exc:
            raise Malformed(f"an invalid answer to {what}: {exc.errors()[0]['msg']}") from None


def _request_meta(meta: dict[str, Any] | None) -> mcp_types.RequestParamsMeta | None:
    return cast("mcp_types.RequestParamsMeta", meta) if meta else None


def _page(cursor: str | None) -> mcp_types.PaginatedRequestParams | None:
    return mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None


class _ProgressTap:
    """Gives each progress notification of a call of ours to that call's relay as the server sent it,
    read off the SDK's read stream (``tapping``): the SDK's own progress callback gets floats, and no
    ``_meta``. A call's progress token is ours (the SDK's is its request id, given a callback), so
    the SDK finds no request of its own for the notification and leaves it alone."""

    def __init__(self) -> None:
        self._relays: dict[str, ProgressCallback] = {}
        self._tokens = itertools.count(1)

    @contextlib.contextmanager
    def relayed(
        self, meta: dict[str, Any] | None, on_progress: ProgressCallback | None
    ) -> Iterator[dict[str, Any] | None]:
        """The request's ``_meta`` with a progress token of ours, whose notifications go to
        ``on_progress`` until the request ends (``meta`` itself when no one asked for progress)."""
        if on_progress is None:
            yield meta
            return
        token = f"mcpd-{next(self._tokens)}"
        self._relays[token] = on_progress
        try:
            yield {**(meta or {}), "progressToken": token}
        finally:
            del self._relays[token]

    def tapping(self, inner: Any) -> Any:
        """The SDK's read stream ``inner``, watched for progress (the session reads it through this)."""
        return _TappedStream(inner, self)

    def seen(self, item: object) -> None:
        if not self._relays or not isinstance(item, SessionMessage):
            return
        message = item.message
        if not isinstance(message, mcp_types.JSONRPCNotification) or message.method != mcp.PROGRESS:
            return
        try:
            params = msgspec.convert(message.params, ProgressParams)
        except msgspec.ValidationError:
            return
        relay = self._relays.get(str(params.progress_token))
        if relay is None:
            return
        try:
            relay(params.progress, params.total, params.message, params.meta)
        except Exception:
            # This runs in the SDK's receive loop: a relay that fails must not end the session.
            log.exception("progress.relay_failed", token=str(params.progress_token))


class _TappedStream:
    """The SDK's ``ReadStream`` protocol over ``inner``, each item shown to the tap first. The
    sender's context is ``inner``'s (``last_context``, which the SDK reads after each item)."""

    def __init__(self, inner: Any, tap: _ProgressTap) -> None:
        self._inner = inner
        self._tap = tap

    @property
    def last_context(self) -> contextvars.Context | None:
        context: contextvars.Context | None = getattr(self._inner, "last_context", None)
        return context

    async def receive(self) -> Any:
        item = await self._inner.receive()
        self._tap.seen(item)
        return item

    def __aiter__(self) -> _TappedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _TappedStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class _ReasonedWrites:
    """The SDK's ``WriteStream`` protocol over ``inner``: the cancellation the SDK sends for a request
    whose caller cancelled it with a reason (``CancelReason``: a host's) carries that reason, not the
    SDK's own "caller cancelled". The SDK writes it in the caller's task while it handles that
    cancellation, so the cancellation is the exception being handled there (``sys.exc_info``)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def send(self, item: Any) -> None:
        await self._inner.send(_with_reason(item, cancel_reason(sys.exc_info()[1])))

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _ReasonedWrites:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _with_reason(item: Any, reason: str | None) -> Any:
    if reason is None or not isinstance(item, SessionMessage):
        return item
    message = item.message
    if not isinstance(message, mcp_types.JSONRPCNotification) or message.method != mcp.CANCELLED:
        return item
    params = {**(message.params or {}), "reason": reason}
    return SessionMessage(message=message.model_copy(update={"params": params}), metadata=item.metadata)


class SdkSession:
    """``session.Session`` over the SDK's ``ClientSession`` (a remote server's)."""

    def __init__(
        self, session: ClientSession, server: str, progress: _ProgressTap, paged: Paged | None
    ) -> None:
        self._session = session
        self._server = server
        self._progress = progress
        self._paged = paged

    async def initialize(self) -> ServerInfo:
        with _translated("initialize"):
            try:
                result = await self._session.initialize()
            except RuntimeError as exc:  # the SDK's word for a protocol revision it does not speak
                raise Malformed(str(exc)) from None
        info = result.server_info
        # Empty is none, as on the stdio session.
        title, instructions = info.title or None, result.instructions or None
        return ServerInfo(name=info.name, version=info.version, title=title, instructions=instructions)

    async def list_tools(self) -> tuple[ToolInfo, ...]:
        async def fetch(cursor: str | None) -> tuple[list[ToolInfo], str | None]:
            with _translated("tools/list"):
                page = await self._session.list_tools(params=_page(cursor))
            return _items(page.tools, tool_info, self._server, "tools/list"), page.next_cursor

        return await every_page(
            fetch, lambda t: t.name, server=self._server, what="tools/list", paged=self._paged
        )

    async def _resources(self) -> tuple[ResourceInfo, ...]:
        async def fetch(cursor: str | None) -> tuple[list[ResourceInfo], str | None]:
            with _translated("resources/list"):
                page = await self._session.list_resources(params=_page(cursor))
            return _items(page.resources, resource_info, self._server, "resources/list"), page.next_cursor

        return await every_page(
            fetch, lambda r: r.uri, server=self._server, what="resources/list", paged=self._paged
        )

    async def _templates(self) -> tuple[ResourceTemplateInfo, ...]:
        async def fetch(cursor: str | None) -> tuple[list[ResourceTemplateInfo], str | None]:
            what = "resources/templates/list"
            with _translated(what):
                page = await self._session.list_resource_templates(params=_page(cursor))
            return _items(page.resource_templates, template_info, self._server, what), page.next_cursor

        return await every_page(
            fetch,
            lambda t: t.uri_template,
            server=self._server,
            what="resources/templates/list",
            paged=self._paged,
        )

    async def _prompts(self) -> tuple[PromptInfo, ...]:
        async def fetch(cursor: str | None) -> tuple[list[PromptInfo], str | None]:
            with _translated("prompts/list"):
                page = await self._session.list_prompts(params=_page(cursor))
            return _items(page.prompts, prompt_info, self._server, "prompts/list"), page.next_cursor

        return await every_page(
            fetch, lambda p: p.name, server=self._server, what="prompts/list", paged=self._paged
        )

    async def list_surface(self) -> Surface:
        capabilities = self._session.server_capabilities
        if capabilities is None:
            return Surface()
        resources = capabilities.resources is not None
        return await surface_of(
            self._resources if resources else None,
            self._templates if resources else None,
            self._prompts if capabilities.prompts is not None else None,
        )

    async def ping(self) -> None:
        with _translated("ping"):
            await self._session.send_ping()

    async def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any],
        deadline: float,
        on_progress: ProgressCallback | None,
        meta: dict[str, Any] | None = None,
    ) -> ToolResult:
        """``tools/call`` through the SDK; a JSON-RPC error answer is a tool error, as on the stdio path.

        Raises ``TypeError`` for a result of a kind mcpd does not relay.
        """

        try:
            with (
                anyio.fail_after(max(0.0, deadline - anyio.current_time())),
                self._progress.relayed(meta, on_progress) as sent_meta,
                _translated("tools/call"),
            ):
                result = await self._session.call_tool(tool, arguments, meta=_request_meta(sent_meta))
        except Refused as exc:
            return ToolResult.refused(exc.code, exc.message, exc.data)
        if not isinstance(result, mcp_types.CallToolResult):
            raise TypeError(f"unsupported result type {type(result).__name__}")
        return ToolResult(
            content=[
                block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content
            ],
            structured_content=result.structured_content,
            # The SDK fills in False for a result without it: what the server sent is in the fields set.
            is_error=result.is_error if "is_error" in result.model_fields_set else None,
            meta=result.meta,
        )

    async def read_resource(self, uri: str, meta: dict[str, Any] | None = None) -> ReadResult:
        with _translated("resources/read"):
            result = await self._session.read_resource(uri, meta=_request_meta(meta))
        try:
            parts = [contents(_sent(c)) for c in result.contents]
        except DECODE_FAILURES as exc:
            raise Malformed(f"an invalid answer to resources/read: {exc}") from None
        return ReadResult(contents=parts, meta=result.meta)

    async def get_prompt(
        self, name: str, arguments: dict[str, str], meta: dict[str, Any] | None = None
    ) -> PromptResult:
        with _translated("prompts/get"):
            result = await self._session.get_prompt(name, arguments or None, meta=_request_meta(meta))
        messages = [PromptMessage(role=m.role, content=_dump(m.content)) for m in result.messages]
        return PromptResult(description=result.description, messages=messages, meta=result.meta)

    def can_subscribe(self) -> bool:
        capabilities = self._session.server_capabilities
        resources = capabilities.resources if capabilities is not None else None
        return resources is not None and bool(resources.subscribe)

    async def subscribe_resource(self, uri: str) -> None:
        # A plain request: the SDK's ``subscribe_resource`` warns that the 2026 revision drops the
        # method, which the servers that declare ``resources.subscribe`` still speak.
        params = mcp_types.SubscribeRequestParams(uri=uri)
        with _translated("resources/subscribe"):
            await self._session.send_request(mcp_types.SubscribeRequest(params=params), mcp_types.EmptyResult)

    async def roots_changed(self) -> None:
        with _translated(mcp.ROOTS_LIST_CHANGED):
            await self._session.send_roots_list_changed()

    async def set_log_level(self, level: mcp.LogLevel) -> bool:
        capabilities = self._session.server_capabilities
        if capabilities is None or capabilities.logging is None:
            return False
        # A plain request, as for subscriptions: the SDK's ``set_logging_level`` warns that the 2026
        # revision drops logging, which the servers that declare it still speak.
        request = mcp_types.SetLevelRequest(params=mcp_types.SetLevelRequestParams(level=level))
        with _translated("logging/setLevel"):
            await self._session.send_request(request, mcp_types.EmptyResult)
        return True

    async def unsubscribe_resource(self, uri: str) -> None:
        params = mcp_types.UnsubscribeRequestParams(uri=uri)
        with _translated("resources/unsubscribe"):
            await self._session.send_request(
                mcp_types.UnsubscribeRequest(params=params), mcp_types.EmptyResult
            )

    async def complete(
        self,
        ref: CompletionRef,
        argument: tuple[str, str],
        context: dict[str, str] | None,
        meta: dict[str, Any] | None = None,
    ) -> CompleteResult:
        capabilities = self._session.server_capabilities
        if capabilities is None or capabilities.completions is None:
            return CompleteResult(completion=Completion())
        reference = (
            mcp_types.PromptReference(type="ref/prompt", name=ref.name)
            if isinstance(ref, PromptRef)
            else mcp_types.ResourceTemplateReference(type="ref/resource", uri=ref.uri)
        )
        name, value = argument
        # A plain request: the SDK's ``complete`` takes no ``_meta``.
        params = mcp_types.CompleteRequestParams(
            ref=reference,
            argument=mcp_types.CompletionArgument(name=name, value=value),
            context=mcp_types.CompletionContext(arguments=context) if context is not None else None,
            _meta=_request_meta(meta),
        )
        with _translated("completion/complete"):
            result = await self._session.send_request(
                mcp_types.CompleteRequest(params=params), mcp_types.CompleteResult
            )
        found = result.completion
        completion = Completion(values=list(found.values), total=found.total, has_more=found.has_more)
        return CompleteResult(completion=completion, meta=result.meta)


@contextlib.asynccontextmanager
async def open_http_session(
    config: ServerConfig, watch: HttpWatch, hooks: SessionHooks
) -> AsyncIterator[SdkSession]:
    """A client session to a streamable HTTP server, its HTTP layer reporting to ``watch``."""
    assert config.url is not None
    # No read timeout: the event stream stays open for good, and every request already has
    # its own deadline (calls, pings, the handshake), at which its HTTP request is closed
    # (``track_call``).
    timeout = httpx2.Timeout(config.connect_timeout, read=None)
    transport = _Watch(httpx2.AsyncHTTPTransport(), watch)
    headers = dict(config.headers) or None

    async def on_message(message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            hooks.tools_changed()
        elif isinstance(
            message, mcp_types.ResourceListChangedNotification | mcp_types.PromptListChangedNotification
        ):
            hooks.surface_changed()
        elif isinstance(message, mcp_types.ResourceUpdatedNotification) and hooks.resource_updated:
            hooks.resource_updated(str(message.params.uri), message.params.meta)

    callbacks = _server_request_callbacks(hooks.ask) if hooks.ask is not None else {}
    progress = _ProgressTap()
    logging = _logging_callback(hooks.log) if hooks.log is not None else None
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout, transport=transport) as http,
        streamable_http_client(config.url, http_client=http, max_sse_event_size=MAX_ANSWER_BYTES) as (
            read,
            write,
        ),
        ClientSession(
            progress.tapping(read),
            _ReasonedWrites(write),
            message_handler=on_message,
            client_info=_CLIENT_INFO,
            logging_callback=logging,
            **callbacks,
        ) as session,
    ):
        yield SdkSession(session, config.name, progress, hooks.paged)


def is_connection_error(exc: BaseException) -> bool:
    """An HTTP-level failure: the server is not there, or the connection to it broke. (Requests raise
    the session's errors; the SDK's own come out of its transport tasks, which end the run.)"""
    return isinstance(exc, ConnectionLost | NotDelivered | httpx2.TransportError | OSError) or (
        isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED
    )


# -- requests from the server ----------------------------------------------------------------------

_SAMPLING_RESULT: pydantic.TypeAdapter[
    mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools
] = pydantic.TypeAdapter(mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools)
Answer = TypeVar("Answer", bound=pydantic.BaseModel)


def _answer(
    method: str, reply: ServerReply, parse: Callable[[dict[str, Any]], Answer]
) -> Answer | mcp_types.ErrorData:
    """The SDK's form of ``reply``: the result as the SDK's model, or an ``ErrorData``."""
    if reply.error is not None:
        return mcp_types.ErrorData(code=reply.error.code, message=reply.error.message, data=reply.error.data)
    try:
        return parse(reply.result or {})
    except pydantic.ValidationError as exc:
        message = f"mcpd: the host's answer to {method} is not a valid result: {exc.errors()[0]['msg']}"
        return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=message)


def _server_request_callbacks(ask: Ask) -> dict[str, Any]:
    """``ClientSession`` keyword arguments that pass the server's requests to ``ask``.

    With these callbacks the session announces sampling (with context and tools), elicitation
    (form and URL) and roots in ``initialize``: mcpd relays them, and whether a given host
    can answer is decided per request, by whoever ``ask`` finds (see ``mcpd.front.server_requests``).
    """

    answering = 0

    async def relay(
        method: str, params: dict[str, Any], parse: Callable[[dict[str, Any]], Answer]
    ) -> Answer | mcp_types.ErrorData:
        # The SDK runs each of the server's requests in a task of its own; as on stdio
        # (``server_asks``), at most MAX_SERVER_REQUESTS wait on hosts, the rest are refused at once.
        nonlocal answering
        if answering >= MAX_SERVER_REQUESTS:
            return mcp_types.ErrorData(code=mcp.TOO_MANY_REQUESTS, message=TOO_MANY_ASKS)
        answering += 1
        try:
            return _answer(method, await ask(method, params), parse)
        finally:
            answering -= 1

    async def sampling(
        context: ClientRequestContext, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools | mcp_types.ErrorData:
        return await relay(SAMPLING, _dump(params), _SAMPLING_RESULT.validate_python)

    async def elicitation(
        context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        return await relay(ELICITATION, _dump(params), mcp_types.ElicitResult.model_validate)

    async def roots(context: ClientRequestContext) -> mcp_types.ListRootsResult | mcp_types.ErrorData:
        return await relay(ROOTS, {}, mcp_types.ListRootsResult.model_validate)

    return {
        "sampling_callback": sampling,
        "elicitation_callback": elicitation,
        "list_roots_callback": roots,
        "sampling_capabilities": mcp_types.SamplingCapability(
            context=mcp_types.SamplingContextCapability(), tools=mcp_types.SamplingToolsCapability()
        ),
    }
