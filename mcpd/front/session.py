"""``HostSession``: one MCP server session for one host, over any transport.

It consumes JSON-RPC messages (``receive(bytes)``) and emits them through a ``send(bytes)``
callable, so the socket relay (``mcpd bridge``) and, later, Streamable HTTP drive the
same engine. Requests are declared once each in ``_REQUESTS`` (method -> params struct
-> handler).

What a host sees: the meta tools (``mcpd.front.meta``) plus the tools of the servers
this session connected (every tool with ``expose_all``), ``tools/list_changed`` when
that set changes, progress of its calls, and cancellation that reaches the server. The
same servers' resources, templates and prompts (``mcpd.front.host_surface``), with their
``list_changed``, completions, and the updates of the resources it subscribed to
(``mcpd.front.subscriptions``; its subscriptions end with the session).
The session remembers its last search query: a call within ``LEARNING_WINDOW`` of it
is recorded with that query, so ranking learns which tools answer which words.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import msgspec
import structlog

import mcpd
from mcpd.discovery.render import estimate_tokens, render
from mcpd.errors import (
    DECODE_FAILURES,
    McpdError,
    UnknownResource,
    UnknownServer,
    UnknownTool,
    server_refusal,
)
from mcpd.front import calls, host_surface, meta, surface
from mcpd.front.behind import ALWAYS_ROOM, Advice, Behind
from mcpd.front.core import Caller, Core
from mcpd.front.rpc_errors import RpcError, rpc_error, server_error
from mcpd.front.server_requests import HOST_REQUEST, HostAnswerer, RunningCall
from mcpd.model import mcp
from mcpd.model.logs import LogMessage
from mcpd.model.protocol import ConnectResult, ToolsCallParams, ToolsListParams
from mcpd.model.resources import ReadParams
from mcpd.model.servers import (
    ResourceUpdated,
    ServerEvent,
    StateChanged,
    SurfaceChanged,
    ToolsChanged,
    ends_subscription,
)
from mcpd.model.states import LIVE_STATES, ServerState
from mcpd.model.tools import Rendered, ToolEntry, ToolResult
from mcpd.model.uris import qualify_uri, split_uri
from mcpd.registry import reserved
from mcpd.supervisor.session import CancelReason, ProgressCallback

log = structlog.get_logger("mcpd.front")

LEARNING_WINDOW = 600.0
"""Seconds after a search during which the session's calls are attributed to its query."""
COLD_START_WAIT = 2.0
"""Longest ``initialize`` waits for the servers' first start attempts (a daemon just started): long
enough for a usual server's handshake, short enough that a slow or hung one never holds the host (the
instructions list it with its state; its tools arrive with ``list_changed``)."""
PRECONNECT_MARGIN = 5.0
"""Seconds beyond a server's connect timeout that a ``--connect`` waits before reporting it."""
HELD_LIMIT = 100
"""Notifications kept for a host that has not sent ``notifications/initialized`` (the oldest go):
hosts send it right after ``initialize``, so only one that never does reaches the limit."""
UNKNOWN_SHOWN = 10
"""Names of unknown ``preconnect`` servers given in the one line that reports them."""

_encoder = msgspec.json.Encoder()
_incoming = msgspec.json.Decoder(mcp.Incoming)
_CAPABILITIES = {
    "tools": {"listChanged": True},
    "logging": {},
    "resources": {"subscribe": True, "listChanged": True},
    "prompts": {"listChanged": True},
    "completions": {},
}
_EMPTY_RESULT = mcp.Empty()
_GAVE_UP = (ServerState.FAILED, ServerState.STOPPED, ServerState.DISABLED)


@dataclass(frozen=True)
class _Handler:
    params: type[msgspec.Struct]
    run: Callable[[HostSession, Any], Awaitable[msgspec.Struct | dict[str, Any]]]


_REQUESTS: dict[str, _Handler] = {}


def _request(method: str, params: type[msgspec.Struct]) -> Callable[[Any], Any]:
    def register(run: Callable[[HostSession, Any], Awaitable[msgspec.Struct | dict[str, Any]]]) -> Any:
        _REQUESTS[method] = _Handler(params, run)
        return run

    return register


_NAME_KEPT = 200
"""Characters of a host's name and version a session's state keeps."""


def _resumable(init: mcp.InitializeParams | None) -> mcp.InitializeParams | None:
    """What of the host's ``initialize`` a new daemon needs: the revision, the host's name, and the
    capabilities mcpd reads (``HostAnswerer``). A host may declare kilobytes of others; the state
    goes back in a reconnecting relay's hello, which must stay within its 64 KiB."""
    if init is None:
        return None
    declared = init.capabilities
    kept: dict[str, Any] = {}
    for name, extension in (("sampling", "tools"), ("elicitation", "url"), ("roots", None)):
        value = declared.get(name)
        if value is not None:
            kept[name] = {extension: {}} if isinstance(value, dict) and extension in value else {}
    info = init.client_info
    client = mcp.Implementation(info.name[:_NAME_KEPT], info.version[:_NAME_KEPT])
    return mcp.InitializeParams(init.protocol_version[:_NAME_KEPT], kept, client)


def _text(text: str, *, error: bool = False, structured: Any = msgspec.UNSET) -> mcp.CallToolResult:
    return mcp.CallToolResult(
        content=[{"type": "text", "text": text}], structured_content=structured, is_error=error
    )


def _budgeted(tools: list[ToolEntry], rendered: Rendered, budget: int) -> mcp.CallToolResult:
    """A search's answer within ``budget`` as a whole: the rendering, and as structured content
    the names of what it shows (a host may give either or both to its model). The rendering
    makes room for the names when together they would not fit."""
    while True:
        shown = {t.name for t in rendered.full} | {t.name for t in rendered.brief} | set(rendered.names)
        found = [{"name": t.name, "server": t.server, "score": t.score} for t in tools if t.name in shown]
        structured = {"tools": found, "omitted": len(tools) - len(found)}
        cost = estimate_tokens(_encoder.encode(structured).decode())
        if rendered.tokens + cost <= budget or not shown:
            return _text(rendered.text, structured=structured)
        rendered = render(tools, max(0, budget - cost))


def _relay(result: ToolResult, server: str | None) -> mcp.CallToolResult | dict[str, Any]:
    """The result as ``server`` gave it (the fields mcpd does not model too), the URIs of its resource
    links and embedded resources qualified (the host reads them back by those); its JSON-RPC error as
    that error (-32042 and its ``data`` ask the host for a URL elicitation, which a tool error's text
    cannot)."""
    if result.refusal is not None:
        raise server_error(result.refusal.code, result.refusal.message, result.refusal.data)
    structured = msgspec.UNSET if result.structured_content is None else result.structured_content
    meta_ = msgspec.UNSET if result.meta is None else result.meta
    is_error = msgspec.UNSET if result.is_error is None else result.is_error
    content = (
        result.content if server is None else [surface.qualify_content(server, b) for b in result.content]
    )
    relayed = mcp.CallToolResult(
        content=content, structured_content=structured, is_error=is_error, meta=meta_
    )
    return mcp.with_extra(relayed, result.extra)


class _Tasks:
    """The session's running requests, as plain asyncio tasks (cheaper than a task group per call,
    as in ``mcpd.ipc.server``); at most ``limit`` at once, and all cancelled by ``aclose``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._by_id: dict[mcp.RequestId, asyncio.Task[None]] = {}
        self._all: set[asyncio.Task[None]] = set()
        self._closed = False

    def running(self, key: mcp.RequestId) -> bool:
        return key in self._by_id

    def start(self, key: mcp.RequestId, coro: Coroutine[Any, Any, None]) -> bool:
        """Run ``coro``, or refuse it (False) when ``limit`` run already; a closed session drops it.

        Refused rather than queued: a reader that waited for room would leave the host's answers
        to the servers' requests (which the running calls may be waiting for) unread.
        """
        if self._closed or len(self._all) >= self.limit:
            coro.close()
            return self._closed  # dropped (True) after aclose, refused (False) when full
        task = asyncio.get_running_loop().create_task(coro)
        self._all.add(task)
        self._by_id[key] = task
        task.add_done_callback(lambda done: self._done(key, done))
        return True

    def _done(self, key: mcp.RequestId, task: asyncio.Task[None]) -> None:
        self._all.discard(task)
        if self._by_id.get(key) is task:
            del self._by_id[key]

    def cancel(self, key: mcp.RequestId, reason: str | None = None) -> bool:
        """Cancel a running request; the host's ``reason`` goes with it to the server."""
        task = self._by_id.get(key)
        if task is None:
            return False
        task.cancel(CancelReason(reason) if reason else None)
        return True

    async def aclose(self) -> None:
        self._closed = True
        for task in self._all:
            task.cancel()
        if self._all:
            await asyncio.gather(*self._all, return_exceptions=True)


class Send(Protocol):
    """How a session's messages leave for its host: ``related`` names the host's request (its id)
    that a message belongs to, such as a log message its server sent during that request's tool
    call; a transport with a stream per request sends it there, ahead of that request's answer."""

    def __call__(self, data: bytes, related: mcp.RequestId | None = None, /) -> None: ...


class HostSession:
    """One host's MCP session. Build it with ``Hosts.open_session``; feed it with ``receive``."""

    def __init__(
        self,
        core: Core,
        send: Send,
        *,
        caller: Caller,
        state: mcp.SessionState,
        on_state: Callable[[mcp.SessionState], None] | None,
        on_subscriptions: Callable[[mcp.SubscriptionsChanged], None] | None = None,
        advice: Advice = ALWAYS_ROOM,
        max_in_flight: int = 256,
        cold_start_wait: float = COLD_START_WAIT,
    ) -> None:
        self.core = core
        self._send = send
        self._advice = advice
        """No room while the host is not taking what it is sent: advisory notifications are dropped
        (resource updates held, ``_updates``)."""
        self._updates: Behind[bytes] = Behind(
            advice.room_for_advice,
            self._put,
            size=len,
            dropped=lambda: advice.drop_advice(mcp.RESOURCE_UPDATED),
        )
        self.caller = caller
        self._hello_client = caller.client
        self.init = state.initialize
        self.connected: set[str] = set(state.connected)
        self.preconnect: set[str] = set(state.preconnect)
        self.expose_all = state.expose_all
        self.query = state.query
        self.query_at = state.query_at
        self.log_level = state.log_level
        self.initialized = state.initialize is not None
        """The host sent ``notifications/initialized`` (or this session resumes one that had)."""
        self._on_state = on_state
        """Told the session's state at each change: what a new daemon needs to carry it on."""
        self._on_subscriptions = on_subscriptions
        """Told each change of the subscriptions, which the states it is given then leave out."""
        self._last_state: mcp.SessionState | None = None
        self._cold_start_wait = cold_start_wait
        self._tasks = _Tasks(max_in_flight)
        self._held: deque[bytes] = deque(maxlen=HELD_LIMIT)
        """Notifications waiting for the host to finish initializing."""
        self._list_changed_due = False
        self._listed: list[ToolEntry] | None = None
        """The tools the host was last given (None: unknown, any change is announced)."""
        self._connecting: set[str] = set()
        """``preconnect`` servers being connected right now."""
        self._background: set[asyncio.Task[None]] = set()
        self._timers: list[asyncio.TimerHandle] = []
        self._problems: dict[str, str] = {}
        """Why each ``preconnect`` server could not be connected (reported once each)."""
        self._surface_pending: set[str] = set()
        """The lists (``_SURFACE``) that may have changed since the last announcement."""
        self._shown: dict[str, Any] = {}
        """The resources, templates and prompts the host was last given or told of, by kind (missing:
        none yet)."""
        self._resubscribe = dict.fromkeys(state.subscribed)
        """Subscriptions of a resumed session, taken again by ``start``: each stays in
        ``_subscribed`` until it is back or refused. The relay hands what it was told to the next
        daemon: one told without them lost them all to a daemon that died meanwhile."""
        self._subscribed = dict.fromkeys(state.subscribed)
        """The subscriptions the relay (or the saved state) was told of, in the order it was: those
        held and those still to be taken again, kept up to date at each change of one (``_settle``)."""
        if self.init is not None:
            self._name_client(self.init)
        self.answers = HostAnswerer(self._emit, lambda: self.init)
        """Asks the host what servers ask during its calls (sampling, elicitation, roots)."""

    # -- transport side ------------------------------------------------------------------------

    def start(self) -> None:
        """Begin work that needs no host message: connect the ``preconnect`` servers as they run."""
        loop = asyncio.get_running_loop()
        self._drop_unknown_preconnect()
        for name in sorted(self.preconnect):
            try:
                actor = self.core.supervisor.actor(name)
            except UnknownServer as exc:
                self._preconnect_failed(name, exc.message)
                continue
            if not self._try_preconnect(name):
                wait = actor.config.connect_timeout + PRECONNECT_MARGIN
                self._timers.append(loop.call_later(wait, self._preconnect_overdue, name))
        by_server: dict[str | None, list[str]] = {}
        for uri in self._resubscribe:
            by_server.setdefault((split_uri(uri) or (None, uri))[0], []).append(uri)
        for uris in by_server.values():
            self._in_background(self._subscribe_again(uris))
        if self.log_level is not None:
            self.core.log_levels.set(self, self.log_level)
        self._state_changed()

    def receive(self, data: bytes) -> None:
        """Handle one JSON-RPC message from the host; never waits (a request runs in its own task), so
        it may run in a read callback (``mcpd.front.socket``)."""
        try:
            message = _incoming.decode(data)
        except msgspec.ValidationError as exc:
            self._error(None, mcp.INVALID_REQUEST, f"not a JSON-RPC message: {exc}")
            return
        except DECODE_FAILURES as exc:
            self._error(None, mcp.PARSE_ERROR, f"parse error: {exc}")
            return
        if isinstance(message.method, msgspec.UnsetType):
            if isinstance(message.result, msgspec.UnsetType) and isinstance(message.error, msgspec.UnsetType):
                self._error(None, mcp.INVALID_REQUEST, "neither a request, a notification nor a response")
                return
            self.answers.reply(data)  # a response to a server's request we passed on
            return
        if isinstance(message.id, msgspec.UnsetType):
            self._notification(message.method, message.params)
            return
        if message.id is None:
            self._error(None, mcp.INVALID_REQUEST, "a request id must be a string or a number")
            return
        if self._tasks.running(message.id):
            self._error(message.id, mcp.INVALID_REQUEST, f"request id {message.id!r} is already in progress")
            return
        if not self._tasks.start(message.id, self._answer(message.id, message.method, message.params)):
            limit = self._tasks.limit
            self._error(
                message.id,
                mcp.TOO_MANY_REQUESTS,
                f"{limit} requests of this session are running (max_in_flight); send it again later",
            )

    async def aclose(self) -> None:
        """The host is gone: cancel its requests (and so its calls in the servers), end its subscriptions."""
        for timer in self._timers:
            timer.cancel()
        self._updates.close()
        for task in self._background:
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        await self._tasks.aclose()
        self.core.subscriptions.drop(self)  # last: no request of this session can subscribe any more
        self.core.log_levels.drop(self)

    def on_event(self, event: ServerEvent) -> None:
        """A supervisor event: connect a waiting ``preconnect`` server; re-send the tool list on a change."""
        if isinstance(event, ResourceUpdated):
            return  # for subscribers only: ``Subscriptions`` calls ``_resource_updated``
        if event.server in self.preconnect:
            if self._try_preconnect(event.server):
                return
            if isinstance(event, StateChanged) and event.new in _GAVE_UP:
                self._preconnect_failed(event.server, f"it is {event.new}: {event.reason}")
        if not self.sees(event.server):
            return
        if isinstance(event, SurfaceChanged):
            said = (("resources", "templates") if event.resources else ()) + (
                ("prompts",) if event.prompts else ()
            )
            self._surface_changed(said)
            return
        if isinstance(event, ToolsChanged):
            self._list_changed()
        elif (event.old in LIVE_STATES) != (event.new in LIVE_STATES):
            self._joined_or_left()

    def relist(self) -> None:
        """Tell the host to list tools, resources and prompts again: a session resumed (by a new
        daemon, or after it was set aside) cannot know what changed while it was away."""
        for method in (mcp.TOOLS_LIST_CHANGED, mcp.RESOURCES_LIST_CHANGED, mcp.PROMPTS_LIST_CHANGED):
            self._notify(method)

    def sees(self, server: str) -> bool:
        """Whether the host sees ``server``: its tools, their changes, its log messages."""
        return self.expose_all or server in self.connected

    def on_log(self, server: str, message: LogMessage, call: RunningCall | None) -> None:
        """A server's MCP log message: passed on at or above the level the host set, if it set one,
        for the servers it sees; the logger names the server (``server`` or ``server/logger``), and
        its data and ``_meta`` are the server's. A level MCP does not define is passed on as
        ``info`` (``"ERROR"`` as ``error``): hosts' SDKs refuse a message at a level they do not know.
        ``call``: the tool call it belongs to (``ServerRequests.related``), sent with it if it is this
        host's."""
        if self.log_level is None or not self.sees(server):
            return
        level = message.level.lower()
        if level not in mcp.LOG_LEVELS:
            level = "info"
        if mcp.LOG_LEVELS.index(level) < mcp.LOG_LEVELS.index(self.log_level):
            return
        logger = message.logger
        named = f"{server}/{logger}" if logger else server
        meta_ = msgspec.UNSET if message.meta is None else message.meta
        related = call.origin if call is not None and call.answerer is self.answers else None
        params = mcp.LogMessageParams(level=level, data=message.data, logger=named, meta=meta_)
        self._advise(mcp.MESSAGE, params, related)

    # -- messages ------------------------------------------------------------------------------

    def _emit(self, message: msgspec.Struct) -> None:
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            self._send(_encoder.encode(message))

    def _error(
        self, request_id: mcp.RequestId | None, code: int, message: str, data: Any = msgspec.UNSET
    ) -> None:
        self._emit(mcp.ErrorResponse(request_id, mcp.ErrorObject(code, message, data)))

    def _notify(self, method: str, params: Any = msgspec.UNSET, related: mcp.RequestId | None = None) -> None:
        """Send a notification (``related``: for the host's request of that id, see ``Send``)."""
        self._put(_encoder.encode(mcp.Notification(method, params)), related)

    def _put(self, data: bytes, related: mcp.RequestId | None = None) -> None:
        if self.initialized:
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                self._send(data, related)
        else:
            self._held.append(data)

    def _advise(self, method: str, params: Any, related: mcp.RequestId | None = None) -> None:
        """A notification the host can do without: progress and log messages are dropped while it is
        behind (superseded by the next step; a record the server keeps), a resource update held
        until it caught up (``Behind``: the host's one news of the change)."""
        if isinstance(params, mcp.ResourceUpdatedParams):
            self._updates.offer(params.uri, _encoder.encode(mcp.Notification(method, params)))
        elif self._advice.room_for_advice():
            self._notify(method, params, related)
        else:
            self._advice.drop_advice(method)

    def _notification(self, method: str, params: msgspec.Raw) -> None:
        if method == "notifications/initialized":
            self.initialized = True
            held, self._held = self._held, deque(maxlen=HELD_LIMIT)
            for data in held:
                with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                    self._send(data)
        elif method == mcp.ROOTS_LIST_CHANGED:
            # Servers answer with whoever calls; one that kept the roots it was given asks again.
            self._in_background(self.core.supervisor.roots_changed())
        elif method == mcp.CANCELLED:
            with contextlib.suppress(*DECODE_FAILURES):
                cancelled = msgspec.json.decode(params, type=mcp.CancelledParams)
                if cancelled.request_id is not None:
                    found = self._tasks.cancel(cancelled.request_id, cancelled.reason)
                    # Debug for an id that names nothing running: a host may send any number of them
                    # (566 a second filled 1.3 MB of log in 15 s at info).
                    (log.info if found else log.debug)(
                        "request.cancelled",
                        session=self.caller.session,
                        request=cancelled.request_id,
                        found=found,
                    )

    async def _answer(self, request_id: mcp.RequestId, method: str, raw: msgspec.Raw) -> None:
        asked_for = HOST_REQUEST.set(request_id)
        try:
            handler = _REQUESTS.get(method)
            if handler is None:
                raise RpcError(mcp.METHOD_NOT_FOUND, f"method not found: {method}")  # noqa: TRY301
            try:
                params = msgspec.json.decode(raw, type=handler.params)
            except DECODE_FAILURES as exc:
                raise RpcError(mcp.INVALID_PARAMS, f"invalid params for {method}: {exc}") from None
            result = await handler.run(self, params)
            self._emit(mcp.Response(request_id, result))
        except RpcError as exc:
            self._error(request_id, exc.code, exc.message, exc.data)
        except McpdError as exc:
            error = rpc_error(exc)
            self._error(request_id, error.code, error.message, error.data)
        except (msgspec.EncodeError, OverflowError, TypeError) as exc:
            self._error(request_id, mcp.INTERNAL_ERROR, f"the result of {method} cannot be sent: {exc}")
        except Exception as exc:
            log.exception("front.internal_error", method=method, session=self.caller.session)
            self._error(request_id, mcp.INTERNAL_ERROR, f"internal error in {method}: {exc}")
        finally:
            HOST_REQUEST.reset(asked_for)

    # -- session state -------------------------------------------------------------------------

    def state(self) -> mcp.SessionState:
        """What a new daemon needs to carry the session on, its subscriptions included."""
        return self._state(list(self._subscribed))

    def _state(self, subscribed: list[str]) -> mcp.SessionState:
        return mcp.SessionState(
            initialize=_resumable(self.init),
            connected=sorted(self.connected),
            preconnect=sorted(self.preconnect),
            expose_all=self.expose_all,
            query=self.query,
            query_at=self.query_at,
            subscribed=subscribed,
            subscription_deltas=self._on_subscriptions is not None,
            log_level=self.log_level,
        )

    def _state_changed(self) -> None:
        if self._on_state is None:
            return
        # A relay told of each change of the subscriptions keeps them: they stay out of its states.
        state = self._state([] if self._on_subscriptions is not None else list(self._subscribed))
        if state != self._last_state:
            self._last_state = state
            self._on_state(state)

    def _name_client(self, params: mcp.InitializeParams) -> None:
        # Usage records name the host ("claude-ai", "cursor"), not the relay in between.
        name = params.client_info.name
        self.caller = Caller(name if name != "unknown" else self._hello_client, self.caller.session)

    def _joined_or_left(self) -> None:
        """A server came into the session or went out of it: its tools, resources and prompts with it
        (a change of its tools alone is no news of its other lists)."""
        self._surface_changed()
        self._list_changed()

    def _list_changed(self) -> None:
        """Send ``tools/list_changed`` if the tools differ from those last listed, once per loop turn."""
        if self._list_changed_due:
            return
        self._list_changed_due = True

        self._in_background(self._announce())

    async def _announce(self) -> None:
        self._list_changed_due = False  # a change from here on is announced again
        # A server flapping between degraded and backoff with no tools changes nothing to list.
        if await self._entries() != self._listed:
            self._listed = None
            self._notify(mcp.TOOLS_LIST_CHANGED)

    def _in_background(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` for this session (cancelled when it closes), from synchronous code."""
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            # E.g. a server removed by a reload between listing the session's servers and asking
            # each: that announcement is lost, the next change sends another.
            log.warning("session.background_failed", client=self.caller.client, error=str(exc))

    # -- preconnect ----------------------------------------------------------------------------

    def _try_preconnect(self, name: str) -> bool:
        """Connect ``name`` if it runs now; True if it does (the connection is under way)."""
        if name in self._connecting:
            return True
        # Live with a run that listed its tools: a server degraded in its handshake would join with
        # none. One degraded after it (tool calls hung, pings answered) is there to join: it becomes
        # ``running`` only when a call is answered, which this host, not given its tools, cannot make.
        actor = self.core.supervisor.actor(name)
        if actor.state not in LIVE_STATES or actor.link is None:
            return False
        self._connecting.add(name)
        self._in_background(self._preconnect(name))
        return True

    async def _preconnect(self, name: str) -> None:
        try:
            await self._join(name)
        except McpdError as exc:
            self._preconnect_failed(name, exc.message)
            return
        finally:
            self._connecting.discard(name)
        self.preconnect.discard(name)
        self._joined_or_left()
        self._state_changed()

    def _preconnect_overdue(self, name: str) -> None:
        if name in self.preconnect:
            actor = self.core.supervisor.actor(name)
            reason = f"it is still {actor.state}" + (f": {actor.last_error}" if actor.last_error else "")
            self._preconnect_failed(name, reason)

    def _drop_unknown_preconnect(self) -> None:
        """Forget ``preconnect`` names that are no configured server, said in one line: a host can
        name any number (``?connect=`` 4,000 times made 4,000 log lines and a 36 KB saved state)."""
        unknown = sorted(self.preconnect - set(self.core.supervisor.names()))
        if not unknown:
            return
        self.preconnect.difference_update(unknown)
        shown = ", ".join(unknown[:UNKNOWN_SHOWN]) + (", ..." if len(unknown) > UNKNOWN_SHOWN else "")
        line = f"no such servers ({len(unknown)}): {shown}"
        self._problems["?unknown"] = line
        log.warning(
            "front.preconnect_unknown", count=len(unknown), servers=shown, session=self.caller.session
        )
        self._notify(mcp.MESSAGE, mcp.LogMessageParams(level="warning", data=line, logger="mcpd"))

    def _preconnect_failed(self, name: str, reason: str) -> None:
        """Report a ``--connect`` server that could not be connected; it is connected if it comes up later."""
        if name in self._problems:
            return
        line = f"{name}: not connected, {reason}"
        self._problems[name] = line
        log.warning("front.preconnect_failed", server=name, reason=reason, session=self.caller.session)
        self._notify(mcp.MESSAGE, mcp.LogMessageParams(level="warning", data=line, logger="mcpd"))

    # -- what hosts ask ------------------------------------------------------------------------

    async def instructions(self) -> str:
        text = f"MCP servers available through mcpd:\n{await calls.snippet(self.core)}"
        if self._problems:
            text += "\nServers asked for but not connected:\n" + "\n".join(self._problems.values())
        return text

    async def _entries(self) -> list[ToolEntry]:
        if self.expose_all:
            return await self.core.catalog.tools()
        names = sorted(n for n in self.connected if n in self.core.supervisor.names())
        return await self.core.catalog.tools(names) if names else []

    async def tools(self) -> list[mcp.Tool | dict[str, Any]]:
        """The host's tool list: the meta tools, then those of connected servers (or of all)."""
        self._listed = await self._entries()
        return [*meta.TOOLS, *(meta.as_tool(entry) for entry in self._listed)]

    def learned_query(self) -> str | None:
        """The last search query, if recent enough to have led to a call made now."""
        if self.query is None or self.query_at is None:
            return None
        return self.query if time.time() - self.query_at <= LEARNING_WINDOW else None

    def progress_relay(self, meta_: dict[str, Any] | None) -> ProgressCallback | None:
        token = mcp.progress_token(meta_)
        if token is None:
            return None

        def relay(
            progress: float, total: float | None, message: str | None, sent: dict[str, Any] | None
        ) -> None:
            params = mcp.ProgressParams(
                progress_token=token,
                progress=progress,
                total=msgspec.UNSET if total is None else total,
                message=msgspec.UNSET if message is None else message,
                meta=msgspec.UNSET if sent is None else sent,
            )
            self._advise(mcp.PROGRESS, params)

        return relay

    async def call(
        self, name: str, arguments: dict[str, Any], meta_: dict[str, Any] | None
    ) -> mcp.CallToolResult | dict[str, Any]:
        if name == meta.SEARCH:
            return await self._search(arguments)
        if name == meta.CONNECT:
            return await self._connect(str(arguments.get("server", "")))
        if name == meta.CALL:
            tool, inner = arguments.get("tool"), arguments.get("arguments") or {}
            if not isinstance(tool, str) or not isinstance(inner, dict):
                return _text("`tool` must be a string and `arguments` an object", error=True)
            name, arguments = tool, inner
        # Resolved here: the result's resource URIs are qualified by the server that answers.
        server, tool = (None, name) if reserved.is_reserved(name, None) else self.core.catalog.resolve(name)
        try:
            # Converted, not constructed: the socket API's limits (a name's length) hold here too.
            params = msgspec.convert(
                {
                    "tool": tool,
                    "server": server,
                    "arguments": arguments,
                    "query": self.learned_query(),
                    "meta": meta_,
                },
                ToolsCallParams,
            )
        except msgspec.ValidationError as exc:
            return _text(f"invalid call: {exc}", error=True)
        relay = self.progress_relay(meta_)
        return _relay(await calls.call_tool(self.core, self.caller, params, relay, self.answers), server)

    async def _search(self, arguments: dict[str, Any]) -> mcp.CallToolResult:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return _text("`query` must be a non-empty string", error=True)
        try:
            limit, budget = int(arguments.get("limit") or 10), int(arguments.get("budget_tokens") or 2000)
        except (TypeError, ValueError):
            return _text("`limit` and `budget_tokens` must be integers", error=True)
        if budget < meta.MIN_BUDGET:
            return _text(f"`budget_tokens` must be at least {meta.MIN_BUDGET}", error=True)
        try:
            # Converted, not constructed: the socket API's limits (a query's length) hold here too.
            params = msgspec.convert(
                {
                    "query": query,
                    "limit": min(max(1, limit), meta.MAX_LIMIT),
                    "budget_tokens": budget,
                    "include_reserved": False,
                },
                ToolsListParams,
            )
        except msgspec.ValidationError as exc:
            return _text(f"invalid search: {exc}", error=True)
        result = await calls.list_tools(self.core, params)
        self.query, self.query_at = query, time.time()
        self._state_changed()
        if not result.tools:
            return _text("No tool matches; consider mcpd_request_capability.", structured={"tools": []})
        assert result.rendered is not None  # a budget was given
        return _budgeted(result.tools, result.rendered, budget)

    async def _join(self, server: str) -> ConnectResult:
        """Connect ``server`` to this session, which then sees it (its log level may change)."""
        try:
            return await calls.connect_server(self.core, self.connected, server)
        finally:
            if server in self.connected:  # even when listing its tools failed after it joined
                self.core.log_levels.sees_more(self)

    async def _connect(self, server: str) -> mcp.CallToolResult:
        connected = await self._join(server)
        names = ", ".join(t.name for t in connected.tools) or "(no tools)"
        if connected.already:
            return _text(f"{server} was already connected: {names}")
        self.preconnect.discard(server)
        self._joined_or_left()
        self._state_changed()
        return _text(f"Connected {server}; its tools are now in your tool list: {names}")

    # -- resources, prompts, completions --------------------------------------------------------

    def scope(self) -> list[str] | None:
        """The servers whose resources and prompts this host sees: those it connected (None: all)."""
        if self.expose_all:
            return None
        return sorted(n for n in self.connected if n in self.core.supervisor.names())

    async def show(self, kind: str, lister: Lister[L]) -> list[L]:
        """The host's list of ``kind`` (``_SURFACE``), remembered as what it was last given."""
        shown = await lister(self.core, self.scope())
        self._shown[kind] = shown
        return shown

    def _surface_changed(self, kinds: Iterable[str] = ("resources", "templates", "prompts")) -> None:
        """Send the ``list_changed`` of those of ``kinds`` (the lists a server said changed; all when
        a server joins or leaves) that differ from what the host was last given (or told of), once
        per loop turn. Only those: a list the host never asked for differs from none it was given."""
        due = not self._surface_pending
        self._surface_pending.update(kinds)
        if due:
            self._in_background(self._announce_surface())

    async def _announce_surface(self) -> None:
        pending, self._surface_pending = self._surface_pending, set()
        scope = self.scope()
        now = {kind: await lister(self.core, scope) for kind, lister in _SURFACE.items() if kind in pending}
        for method, kinds in _SURFACE_NOTIFICATIONS:
            if any(kind in now and now[kind] != self._shown.get(kind, []) for kind in kinds):
                self._shown.update({kind: now[kind] for kind in kinds if kind in now})
                if method == mcp.RESOURCES_LIST_CHANGED:
                    # The updates held for a host that is behind came before it: they go first, as at
                    # the server (after it, one may name a resource the new list has not).
                    self._updates.flush()
                self._notify(method)

    async def subscribe(self, uri: str) -> None:
        """Subscribe the host to a qualified resource URI; updates arrive as notifications. The relay
        is told before the host is answered: a daemon killed after the answer cannot lose it."""
        try:
            await self._take(uri)
        finally:
            self._settle((uri,))

    async def _take(self, uri: str) -> None:
        self.core.subscriptions.register(self, self._resource_updated, self._subscription_ended)
        await surface.subscribe(self.core, self, ReadParams(uri=uri))

    async def unsubscribe(self, uri: str) -> None:
        self._resubscribe.pop(uri, None)  # not to be taken again behind the host's back
        try:
            await surface.unsubscribe(self.core, self, ReadParams(uri=uri))
        finally:
            self._settle((uri,))

    def _holds(self, uri: str) -> bool:
        key = split_uri(uri)
        return key is not None and self.core.subscriptions.held(self, *key)

    def _settle(self, uris: Iterable[str]) -> None:
        """Bring what the relay was told of ``uris`` in line with the session (held, or still to be
        taken again), telling it what changed: the whole set at each change cost O(n) per
        subscription, quadratic for a host subscribing to thousands one by one. A relay that keeps
        no set is sent the whole state instead (HTTP saves it)."""
        added: list[str] = []
        removed: list[str] = []
        for uri in uris:
            subscribed = uri in self._resubscribe or self._holds(uri)
            if subscribed and uri not in self._subscribed:
                self._subscribed[uri] = None
                added.append(uri)
            elif not subscribed and uri in self._subscribed:
                del self._subscribed[uri]
                removed.append(uri)
        if not added and not removed:
            return
        if self._on_subscriptions is None:
            self._state_changed()
        else:
            self._on_subscriptions(mcp.SubscriptionsChanged(added, removed))

    def _resource_updated(self, server: str, uri: str, meta_: dict[str, Any] | None) -> None:
        params = mcp.ResourceUpdatedParams(
            uri=qualify_uri(server, uri), meta=msgspec.UNSET if meta_ is None else meta_
        )
        if ends_subscription(meta_):
            # Not advice: the host's one word that no update of the URI will come (``Behind.offer``).
            update = _encoder.encode(mcp.Notification(mcp.RESOURCE_UPDATED, params))
            self._updates.offer(params.uri, update, final=True)
        else:
            self._advise(mcp.RESOURCE_UPDATED, params)

    def _subscription_ended(self, server: str, uri: str) -> None:
        # The relay (or the saved state) hears of it too: a new daemon must not take it again.
        self._settle((qualify_uri(server, uri),))

    async def _subscribe_again(self, uris: list[str]) -> None:
        """A resumed session's subscriptions to one server, taken again in this daemon (it may still
        be starting), one after another; then the relay is told of those refused, at once. The relay
        knows them all already: those taken again cost it nothing."""
        for uri in uris:
            if uri not in self._resubscribe:
                continue  # the host unsubscribed meanwhile
            try:
                # The host's unsubscribe while this one waits for the server's turn withdraws it.
                await self._take(uri)
            except McpdError as exc:
                log.warning(
                    "front.resubscribe_failed", uri=uri, error=exc.message, session=self.caller.session
                )
            finally:
                self._resubscribe.pop(uri, None)
        self._settle(uris)


L = TypeVar("L")
Lister = Callable[[Core, list[str] | None], Awaitable[list[L]]]
_SURFACE: dict[str, Lister[Any]] = {
    "resources": host_surface.resources,
    "templates": host_surface.templates,
    "prompts": host_surface.prompts,
}
_SURFACE_NOTIFICATIONS = (
    (mcp.RESOURCES_LIST_CHANGED, ("resources", "templates")),
    (mcp.PROMPTS_LIST_CHANGED, ("prompts",)),
)


# -- the requests -------------------------------------------------------------------------------


@_request("initialize", mcp.InitializeParams)
async def _initialize(session: HostSession, params: mcp.InitializeParams) -> mcp.InitializeResult:
    session.init = params
    session._name_client(params)
    session._state_changed()
    # A daemon that has just started: give the servers a moment for their first try, so the
    # instructions can describe them (bounded; a warm daemon returns at once).
    await session.core.supervisor.wait_started(session._cold_start_wait)
    asked = params.protocol_version
    return mcp.InitializeResult(
        protocol_version=asked if asked in mcp.PROTOCOL_VERSIONS else mcp.LATEST_PROTOCOL_VERSION,
        capabilities=_CAPABILITIES,
        server_info=mcp.Implementation(name="mcpd", version=mcpd.__version__),
        instructions=await session.instructions(),
    )


@_request("ping", mcp.Empty)
async def _ping(session: HostSession, params: mcp.Empty) -> mcp.Empty:
    return _EMPTY_RESULT


@_request("logging/setLevel", mcp.SetLevelParams)
async def _set_level(session: HostSession, params: mcp.SetLevelParams) -> mcp.Empty:
    session.log_level = params.level
    session.core.log_levels.set(session, params.level)
    session._state_changed()
    return _EMPTY_RESULT


@_request("tools/list", mcp.Paginated)
async def _list_tools(session: HostSession, params: mcp.Paginated) -> mcp.ListToolsResult:
    return mcp.ListToolsResult(tools=await session.tools())


@_request("tools/call", mcp.CallToolParams)
async def _call_tool(session: HostSession, params: mcp.CallToolParams) -> mcp.CallToolResult | dict[str, Any]:
    try:
        return await session.call(params.name, params.arguments or {}, params.meta)
    except McpdError as exc:
        # A tool that is not there is a protocol error (MCP). Wrong arguments of one that is (MCP
        # 2025-11-25: input validation errors), a meta tool's wrong argument and a call that could
        # not run now are the tool's errors: the host's model sees why, and can correct the call or
        # try something else.
        unknown = isinstance(exc, UnknownTool | UnknownServer) and params.name not in meta.OWN
        if unknown or server_refusal(exc) is not None:
            raise rpc_error(exc) from None
        return _text(exc.message, error=True)


@_request("resources/list", mcp.Paginated)
async def _list_resources(session: HostSession, params: mcp.Paginated) -> mcp.ListResourcesResult:
    return mcp.ListResourcesResult(resources=await session.show("resources", host_surface.resources))


@_request("resources/templates/list", mcp.Paginated)
async def _list_templates(session: HostSession, params: mcp.Paginated) -> mcp.ListResourceTemplatesResult:
    templates = await session.show("templates", host_surface.templates)
    return mcp.ListResourceTemplatesResult(resource_templates=templates)


@_request("prompts/list", mcp.Paginated)
async def _list_prompts(session: HostSession, params: mcp.Paginated) -> mcp.ListPromptsResult:
    return mcp.ListPromptsResult(prompts=await session.show("prompts", host_surface.prompts))


@_request("resources/read", mcp.ReadResourceParams)
async def _read_resource(
    session: HostSession, params: mcp.ReadResourceParams
) -> mcp.ReadResourceResult | dict[str, Any]:
    return await host_surface.read(session.core, params)


@_request("resources/subscribe", mcp.UriParams)
async def _subscribe(session: HostSession, params: mcp.UriParams) -> mcp.Empty:
    await session.subscribe(params.uri)
    return _EMPTY_RESULT


@_request("resources/unsubscribe", mcp.UriParams)
async def _unsubscribe(session: HostSession, params: mcp.UriParams) -> mcp.Empty:
    await session.unsubscribe(params.uri)
    return _EMPTY_RESULT


@_request("prompts/get", mcp.GetPromptParams)
async def _get_prompt(
    session: HostSession, params: mcp.GetPromptParams
) -> mcp.GetPromptResult | dict[str, Any]:
    return await host_surface.get_prompt(session.core, params)


@_request("completion/complete", mcp.CompleteRequestParams)
async def _complete(
    session: HostSession, params: mcp.CompleteRequestParams
) -> mcp.CompleteResult | dict[str, Any]:
    try:
        return await host_surface.complete(session.core, params)
    except UnknownResource as exc:
        # A template the server does not have is an invalid reference to complete, as servers answer.
        error = rpc_error(exc)
        code = mcp.INVALID_PARAMS if server_refusal(exc) is None else error.code
        raise RpcError(code, error.message, error.data) from None
