"""The rpc layer on the daemon's side: connections, the methods table, dispatch, notifications.

Every connection is served by its own task group, and every request in its own task, so
requests on one connection run concurrently and are answered as they finish. Nothing a
client sends can disturb another client: a bad message gets an error response on that
connection; a stream that cannot be resynchronised closes that connection only; a client
that stops reading is dropped once a write has waited ``write_timeout``.
"""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import anyio
import msgspec
import structlog
from anyio.abc import SocketAttribute, SocketListener, SocketStream, TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

import mcpd
from mcpd.errors import InvalidParams, McpdError, ProtocolError, UnknownMethod
from mcpd.ipc.endpoint import peer_uid
from mcpd.ipc.framing import DEFAULT_MAX_FRAME, FrameTooLarge, TruncatedFrame
from mcpd.ipc.protocol import (
    EVENT_NOTIFICATION,
    PROTOCOL_VERSION,
    ErrorInfo,
    Event,
    HelloParams,
    HelloResult,
    Message,
    Notification,
    Request,
    Response,
)
from mcpd.ipc.reader import read_frames

log = structlog.get_logger("mcpd.ipc")

Ctx = TypeVar("Ctx")
P = TypeVar("P", bound=msgspec.Struct)
Handler = Callable[[Ctx, "Connection", Any], Awaitable[msgspec.Struct]]

_NIL = b"\xc0"
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Message)
_ids = itertools.count(1)


@dataclass
class Limits:
    max_frame: int = DEFAULT_MAX_FRAME
    write_timeout: float = 10.0
    """A client whose socket stays full this long is dropped."""
    max_in_flight: int = 256
    """Requests one connection may have running; past that the daemon stops reading from it."""
    notification_backlog: int = 4096
    """Undelivered notifications one subscriber may have queued before it is dropped."""


def encode_message(message: Response | Notification) -> bytes:
    """One frame: length prefix, then the msgpack message, built in one buffer."""
    buffer = bytearray(4)
    _encoder.encode_into(message, buffer, 4)
    buffer[:4] = (len(buffer) - 4).to_bytes(4, "big")
    return bytes(buffer)


def error_response(request_id: int | None, error: McpdError) -> bytes:
    return encode_message(Response(request_id, error=ErrorInfo(error.code, error.message, error.data)))


@dataclass(eq=False)
class Connection:
    """One client: its identity from ``hello``, its writes, its subscription."""

    stream: SocketStream
    limits: Limits
    id: int = field(default_factory=lambda: next(_ids))
    client: str | None = None
    peer_pid: int | None = None
    _lock: anyio.Lock = field(default_factory=anyio.Lock)
    _events: MemoryObjectSendStream[Event] | None = None
    _tg: TaskGroup | None = None

    async def send(self, data: bytes) -> None:
        """Write one frame; a client that does not read within ``write_timeout`` is disconnected."""
        async with self._lock:
            with anyio.move_on_after(self.limits.write_timeout) as scope:
                await self.stream.send(data)
            if scope.cancelled_caught:
                log.warning("client.dropped", conn=self.id, client=self.client, reason="not reading")
                self.close()
                raise anyio.BrokenResourceError

    def close(self) -> None:
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    def subscribe(self) -> bool:
        """Start pushing events to this client; False if it already was subscribed."""
        if self._events is not None or self._tg is None:
            return False
        send, receive = anyio.create_memory_object_stream[Event](self.limits.notification_backlog)
        self._events = send

        async def pump() -> None:
            async with receive:
                async for event in receive:
                    params = msgspec.Raw(_encoder.encode(event))
                    await self.send(encode_message(Notification(EVENT_NOTIFICATION, params)))

        self._tg.start_soon(pump)
        return True

    def push(self, event: Event) -> None:
        """Queue an event for this client if it subscribed; a subscriber that lags too far is dropped."""
        if self._events is None:
            return
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


class MethodTable(Generic[Ctx]):
    """Method name -> params struct -> handler, each declared once with ``@table.method(...)``."""

    def __init__(self) -> None:
        self._methods: dict[str, _Method[Ctx]] = {}

    def method(self, name: str, params: type[P]) -> Callable[[Handler[Ctx]], Handler[Ctx]]:
        def register(handler: Handler[Ctx]) -> Handler[Ctx]:
            if name in self._methods or name == "hello":
                raise ValueError(f"method {name!r} is already defined")
            self._methods[name] = _Method(params, handler)
            return handler

        return register

    def names(self) -> list[str]:
        return sorted(["hello", *self._methods])

    def get(self, name: str) -> _Method[Ctx]:
        try:
            return self._methods[name]
        except KeyError:
            raise UnknownMethod(f"unknown method {name!r}", {"method": name}) from None


def _decode_params(raw: msgspec.Raw, params_type: type[P]) -> P:
    try:
        if bytes(raw) == _NIL:
            return params_type()
        return msgspec.msgpack.decode(raw, type=params_type)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise InvalidParams(f"invalid params: {exc}") from None
    except TypeError as exc:  # required fields missing from an empty params object
        raise InvalidParams(f"invalid params: {exc}") from None


class RpcServer(Generic[Ctx]):
    """Serves ``table`` on a listener, passing ``ctx`` to every handler."""

    def __init__(self, table: MethodTable[Ctx], ctx: Ctx, limits: Limits | None = None) -> None:
        self.table = table
        self.ctx = ctx
        self.limits = limits or Limits()
        self.connections: set[Connection] = set()
        self._uid = os.getuid()

    def broadcast(self, event: Event) -> None:
        for conn in list(self.connections):
            conn.push(event)

    async def serve(self, listener: SocketListener) -> None:
        async with listener:
            await listener.serve(self._serve_connection)

    async def _serve_connection(self, stream: SocketStream) -> None:
        conn = Connection(stream, self.limits)
        async with stream:
            sock: socket.socket = stream.extra(SocketAttribute.raw_socket)
            uid = peer_uid(sock)
            if uid is not None and uid != self._uid:
                log.warning("client.refused", conn=conn.id, uid=uid)
                denied = ProtocolError(f"permission denied: this daemon serves uid {self._uid} only")
                with anyio.move_on_after(1):
                    await stream.send(error_response(None, denied))
                return
            self.connections.add(conn)
            try:
                async with anyio.create_task_group() as tg:
                    conn._tg = tg
                    await self._read_requests(conn, tg)
                    tg.cancel_scope.cancel()  # the client is gone: nobody is left to answer
            finally:
                self.connections.discard(conn)
                log.info("client.disconnected", conn=conn.id, client=conn.client)

    async def _read_requests(self, conn: Connection, tg: TaskGroup) -> None:
        in_flight = anyio.Semaphore(self.limits.max_in_flight)
        try:
            async for data in read_frames(conn.stream, self.limits.max_frame):
                try:
                    message = _decoder.decode(data)
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    await conn.send(error_response(None, ProtocolError(f"undecodable message: {exc}")))
                    continue
                if not isinstance(message, Request):
                    await conn.send(error_response(None, ProtocolError("clients may only send requests")))
                    continue
                await in_flight.acquire()
                tg.start_soon(self._answer, conn, message, in_flight)
        except FrameTooLarge as exc:
            log.warning("client.bad_frame", conn=conn.id, client=conn.client, error=exc.message)
            await conn.send(error_response(None, exc))
        except TruncatedFrame as exc:
            log.info("client.truncated", conn=conn.id, client=conn.client, error=exc.message)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
            pass

    async def _answer(self, conn: Connection, request: Request, in_flight: anyio.Semaphore) -> None:
        try:
            response = await self._dispatch(conn, request)
            await conn.send(response)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
            pass  # the client left before its answer; nothing to do
        finally:
            in_flight.release()

    async def _dispatch(self, conn: Connection, request: Request) -> bytes:
        try:
            result = await self._run(conn, request)
        except McpdError as exc:
            return error_response(request.id, exc)
        except Exception as exc:
            log.exception("ipc.internal_error", method=request.method, conn=conn.id)
            return error_response(request.id, McpdError(f"internal error in {request.method}: {exc}"))
        return encode_message(Response(request.id, msgspec.Raw(_encoder.encode(result))))

    async def _run(self, conn: Connection, request: Request) -> msgspec.Struct:
        if request.method == "hello":
            return self._hello(conn, _decode_params(request.params, HelloParams))
        if conn.client is None:
            raise ProtocolError("the first request on a connection must be `hello`")
        method = self.table.get(request.method)
        return await method.handler(self.ctx, conn, _decode_params(request.params, method.params))

    def _hello(self, conn: Connection, params: HelloParams) -> HelloResult:
        if params.protocol != PROTOCOL_VERSION:
            raise ProtocolError(
                f"protocol mismatch: this daemon speaks version {PROTOCOL_VERSION}, "
                f"the client {params.protocol}; use the same mcpd version for both",
                {"daemon": PROTOCOL_VERSION, "client": params.protocol},
            )
        if conn.client is None:
            log.info("client.connected", conn=conn.id, client=params.client)
        conn.client = params.client
        return HelloResult(protocol=PROTOCOL_VERSION, version=mcpd.__version__, pid=os.getpid())
