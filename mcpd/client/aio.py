"""The async client (anyio on asyncio): many requests in flight on one connection, and pushed events.

``async with connect() as mcpd:`` opens the socket, says hello and runs a reader task
that routes each response to its waiting request and each event to ``subscribe()``'s stream.

With ``connect(reconnect=True)`` the client outlives the daemon: when the connection drops a
task of its own connects again (50 ms, doubling to 1 s, for as long as the client is open), says
hello, restores its session (subscription, connected servers) and carries on, whether or not a
request waits. A request waits for that within its own deadline; one that only reads is then
sent again, one the daemon may have been running (a tool call) fails with ``TransportError``:
only the caller can know whether to run it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from mcpd.client import _wire
from mcpd.client._wire import ProgressHandler
from mcpd.client.answers import Answers, AskHandler, answer
from mcpd.client.api import Api
from mcpd.errors import CallTimeout, InvalidParams, McpdError, ProtocolError, TransportError
from mcpd.ipc.endpoint import check_server, peer_pid
from mcpd.ipc.framing import MAX_CLIENT_FRAME
from mcpd.ipc.stream import FrameStream
from mcpd.model.logs import LOGS_NOTIFICATION, LogEntry, LogLines
from mcpd.model.protocol import (
    EVENT_NOTIFICATION,
    PROGRESS_NOTIFICATION,
    HelloResult,
    Notification,
    Response,
)
from mcpd.model.requests import SERVER_REQUEST_NOTIFICATION, ServerAsk
from mcpd.model.servers import Event, ResourceUpdated, ends_subscription

T = TypeVar("T")
R = TypeVar("R")


class AsyncClient(Api):
    """A connected client; build it with ``connect()``."""

    def __init__(
        self,
        stream: FrameStream,
        name: str,
        *,
        path: Path,
        reconnect: bool = False,
        answers: Answers[AskHandler] | None = None,
    ) -> None:
        self.name = name
        self.answers: Answers[AskHandler] = answers or Answers()
        """What this client answers when a server asks during one of its calls."""
        self._answering: set[asyncio.Task[None]] = set()
        self.hello_result: HelloResult | None = None
        self._pid: int | None = None
        """The daemon's pid, as its hello said (else its socket): a frozen one is looked at."""
        self._stream = stream
        self._path = path
        self._reconnect = reconnect
        self._reader: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        """Connects again whenever the connection drops (``reconnect=True`` only)."""
        self._watchdog: asyncio.Task[None] | None = None
        """Finds out a daemon that stopped answering (``_watch``)."""
        self._revived: asyncio.Future[None] | None = None
        """Done once the keeper has connected again after the latest drop."""
        self._restore: list[_wire.Call[Any]] = []
        self._ids = itertools.count(1)
        self._waiters: dict[int, asyncio.Future[Response | None]] = {}
        self._heard = 0
        """Messages read from the daemon so far: the watchdog sees whether any came meanwhile."""
        self._progress: dict[int, ProgressHandler] = {}
        self._closed: McpdError | None = None
        self._dropped: McpdError | None = None
        """Why the client ended the current connection itself (``_drop``), for its reader to report."""
        self._event_send: MemoryObjectSendStream[Event] | None = None
        self._event_receive: MemoryObjectReceiveStream[Event] | None = None
        self._log_sends: dict[str, MemoryObjectSendStream[LogEntry]] = {}
        """The servers whose log ``follow_logs`` follows, and where their entries go."""
        self._subscribed = False

    async def request(self, call: _wire.Call[T]) -> T:
        """Send ``call``, wait for its answer (other requests may be answered meanwhile)."""
        deadline = anyio.current_time() + call.timeout
        while True:
            if self._closed is not None:
                await self._wait_connected(deadline)
            try:
                result = await self._request_once(call)
            except TransportError:
                if not (self._reconnect and call.safe and self._closed is not None):
                    raise
                continue  # only reads: ask the next daemon
            if call.restore and call not in self._restore:
                self._restore.append(call)
            if call.withdraws is not None:
                self._restore = [c for c in self._restore if not (c.restore and call.withdraws(c))]
            return result

    async def _request_once(self, call: _wire.Call[T]) -> T:
        reader = self._reader
        if reader is None or reader.done():
            # Nothing would ever answer: the connection is gone (the keeper's next try may revive it).
            raise self._closed or TransportError("the client is not connected")
        request_id = next(self._ids)
        data = call.request(request_id)
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Response | None] = loop.create_future()
        self._waiters[request_id] = waiter
        if call.on_progress is not None:
            self._progress[request_id] = call.on_progress
        # A loop timer, not a cancel scope, bounds the wait: it is far cheaper per request.
        timer = loop.call_later(call.timeout, _settle, waiter, None)
        try:
            self._stream.send_nowait(data)
            if self._stream.backed_up():
                await self._drain(waiter)
            response = await waiter
        except (ConnectionError, OSError) as exc:
            raise TransportError(f"lost the daemon connection: {exc}") from None
        except BaseException:
            # The caller gave up, or its progress callback failed: withdraw the request so the
            # daemon (and the server) stop too.
            if self._closed is None:
                with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                    self._stream.send_nowait(_wire.cancel(request_id))
            raise
        finally:
            timer.cancel()
            self._waiters.pop(request_id, None)
            self._progress.pop(request_id, None)
        if response is None:
            # The reader settles what waits once it has ended (and said why); the timer, while it
            # reads on. ``_closed`` alone is set too while the keeper's hello and restore run, on a
            # live connection.
            lost = self._closed if reader.done() else None
            if lost is not None:
                if call.safe or not self._reconnect:
                    raise lost
                raise TransportError(
                    f"the daemon connection dropped during {call.method}; it may or may not have run",
                    {"method": call.method},
                )
            raise CallTimeout(f"no answer to {call.method} within {call.timeout:g}s")
        return _wire.result_of(response, call)

    async def _drain(self, waiter: asyncio.Future[Response | None]) -> None:
        """Wait for the daemon to take a request queued for it, as long as ``waiter`` waits (its
        timer, or the watchdog once the daemon stopped answering): a frozen daemon never takes it."""
        drained = asyncio.ensure_future(self._stream.drain())
        either: list[asyncio.Future[Any]] = [drained, waiter]
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            drained.cancel()
        if waiter.done():
            return  # answered, timed out or lost meanwhile: the waiter says which
        if drained.done() and not drained.cancelled():
            drained.result()  # the connection's loss, as ``ConnectionError``

    async def _read(self) -> None:
        reason: McpdError = TransportError("the daemon closed the connection")
        try:
            async for data in self._stream.frames(MAX_CLIENT_FRAME):
                self._heard += 1
                message = _wire.decode_message(data)
                if isinstance(message, Response):
                    self._deliver(message)
                elif isinstance(message, Notification):
                    self._notified(message)
        except (ConnectionError, OSError) as exc:
            reason = TransportError(f"lost the daemon connection: {exc}")
        except ProtocolError as exc:  # a frame over the limit
            reason = TransportError(f"the daemon sent a malformed message: {exc}")
        except TransportError as exc:
            reason = exc
        finally:
            self._closed = self._dropped or reason
            if self._reconnect and (self._revived is None or self._revived.done()):
                self._revived = asyncio.get_running_loop().create_future()
            for waiter in self._waiters.values():
                _settle(waiter, None)
            for task in self._answering:
                # What this connection asked is withdrawn with it: its answer, sent on the next
                # connection, would be taken there for another question (or go nowhere).
                task.cancel()
            if self._event_send is not None and not self._reconnect:
                self._event_send.close()
            for send in self._log_sends.values():
                send.close()  # follows are not restored after a reconnect: their streams end

    def _notified(self, message: Notification) -> None:
        if message.method == EVENT_NOTIFICATION:
            self._push(_wire.decode_event(message.params))
        elif message.method == LOGS_NOTIFICATION:
            self._push_logs(_wire.decode_log_lines(message.params))
        elif message.method == SERVER_REQUEST_NOTIFICATION:
            self._answer(_wire.decode_ask(message.params))
        elif message.method == PROGRESS_NOTIFICATION:
            update = _wire.decode_progress(message.params)
            handler = self._progress.get(update.request)
            if handler is not None:
                try:
                    handler(update)
                except Exception as exc:  # the caller's own bug: raised to that caller
                    # It ends that one request, never the reader every other request shares.
                    del self._progress[update.request]
                    waiter = self._waiters.get(update.request)
                    if waiter is not None and not waiter.done():
                        waiter.set_exception(exc)

    def _start(self, stream: FrameStream) -> None:
        self._stream = stream
        self._pid = peer_pid(stream.socket)
        self._dropped = None
        # Plain tasks rather than a task group around the caller's block, so that errors from
        # that block reach the caller as themselves, not wrapped in an ExceptionGroup.
        loop = asyncio.get_running_loop()
        self._reader = loop.create_task(self._read())
        if self._watchdog is None:  # one for the client's life, whichever connection it is on
            self._watchdog = loop.create_task(self._watch())

    async def _watch(self) -> None:
        """Ask the daemon whether it is there whenever something has waited ``PROBE_AFTER`` without a
        word from it: a request, or a reader of the event stream or of a followed log. If it does not
        answer that either, it is frozen (SIGSTOP, a hung loop) and the connection is dropped as if
        the daemon had gone: requests fail with ``TransportError`` rather than wait out their
        timeouts (an hour for a tool call without one), the streams end (a reconnecting client's
        connects again instead). One task for all: nothing is added to each request's own path.

        A connection being restored is watched too: the keeper's hello to a daemon that accepts but
        never answers would otherwise wait out its whole timeout before the next try."""
        while True:
            heard = self._heard
            await asyncio.sleep(_wire.PROBE_AFTER)
            reading = self._reader is not None and not self._reader.done()
            if self._heard != heard or not reading or not self._awaited():
                continue
            try:
                await self._request_once(_wire.ping())
            except CallTimeout:
                self._drop(_wire.stopped(self._pid) or _wire.frozen())
            except McpdError:
                pass  # answered (an older daemon refuses the method), or dropped: the reader says so

    def _awaited(self) -> bool:
        """Whether a request waits for its answer, or a reader for the next event or log entry."""
        streams: list[MemoryObjectSendStream[Any]] = [*self._log_sends.values()]
        if self._event_send is not None:
            streams.append(self._event_send)
        return bool(self._waiters) or any(s.statistics().tasks_waiting_receive for s in streams)

    def _drop(self, reason: McpdError) -> None:
        """End the connection at once (a frozen daemon never takes what is queued for it): its
        reader then settles what waits on it with ``reason``, as it would the daemon's own leaving."""
        self._dropped = reason
        self._stream.abort()

    def _answer(self, ask: ServerAsk) -> None:
        """Answer a server's request in a task of its own: the reader must read on meanwhile."""

        async def reply() -> None:
            with contextlib.suppress(McpdError):  # the daemon went away: nobody waits for the answer
                await self.request(_wire.server_reply(await answer(self.answers, ask)))

        task = asyncio.get_running_loop().create_task(reply())
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    async def _stop(self) -> None:
        for task in self._answering:
            task.cancel()
        # The keeper first: it would otherwise go on to connect to the next daemon for nobody.
        owned: list[asyncio.Task[None] | None] = [self._keeper, self._watchdog, self._reader]
        for running in owned:
            if running is not None:
                running.cancel()
                with anyio.CancelScope(shield=True):
                    await asyncio.wait([running])
        self._stream.close()
        if self._event_send is not None:
            self._event_send.close()

    async def _wait_connected(self, deadline: float) -> None:
        """Wait (until ``deadline`` at most) while the keeper connects again; else raise the loss."""
        while (closed := self._closed) is not None:
            keeper, revived = self._keeper, self._revived
            remaining = deadline - anyio.current_time()
            if keeper is None or keeper.done() or revived is None or revived.done() or remaining <= 0:
                raise closed
            # asyncio.wait, not a cancel scope: running out of time is the loss itself, never a
            # TimeoutError, and one caller's deadline leaves the keeper and other callers alone.
            await asyncio.wait([revived, keeper], timeout=remaining, return_when=asyncio.FIRST_COMPLETED)

    async def _keep_connected(self) -> None:
        """Connect again each time the connection drops, until the client closes or the daemon
        there refuses it for good (then its requests raise why and its event stream ends)."""
        while True:
            assert self._reader is not None
            await asyncio.wait([self._reader])
            try:
                refused = await self._reconnect_once()
            except McpdError as exc:
                self._closed = exc
                if self._event_send is not None:
                    self._event_send.close()
                return
            assert self._revived is not None
            _settle(self._revived, None)
            with contextlib.suppress(TransportError, CallTimeout):  # dropped again: reconnect
                await self._restore_later(refused)

    async def _restore_later(self, refused: list[_wire.Call[Any]]) -> None:
        """Send again, for a while, the restore calls the daemon refused (a server still starting)."""
        delay = _RETRY_FIRST
        give_up = anyio.current_time() + _wire.DEFAULT_TIMEOUT
        while refused and anyio.current_time() + delay < give_up:
            await anyio.sleep(delay)
            delay = min(delay * 2, _RETRY_CAP)
            # Only what is still part of the session: the caller may have withdrawn some meanwhile.
            refused = [call for call in refused if call in self._restore and not await self._restored(call)]

    async def _restored(self, call: _wire.Call[Any]) -> bool:
        """Restore one part of the session; False if the daemon refused it (the others go on)."""
        try:
            await self._request_once(call)
        except (TransportError, CallTimeout):
            raise
        except McpdError:
            return False
        return True

    async def _reconnect_once(self) -> list[_wire.Call[Any]]:
        """Connect to the next daemon (retrying while none listens), say hello and restore the
        session; returns the restore calls the daemon refused, to send again later."""
        delay = _RETRY_FIRST
        while True:
            await anyio.sleep(delay)
            delay = min(delay * 2, _RETRY_CAP)
            try:
                with anyio.fail_after(_wire.DEFAULT_TIMEOUT):
                    stream = await FrameStream.connect(str(self._path))
            except (OSError, TimeoutError):
                continue  # nothing listens (yet)
            try:
                check_server(stream.socket, self._path)  # the next daemon is checked like the first
            except McpdError:
                stream.close()
                raise
            self._stream.close()
            self._start(stream)
            try:
                self.hello_result = await self._request_once(_wire.hello(self.name))
                self._pid = self.hello_result.pid
                refused = [call for call in list(self._restore) if not await self._restored(call)]
            except (TransportError, CallTimeout):
                # Gone again, or listening but not answering: drop this connection and try anew.
                await self._let_go(stream)
                continue
            except McpdError:
                await self._let_go(stream)  # refused for good (another protocol): nothing left open
                raise
            self._closed = None
            return refused

    async def _let_go(self, stream: FrameStream) -> None:
        stream.close()
        assert self._reader is not None
        await asyncio.wait([self._reader])

    def _deliver(self, response: Response) -> None:
        if response.id is None:  # the daemon could not tell which request failed: fail them all
            for waiter in self._waiters.values():
                _settle(waiter, response)
            return
        pending = self._waiters.get(response.id)
        if pending is not None:
            _settle(pending, response)

    def _push(self, event: Event) -> None:
        if isinstance(event, ResourceUpdated) and ends_subscription(event.meta):
            # The daemon ended it (the resource is gone, or its server): a reconnect must not take it
            # again, perhaps from another server of that name.
            self._restore = [call for call in self._restore if not _wire.subscribes_to(call, event.uri)]
        if self._event_send is None:
            return
        # Full: the consumer is behind, the event is dropped. Closed: nobody reads any more.
        with contextlib.suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._event_send.send_nowait(event)

    def _push_logs(self, lines: LogLines) -> None:
        send = self._log_sends.get(lines.server)
        if send is None:
            return
        for entry in lines.entries:
            try:
                send.send_nowait(entry)
            except anyio.WouldBlock:
                break  # the consumer is behind: drop what does not fit (``seq`` shows the gap)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
        if lines.ended:
            send.close()

    @contextlib.asynccontextmanager
    async def follow_logs(
        self, server: str, limit: int | None = None, *, backlog: int = 10_000
    ) -> AsyncIterator[MemoryObjectReceiveStream[LogEntry]]:
        """A stream of ``server``'s latest ``limit`` log entries (all it keeps when None), then of
        each new one as it comes; it ends when the server leaves the config or the connection drops.

        Entries left unread beyond ``backlog`` are dropped (the ``seq`` of the next shows the gap).
        The follow stops when the block ends. One follow per server at a time on a client.
        """
        if server in self._log_sends:
            raise InvalidParams(f"this client already follows the log of {server!r}", {"server": server})
        send, receive = anyio.create_memory_object_stream[LogEntry](backlog)
        self._log_sends[server] = send
        following = False
        try:
            await self.request(_wire.logs_follow(server, limit))
            following = True
            with receive:
                yield receive
        finally:
            del self._log_sends[server]
            send.close()
            if following and self._closed is None:
                with anyio.CancelScope(shield=True), contextlib.suppress(McpdError):
                    await self.request(_wire.logs_unfollow(server))

    async def _run(self, call: _wire.Call[R], pick: Callable[[R], T]) -> T:
        return pick(await self.request(call))

    async def subscribe(self, backlog: int = 1024) -> MemoryObjectReceiveStream[Event]:
        """Ask for state and tool-list events; returns the stream they arrive on."""
        stream = self.events(backlog)
        if not self._subscribed:
            await self.request(_wire.subscribe())
            self._subscribed = True
        return stream

    def events(self, backlog: int = 1024) -> MemoryObjectReceiveStream[Event]:
        """The stream events arrive on: the daemon's after ``subscribe()``, a resource's
        ``ResourceUpdated`` after ``subscribe_resource()``."""
        if self._event_receive is None:
            self._event_send, self._event_receive = anyio.create_memory_object_stream[Event](backlog)
        return self._event_receive


_RETRY_FIRST = 0.05
_RETRY_CAP = 1.0


@contextlib.asynccontextmanager
async def connect(
    socket_path: str | Path | None = None,
    *,
    name: str = "mcpd-client",
    timeout: float = _wire.DEFAULT_TIMEOUT,
    reconnect: bool = False,
    on_sampling: AskHandler | None = None,
    on_elicitation: AskHandler | None = None,
    roots: Sequence[str | Mapping[str, str]] | None = None,
) -> AsyncIterator[AsyncClient]:
    """Connect to the daemon and say hello, each within ``timeout``; raises ``DaemonNotRunning`` when
    nothing listens, ``TransportError`` when connecting times out, ``CallTimeout`` when the daemon
    does not answer.

    ``reconnect``: outlive the daemon (see the module docstring). ``on_sampling`` and
    ``on_elicitation`` answer a server's ``sampling/createMessage`` and ``elicitation/create``
    during this client's tool calls, ``roots`` its ``roots/list`` (see ``mcpd.client.answers``).
    """
    path = _wire.resolve_socket(socket_path)
    try:
        with anyio.fail_after(timeout):
            stream = await FrameStream.connect(str(path))
    except OSError as exc:
        raise _wire.unreachable(path, exc) from None
    answers: Answers[AskHandler] = Answers(on_sampling, on_elicitation, roots)
    client = AsyncClient(stream, name, path=path, reconnect=reconnect, answers=answers)
    client._start(stream)
    try:
        check_server(stream.socket, path)
        client.hello_result = await client._request_once(_wire.hello(name, timeout))
        client._pid = client.hello_result.pid  # its own word: systemd's socket has systemd's pid
        capabilities = answers.capabilities()
        if capabilities.names():
            await client.request(_wire.declare_capabilities(capabilities))
        if reconnect:
            client._keeper = asyncio.get_running_loop().create_task(client._keep_connected())
        yield client
    finally:
        await client._stop()


def _settle(future: asyncio.Future[T], value: T) -> None:
    if not future.done():
        future.set_result(value)
