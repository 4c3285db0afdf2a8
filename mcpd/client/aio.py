"""The async client (anyio): many requests in flight on one connection, and pushed events.

``async with connect() as mcpd:`` opens the socket, says hello and runs a reader task
that routes each response to its waiting request and each event to ``events()``.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import msgspec
from anyio.abc import SocketStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from mcpd.client import _wire
from mcpd.errors import CallTimeout, McpdError, ProtocolError, TransportError
from mcpd.ipc.protocol import (
    EVENT_NOTIFICATION,
    Event,
    HelloResult,
    Notification,
    ReloadResult,
    Response,
    ToolResult,
)
from mcpd.ipc.reader import read_frames
from mcpd.registry.model import ToolEntry
from mcpd.supervisor.model import ServerStatus

T = TypeVar("T")
_event_decoder = msgspec.msgpack.Decoder(Event)


@dataclass
class _Waiter:
    done: anyio.Event = field(default_factory=anyio.Event)
    response: Response | None = None


class AsyncClient:
    """A connected client; build it with ``connect()``."""

    def __init__(self, stream: SocketStream, name: str) -> None:
        self.name = name
        self.hello_result: HelloResult | None = None
        self._stream = stream
        self._ids = itertools.count(1)
        self._waiters: dict[int, _Waiter] = {}
        self._send_lock = anyio.Lock()
        self._closed: McpdError | None = None
        self._event_send: MemoryObjectSendStream[Event] | None = None
        self._event_receive: MemoryObjectReceiveStream[Event] | None = None

    async def request(self, call: _wire.Call[T]) -> T:
        """Send ``call``, wait for its answer (other requests may be answered meanwhile)."""
        if self._closed is not None:
            raise self._closed
        request_id = next(self._ids)
        waiter = _Waiter()
        self._waiters[request_id] = waiter
        try:
            async with self._send_lock:
                await self._stream.send(call.request(request_id))
            with anyio.move_on_after(call.timeout):
                await waiter.done.wait()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise TransportError(f"lost the daemon connection: {exc}") from None
        finally:
            self._waiters.pop(request_id, None)
        if waiter.response is None:
            if self._closed is not None:
                raise self._closed
            raise CallTimeout(f"no answer to {call.method} within {call.timeout:g}s")
        return _wire.result_of(waiter.response, call)

    async def _read(self) -> None:
        reason: McpdError = TransportError("the daemon closed the connection")
        try:
            async for data in read_frames(self._stream):
                message = _wire.decoder.decode(data)
                if isinstance(message, Response):
                    self._deliver(message)
                elif isinstance(message, Notification) and message.method == EVENT_NOTIFICATION:
                    self._push(_event_decoder.decode(message.params))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            reason = TransportError(f"lost the daemon connection: {exc}")
        except (ProtocolError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            reason = TransportError(f"the daemon sent a malformed message: {exc}")
        finally:
            self._closed = reason
            for waiter in self._waiters.values():
                waiter.done.set()
            if self._event_send is not None:
                self._event_send.close()

    def _deliver(self, response: Response) -> None:
        if response.id is None:  # the daemon could not tell which request failed: fail them all
            for waiter in self._waiters.values():
                waiter.response = response
                waiter.done.set()
            return
        pending = self._waiters.get(response.id)
        if pending is not None:
            pending.response = response
            pending.done.set()

    def _push(self, event: Event) -> None:
        if self._event_send is None:
            return
        with contextlib.suppress(anyio.WouldBlock):
            self._event_send.send_nowait(event)

    # -- the methods ------------------------------------------------------------------------

    async def status(self) -> list[ServerStatus]:
        return (await self.request(_wire.status())).servers

    async def start(self, name: str) -> ServerStatus:
        return await self.request(_wire.server_action("start", name))

    async def stop(self, name: str) -> ServerStatus:
        return await self.request(_wire.server_action("stop", name))

    async def restart(self, name: str) -> ServerStatus:
        return await self.request(_wire.server_action("restart", name))

    async def reload(self) -> ReloadResult:
        return await self.request(_wire.reload())

    async def tools(self, servers: list[str] | None = None) -> list[ToolEntry]:
        return (await self.request(_wire.tools_list(servers))).tools

    async def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        server: str | None = None,
        timeout: float | None = None,
    ) -> ToolResult:
        """Call ``tool`` (qualified ``server__tool``, or a plain name with ``server=``)."""
        return await self.request(_wire.tools_call(tool, arguments, server, timeout))

    async def subscribe(self, backlog: int = 1024) -> MemoryObjectReceiveStream[Event]:
        """Ask for state and tool-list events; returns the stream they arrive on."""
        if self._event_receive is None:
            self._event_send, self._event_receive = anyio.create_memory_object_stream[Event](backlog)
            await self.request(_wire.subscribe())
        return self._event_receive


@contextlib.asynccontextmanager
async def connect(
    socket_path: str | Path | None = None,
    *,
    name: str = "mcpd-client",
    timeout: float = _wire.DEFAULT_TIMEOUT,
) -> AsyncIterator[AsyncClient]:
    """Connect to the daemon and say hello; raises ``DaemonNotRunning`` when nothing listens."""
    path = _wire.resolve_socket(socket_path)
    try:
        with anyio.fail_after(timeout):
            stream = await anyio.connect_unix(path)
    except OSError as exc:
        raise _wire.not_running(path, exc) from None
    async with stream, anyio.create_task_group() as tg:
        client = AsyncClient(stream, name)
        tg.start_soon(client._read)
        try:
            client.hello_result = await client.request(_wire.hello(name))
            yield client
        finally:
            tg.cancel_scope.cancel()
