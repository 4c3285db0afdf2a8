"""Requests from servers (sampling, elicitation, roots), routed to the caller whose tool call is running.

A server asks its client while it handles a tool call; mcpd is that client for every
caller at once, so it must find who made the call. The rule, in order:

1. Exact: when the request reaches mcpd in the context of the call's own task (streamable
   HTTP servers send it on that call's response stream, and the SDK runs the callback in
   the context of the task that sent the call), that call's caller is asked.
2. Otherwise (stdio carries no related-request id): the caller of the calls in flight to
   that server, if they all come from one caller (one host session or one client
   connection). When several callers have calls in flight the request cannot be placed,
   and none is asked: a guess would show one host's prompt or form to another and hand
   that one's answer back as the first one's.

A server's log message is placed by the same rule (``related``), except that of several calls of
one caller it goes with the oldest: the call likeliest to end next, and the message's own call when
the server handles one call at a time. A message placed nowhere is no call's: every host that sees
the server gets it unasked.

Outside any call, or when the caller did not declare the capability, the server gets a
JSON-RPC error (``NOT_AVAILABLE``) saying why; a caller that does not answer within
``ANSWER_TIMEOUT``, or whose call ends first, gets the server a ``TIMED_OUT`` error.

Callers are ``Answerer``s: a host's MCP session (``HostAnswerer``, a JSON-RPC request to
the host) and a client-library connection (``ClientAnswerer``, a ``server.request``
notification answered with ``server.reply``).
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import secrets
import weakref
from collections.abc import Callable
from typing import Any, Protocol
from weakref import WeakKeyDictionary

import anyio
import msgspec
import structlog

from mcpd.errors import DECODE_FAILURES
from mcpd.model import mcp
from mcpd.model.requests import (
    CAPABILITY_OF,
    ELICITATION,
    ELICITATION_URL,
    NOT_AVAILABLE,
    SAMPLING,
    SAMPLING_TOOLS,
    SERVER_REQUEST_NOTIFICATION,
    TIMED_OUT,
    ClientCapabilities,
    ReplyError,
    ServerAsk,
    ServerReply,
    ServerReplyParams,
    ServerRequest,
)
from mcpd.tally import Tally

log = structlog.get_logger("mcpd.front")

ANSWER_TIMEOUT = 300.0
"""Seconds a caller has to answer a server's request (a person may be answering an elicitation)."""


class Answerer(Protocol):
    """A caller that may be asked a server's request."""

    def capabilities(self) -> frozenset[str]:
        """The client capabilities it declared (``sampling``, ``elicitation``, ``roots``)."""
        ...

    async def ask(self, request: ServerRequest, origin: mcp.RequestId | None) -> ServerReply:
        """Pass ``request`` on and wait for the answer (the router bounds the wait); ``origin`` is
        the caller's own id of the request whose tool call this is, if it has one."""
        ...


class Notifiable(Protocol):
    """A client-library connection: it can be sent a notification."""

    def notify(self, method: str, params: msgspec.Struct) -> bool:
        """False when ``params`` cannot be carried (an integer beyond 64 bits)."""
        ...


class RunningCall:
    """One tool call in flight: to which server, for whom, and the requests it is answering."""

    __slots__ = ("answerer", "asking", "client", "origin", "server", "session")

    def __init__(self, server: str, answerer: Answerer | None, client: str | None, session: str) -> None:
        self.server = server
        self.answerer = answerer
        self.client = client
        self.session = session
        self.origin = HOST_REQUEST.get()
        self.asking: set[anyio.CancelScope] = set()

    @property
    def label(self) -> str:
        """Who made the call, for messages (built only when one is needed: calls are the hot path)."""
        return f"{self.client or 'a client'} (session {self.session})"


_current: contextvars.ContextVar[RunningCall | None] = contextvars.ContextVar(
    "mcpd_server_call", default=None
)

HOST_REQUEST: contextvars.ContextVar[mcp.RequestId | None] = contextvars.ContextVar(
    "mcpd_host_request", default=None
)
"""The host's id of the request a host session is handling in this task: a tool call begun here
is that request's, and what its server asks goes with that request's answer (HTTP)."""


_REFUSED = Tally()


def _refusal(request: ServerRequest, why: str) -> ServerReply:
    message = f"mcpd cannot pass {request.method} from {request.server} to a host: {why}"
    if _REFUSED.due():  # a server may ask thousands of times
        log.info(
            "server_request.refused",
            server=request.server,
            method=request.method,
            reason=why,
            count=_REFUSED.count,
        )
    return ServerReply(error=ReplyError(NOT_AVAILABLE, message))


class ServerRequests:
    """The router: ``begin``/``end`` bracket each tool call, ``route`` answers a server's request."""

    def __init__(self, timeout: float = ANSWER_TIMEOUT) -> None:
        self.timeout = timeout
        self._calls: dict[str, list[RunningCall]] = {}
        self.clients: WeakKeyDictionary[Notifiable, ClientAnswerer] = WeakKeyDictionary()
        """The client-library connections that declared capabilities (forgotten with the connection)."""

    def begin(
        self, server: str, answerer: Answerer | None, client: str | None, session: str
    ) -> tuple[RunningCall, contextvars.Token[Any]]:
        """A tool call to ``server`` starts in this task, made by ``client`` in ``session``, for
        ``answerer`` (None: it answers nothing)."""
        call = RunningCall(server, answerer, client, session)
        self._calls.setdefault(server, []).append(call)
        return call, _current.set(call)

    def end(self, call: RunningCall, token: contextvars.Token[Any]) -> None:
        """The call ended: what it was still being asked is given up."""
        _current.reset(token)
        calls = self._calls[call.server]
        calls.remove(call)
        if not calls:
            del self._calls[call.server]
        for scope in call.asking:
            scope.cancel()

    def related(self, server: str) -> RunningCall | None:
        """The tool call to ``server`` that a log message it sends now belongs to (see the module
        docstring); None when it belongs to none, or to one of several callers' calls."""
        exact = _current.get()
        candidates = self._calls.get(server, [])
        if exact is not None and exact.server == server:
            return exact if exact in candidates else None
        if not candidates or len({id(call.answerer) for call in candidates}) > 1:
            return None
        return candidates[0]

    def _pick(self, request: ServerRequest, capability: str) -> RunningCall | ServerReply:
        exact = _current.get()
        candidates = self._calls.get(request.server, [])
        if exact is not None and exact.server == request.server:
            if exact not in candidates:  # a late request on the stream of a call that has ended
                return _refusal(request, f"the tool call it belongs to, by {exact.label}, has ended")
            candidates = [exact]
        if not candidates:
            return _refusal(
                request,
                f"no tool call to {request.server} is in flight (a server may only ask during a call)",
            )
        callers = {id(call.answerer) for call in candidates}  # None: one caller that answers nothing
        if len(callers) > 1:
            # Asking one of them would hand one caller's question (a prompt, a form, its answer)
            # to another: none is asked.
            return _refusal(
                request,
                f"tool calls from {len(callers)} callers are in flight to {request.server}, and its request"
                " does not say which call it belongs to",
            )
        call = candidates[-1]
        if call.answerer is None or capability not in call.answerer.capabilities():
            return _refusal(
                request, f"the caller of the tool ({call.label}) did not declare the {capability} capability"
            )
        return call

    async def route(self, request: ServerRequest) -> ServerReply:
        """Ask the caller that the rule picks (see the module docstring); never raises."""
        capability = CAPABILITY_OF.get(request.method)
        if capability is None:
            return _refusal(request, "mcpd does not relay this method")
        if request.method == SAMPLING and ("tools" in request.params or "toolChoice" in request.params):
            # mcpd announces sampling with tools on behalf of every host; the spec lets only a
            # host that declared it receive such a request.
            capability = SAMPLING_TOOLS
        elif request.method == ELICITATION and request.params.get("mode") == "url":
            # Likewise a URL to open: a form-only host would answer for a page nobody saw.
            capability = ELICITATION_URL
        call = self._pick(request, capability)
        if isinstance(call, ServerReply):
            return call
        assert call.answerer is not None
        why = f"the tool call ended before {call.label} answered"  # unless the timeout comes first
        with anyio.CancelScope() as scope:
            call.asking.add(scope)
            try:
                with anyio.fail_after(self.timeout):
                    reply = await call.answerer.ask(request, call.origin)
            except TimeoutError:
                why = f"{call.label} did not answer within {self.timeout:g}s"
            else:
                log.debug(
                    "server_request.answered", server=request.server, method=request.method, caller=call.label
                )
                return reply
            finally:
                call.asking.discard(scope)
        log.info("server_request.unanswered", server=request.server, method=request.method, reason=why)
        return ServerReply(error=ReplyError(TIMED_OUT, f"mcpd got no answer to {request.method}: {why}"))

    def client(self, conn: Notifiable) -> ClientAnswerer:
        """The answerer of a client-library connection (made on first use)."""
        answerer = self.clients.get(conn)
        if answerer is None:
            answerer = self.clients[conn] = ClientAnswerer(conn)
        return answerer


_numbers = itertools.count(secrets.randbelow(2**30) + 1)
"""Numbers of the requests passed to callers, shared by every caller of this daemon run: a caller
may outlive the run (a bridge, a reconnecting client, an HTTP session resumed by the next daemon)
and answer late, so a number is never given twice in a run, and a run starts at a random point
so that it does not give the last run's numbers either (below 2**30: a 32-bit integer for a billion
requests, which every msgpack and JSON library keeps an integer). Counting from 1 per caller, the
answer to a question of a killed daemon settled the first question the next daemon asked."""


class _Pending:
    """Requests sent to a caller and not answered yet, by id."""

    def __init__(self) -> None:
        self._waiting: dict[int, asyncio.Future[ServerReply]] = {}

    def open(self) -> tuple[int, asyncio.Future[ServerReply]]:
        request_id = next(_numbers)
        future: asyncio.Future[ServerReply] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        return request_id, future

    def waits(self, request_id: int) -> bool:
        return request_id in self._waiting

    def close(self, request_id: int) -> bool:
        """Forget ``request_id``; True if it was still unanswered."""
        return self._waiting.pop(request_id, None) is not None

    def settle(self, request_id: int, reply: ServerReply) -> bool:
        """Hand ``reply`` to whoever waits for ``request_id``; False when nobody does (any more)."""
        future = self._waiting.pop(request_id, None)
        if future is None or future.done():
            return False
        future.set_result(reply)
        return True


class ClientAnswerer:
    """A client-library connection: ``server.request`` out, ``server.reply`` back."""

    def __init__(self, conn: Notifiable) -> None:
        self.declared = ClientCapabilities()
        # Weak, so that the connection (a key of ``ServerRequests.clients``) can go.
        self._conn = weakref.ref(conn)
        self._pending = _Pending()

    def capabilities(self) -> frozenset[str]:
        return self.declared.names()

    async def ask(self, request: ServerRequest, origin: mcp.RequestId | None) -> ServerReply:
        request_id, answered = self._pending.open()
        try:
            ask = ServerAsk(
                id=request_id, server=request.server, method=request.method, params=request.params
            )
            conn = self._conn()
            if conn is None:
                return ServerReply(error=ReplyError(NOT_AVAILABLE, "the caller's connection is gone"))
            if not conn.notify(SERVER_REQUEST_NOTIFICATION, ask):
                why = "the request cannot be carried over mcpd's socket (an integer beyond 64 bits?)"
                return ServerReply(error=ReplyError(mcp.INTERNAL_ERROR, why))
            return await answered
        finally:
            self._pending.close(request_id)

    def reply(self, params: ServerReplyParams) -> bool:
        if self._pending.settle(params.id, ServerReply(result=params.result, error=params.error)):
            return True
        log.debug("server_request.stray_reply", id=params.id)  # too late, or asked by another run
        return False


_host_reply = msgspec.json.Decoder(mcp.IncomingReply)
_route = msgspec.json.Decoder(mcp.Route)
_REQUEST_PREFIX = f"mcpd-ask-{secrets.token_hex(4)}-"
"""Our requests to hosts are ``mcpd-ask-<run>-N``: the run's token tells an answer to a request of
this daemon run from a late one to a request of another run (see ``_numbers``)."""


def _request_number(wire_id: object) -> int | None:
    """N of a request id ``mcpd-ask-<run>-N`` of this run (None for any other id)."""
    if not isinstance(wire_id, str) or not wire_id.startswith(_REQUEST_PREFIX):
        return None
    number = wire_id[len(_REQUEST_PREFIX) :]
    if not (number.isascii() and number.isdigit()) or number.startswith("0") or len(number) > 19:
        return None  # one spelling per id ("07" is not our 7), and none too long for int()
    return int(number)


class HostAnswerer:
    """A host's MCP session: a JSON-RPC request to the host, answered by its JSON-RPC response.

    Its capabilities are those the host declared in ``initialize`` (``mcpd bridge`` relays
    the host's own ``initialize`` unchanged).
    """

    def __init__(
        self, send: Callable[[msgspec.Struct], None], init: Callable[[], mcp.InitializeParams | None]
    ) -> None:
        self._send = send
        self._init = init
        self._pending = _Pending()
        self._origins: dict[str, mcp.RequestId] = {}

    def capabilities(self) -> frozenset[str]:
        init = self._init()
        if init is None:
            return frozenset()
        declared = init.capabilities
        names: set[str] = {name for name in ("sampling", "elicitation", "roots") if name in declared}
        sampling = declared.get("sampling")
        if isinstance(sampling, dict) and "tools" in sampling:
            names.add(SAMPLING_TOOLS)
        elicitation = declared.get("elicitation")
        if isinstance(elicitation, dict) and "url" in elicitation:
            names.add(ELICITATION_URL)
        return frozenset(names)

    async def ask(self, request: ServerRequest, origin: mcp.RequestId | None) -> ServerReply:
        request_id, answered = self._pending.open()
        wire_id = f"{_REQUEST_PREFIX}{request_id}"
        if origin is not None:
            self._origins[wire_id] = origin
        try:
            # No params as none: a server asks roots/list without any (mcpd reads that as empty).
            self._send(mcp.Request(wire_id, request.method, request.params or msgspec.UNSET))
            return await answered
        finally:
            self._origins.pop(wire_id, None)
            if self._pending.close(request_id):  # given up: the host may stop asking its user
                self._send(mcp.Notification(mcp.CANCELLED, mcp.CancelledParams(wire_id, "no longer needed")))

    def origin_of(self, wire_id: object) -> mcp.RequestId | None:
        """The host's request on whose behalf mcpd sent request ``wire_id`` to the host (if any)."""
        return self._origins.get(wire_id) if isinstance(wire_id, str) else None

    def awaits(self, wire_id: object) -> bool:
        """Whether a request of ours with this id waits for the host's answer."""
        request_id = _request_number(wire_id)
        return request_id is not None and self._pending.waits(request_id)

    def reply(self, data: bytes) -> None:
        """A JSON-RPC response from the host; one that answers none of our requests is ignored."""
        try:
            response = _host_reply.decode(data)
        except DECODE_FAILURES as exc:
            self._malformed(data, exc)
            return
        request_id = _request_number(response.id)
        if request_id is None or not self._pending.waits(request_id):
            # An answer to a request of another run (the host answered a daemon that is gone), or
            # one given up already: it must not settle any other request.
            log.debug("host.stray_reply", id=response.id)
            return
        if response.error is not None:
            error = response.error
            detail = None if isinstance(error.data, msgspec.UnsetType) else error.data
            reply = ServerReply(error=ReplyError(error.code, error.message, detail))
        else:
            reply = ServerReply(result=response.result if isinstance(response.result, dict) else {})
        self._pending.settle(request_id, reply)

    def _malformed(self, data: bytes, exc: Exception) -> None:
        """A response to one of our requests that is not JSON-RPC (``"error": "boom"``): its server
        gets an error now. Dropped, it left the call waiting out its whole timeout (60 s)."""
        try:
            request_id = _request_number(_route.decode(data).id)
        except DECODE_FAILURES:
            return  # not even an id: nothing to answer
        if request_id is None:
            return
        log.warning("host.reply_malformed", error=str(exc))
        why = f"the host's answer was not a JSON-RPC response: {exc}"
        self._pending.settle(request_id, ServerReply(error=ReplyError(mcp.INVALID_REQUEST, why)))
