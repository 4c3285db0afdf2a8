"""uvicorn inside the daemon: bound at start like the socket, stopped with the daemon.

``listener.HttpFront.open`` binds the address and reads (or makes) the token before any server
is started. ``serve`` runs uvicorn in the daemon's task group, on that socket: lifespan off, no
access log, no logging set-up of its own, and no signal handlers (the daemon owns SIGTERM,
SIGINT and SIGHUP). When the daemon stops, every session ends first (event streams close,
waiting POSTs are answered), then uvicorn closes its listener and connections, waiting at
most ``SHUTDOWN_GRACE`` for responses in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
from collections.abc import Iterator

import anyio
import structlog
import uvicorn
from anyio.abc import TaskStatus

from mcpd.config.model import is_loopback
from mcpd.front.hosts import Hosts
from mcpd.front.http.app import HttpLimits, build_app
from mcpd.front.http.gate import Gate
from mcpd.front.http.listener import HttpFront
from mcpd.front.http.protocol import limited_protocol
from mcpd.front.http.sessions import HttpSessions, saved_sessions

log = structlog.get_logger("mcpd.front")

SHUTDOWN_GRACE = 5
"""Seconds uvicorn waits for responses in flight once the sessions have ended."""
MAX_CONNECTIONS = 1000
"""Open HTTP connections at once whose requests carried the token (``limited_protocol``: those
without it have a pool of their own, and cannot take these)."""


class _Server(uvicorn.Server):
    """uvicorn, that accepts through a ``Gate`` on ``front``'s listener rather than an asyncio server."""

    def __init__(self, config: uvicorn.Config, front: HttpFront) -> None:
        super().__init__(config)
        self._front = front
        self._gate: Gate | None = None
        self._admitting: set[asyncio.Task[object]] = set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # uvicorn would replace the daemon's handlers with its own for SIGINT and SIGTERM.
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=[])  # no listener of uvicorn's own
        loop = asyncio.get_running_loop()
        self._gate = Gate(self._front.listener, self._front.token, self._admit, loop)
        self._gate.open()

    def _admit(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        protocol = self.config.http_protocol_class(  # type: ignore[call-arg]
            config=self.config, server_state=self.server_state, app_state=self.lifespan.state, _loop=loop
        )
        task = loop.create_task(loop.connect_accepted_socket(lambda: protocol, conn))
        self._admitting.add(task)
        task.add_done_callback(functools.partial(self._admitted, conn))

    def _admitted(self, conn: socket.socket, task: asyncio.Task[object]) -> None:
        self._admitting.discard(task)
        if task.cancelled() or task.exception() is not None:
            conn.close()  # gone before its transport was made

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._gate is not None:
            self._gate.close()
        for task in self._admitting:
            task.cancel()
        await super().shutdown(sockets=sockets)


async def serve(
    front: HttpFront, hosts: Hosts, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Serve ``front`` to ``hosts`` until cancelled, then end its sessions and stop uvicorn."""
    settings = front.settings
    limits = HttpLimits(max_body=settings.max_frame_bytes, io_timeout=settings.client_write_timeout)
    host = front.listener.getsockname()[0]
    async with anyio.create_task_group() as tg:
        idle = settings.http_session_idle
        saved = await saved_sessions(hosts.core.usage, idle)
        sessions = HttpSessions(hosts, tg, max_sessions=settings.http_max_sessions, idle=idle, saved=saved)
        hosts.core.resavers.append(sessions.resave)
        hosts.core.forgetters.append(sessions.forget_servers)
        app = build_app(sessions, front.token, limits, check_host=is_loopback(host))
        server = _Server(
            uvicorn.Config(
                app,
                lifespan="off",
                log_config=None,
                access_log=False,
                http=limited_protocol(limits.io_timeout, MAX_CONNECTIONS, front.token),
                ws="none",
                proxy_headers=False,
                server_header=False,
                date_header=False,
                timeout_graceful_shutdown=SHUTDOWN_GRACE,
            ),
            front,
        )
        running = anyio.CancelScope(shield=True)
        stopped = anyio.Event()

        async def run() -> None:
            # Shielded: a cancelled main loop would skip uvicorn's shutdown (listener, connections).
            with running:
                try:
                    await server.serve()
                finally:
                    stopped.set()

        tg.start_soon(run)
        tg.start_soon(sessions.expire)
        log.info("http.listening", url=front.url, remote=not is_loopback(host))
        task_status.started()
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                hosts.core.resavers.remove(sessions.resave)
                hosts.core.forgetters.remove(sessions.forget_servers)
                sessions.end_all("the daemon is stopping")
                server.should_exit = True
                with anyio.move_on_after(SHUTDOWN_GRACE + 1):
                    await stopped.wait()
                running.cancel()  # only if uvicorn overran its own grace
            tg.cancel_scope.cancel()
