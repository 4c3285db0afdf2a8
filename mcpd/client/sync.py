"""The blocking client: a plain socket, one request at a time, no event loop and no threads.

It starts fast (the CLI uses it) and suits scripts. For concurrent requests and event
subscriptions use ``mcpd.client.AsyncClient``.
"""

from __future__ import annotations

import itertools
import socket
import threading
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from mcpd.client import _wire
from mcpd.errors import CallTimeout, ProtocolError, TransportError
from mcpd.ipc.framing import MAX_CLIENT_FRAME, FrameBuffer
from mcpd.model.protocol import (
    ApproveResult,
    ConnectResult,
    HelloResult,
    ReloadResult,
    Response,
    SelectResult,
    SessionTools,
    ToolsListResult,
    TrustResult,
)
from mcpd.model.servers import ServerStatus
from mcpd.model.tools import ToolEntry, ToolResult
from mcpd.model.usage import ReportResult

T = TypeVar("T")


class Client:
    """``with Client() as mcpd: mcpd.status()``. Raises the daemon's errors as mcpd exceptions."""

    def __init__(self, socket_path: str | Path | None = None, *, name: str = "mcpd-client") -> None:
        self.path = _wire.resolve_socket(socket_path)
        self.name = name
        self.hello_result: HelloResult | None = None
        self._sock: socket.socket | None = None
        self._frames = FrameBuffer(MAX_CLIENT_FRAME)
        self._pending: list[bytes] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def connect(self, timeout: float = _wire.DEFAULT_TIMEOUT) -> Self:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(str(self.path))
        except OSError as exc:
            sock.close()
            raise _wire.not_running(self.path, exc) from None
        self._sock = sock
        try:
            self.hello_result = self.request(_wire.hello(self.name))
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> Self:
        return self.connect()

    def __exit__(self, *exc: tuple[type[BaseException], BaseException, TracebackType] | None) -> None:
        self.close()

    def request(self, call: _wire.Call[T]) -> T:
        """Send one call and wait for its answer (notifications arriving meanwhile are ignored)."""
        sock = self._sock
        if sock is None:
            raise TransportError("the client is not connected")
        with self._lock:
            request_id = next(self._ids)
            sock.settimeout(call.timeout)
            try:
                sock.sendall(call.request(request_id))
                response = self._receive(sock, request_id)
            except TimeoutError:
                self.close()
                raise CallTimeout(f"no answer to {call.method} within {call.timeout:g}s") from None
            except OSError as exc:
                self.close()
                raise TransportError(f"lost the daemon connection: {exc}") from None
        return _wire.result_of(response, call)

    def _receive(self, sock: socket.socket, request_id: int) -> Response:
        while True:
            while self._pending:
                message = _wire.decoder.decode(self._pending.pop(0))
                if isinstance(message, Response) and message.id in (request_id, None):
                    return message
            data = sock.recv(256 * 1024)
            if not data:
                raise TransportError("the daemon closed the connection")
            try:
                self._pending.extend(self._frames.feed(data))
            except ProtocolError:
                raise TransportError("the daemon sent a malformed frame") from None

    # -- the methods ------------------------------------------------------------------------

    def status(self) -> list[ServerStatus]:
        return self.request(_wire.status()).servers

    def start(self, name: str) -> ServerStatus:
        return self.request(_wire.server_action("start", name))

    def stop(self, name: str) -> ServerStatus:
        return self.request(_wire.server_action("stop", name))

    def restart(self, name: str) -> ServerStatus:
        return self.request(_wire.server_action("restart", name))

    def reload(self) -> ReloadResult:
        return self.request(_wire.reload())

    def tools(self, servers: list[str] | None = None) -> list[ToolEntry]:
        """Every tool of the live servers (or of ``servers``), by server then name."""
        return self.request(_wire.tools_list(servers)).tools

    def search(
        self,
        query: str,
        *,
        servers: list[str] | None = None,
        limit: int | None = None,
        budget_tokens: int | None = None,
        explain: bool = False,
    ) -> ToolsListResult:
        """Tools ranked for ``query``; with ``budget_tokens``, also rendered for a model's context."""
        return self.request(
            _wire.tools_list(servers, query=query, limit=limit, budget_tokens=budget_tokens, explain=explain)
        )

    def connect_server(self, server: str) -> ConnectResult:
        """Activate ``server``'s tools for this connection's session."""
        return self.request(_wire.session_connect(server))

    def session_tools(self) -> SessionTools:
        """The servers this session connected and their tools."""
        return self.request(_wire.session_tools())

    def snippet(self) -> str:
        """An ``<available_mcps>`` block describing the live servers, for a system prompt."""
        return (self.request(_wire.snippet())).text

    def approve(self, server: str, tool: str | None = None) -> ApproveResult:
        """Accept the current definitions of ``server``'s held-back tools (or of ``tool``)."""
        return self.request(_wire.approve(server, tool))

    def trust(self, server: str) -> TrustResult:
        """Held-back changes (with diffs) and verifier findings for ``server``."""
        return self.request(_wire.trust(server))

    def request_capability(self, capability: str, context: str | None = None) -> ToolResult:
        """Record that the user needed something no tool provides."""
        return self.request(_wire.capability_request(capability, context))

    def report(self, since_s: float | None = None, top: int = 20) -> ReportResult:
        """Per-tool call statistics and the top missing capabilities (optionally of the last ``since_s``)."""
        return self.request(_wire.report(since_s, top))

    def select(self, query: str, threshold: float | None = None) -> SelectResult:
        """Compatible-mode server selection (term-frequency cosine, reference behaviour)."""
        return self.request(_wire.select(query, threshold))

    def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        server: str | None = None,
        timeout: float | None = None,
        query: str | None = None,
    ) -> ToolResult:
        """Call ``tool`` (qualified ``server__tool``, or a plain name with ``server=``).

        ``query``: the user request that led to the call, so that ranking learns from it.
        """
        return self.request(_wire.tools_call(tool, arguments, server, timeout, query))
