"""One supervised server: a task that owns its transport and MCP session for their whole life.

The SDK's context managers must be entered and left in one task, so everything that
touches them (spawn, handshake, health pings, tool refresh, teardown) runs inside
``ServerActor.run``. Other tasks use the handle: ``status()``, ``call_tool()``,
``start()``, ``stop()``, ``restart()``, which set a wish and poke the actor.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import mcp_types
import msgspec
import structlog
from anyio.abc import TaskGroup
from mcp.client._transport import TransportStreams
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

import mcpd
from mcpd.config.model import ServerConfig
from mcpd.errors import CallTimeout, InvalidParams, ServerNotRunning, TransportError, UnknownTool
from mcpd.model.servers import ServerEvent, ServerInfo, ServerStatus, StateChanged, ToolsChanged
from mcpd.model.states import LIVE_STATES, ServerState, can_transition, check_transition
from mcpd.model.tools import ToolInfo, ToolResult
from mcpd.supervisor.backoff import backoff_delay, gives_up
from mcpd.supervisor.gate import StartGate
from mcpd.supervisor.rawrpc import MAX_BACKLOG, CallResult, ConnectionLost, NotReading, ProgressCallback
from mcpd.supervisor.stdio import SpawnError, StdioChild, open_stdio_child

log = structlog.get_logger("mcpd.supervisor")

S = ServerState
_CLIENT_INFO = mcp_types.Implementation(name="mcpd", version=mcpd.__version__)
_MAX_TOOL_PAGES = 100
_call_result = msgspec.json.Decoder(CallResult)


class _LifeEnded(Exception):
    """Raised inside a life to end it with a reason (and whether the process was still alive)."""

    def __init__(self, reason: str, *, alive: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.alive = alive


def _first_leaf(exc: BaseException) -> BaseException:
    """The exception that started it all: the first leaf of nested exception groups.

    Our own ``_LifeEnded`` wins over the teardown noise it causes around it.
    """
    if isinstance(exc, BaseExceptionGroup):
        ended, _ = exc.split(_LifeEnded)
        return _first_leaf((ended or exc).exceptions[0])
    return exc


def describe_error(exc: BaseException) -> str:
    """A one-line reason from an exception, digging the first leaf out of exception groups."""
    exc = _first_leaf(exc)
    if isinstance(exc, MCPError):
        return f"MCP error {exc.code}: {exc.error.message}"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ServerActor:
    """Supervises one server. ``run()`` is its task; everything else is safe from other tasks."""

    def __init__(
        self,
        config: ServerConfig,
        emit: Callable[[ServerEvent], None],
        *,
        start_gate: StartGate | None = None,
        unit_random: Callable[[], float] = random.random,
    ) -> None:
        self.config = config
        self._start_gate = start_gate or StartGate()
        self._emit = emit
        self._random = unit_random
        self._state = S.STOPPED if config.enabled else S.DISABLED
        self._changed = anyio.Event()
        self._wake = anyio.Event()
        self._want_running = config.enabled
        self._restart_wanted = False
        self._session: ClientSession | None = None
        self._child: StdioChild | None = None
        self._alive = False
        self._tools: tuple[ToolInfo, ...] = ()
        self._tool_names: frozenset[str] = frozenset()
        self._tools_dirty = anyio.Event()
        self._server_info: ServerInfo | None = None
        self._live_since: float | None = None
        self._attempt = 0
        self.first_attempt_done = anyio.Event()
        """Set when the first start attempt has ended, whichever way: what readiness waits for."""
        self.restarts = 0
        self.last_error: str | None = None

    # -- the handle -------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def state(self) -> ServerState:
        return self._state

    @property
    def tools(self) -> tuple[ToolInfo, ...]:
        return self._tools

    @property
    def server_info(self) -> ServerInfo | None:
        return self._server_info

    def status(self) -> ServerStatus:
        live = self._state in LIVE_STATES
        return ServerStatus(
            name=self.name,
            state=self._state,
            transport=self.config.transport,
            alive=self._alive,
            degraded=self._state is S.DEGRADED,
            pid=self._child.pid if self._child is not None and self._alive else None,
            restarts=self.restarts,
            uptime_s=round(time.monotonic() - self._live_since, 3) if live and self._live_since else None,
            last_error=self.last_error,
            tools=len(self._tools),
            description=self.config.description,
            server_info=self._server_info,
        )

    def start(self) -> None:
        """Wish the server running; a ``failed`` or ``disabled`` server is given a fresh start."""
        if not self._want_running:
            self._attempt = 0
        self._want_running = True
        self._wake.set()

    def restart(self) -> None:
        """Stop the current process (if any) and start again, resetting the crash-loop count."""
        self._attempt = 0
        self._want_running = True
        self._restart_wanted = True
        self._wake.set()

    async def stop(self, timeout: float | None = None) -> None:
        """Wish the server stopped and wait (bounded) until it is."""
        self._want_running = False
        self._wake.set()
        limit = timeout if timeout is not None else 2 * self.config.stop_grace + 5
        with anyio.move_on_after(limit):
            while self._state not in (S.STOPPED, S.DISABLED, S.FAILED) or self._alive:
                await self._changed.wait()

    async def wait_state(self, *states: ServerState, timeout: float) -> ServerState:
        """Wait until the state is one of ``states``; raise ``TimeoutError`` after ``timeout``."""
        with anyio.fail_after(timeout):
            while self._state not in states:
                await self._changed.wait()
        return self._state

    async def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any],
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> ToolResult:
        """Call ``tool``; waits for a (re)starting server, all within ``timeout`` seconds.

        ``on_progress`` receives the server's progress notifications for this call (stdio servers).

        Raises ``ServerNotRunning``, ``UnknownTool``, ``CallTimeout`` or ``TransportError``.
        A tool that ran and failed is a result with ``is_error`` set, not an exception.
        """
        limit = timeout if timeout is not None else self.config.call_timeout
        deadline = asyncio.get_running_loop().time() + limit
        session = await self._wait_live(deadline, limit)
        if tool not in self._tool_names:
            raise UnknownTool(
                f"server {self.name!r} has no tool {tool!r}", {"server": self.name, "tool": tool}
            )
        child = self._child
        try:
            if child is not None:
                return await self._call_raw(child, tool, arguments, deadline, on_progress)
            with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
                return await self._call_sdk(session, tool, arguments)
        except TimeoutError:
            raise CallTimeout(
                f"{self.name}/{tool} did not answer within {limit:g}s", {"server": self.name, "tool": tool}
            ) from None

    async def _call_raw(
        self,
        child: StdioChild,
        tool: str,
        arguments: dict[str, Any],
        deadline: float,
        on_progress: ProgressCallback | None,
    ) -> ToolResult:
        try:
            reply = await child.rpc.request(
                "tools/call", {"name": tool, "arguments": arguments}, deadline, on_progress
            )
        except ConnectionLost:
            with anyio.move_on_after(0.5):  # the exit status makes the better message
                await child.exited.wait()
            raise TransportError(
                f"{self.name} closed the connection during {tool}: {child.exit_reason()}",
                {"server": self.name, "tool": tool},
            ) from None
        except (msgspec.EncodeError, TypeError) as exc:
            raise InvalidParams(f"arguments for {tool} cannot be sent as JSON: {exc}") from None
        except NotReading:
            raise TransportError(
                f"{self.name} is not reading its stdin (over {MAX_BACKLOG} bytes of requests queued)",
                {"server": self.name, "tool": tool},
            ) from None
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise TransportError(f"{self.name} sent a malformed answer to {tool}: {exc}") from None
        if reply.error is not None:
            # A JSON-RPC error response: the server handled the request and refused it.
            return ToolResult(content=[{"type": "text", "text": reply.error.message}], is_error=True)
        try:
            result = _call_result.decode(reply.result)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise TransportError(f"{self.name} answered {tool} with an invalid result: {exc}") from None
        return ToolResult(
            content=result.content, structured_content=result.structured_content, is_error=result.is_error
        )

    async def _call_sdk(self, session: ClientSession, tool: str, arguments: dict[str, Any]) -> ToolResult:
        try:
            result = await session.call_tool(tool, arguments)
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                raise TransportError(
                    f"{self.name} closed the connection during {tool}", {"server": self.name, "tool": tool}
                ) from None
            return ToolResult(content=[{"type": "text", "text": exc.error.message}], is_error=True)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            raise TransportError(
                f"{self.name} connection broke during {tool}: {describe_error(exc)}", {"server": self.name}
            ) from None
        if not isinstance(result, mcp_types.CallToolResult):
            raise TransportError(f"{self.name} answered {tool} with an unsupported result type")
        return ToolResult(
            content=[
                block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content
            ],
            structured_content=result.structured_content,
            is_error=result.is_error,
        )

    def _connection_lost(self) -> bool:
        """The process closed stdout: the session is dead though the exit may not be seen yet."""
        return self._child is not None and self._child.stdout_closed.is_set()

    async def _wait_live(self, deadline: float, limit: float) -> ClientSession:
        while True:
            if self._state in LIVE_STATES and self._session is not None and not self._connection_lost():
                return self._session
            if self._state in (S.STOPPED, S.FAILED, S.DISABLED) or not self._want_running:
                raise ServerNotRunning(
                    f"server {self.name!r} is {self._state}"
                    + (f": {self.last_error}" if self.last_error else ""),
                    {"server": self.name, "state": str(self._state), "last_error": self.last_error},
                )
            with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
                await self._changed.wait()
                continue
            raise CallTimeout(
                f"server {self.name!r} was still {self._state} after {limit:g}s",
                {"server": self.name, "state": str(self._state), "last_error": self.last_error},
            )

    # -- the task ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Supervise until cancelled: start when wished, restart with backoff, stop when wished."""
        while True:
            if not self._want_running:
                await self._consume_wake()
                continue
            self._restart_wanted = False
            if self._state in LIVE_STATES:
                self.restarts += 1
                self._set(S.STARTING, "restart requested")
            elif self._state is not S.STARTING:
                self._set(S.STARTING, "start")
            try:
                failure = await self._live_once()
                if failure is None:  # stopped or restarted on purpose
                    if self._stop_wanted():
                        self._set(S.STOPPED, "stop requested")
                    continue
                await self._after_failure(failure)
            except Exception as exc:
                # A bug here must not take the other servers down with this one.
                log.exception("server.internal_error", server=self.name)
                self._give_up(f"internal error in mcpd: {describe_error(exc)}")

    def _give_up(self, reason: str) -> None:
        self._want_running = False
        self.last_error = reason
        if can_transition(self._state, S.FAILED):
            self._set(S.FAILED, reason)
        elif can_transition(self._state, S.STOPPED):
            self._set(S.STOPPED, reason)

    def _stop_wanted(self) -> bool:
        # A method, not the attribute, so type checkers do not assume it unchanged across awaits.
        return not self._want_running

    async def _after_failure(self, failure: _LifeEnded) -> None:
        self.last_error = failure.reason
        ran = time.monotonic() - self._live_since if self._live_since else 0.0
        self._live_since = None
        self._attempt = 1 if ran >= self.config.restart.stable_after else self._attempt + 1
        if not self._want_running:
            self._set(S.STOPPED, "stop requested")
            return
        if isinstance(failure.__cause__, SpawnError):
            # Retrying cannot help until the config or the system changes.
            self._give_up(f"cannot start: {failure.reason}")
            return
        if gives_up(self._attempt, self.config.restart):
            self._give_up(f"crash loop: {self._attempt} failed runs in a row; last: {failure.reason}")
            return
        delay = backoff_delay(self._attempt, self.config.restart, self._random())
        self._set(S.BACKOFF, f"restart in {delay:.2f}s: {failure.reason}")
        self._wake = anyio.Event()
        if self._want_running and not self._restart_wanted:
            with anyio.move_on_after(delay):
                await self._consume_wake()
        if self._stop_wanted():
            self._set(S.STOPPED, "stop requested")
        else:
            self.restarts += 1
            self._set(S.STARTING, "restart after backoff")

    async def _consume_wake(self) -> None:
        await self._wake.wait()
        self._wake = anyio.Event()

    async def _live_once(self) -> _LifeEnded | None:
        """One life of the server: connect, serve until it dies or we are told to stop."""
        self._tools_dirty = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch_wishes, tg)
                slot = await self._start_gate.enter()
                tg.start_soon(slot.expire)
                async with self._connect() as session:
                    if self._child is not None:
                        tg.start_soon(self._watch_exit, self._child)
                    await self._handshake(session)
                    slot.release()
                    tg.start_soon(self._watch_health, session)
                    tg.start_soon(self._watch_tools, session)
                    await anyio.sleep_forever()
        except Exception as exc:  # an ExceptionGroup from the task group, or a spawn error
            return self._ended_by(exc)
        finally:
            self._session = None
            self._alive = False
            self._child = None
        return None

    def _ended_by(self, exc: BaseException) -> _LifeEnded:
        leaf = _first_leaf(exc)
        if isinstance(leaf, _LifeEnded):
            return leaf
        reason = str(leaf) if isinstance(leaf, SpawnError) else describe_error(leaf)
        ended = _LifeEnded(reason)
        ended.__cause__ = leaf
        return ended

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[ClientSession]:
        async with (
            self._open_streams() as (read, write),
            ClientSession(read, write, message_handler=self._on_message, client_info=_CLIENT_INFO) as session,
        ):
            yield session

    @contextlib.asynccontextmanager
    async def _open_streams(self) -> AsyncIterator[TransportStreams]:
        config = self.config
        if config.command is not None:
            async with open_stdio_child(config) as (child, read, write):
                self._child = child
                self._alive = True
                log.debug("server.spawned", server=self.name, pid=child.pid)
                yield read, write
            return
        assert config.url is not None
        async with (
            create_mcp_http_client(headers=dict(config.headers) or None) as http,
            streamable_http_client(config.url, http_client=http) as (read, write),
        ):
            yield read, write

    async def _handshake(self, session: ClientSession) -> None:
        timeout = self.config.connect_timeout
        try:
            with anyio.fail_after(timeout):
                result = await session.initialize()
                tools = await self._list_tools(session)
        except TimeoutError:
            raise await self._handshake_failed(
                f"no answer to initialize/tools/list within {timeout:g}s"
            ) from None
        except MCPError as exc:
            raise await self._handshake_failed(describe_error(exc)) from None
        info = result.server_info
        self._server_info = ServerInfo(
            name=info.name, version=info.version, title=info.title, instructions=result.instructions
        )
        self._set_tools(tools)
        self._session = session
        self._alive = True
        self._live_since = time.monotonic()
        pid = f" (pid {self._child.pid})" if self._child else ""
        self._set(S.RUNNING, f"ready with {len(tools)} tools{pid}")

    async def _handshake_failed(self, reason: str) -> _LifeEnded:
        child = self._child
        if child is not None:
            # A closed connection usually means the process is exiting; let the exit be seen.
            with anyio.move_on_after(0.5):
                await child.exited.wait()
        if child is not None and child.returncode is not None:
            return _LifeEnded(f"{child.exit_reason()} during initialize")
        if child is not None:
            # Alive but not speaking MCP: say so before the process is stopped and retried.
            self.last_error = reason
            self._set(S.DEGRADED, f"{reason}; process {child.pid} alive")
            return _LifeEnded(reason, alive=True)
        return _LifeEnded(reason)

    async def _list_tools(self, session: ClientSession) -> tuple[ToolInfo, ...]:
        tools: list[ToolInfo] = []
        cursor: str | None = None
        for _ in range(_MAX_TOOL_PAGES):
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(
                ToolInfo(
                    name=t.name,
                    description=t.description or "",
                    input_schema=t.input_schema,
                    title=t.title,
                    annotations=t.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
                    if t.annotations
                    else None,
                )
                for t in page.tools
            )
            cursor = page.next_cursor
            if not cursor:
                break
        return tuple(sorted(tools, key=lambda t: t.name))

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._tools_dirty.set()

    async def _watch_wishes(self, tg: TaskGroup) -> None:
        while self._want_running and not self._restart_wanted:
            await self._consume_wake()
        tg.cancel_scope.cancel()

    async def _watch_exit(self, child: StdioChild) -> None:
        await child.stdout_closed.wait()
        # Closing stdout almost always means exiting; wait a moment to report the real exit status.
        with anyio.move_on_after(self.config.stop_grace):
            await child.exited.wait()
        self._alive = child.returncode is None
        if self._alive:
            raise _LifeEnded("closed its stdout but kept running", alive=True)
        raise _LifeEnded(child.exit_reason())

    async def _watch_health(self, session: ClientSession) -> None:
        failures = 0
        while True:
            await anyio.sleep(self.config.ping_interval)
            try:
                with anyio.fail_after(self.config.ping_timeout):
                    await session.send_ping()
            except (TimeoutError, MCPError) as exc:
                failures += 1
                reason = (
                    "ping timed out"
                    if isinstance(exc, TimeoutError)
                    else f"ping failed: {describe_error(exc)}"
                )
                self._degrade(f"{reason} ({failures}/{self.config.unhealthy_after})")
                if failures >= self.config.unhealthy_after:
                    raise _LifeEnded(f"unresponsive: {failures} pings failed in a row", alive=True) from None
                continue
            failures = 0
            self._recover("ping answered")

    async def _watch_tools(self, session: ClientSession) -> None:
        while True:
            await self._tools_dirty.wait()
            self._tools_dirty = anyio.Event()
            try:
                with anyio.fail_after(self.config.connect_timeout):
                    tools = await self._list_tools(session)
            except (TimeoutError, MCPError) as exc:
                self._degrade(f"tools/list after list_changed failed: {describe_error(exc)}")
                continue
            self._set_tools(tools)
            self._recover("tools/list answered")
            log.info("server.tools_changed", server=self.name, tools=len(tools))
            self._emit(ToolsChanged(server=self.name, tools=len(tools)))

    def _set_tools(self, tools: tuple[ToolInfo, ...]) -> None:
        self._tools = tools
        self._tool_names = frozenset(t.name for t in tools)

    def _degrade(self, reason: str) -> None:
        self.last_error = reason
        if self._state is S.RUNNING:
            self._set(S.DEGRADED, reason)

    def _recover(self, reason: str) -> None:
        if self._state is S.DEGRADED:
            self._set(S.RUNNING, reason)

    def _set(self, new: ServerState, reason: str) -> None:
        old = self._state
        self._state = check_transition(old, new)
        changed, self._changed = self._changed, anyio.Event()
        changed.set()
        if old is S.STARTING:
            self.first_attempt_done.set()
        pid = self._child.pid if self._child is not None else None
        log.info("server.state", server=self.name, old=str(old), new=str(new), reason=reason, pid=pid)
        self._emit(StateChanged(server=self.name, old=old, new=new, reason=reason))
