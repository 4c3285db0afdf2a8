"""The gateways ``bench/peers.py`` compares, each behind the same two small interfaces.

A launcher (``launch_*``) starts one gateway in front of a list of fixture servers and
yields a ``Gateway`` as soon as its processes are spawned, not when they are ready: the
start measurements time readiness themselves. ``Gateway.open_session()`` connects one
client the way that gateway's users do (a socket client, a host running ``mcpd bridge``,
an HTTP client, an MCP client); ``Session.call()`` calls a tool on a named server and
raises ``CallFailed`` for anything but a successful result. ``gateway_pids()`` are the
processes whose CPU and memory count as the gateway's (servers excluded), ``host_pids()``
those of them that every host starts for itself (``mcpd bridge``).

Every launcher stops what it started when its block exits, on errors and Ctrl-C too.
"""

from __future__ import annotations

import compileall
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

import anyio
import httpx2
import mcp_types as types
from anyio.abc import Process, TaskGroup, TaskStatus
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

import mcpd
from mcpd.client.aio import AsyncClient, connect
from mcpd.errors import DaemonNotRunning, McpdError
from mcpd.testing import fixture_command, fixture_toml
from mcpd.testing.daemon import DaemonProcess, running_daemon

CONNECT_RETRY = 0.02
"""Seconds between attempts to reach a gateway that is still starting."""


@dataclass(frozen=True)
class ServerSpec:
    """One fixture server: its name and misbehaviour flags. Built on the MCP SDK (``--sdk``), as the
    servers users run mostly are and as the issue's figures were measured: the plain fixture starts
    and answers faster than any real server, which would flatter the direct SDK column."""

    name: str
    flags: tuple[str, ...] = ()

    @property
    def all_flags(self) -> tuple[str, ...]:
        return ("--sdk", *self.flags)

    @property
    def command(self) -> tuple[str, ...]:
        return fixture_command(self.name, *self.all_flags)


class CallFailed(Exception):
    """A call that did not return a successful result; ``kind`` says what the caller got."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind


class Session(Protocol):
    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> str:
        """The text of a successful result; raises ``CallFailed`` otherwise."""
        ...


class Gateway(Protocol):
    label: str

    def gateway_pids(self) -> list[int]: ...

    def host_pids(self) -> list[int]: ...

    async def open_session(self) -> Session:
        """A new connected client; closed when the launcher's block exits."""
        ...


Launcher = Callable[[list[ServerSpec], Path], AbstractAsyncContextManager[Gateway]]
Opener = Callable[[AsyncExitStack], Awaitable[Session]]


@dataclass
class SessionHost:
    """Holds each session's resources in a task of its own (``TaskGroup.start``), so that a
    caller may open one under a deadline and keep it after the deadline's scope has closed."""

    tasks: TaskGroup

    async def open(self, opener: Opener) -> Session:
        session: Session = await self.tasks.start(self._hold, opener)
        return session

    async def _hold(self, opener: Opener, *, task_status: TaskStatus[Session]) -> None:
        async with AsyncExitStack() as exits:
            task_status.started(await opener(exits))
            await anyio.sleep_forever()


@contextlib.asynccontextmanager
async def hosting() -> AsyncIterator[SessionHost]:
    """A ``SessionHost`` whose sessions all close when the block exits."""
    async with anyio.create_task_group() as tasks:
        try:
            yield SessionHost(tasks)
        finally:
            tasks.cancel_scope.cancel()


def result_text(result: types.CallToolResult, kind_from_text: bool = False) -> str:
    """The first text block of a successful result; ``CallFailed`` for a tool error."""
    text = next((block.text for block in result.content if isinstance(block, types.TextContent)), "")
    if result.is_error:
        # The bridge reports daemon errors as tool errors whose text starts with the class name.
        kind = text.split(":", 1)[0] if kind_from_text and ":" in text else "tool error"
        raise CallFailed(kind, text[:80])
    return text


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, ...), None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, ValueError):
        return None


def child_pids(parent: int) -> set[int]:
    """Pids whose parent is ``parent`` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        fields = proc_stat(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and int(fields[1]) == parent:
            found.add(int(entry.name))
    return found


def _started_at(pid: int) -> str | None:
    """The start time of ``pid`` in clock ticks: tells a process from a later one with its pid."""
    fields = proc_stat(pid)
    return fields[19] if fields else None


async def _retrying(attempt: Callable[[], Any], errors: tuple[type[BaseException], ...]) -> Any:
    """Await ``attempt()`` until it stops raising ``errors`` (the caller bounds the time)."""
    while True:
        try:
            return await attempt()
        except errors:
            await anyio.sleep(CONNECT_RETRY)


async def _call_mcp(session: ClientSession, name: str, arguments: dict[str, Any], bridge: bool) -> str:
    try:
        result = await session.call_tool(name, arguments)
    except Exception as exc:  # whatever the SDK raises is what this client gets
        raise CallFailed(type(exc).__name__, str(exc)[:80]) from None
    return result_text(result, kind_from_text=bridge)


# -- the direct SDK: one ClientSession straight to each server ---------------------------------


@dataclass
class DirectGateway:
    """No gateway: this process holds a stdio ``ClientSession`` per server."""

    label: str = "direct SDK"
    sessions: dict[str, ClientSession] = field(default_factory=dict)
    ready: dict[str, anyio.Event] = field(default_factory=dict)

    def gateway_pids(self) -> list[int]:
        return []

    def host_pids(self) -> list[int]:
        return []

    async def open_session(self) -> Session:
        return DirectSession(self)


@dataclass
class DirectSession:
    """Calls each server on its own stdio session (all sessions share them: one pipe per server)."""

    gateway: DirectGateway

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> str:
        await self.gateway.ready[server].wait()
        return await _call_mcp(self.gateway.sessions[server], tool, arguments, bridge=False)


async def _run_direct(gateway: DirectGateway, spec: ServerSpec, errlog: TextIO) -> None:
    command, *args = spec.command
    with contextlib.suppress(Exception):  # a server that dies or never answers stays not ready
        async with (
            stdio_client(StdioServerParameters(command=command, args=args), errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            gateway.sessions[spec.name] = session
            gateway.ready[spec.name].set()
            await anyio.sleep_forever()


@contextlib.asynccontextmanager
async def launch_direct(specs: list[ServerSpec], workdir: Path) -> AsyncIterator[Gateway]:
    gateway = DirectGateway(ready={spec.name: anyio.Event() for spec in specs})
    with open(os.devnull, "w") as errlog:  # noqa: ASYNC230  (/dev/null never blocks)
        async with anyio.create_task_group() as tg:
            for spec in specs:
                tg.start_soon(_run_direct, gateway, spec, errlog)
            try:
                yield gateway
            finally:
                tg.cancel_scope.cancel()


# -- mcpd: the daemon's socket API, and `mcpd bridge` as a host launches it ---------------------


@dataclass
class McpdSession:
    client: AsyncClient

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> str:
        try:
            result = await self.client.call_tool(f"{server}__{tool}", arguments)
        except McpdError as exc:
            raise CallFailed(type(exc).__name__, exc.message[:80]) from None
        if result.is_error:
            raise CallFailed("tool error")
        return next((str(block.get("text", "")) for block in result.content), "")


@dataclass
class McpdGateway:
    """``mcpd serve``; sessions are socket clients (``mcpd.client``)."""

    socket: Path
    pid: int
    host: SessionHost
    label: str = "mcpd socket"

    def gateway_pids(self) -> list[int]:
        return [self.pid]

    def host_pids(self) -> list[int]:
        return []

    async def open_session(self) -> Session:
        return await self.host.open(self._open)

    async def _open(self, exits: AsyncExitStack) -> Session:
        def attempt() -> Awaitable[AsyncClient]:
            return exits.enter_async_context(connect(self.socket, name="bench"))

        client: AsyncClient = await _retrying(attempt, (DaemonNotRunning,))
        return McpdSession(client)


@dataclass
class BridgeSession:
    """A host: ``mcpd bridge`` on stdio, its qualified tool when listed, else ``mcpd_call_tool``."""

    session: ClientSession
    listed: set[str]

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> str:
        name = f"{server}__{tool}"
        if name in self.listed:
            return await _call_mcp(self.session, name, arguments, bridge=True)
        relayed = {"tool": name, "arguments": arguments}
        return await _call_mcp(self.session, "mcpd_call_tool", relayed, bridge=True)


@dataclass
class BridgeGateway(McpdGateway):
    """``mcpd serve`` plus one ``mcpd bridge --socket S`` process per session (per host)."""

    label: str = "mcpd bridge"
    errlog: TextIO = sys.stderr
    bridges: list[int] = field(default_factory=list)

    def gateway_pids(self) -> list[int]:
        return [self.pid, *self.bridges]

    def host_pids(self) -> list[int]:
        return list(self.bridges)

    async def _open(self, exits: AsyncExitStack) -> Session:
        # A bridge finding no daemon would start one of its own: wait until the socket answers.
        await _retrying(self._probe, (DaemonNotRunning,))
        before = child_pids(os.getpid())
        params = StdioServerParameters(command=_mcpd_command(), args=["bridge", "--socket", str(self.socket)])
        read, write = await exits.enter_async_context(stdio_client(params, errlog=self.errlog))
        self.bridges += sorted(child_pids(os.getpid()) - before)
        session = await exits.enter_async_context(ClientSession(read, write))
        await session.initialize()
        listed = {tool.name for tool in (await session.list_tools()).tools}
        return BridgeSession(session, listed)

    async def _probe(self) -> None:
        async with connect(self.socket, name="bench-probe"):
            pass


def _mcpd_command() -> str:
    """The ``mcpd`` entry point beside this interpreter, as a host's config names it."""
    script = Path(sys.executable).with_name("mcpd")
    if not script.exists():
        raise SystemExit(f"no mcpd entry point at {script}: install the package (pip install -e .)")
    return str(script)


def compile_mcpd(root: Path | None = None) -> None:
    """Write current bytecode for the mcpd package under ``root`` (None: the one this process runs),
    which the daemons launched from it then load instead of compiling.

    With PYTHONDONTWRITEBYTECODE set, nothing else writes it: each ``mcpd serve`` compiles every
    module edited since its bytecode was written (in a fresh clone, all of them: a few tenths of a
    second of CPU before and while its children boot), a cost an installed mcpd does not pay, nor
    the direct SDK column, whose code this process imported once. Measured so, a checkout's start
    says how recently it was edited.
    """
    package = Path(mcpd.__file__).parent if root is None else root / "mcpd"
    compileall.compile_dir(package, quiet=1)


def _mcpd_config(specs: list[ServerSpec], workdir: Path, daemon: str = "") -> Path:
    """mcpd's config for ``specs``; ``daemon``: lines of its ``[daemon]`` table."""
    config = workdir / "mcpd.toml"
    table = f"[daemon]\n{daemon}" if daemon else ""
    config.write_text(table + "".join(fixture_toml(spec.name, *spec.all_flags) for spec in specs))
    return config


@contextlib.asynccontextmanager
async def _launch_daemon(
    specs: list[ServerSpec], workdir: Path, make: Callable[[Path, int, SessionHost], McpdGateway]
) -> AsyncIterator[Gateway]:
    async with (
        running_daemon(_mcpd_config(specs, workdir), wait_ready=False) as daemon,
        hosting() as host,  # inner: sessions close before the daemon stops
    ):
        yield make(daemon.socket, daemon.process.pid, host)


def launch_mcpd(specs: list[ServerSpec], workdir: Path) -> AbstractAsyncContextManager[Gateway]:
    return _launch_daemon(specs, workdir, McpdGateway)


@contextlib.asynccontextmanager
async def launch_bridge(specs: list[ServerSpec], workdir: Path) -> AsyncIterator[Gateway]:
    with open(workdir / "bridges.log", "w") as errlog:  # noqa: ASYNC230  (a new local temp file)

        def make(path: Path, pid: int, host: SessionHost) -> McpdGateway:
            return BridgeGateway(path, pid, host, errlog=errlog)

        async with _launch_daemon(specs, workdir, make) as gateway:
            yield gateway


@dataclass
class HttpGateway(McpdGateway):
    """``mcpd serve`` with its HTTP front end; sessions are the SDK's streamable HTTP client."""

    label: str = "mcpd HTTP"
    daemon: DaemonProcess | None = None
    token_file: Path = Path()

    async def _open(self, exits: AsyncExitStack) -> Session:
        assert self.daemon is not None
        url = (await self.daemon.wait_for("http.listening"))["url"]  # the token file is written before
        auth = {"Authorization": f"Bearer {self.token_file.read_text().strip()}"}
        http = await exits.enter_async_context(
            httpx2.AsyncClient(headers=auth, timeout=httpx2.Timeout(120.0))
        )
        read, write = await exits.enter_async_context(streamable_http_client(url, http_client=http))
        session = await exits.enter_async_context(ClientSession(read, write))
        await session.initialize()
        listed = {tool.name for tool in (await session.list_tools()).tools}
        return BridgeSession(session, listed)  # the same daemon-hosted session as the bridge's


@contextlib.asynccontextmanager
async def launch_mcpd_http(specs: list[ServerSpec], workdir: Path) -> AsyncIterator[Gateway]:
    token_file = workdir / "http.token"
    daemon = f'http = "127.0.0.1:0"\nhttp_token_file = {json.dumps(str(token_file))}\n'
    async with (
        running_daemon(_mcpd_config(specs, workdir, daemon), wait_ready=False) as running,
        hosting() as host,  # inner: sessions close before the daemon stops
    ):
        yield HttpGateway(running.socket, running.process.pid, host, daemon=running, token_file=token_file)


# -- mcp-hub (npm mcp-hub 4.2.1): its REST API and its /mcp endpoint ----------------------------

HUB_VERSION = "4.2.1"

# mcp-hub listens on every interface and has no option to choose one; this preload, run by node
# before the hub, binds a listen() that names no host to loopback instead.
_LOOPBACK_PRELOAD = """\
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" && typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
  return listen.apply(this, args);
};
"""


async def install_hub(prefix: Path) -> Path | None:
    """``npm install --prefix`` mcp-hub into ``prefix``; its cli.js, or None without npm/node."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        return None
    argv = ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", f"mcp-hub@{HUB_VERSION}"]
    try:
        with anyio.fail_after(300):
            await anyio.run_process(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except (subprocess.CalledProcessError, TimeoutError):
        return None
    cli = prefix / "node_modules" / "mcp-hub" / "dist" / "cli.js"
    return cli if cli.exists() else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class HubRestSession:
    client: httpx2.AsyncClient

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> str:
        body = {"server_name": server, "tool": tool, "arguments": arguments}
        try:
            response = await self.client.post("/api/servers/tools", json=body)
        except httpx2.HTTPError as exc:
            raise CallFailed(type(exc).__name__, str(exc)[:80]) from None
        try:
            payload = response.json()
        except ValueError:
            payload = {}
        if response.status_code != 200 or "result" not in payload:
            raise CallFailed(f"HTTP {response.status_code} {payload.get('error', '')}".strip())
        result = payload["result"]
        if result.get("isError"):
            raise CallFailed("tool error")
        return next((str(block.get("text", "")) for block in result["content"]), "")


@dataclass
class HubMcpSession:
    session: ClientSession

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> str:
        # The hub names a server's tools `server__tool` (server name with non-alphanumerics as _).
        return await _call_mcp(self.session, f"{server}__{tool}", arguments, bridge=False)


@dataclass
class HubGateway:
    """One ``node cli.js`` process; sessions over REST, or MCP on its /mcp endpoint."""

    label: str
    port: int
    pid: int
    host: SessionHost

    def gateway_pids(self) -> list[int]:
        return [self.pid]

    def host_pids(self) -> list[int]:
        return []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def open_session(self) -> Session:
        return await self.host.open(self._open)

    async def _open(self, exits: AsyncExitStack) -> Session:
        if self.label.endswith("REST"):
            client = httpx2.AsyncClient(base_url=self.url, timeout=httpx2.Timeout(120.0))
            return HubRestSession(await exits.enter_async_context(client))
        # Refused connections surface from the SDK's task groups as exception groups: retry on any.
        session: ClientSession = await _retrying(lambda: self._open_mcp(exits), (Exception,))
        return HubMcpSession(session)

    async def _open_mcp(self, exits: AsyncExitStack) -> ClientSession:
        # 4.2.1's /mcp is the HTTP+SSE transport (GET /mcp, POST /messages), not streamable HTTP.
        attempt = AsyncExitStack()
        try:
            read, write = await attempt.enter_async_context(sse_client(f"{self.url}/mcp"))
            session = await attempt.enter_async_context(ClientSession(read, write))
            await session.initialize()
        except BaseException:
            await attempt.aclose()
            raise
        exits.push_async_exit(attempt)
        return session


def _hub_server(spec: ServerSpec) -> dict[str, Any]:
    """The hub's config entry for ``spec``, its server in a session of its own.

    mcpd and the SDK start every server with setsid; the hub does not. With autogroup scheduling
    (Linux's default) the hub's 10 servers would then share one CPU slot on a busy machine where the
    others get ten, so here ``setsid`` (which execs in place: same pid, same pipes) evens that out.
    """
    command = [*spec.command]
    setsid = shutil.which("setsid")
    if setsid is not None:
        command.insert(0, setsid)
    return {"command": command[0], "args": command[1:]}


@contextlib.asynccontextmanager
async def _launch_hub(
    label: str, cli: Path, specs: list[ServerSpec], workdir: Path
) -> AsyncIterator[Gateway]:
    servers = {spec.name: _hub_server(spec) for spec in specs}
    (workdir / "hub.json").write_text(json.dumps({"mcpServers": servers}))
    (workdir / "loopback.cjs").write_text(_LOOPBACK_PRELOAD)
    home = workdir / "home"  # its logs, workspace cache and config lookups stay in the temp dir
    env = {
        **os.environ,
        "HOME": str(home),
        **{f"XDG_{kind}_HOME": str(home / kind) for kind in ("STATE", "CONFIG", "DATA", "CACHE")},
    }
    port = _free_port()
    argv = ["node", "--require", str(workdir / "loopback.cjs"), str(cli), "--port", str(port)]
    argv += ["--config", str(workdir / "hub.json")]
    with open(workdir / "hub.log", "wb") as log:  # noqa: ASYNC230  (a new local temp file)
        # In this process's session, as `mcpd serve` is: stop_tree() finds what it leaves behind.
        process = await anyio.open_process(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
        try:
            async with hosting() as host:
                yield HubGateway(label, port, process.pid, host)
        finally:
            with anyio.CancelScope(shield=True):
                await stop_tree(process)


def launch_hub_rest(cli: Path) -> Launcher:
    return lambda specs, workdir: _launch_hub("mcp-hub REST", cli, specs, workdir)


def launch_hub_mcp(cli: Path) -> Launcher:
    return lambda specs, workdir: _launch_hub("mcp-hub /mcp", cli, specs, workdir)


async def stop_tree(process: Process, grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL to the process and to the children it had if they outlive ``grace``."""
    children = {pid: _started_at(pid) for pid in child_pids(process.pid)}
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        with anyio.move_on_after(grace):
            await process.wait()
    if process.returncode is None:
        process.kill()
        with anyio.move_on_after(5):
            await process.wait()
    for pid, started in children.items():
        if _started_at(pid) == started:  # still the same process, not a new one with its pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
