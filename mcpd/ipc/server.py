"""The rpc layer on the daemon's side: connections, the methods table, dispatch, notifications.

Every connection is served by its own task group, and every request in its own task, so
requests on one connection run concurrently and are answered as they finish. Nothing a
client sends can disturb another client: a bad message gets an error response on that
connection; a stream that cannot be resynchronised closes that connection only; a client
that stops reading is dropped once a write has waited ``write_timeout``.

Nor can one client take more than its share of the event loop: the accept loop yields
after every connection, connection set-ups and tear-downs take turns (``Turns``) so that a
crowd arriving or leaving at once cannot hold up established clients, a connection yields
after a few frames (``FrameStream.frames``), each method's params have a byte limit checked
before decoding, and large params are decoded one at a time across the daemon, after
``codec.walk`` has bounded their cost. A client's frames before its hello take turns too. Once
a burst is over, its garbage is collected and its memory given back (``Reclaimer``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import gc
import itertools
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import anyio
import msgspec
import structlog
from anyio.streams.memory import MemoryObjectSendStream

import mcpd
from mcpd.errors import (
    DECODE_FAILURES,
    InvalidParams,
    McpdError,
    PeerRejected,
    ProtocolError,
    TooManyRequests,
    TransportError,
    UnknownMethod,
)
from mcpd.ipc import codec
from mcpd.ipc.endpoint import peer_hung_up, peer_uid
from mcpd.ipc.framing import DEFAULT_MAX_FRAME, MAX_CLIENT_FRAME, FrameTooLarge, TruncatedFrame, frame
from mcpd.ipc.inflight import InFlight
from mcpd.ipc.spare import Spare
from mcpd.ipc.stream import FrameStream
from mcpd.ipc.turns import Turns
from mcpd.memory import CONNECTION_BYTES, Reclaimer
from mcpd.model.protocol import (
    EVENT_NOTIFICATION,
    HELLO_MAX_PARAMS,
    PROTOCOL_VERSION,
    UPGRADE_MAX_PARAMS,
    CancelParams,
    ErrorInfo,
    HelloParams,
    HelloResult,
    Notification,
    Ok,
    Request,
    Response,
)
from mcpd.model.servers import Event, StateChanged, SurfaceChanged
from mcpd.model.states import LIVE_STATES

log = structlog.get_logger("mcpd.ipc")

current_request: contextvars.ContextVar[int] = contextvars.ContextVar("mcpd_current_request")
"""The id of the request a handler is answering (each request runs in its own task)."""

_DISCONNECTS = (ConnectionError, OSError, anyio.BrokenResourceError, anyio.ClosedResourceError)
_ACCEPT_RETRY = 0.1
CHURN_PER_ITERATION = 16
"""Connection set-ups plus tear-downs per event-loop iteration (see ``Turns``)."""
MAX_RESPONSE = MAX_CLIENT_FRAME - 1024
"""Largest response the daemon sends: what clients accept, less room for the envelope."""
HANG_UP_LOOK = 0.25
"""Seconds between two looks at whether a client that stopped sending has left (``_answer_rest``)."""


def _only_disconnects(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_disconnects(e) for e in exc.exceptions)
    return isinstance(exc, _DISCONNECTS)


Ctx = TypeVar("Ctx")
P = TypeVar("P", bound=msgspec.Struct)
Handler = Callable[[Ctx, "Connection", Any], Awaitable[msgspec.Struct]]
Upgrade = Callable[["Connection", AsyncIterator[bytes], bytes | None], Awaitable[None]]
"""Serves a connection whose ``hello`` asked for its mode: (connection, its remaining frames, ``resume``)."""

_NIL = b"\xc0"
_encoder = msgspec.msgpack.Encoder()
_ids = itertools.count(1)

DEFAULT_MAX_PARAMS = 64 * 1024
"""Bytes of params a method accepts unless it declares otherwise."""


@dataclass
class Limits:
    max_frame: int = DEFAULT_MAX_FRAME
    write_timeout: float = 10.0
    """A client whose socket stays full this long is dropped."""
    hello_timeout: float = 20.0
    """A client that has not been greeted this long after it connected is told so and dropped: a
    connection that never says hello would otherwise hold one of the daemon's descriptors for good."""
    max_in_flight: int = 256
    """Requests one connection may have running; as many more wait for a slot, and past those a
    request is refused (``TooManyRequests``)."""
    notification_backlog: int = 4096
    """Undelivered notifications one subscriber may have queued before it is dropped."""
    advisory_backlog: int = 1024 * 1024
    """Unread bytes past which advisory notifications (progress, resource updates) to a client are
    dropped: a client that far behind cannot act on them, and a flooding server would otherwise
    grow the daemon for as long as the client keeps reading slowly."""


class _Answer(msgspec.Struct, array_like=True, tag=1, frozen=True):
    """A ``Response`` as it is sent, its result still the handler's struct: encoded with the message,
    not into bytes of its own first and then copied in (the same bytes on the wire)."""

    id: int | None
    result: Any
    error: None = None


def encode_message(message: Response | Notification | _Answer) -> bytes:
    """One frame: length prefix, then the msgpack message. Encoded, then prefixed: ``encode_into`` a
    buffer behind a blank prefix, then copied out, made the same bytes and copies in twice the time
    for a small answer (0.8 against 0.4 us), and was slower at 4 MiB too (measured)."""
    return frame(_encoder.encode(message))


def result_response(request_id: int | None, result: msgspec.Struct) -> bytes:
    return encode_message(_Answer(request_id, result))


def error_response(request_id: int | None, error: McpdError) -> bytes:
    return encode_message(Response(request_id, error=ErrorInfo(error.code, error.message, error.data)))


class _Tasks:
    """Tasks that must not outlive their owner: a connection's event pump, or the server's
    connections. Plain asyncio tasks, cancelled and awaited by ``aclose``. (A connection's
    requests are plain tasks too, in ``InFlight``.)

    Not ``TaskGroup.start_soon``: anyio's per-task bookkeeping measured about 30 us of CPU
    per request (``status`` fell from 68 to 38 us, and twice the requests per second), and
    a task group per connection made connection churn costly for everyone else.
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        """Cancel whatever still runs and wait for it (shielded, so it happens even when cancelled)."""
        if not self._tasks:
            return
        with anyio.CancelScope(shield=True):
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)


@dataclass
class Session:
    """What one client has asked for, seen by no other client."""

    activated: set[str] = field(default_factory=set)
    """Servers whose tools this session has connected (``session.connect``)."""


def _overtakes_updates(event: Event) -> bool:
    """Whether ``event`` would tell of their resources' end before resource updates held for a
    client, which came first: a resource list change (it may remove them), or their server's
    leaving (stopped, removed, died), after which an update is of a resource the client cannot read."""
    if isinstance(event, SurfaceChanged):
        return event.resources
    return isinstance(event, StateChanged) and event.old in LIVE_STATES and event.new not in LIVE_STATES


@dataclass(eq=False)
class Connection:
    """One client: its identity from ``hello``, its session, its writes, its subscription."""

    stream: FrameStream
    limits: Limits
    id: int = field(default_factory=lambda: next(_ids))
    arrived: float = field(default_factory=anyio.current_time)
    """When it was set up, on the event loop's clock: it has until ``hello_timeout`` after to say hello."""
    client: str | None = None
    session: Session = field(default_factory=Session)
    tasks: _Tasks = field(default_factory=_Tasks)
    """Its event pump and other tasks that serve it (its requests are in ``InFlight``)."""
    bad_messages: int = 0
    """Frames that did not decode to a request."""
    dropped_advice: int = 0
    """Advisory notifications dropped because the client was too far behind (a resource update held
    for it, and sent later, is not one)."""
    unsendable: int = 0
    """Notifications msgpack could not carry (an integer beyond 64 bits from a server)."""
    flush_held: Callable[[], object] | None = None
    """Sends the resource updates held for the client while it is behind (set once it subscribed to
    one): called before an event that must not overtake them (``_overtakes_updates``)."""
    _events: MemoryObjectSendStream[Event] | None = None
    _task: asyncio.Task[None] | None = None
    _ended: bool = False
    _stalled_since: float | None = None
    _last_backlog: int = 0
    _dropped_methods: set[str] = field(default_factory=set)

    async def send(self, data: bytes) -> None:
        await self.stream.send(data)

    def room_for_advice(self) -> bool:
        """Whether the client has room for advisory notifications: not while it has more unread
        bytes than they may add to. Asking drops nothing: the caller drops (``drop_advice``), or
        holds a resource update."""
        return self.stream.backlog() <= self.limits.advisory_backlog

    def drop_advice(self, method: str) -> None:
        """Count an advisory notification of ``method`` not sent; said once per method (a client
        that does not read would flood the log), so that a dropped update is told apart from a
        dropped progress step."""
        if method not in self._dropped_methods:
            self._dropped_methods.add(method)
            log.warning("client.behind", conn=self.id, client=self.client, dropped=method)
        self.dropped_advice += 1

    def notify(self, method: str, params: msgspec.Struct, *, advisory: bool = False) -> bool:
        """Push a notification without waiting (from synchronous callbacks); dropped if the client
        left, or if it is ``advisory`` and there is no ``room_for_advice`` (``drop_advice``). False
        only when msgpack cannot carry ``params`` (an integer beyond 64 bits from a server)."""
        if advisory and not self.room_for_advice():
            self.drop_advice(method)
            return True
        try:
            data = encode_message(Notification(method, msgspec.Raw(_encoder.encode(params))))
        except (msgspec.EncodeError, OverflowError) as exc:
            if not self.unsendable:  # said once: a server may send thousands
                log.warning("client.notification_unsendable", conn=self.id, method=method, error=str(exc))
            self.unsendable += 1
            return False
        with contextlib.suppress(*_DISCONNECTS, RuntimeError):
            self.stream.send_nowait(data)
        return True

    def check_writes(self, now: float) -> None:
        """Drop the client once its unread answers have not shrunk for ``write_timeout``.

        Called periodically by the server's one watchdog: a timeout around every send would
        cost more than the response, a watchdog task per connection made every connection
        dearer; and a slow reader that makes progress is not dropped.
        """
        backlog = self.stream.backlog()
        if backlog == 0 or backlog < self._last_backlog:
            self._stalled_since = None
        elif self._stalled_since is None:
            self._stalled_since = now
        elif now - self._stalled_since >= self.limits.write_timeout:
            log.warning("client.dropped", conn=self.id, client=self.client, reason="not reading")
            self.stream.abort()
            self.close()
        self._last_backlog = backlog

    def check_hello(self, now: float, told: bytes) -> bool:
        """Drop the client, once it is ``told`` why, if it has not said hello ``hello_timeout`` after
        it arrived; True if it was dropped. Called by the same watchdog as ``check_writes``."""
        if self.client is not None or self._ended or now - self.arrived < self.limits.hello_timeout:
            return False
        with contextlib.suppress(*_DISCONNECTS, RuntimeError):
            self.stream.send_nowait(told)  # flushed as the connection closes
        self.close()
        return True

    def close(self) -> None:
        """End the connection: its serving task stops, and with it the client's requests."""
        if self._task is not None and not self._ended:
            self._ended = True
            self._task.cancel()

    def subscribe(self) -> bool:
        """Start pushing events to this client; False if it already was subscribed."""
        if self._events is not None or self._ended:
            return False
        send, receive = anyio.create_memory_object_stream[Event](self.limits.notification_backlog)
        self._events = send

        async def pump() -> None:
            async with receive:
                async for event in receive:
                    params = msgspec.Raw(_encoder.encode(event))
                    try:
                        await self.send(encode_message(Notification(EVENT_NOTIFICATION, params)))
                    except _DISCONNECTS:
                        self.close()
                        return

        self.tasks.spawn(pump())
        return True

    def push(self, event: Event) -> None:
        """Queue an event for this client if it subscribed; a subscriber that lags too far is dropped."""
        if self._events is None:
            return
        if self.flush_held is not None and _overtakes_updates(event):
            self.flush_held()
        try:
            self._events.send_nowait(event)
        except anyio.WouldBlock:
            log.warning(
                "client.dropped", conn=self.id, client=self.client, reason="notification backlog full"
            )
            self.close()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass


@dataclass(frozen=True)
class _Method(Generic[Ctx]):
    params: type[msgspec.Struct]
    handler: Handler[Ctx]
    max_bytes: int = DEFAULT_MAX_PARAMS
    inline: bool = False


class MethodTable(Generic[Ctx]):
    """Method name -> params struct -> handler, each declared once with ``@table.method(...)``."""

    def __init__(self) -> None:
        self._methods: dict[str, _Method[Ctx]] = {}

    def method(
        self, name: str, params: type[P], *, max_bytes: int = DEFAULT_MAX_PARAMS, inline: bool = False
    ) -> Callable[[Handler[Ctx]], Handler[Ctx]]:
        """Register a handler; params over ``max_bytes`` are refused before they are decoded.

        ``inline``: answered by the connection's reader itself, taking no ``max_in_flight`` slot,
        for a client's answer to the daemon's own question, which the requests holding every slot
        may be waiting for. Its handler must not wait.
        """

        def register(handler: Handler[Ctx]) -> Handler[Ctx]:
            if name in self._methods or name == "hello":
                raise ValueError(f"method {name!r} is already defined")
            self._methods[name] = _Method(params, handler, max_bytes, inline)
            return handler

        return register

    def names(self) -> list[str]:
        return sorted(["hello", *self._methods])

    def get(self, name: str) -> _Method[Ctx]:
        method = self.find(name)
        if method is None:
            raise UnknownMethod(f"unknown method {name!r}", {"method": name})
        return method

    def find(self, name: str) -> _Method[Ctx] | None:
        return self._methods.get(name)


def _check_size(name: str, raw: msgspec.Raw, limit: int) -> None:
    if len(raw) > limit:
        raise InvalidParams(
            f"params of {name} are {len(raw)} bytes, over its limit of {limit}",
            {"method": name, "size": len(raw), "limit": limit},
        )


def _decode_params(raw: msgspec.Raw, params_type: type[P]) -> P:
    try:
        if len(raw) == 1 and bytes(raw) == _NIL:
            return params_type()
        return msgspec.msgpack.decode(raw, type=params_type)
    except DECODE_FAILURES as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise InvalidParams(f"invalid params: {reason}") from None
    except TypeError as exc:  # required fields missing from an empty params object
        raise InvalidParams(f"invalid params: {exc}") from None


class RpcServer(Generic[Ctx]):
    """Serves ``table`` on a listener, passing ``ctx`` to every handler."""

    def __init__(
        self,
        table: MethodTable[Ctx],
        ctx: Ctx,
        limits: Limits | None = None,
        upgrades: Mapping[str, Upgrade] | None = None,
    ) -> None:
        self.table = table
        self.ctx = ctx
        self.limits = limits or Limits()
        self.upgrades = dict(upgrades or {})
        self.connections: set[Connection] = set()
        self._uid = os.getuid()
        self._started = time.monotonic()
        self._churn = Turns(CHURN_PER_ITERATION)
        self._reclaimer = Reclaimer()
        self._accepting = anyio.CancelScope()
        self._replacement: socket.socket | None = None
        """A listener handed to ``listen``, taken up by ``serve``."""
        self._unheard = False
        """The last look found clients that never said hello (``_watch``): an episode goes on, said."""
        timeout = self.limits.hello_timeout
        self._no_hello = error_response(
            None,
            ProtocolError(
                f"no hello within {timeout:g} s of connecting: the daemon closed the connection",
                {"timeout": timeout},
            ),
        )
        limit = self.limits.max_in_flight
        self._too_many = TooManyRequests(
            f"{limit} requests of this connection are running and {limit} more wait (max_in_flight); "
            "send it again once some are answered",
            {"limit": limit},
        )
        self._large_turn = asyncio.Lock()
        """Held while large params are decoded, and for one loop turn after: one at a time, daemon-wide."""
        # Answered by the reader, in the arrival's turn: no task of its own, and the frames after it
        # are read as an established client's.
        self._hello_method: _Method[Ctx] = _Method(HelloParams, self._hello, HELLO_MAX_PARAMS, inline=True)

    def broadcast(self, event: Event) -> None:
        for conn in list(self.connections):
            conn.push(event)

    async def serve(self, listener: socket.socket) -> None:
        """Accept clients until cancelled; each is served in its own task."""
        tasks = _Tasks()
        # What exists now (modules, config, servers' sessions) lives as long as the daemon.
        # Frozen, it is left out of garbage collections, which client churn triggers and which
        # otherwise walk all of it: a 65 ms pause on 1,000 parallel connections, measured.
        # What the clients themselves hold is walked only by full collections, and those wait
        # for the crowd to leave (``Reclaimer``). A frozen object is never collected, nor what it
        # refers to: a start-up object must not gather references to later ones (each server's
        # first actor once chained every actor a reload replaced, see ``supervisor.actor._Lineage``).
        gc.freeze()
        self._spare = Spare(functools.partial(error_response, None))
        try:
            tasks.spawn(self._watch())
            tasks.spawn(self._reclaimer.run())
            while True:
                with anyio.CancelScope() as self._accepting:
                    await self._accept(listener, tasks)
                # Replaced (``listen``): the clients it brought stay, new ones come through the new one.
                listener.close()
                assert self._replacement is not None  # only ``listen`` cancels the scope
                listener, self._replacement = self._replacement, None
        finally:
            try:
                await tasks.aclose()
            finally:
                listener.close()
                self._spare.close()

    def listen(self, listener: socket.socket) -> None:
        """Accept new clients on ``listener`` from now on, in place of the one ``serve`` was given."""
        self._replacement = listener
        self._accepting.cancel()

    async def _accept(self, listener: socket.socket, tasks: _Tasks) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _ = await loop.sock_accept(listener)
            except OSError as exc:
                # Out of file descriptors, most likely: keep serving those already here, and tell
                # those who wait to be accepted why they cannot be (``Spare``).
                self._spare.failed(listener, exc)
                await anyio.sleep(_ACCEPT_RETRY)
                continue
            self._spare.accepted()
            tasks.spawn(self._serve_connection(sock))
            # The connection's set-up waits for its turn (``_churn``); the next accept
            # waits for the next iteration, or a client that connects and hangs up in a
            # loop would keep the listener always ready and this loop always running.
            await asyncio.sleep(0)

    async def _watch(self) -> None:
        """Every quarter of ``write_timeout`` (or of ``hello_timeout``, if shorter), drop the clients
        that stopped reading, and those that never said hello."""
        period = max(0.05, min(self.limits.write_timeout, self.limits.hello_timeout) / 4)
        loop = asyncio.get_running_loop()
        while True:
            await anyio.sleep(period)
            unheard = 0
            for index, conn in enumerate(list(self.connections)):
                now = loop.time()
                conn.check_writes(now)
                unheard += conn.check_hello(now, self._no_hello)
                if index % 256 == 255:
                    await asyncio.sleep(0)
            # Said once per episode: thousands of silent connections must not make thousands of lines.
            if unheard and not self._unheard:
                log.warning("client.no_hello", closed=unheard, timeout=self.limits.hello_timeout)
            self._unheard = bool(unheard)

    async def _serve_connection(self, sock: socket.socket) -> None:
        """Serve one client; whatever happens on this connection ends here, never in the server."""
        conn: Connection | None = None
        try:
            await self._churn.take()
            self._reclaimer.note(0)
            uid = peer_uid(sock)
            stream = await FrameStream.adopt(sock)
            conn = Connection(stream, self.limits)
            if uid is not None and uid != self._uid:
                log.warning("client.refused", conn=conn.id, uid=uid)
                denied = PeerRejected(f"permission denied: this daemon serves uid {self._uid} only")
                await stream.send(error_response(None, denied))
                return
            conn._task = asyncio.current_task()
            self.connections.add(conn)
            await self._read_requests(conn)
            await self._churn.take()  # the tear-down below, for a client that left
        except asyncio.CancelledError:
            if conn is None or not conn._ended:
                raise  # the daemon is stopping
            # else dropped by the daemon (Connection.close): this connection ends, nothing else
        except Exception as exc:  # a broken pipe from the event pump, or anything unforeseen
            if not _only_disconnects(exc):
                log.exception("ipc.connection_error", conn=conn.id if conn else None)
        finally:
            if conn is not None:
                conn._ended = True
                self.connections.discard(conn)
                await conn.tasks.aclose()  # the client is gone: nobody is left to answer
                if conn.stream.backlog():
                    # Bytes it has not read (one dropped for never saying hello, while its answers
                    # to other frames back up): a close would wait to flush them for ever, and the
                    # socket closed below under that transport left the loop watching its number,
                    # which then failed the next connection to get it.
                    conn.stream.abort()
                conn.stream.close()
                # A frame cut short goes with the connection: up to ``max_frame`` bytes to give back.
                self._reclaimer.note(CONNECTION_BYTES + conn.stream.pending)
                if conn.client is not None or conn.bad_messages:
                    bad = conn.bad_messages
                    log.info("client.disconnected", conn=conn.id, client=conn.client, bad_messages=bad)
            sock.close()

    async def _read_requests(self, conn: Connection) -> None:
        requests = InFlight(self.limits.max_in_flight)
        try:
            if await self._serve_requests(conn, requests):
                await self._answer_rest(conn, requests)
        except FrameTooLarge as exc:
            log.warning("client.bad_frame", conn=conn.id, client=conn.client, error=exc.message)
            with contextlib.suppress(*_DISCONNECTS):
                await conn.send(error_response(None, exc))
        except TruncatedFrame as exc:
            log.info("client.truncated", conn=conn.id, client=conn.client, error=exc.message)
        except _DISCONNECTS:
            pass
        finally:
            await requests.aclose()  # the client is gone, or the connection ends: nobody to answer

    @staticmethod
    async def _answer_rest(conn: Connection, requests: InFlight) -> None:
        """The client sent its last byte: answer the requests it sent before, unless it left.

        A client may shut down only its sending side once its requests are written (``nc -N``, a
        script through ``socat``) and go on reading: its answers are still wanted. A client that
        closed the socket, or died, reads the same end-of-file but has hung up: nobody is left to
        answer, and its requests are cancelled (``_read_requests``). Each request's own deadline
        bounds the wait; a hang-up meanwhile is looked for every ``HANG_UP_LOOK``.
        """
        while requests.busy() and not peer_hung_up(conn.stream.socket):
            await requests.wait_idle(HANG_UP_LOOK)

    async def _serve_requests(self, conn: Connection, requests: InFlight) -> bool:
        """Serve the client's requests until it stops sending (True) or its connection was handed to
        a mode, or refused one (False: it ends, whatever still runs with it)."""
        conn.stream.express(functools.partial(self._express, conn, requests))
        try:
            return await self._read_frames(conn, requests)
        finally:
            conn.stream.express(None)

    async def _read_frames(self, conn: Connection, requests: InFlight) -> bool:
        frames = conn.stream.frames(self.limits.max_frame)
        async for data in frames:
            if conn.client is None:
                # Until its hello is answered a client is still arriving: its frames take turns
                # with the other arrivals, or a crowd that connected and then sent its hellos at
                # once would have them all read, logged and answered in one loop turn.
                await self._churn.take()
            message = self._request(conn, data)
            if not isinstance(message, Request):
                await conn.send(message)  # the frame held no request: the client is told why
                continue
            if message.method == "cancel":
                await conn.send(self._cancel(message, requests, conn.id))
                continue
            if message.method == "hello" and self.upgrades and await self._upgrade(conn, message, frames):
                return False
            # Nothing of a frame is kept while the client is silent (``del``): a client idle
            # after a large request would hold megabytes until its next one.
            params: msgspec.Struct | None = None
            if len(data) > codec.LARGE_FRAME:
                self._reclaimer.note(len(data))
                # The decoded params are all the request needs: the frame goes once they are out.
                large, message = message, Request(message.id, message.method)
                del data
                try:
                    params = await self._large_params(large)
                except McpdError as exc:
                    await conn.send(error_response(message.id, exc))
                    continue
                finally:
                    del large
            # Looked up once, here: None (an unknown method) is refused the usual way, by ``_run``.
            method = self._find(message.method)
            if (method is not None and method.inline) or conn.client is None:
                # Before hello, too (refused there): a task would run only after a hello read just
                # behind it had greeted the connection, and then serve the request (among the
                # messages of the mode that hello asked for).
                await conn.send(await self._dispatch(conn, message, method, params))
            elif requests.full():
                # Refused, not waited for: the reader must go on reading the frames the
                # running requests may be waiting for (``server.reply``), and ``cancel``.
                await conn.send(error_response(message.id, self._too_many))
            else:
                requests.start(message.id, self._answer(conn, message, method, requests, params))
            del params
        return True

    def _express(self, conn: Connection, requests: InFlight, data: bytes) -> bool:
        """Start an established client's plain request straight from the read callback (see
        ``FrameStream.express``); False leaves the frame to the reader: anything before hello,
        undecodable, ``cancel``, ``hello``, inline, unknown or refused, whose answers it writes."""
        if conn.client is None or conn._ended:
            return False
        try:
            message = codec.decode_request(data)
        except ProtocolError:
            return False
        if not isinstance(message, Request) or message.method == "cancel":
            return False
        method = self.table.find(message.method)  # None for hello too
        if method is None or method.inline or requests.full():
            return False
        requests.start(message.id, self._answer(conn, message, method, requests, None))
        return True

    def _request(self, conn: Connection, data: bytes) -> Request | bytes:
        """The request in a frame, or the error frame that tells the client it held none."""
        try:
            message = codec.decode_request(data)
            if not isinstance(message, Request):
                raise ProtocolError("clients may only send requests")  # noqa: TRY301
        except ProtocolError as exc:
            # The frame was whole, so the stream is still in step: answer and read on.
            # Logged once per connection: a flood of bad frames must not become a flood of
            # log lines. The rest are counted and the count logged at disconnect.
            if not conn.bad_messages:
                log.warning("client.bad_message", conn=conn.id, client=conn.client, error=exc.message)
            conn.bad_messages += 1
            return error_response(None, exc)
        return message

    @staticmethod
    def _cancel(request: Request, requests: InFlight, conn_id: int) -> bytes:
        """``cancel {id}``: stop a request of this connection; its caller gets no answer for it."""
        try:
            # Answered here, before the table's size check: bounded like any method's params, or
            # megabytes of ``id`` keys would be decoded at once, holding up every client.
            _check_size("cancel", request.params, DEFAULT_MAX_PARAMS)
            params = _decode_params(request.params, CancelParams)
        except InvalidParams as exc:
            return error_response(request.id, exc)
        found = requests.cancel(params.id)
        # Debug for an id that names nothing running: a client may send any number of them.
        (log.info if found else log.debug)("request.cancelled", conn=conn_id, request=params.id, found=found)
        return result_response(request.id, Ok(ok=found))

    def _method(self, name: str) -> _Method[Ctx]:
        return self._hello_method if name == "hello" else self.table.get(name)

    def _find(self, name: str) -> _Method[Ctx] | None:
        return self._hello_method if name == "hello" else self.table.find(name)

    async def _large_params(self, request: Request) -> msgspec.Struct:
        """Params of a large frame: size limit, then a sliced walk, then one decode at a time."""
        method = self._method(request.method)
        _check_size(request.method, request.params, method.max_bytes)
        return await self._decode_large(request.params, method.params)

    async def _decode_large(self, raw: msgspec.Raw, params_type: type[P]) -> P:
        """Large params whose size was checked: a sliced walk, then one decode at a time."""
        for _ in codec.walk(raw):
            await asyncio.sleep(0)
        async with self._large_turn:
            params = _decode_params(raw, params_type)
            await asyncio.sleep(0)
        return params

    async def _answer(
        self,
        conn: Connection,
        request: Request,
        method: _Method[Ctx] | None,
        requests: InFlight,
        params: msgspec.Struct | None,
    ) -> None:
        current_request.set(request.id)
        try:
            await conn.stream.send(await self._dispatch(conn, request, method, params))
        except _DISCONNECTS:
            pass  # the client left before its answer; nothing to do
        finally:
            requests.finished()

    async def _dispatch(
        self, conn: Connection, request: Request, method: _Method[Ctx] | None, params: msgspec.Struct | None
    ) -> bytes:
        """The encoded answer to ``request`` (``method``: its entry in the table, None if unknown): its
        result, or the error it ended in. Never raises."""
        try:
            if conn.client is None and request.method != "hello":
                raise ProtocolError("the first request on a connection must be `hello`")  # noqa: TRY301
            if method is None:
                method = self._method(request.method)  # raises UnknownMethod
            if params is None:
                _check_size(request.method, request.params, method.max_bytes)
                params = _decode_params(request.params, method.params)
            # Run here, not in a coroutine of its own: one level less for each resume of the handler.
            result = await method.handler(self.ctx, conn, params)
            response = result_response(request.id, result)
        except McpdError as exc:
            return error_response(request.id, exc)
        except (msgspec.EncodeError, OverflowError, TypeError) as exc:
            # e.g. an integer beyond 64 bits in a tool result: msgpack cannot carry it.
            error = TransportError(f"the result of {request.method} cannot be sent over the socket: {exc}")
            return error_response(request.id, error)
        except Exception as exc:
            log.exception("ipc.internal_error", method=request.method, conn=conn.id)
            return error_response(request.id, McpdError(f"internal error in {request.method}: {exc}"))
        if len(response) > MAX_RESPONSE:
            too_big = TransportError(
                f"the result of {request.method} is {len(response)} bytes, over the limit of {MAX_RESPONSE}",
                {"size": len(response), "limit": MAX_RESPONSE},
            )
            return error_response(request.id, too_big)
        return response

    async def _upgrade(self, conn: Connection, request: Request, frames: AsyncIterator[bytes]) -> bool:
        """A ``hello`` with a ``mode``: answer it, then hand the connection to that mode's handler.

        Returns False for an ordinary hello (answered the usual way), True once the
        upgraded connection has been served to its end or the upgrade was refused.
        """
        # Bounded like any method's params, before anything decodes them: a hello is read before
        # its mode is known, and megabytes of it decoded at once would hold up every client. Above
        # the plain hello's limit (``resume`` carries a session's state), but over this one it is
        # no upgrade: refused by size the usual way.
        raw = request.params
        if len(raw) > UPGRADE_MAX_PARAMS:
            return False
        try:
            if len(raw) > codec.LARGE_FRAME:
                params = await self._decode_large(raw, HelloParams)
            else:
                params = _decode_params(raw, HelloParams)
        except InvalidParams:
            return False
        if params.mode is None:
            return False
        conn.stream.express(None)  # the mode's handler reads the frames from here on
        try:
            if conn.client is not None:
                # Answers to requests still running would be sent among the mode's messages.
                asked = {"mode": params.mode}
                raise ProtocolError("only a connection's first hello may ask for a mode", asked)
            upgrade = self.upgrades.get(params.mode)
            if upgrade is None:
                raise ProtocolError(f"unknown connection mode {params.mode!r}", {"mode": params.mode})
            hello = await self._hello(self.ctx, conn, params)
        except McpdError as exc:
            await conn.send(error_response(request.id, exc))
            return True
        await conn.send(result_response(request.id, hello))
        await upgrade(conn, frames, params.resume)
        return True

    async def _hello(self, _ctx: Ctx, conn: Connection, params: HelloParams) -> HelloResult:
        if params.protocol != PROTOCOL_VERSION:
            raise ProtocolError(
                f"protocol mismatch: this daemon speaks version {PROTOCOL_VERSION}, "
                f"the client {params.protocol}; use the same mcpd version for both",
                {"daemon": PROTOCOL_VERSION, "client": params.protocol},
            )
        if conn.client is None:
            log.info("client.connected", conn=conn.id, client=params.client)
        conn.client = params.client
        uptime = time.monotonic() - self._started
        return HelloResult(
            protocol=PROTOCOL_VERSION,
            version=mcpd.__version__,
            pid=os.getpid(),
            uptime_s=uptime,
            max_frame=self.limits.max_frame,
        )
