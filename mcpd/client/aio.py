"""The async client (anyio on asyncio): many requests in flight on one connection, and pushed events.

``async with connect() as mcpd:`` opens the socket, says hello and runs a reader task
that routes each response to its waiting request and each event to ``events()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from mcpd.client import _wire
from mcpd.errors import CallTimeout, McpdError, ProtocolError, TransportError
from mcpd.ipc.framing import MAX_CLIENT_FRAME
from mcpd.ipc.stream import FrameStream
from mcpd.model.protocol import (
    EVENT_NOTIFICATION,
    PROGRESS_NOTIFICATION,
    ApproveResult,
    ConnectResult,
    HelloResult,
    Notification,
    Progress,
    ReloadResult,
    Response,
    SelectResult,
    SessionTools,
    ToolsListResult,
    TrustResult,
)
from mcpd.model.servers import Event, ServerStatus
from mcpd.model.tools import ToolEntry, ToolResult
from mcpd.model.usage import ReportResult

T = TypeVar("T")
_event_decoder = msgspec.msgpack.Decoder(Event)
_progress_decoder = msgspec.msgpack.Decoder(Progress)
ProgressHandler = Callable[[Progress], None]


class AsyncClient:
    """A connected client; build it with ``connect()``."""

    def __init__(self, stream: FrameStream, name: str) -> None:
        self.name = name
        self.hello_result: HelloResult | None = None
        self._stream = stream
        self._ids = itertools.count(1)
        self._waiters: dict[int, asyncio.Future[Response | None]] = {}
        self._progress: dict[int, ProgressHandler] = {}
        self._closed: McpdError | None = None
        self._event_send: MemoryObjectSendStream[Event] | None = None
        self._event_receive: MemoryObjectReceiveStream[Event] | None = None

    async def request(self, call: _wire.Call[T], on_progress: ProgressHandler | None = None) -> T:
        """Send ``call``, wait for its answer (other requests may be answered meanwhile)."""
        if self._closed is not None:
            raise self._closed
        request_id = next(self._ids)
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Response | None] = loop.create_future()
        self._waiters[request_id] = waiter
        if on_progress is not None:
            self._progress[request_id] = on_progress
        # A loop timer, not a cancel scope, bounds the wait: it is far cheaper per request.
        timer = loop.call_later(call.timeout, _settle, waiter, None)
        try:
            await self._stream.send(call.request(request_id))
            response = await waiter
        except (ConnectionError, OSError) as exc:
            raise TransportError(f"lost the daemon connection: {exc}") from None
        except asyncio.CancelledError:
            # The caller gave up: withdraw the request so the daemon (and the server) stop too.
            if self._closed is None:
                with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                    self._stream.send_nowait(_wire.cancel(request_id))
            raise
        finally:
            timer.cancel()
            self._waiters.pop(request_id, None)
            self._progress.pop(request_id, None)
        if response is None:
            if self._closed is not None:
                raise self._closed
            raise CallTimeout(f"no answer to {call.method} within {call.timeout:g}s")
        return _wire.result_of(response, call)

    async def _read(self) -> None:
        reason: McpdError = TransportError("the daemon closed the connection")
        try:
            async for data in self._stream.frames(MAX_CLIENT_FRAME):
                message = _wire.decoder.decode(data)
                if isinstance(message, Response):
                    self._deliver(message)
                elif isinstance(message, Notification) and message.method == EVENT_NOTIFICATION:
                    self._push(_event_decoder.decode(message.params))
                elif isinstance(message, Notification) and message.method == PROGRESS_NOTIFICATION:
                    update = _progress_decoder.decode(message.params)
                    handler = self._progress.get(update.request)
                    if handler is not None:
                        handler(update)
        except (ConnectionError, OSError) as exc:
            reason = TransportError(f"lost the daemon connection: {exc}")
        except (ProtocolError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            reason = TransportError(f"the daemon sent a malformed message: {exc}")
        finally:
            self._closed = reason
            for waiter in self._waiters.values():
                _settle(waiter, None)
            if self._event_send is not None:
                self._event_send.close()

    def _deliver(self, response: Response) -> None:
        if response.id is None:  # the daemon could not tell which request failed: fail them all
            for waiter in self._waiters.values():
                _settle(waiter, response)
            return
        pending = self._waiters.get(response.id)
        if pending is not None:
            _settle(pending, response)

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
        """Every tool of the live servers (or of ``servers``), by server then name."""
        return (await self.request(_wire.tools_list(servers))).tools

    async def search(
        self,
        query: str,
        *,
        servers: list[str] | None = None,
        limit: int | None = None,
        budget_tokens: int | None = None,
        explain: bool = False,
        include_reserved: bool = True,
    ) -> ToolsListResult:
        """Tools ranked for ``query``; with ``budget_tokens``, also rendered for a model's context."""
        return await self.request(
            _wire.tools_list(
                servers,
                query=query,
                limit=limit,
                budget_tokens=budget_tokens,
                explain=explain,
                include_reserved=include_reserved,
            )
        )

    async def connect_server(self, server: str) -> ConnectResult:
        """Activate ``server``'s tools for this connection's session."""
        return await self.request(_wire.session_connect(server))

    async def session_tools(self) -> SessionTools:
        """The servers this session connected and their tools."""
        return await self.request(_wire.session_tools())

    async def snippet(self) -> str:
        """An ``<available_mcps>`` block describing the live servers, for a system prompt."""
        return (await self.request(_wire.snippet())).text

    async def approve(self, server: str, tool: str | None = None) -> ApproveResult:
        """Accept the current definitions of ``server``'s held-back tools (or of ``tool``)."""
        return await self.request(_wire.approve(server, tool))

    async def trust(self, server: str) -> TrustResult:
        """Held-back changes (with diffs) and verifier findings for ``server``."""
        return await self.request(_wire.trust(server))

    async def request_capability(self, capability: str, context: str | None = None) -> ToolResult:
        """Record that the user needed something no tool provides."""
        return await self.request(_wire.capability_request(capability, context))

    async def report(self, since_s: float | None = None, top: int = 20) -> ReportResult:
        """Per-tool call statistics and the top missing capabilities (optionally of the last ``since_s``)."""
        return await self.request(_wire.report(since_s, top))

    async def select(self, query: str, threshold: float | None = None) -> SelectResult:
        """Compatible-mode server selection (term-frequency cosine, reference behaviour)."""
        return await self.request(_wire.select(query, threshold))

    async def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        server: str | None = None,
        timeout: float | None = None,
        query: str | None = None,
        on_progress: ProgressHandler | None = None,
    ) -> ToolResult:
        """Call ``tool`` (qualified ``server__tool``, or a plain name with ``server=``).

        ``query``: the user request that led to the call, so that ranking learns from it.
        ``on_progress``: receives the server's progress updates for this call.
        """
        call = _wire.tools_call(tool, arguments, server, timeout, query, progress=on_progress is not None)
        return await self.request(call, on_progress)

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
            stream = await FrameStream.connect(str(path))
    except OSError as exc:
        raise _wire.not_running(path, exc) from None
    client = AsyncClient(stream, name)
    # A plain task rather than a task group around the caller's block, so that errors from
    # that block reach the caller as themselves, not wrapped in an ExceptionGroup.
    reader = asyncio.get_running_loop().create_task(client._read())
    try:
        client.hello_result = await client.request(_wire.hello(name))
        yield client
    finally:
        reader.cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.gather(reader, return_exceptions=True)
        stream.close()


def _settle(future: asyncio.Future[Response | None], value: Response | None) -> None:
    if not future.done():
        future.set_result(value)
