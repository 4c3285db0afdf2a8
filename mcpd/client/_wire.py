"""What both clients share: the calls (method, params, result type) and the response decoding."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import msgspec

from mcpd.config.paths import default_socket_path
from mcpd.errors import DaemonNotRunning, InvalidParams, ProtocolError, error_from_wire
from mcpd.ipc.framing import frame
from mcpd.model.protocol import (
    MAX_CALL_TIMEOUT,
    PROTOCOL_VERSION,
    ApproveParams,
    ApproveResult,
    CancelParams,
    CapabilityParams,
    ConnectResult,
    HelloParams,
    HelloResult,
    Message,
    NoParams,
    Ok,
    ReloadResult,
    ReportParams,
    Request,
    Response,
    SelectParams,
    SelectResult,
    ServerParams,
    SessionTools,
    SnippetResult,
    StatusResult,
    ToolsCallParams,
    ToolsListParams,
    ToolsListResult,
    TrustResult,
)
from mcpd.model.servers import ServerStatus
from mcpd.model.tools import ToolResult
from mcpd.model.usage import ReportResult

T = TypeVar("T")

encoder = msgspec.msgpack.Encoder()
decoder = msgspec.msgpack.Decoder(Message)

DEFAULT_TIMEOUT = 30.0
"""Seconds to wait for any answer that is not a tool call."""
CALL_MARGIN = 5.0
"""Extra seconds a client waits beyond a tool call's own deadline, for the daemon to say it expired."""


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    params: msgspec.Struct
    result: type[T]
    timeout: float = DEFAULT_TIMEOUT

    def request(self, request_id: int) -> bytes:
        payload = encoder.encode(Request(request_id, self.method, msgspec.Raw(encoder.encode(self.params))))
        return frame(payload)


def hello(client: str) -> Call[HelloResult]:
    return Call("hello", HelloParams(protocol=PROTOCOL_VERSION, client=client), HelloResult)


def status() -> Call[StatusResult]:
    return Call("status", NoParams(), StatusResult)


def server_action(action: str, name: str, timeout: float = 120.0) -> Call[ServerStatus]:
    return Call(f"servers.{action}", ServerParams(name=name), ServerStatus, timeout)


def reload() -> Call[ReloadResult]:
    return Call("reload", NoParams(), ReloadResult, 120.0)


def tools_list(
    servers: list[str] | None,
    *,
    query: str | None = None,
    limit: int | None = None,
    budget_tokens: int | None = None,
    explain: bool = False,
    include_reserved: bool = True,
) -> Call[ToolsListResult]:
    params = ToolsListParams(
        servers=servers,
        query=query,
        limit=limit,
        budget_tokens=budget_tokens,
        explain=explain,
        include_reserved=include_reserved,
    )
    return Call("tools.list", params, ToolsListResult)


def capability_request(capability: str, context: str | None) -> Call[ToolResult]:
    return Call("capability.request", CapabilityParams(capability=capability, context=context), ToolResult)


def report(since_s: float | None, top: int = 20) -> Call[ReportResult]:
    return Call("report", ReportParams(since_s=since_s, top=top), ReportResult)


def select(query: str, threshold: float | None = None) -> Call[SelectResult]:
    params = (
        SelectParams(query=query) if threshold is None else SelectParams(query=query, threshold=threshold)
    )
    return Call("servers.select", params, SelectResult)


def tools_call(
    tool: str,
    arguments: dict[str, Any] | None,
    server: str | None,
    timeout: float | None,
    query: str | None = None,
    *,
    progress: bool = False,
) -> Call[ToolResult]:
    if timeout is not None and not 0 < timeout <= MAX_CALL_TIMEOUT:
        raise InvalidParams(f"timeout must be a number of seconds in (0, {MAX_CALL_TIMEOUT}], not {timeout}")
    params = ToolsCallParams(
        tool=tool, server=server, arguments=arguments or {}, timeout=timeout, query=query, progress=progress
    )
    # Without an explicit timeout the daemon applies the server's call_timeout (60 s by default).
    wait = (timeout if timeout is not None else 600.0) + CALL_MARGIN
    return Call("tools.call", params, ToolResult, wait)


def session_connect(server: str) -> Call[ConnectResult]:
    return Call("session.connect", ServerParams(name=server), ConnectResult)


def session_tools() -> Call[SessionTools]:
    return Call("session.tools", NoParams(), SessionTools)


def snippet() -> Call[SnippetResult]:
    return Call("prompt.snippet", NoParams(), SnippetResult)


def cancel(request_id: int) -> bytes:
    """The frame that withdraws request ``request_id`` (its answer is not awaited)."""
    return Call("cancel", CancelParams(id=request_id), Ok).request(0)


def approve(server: str, tool: str | None) -> Call[ApproveResult]:
    return Call("trust.approve", ApproveParams(server=server, tool=tool), ApproveResult)


def trust(server: str) -> Call[TrustResult]:
    return Call("trust.show", ServerParams(name=server), TrustResult)


def subscribe() -> Call[Ok]:
    return Call("subscribe", NoParams(), Ok)


def result_of(response: Response, call: Call[T]) -> T:
    """The decoded result, or the daemon's error rebuilt as the same exception class."""
    if response.error is not None:
        raise error_from_wire(response.error.code, response.error.message, response.error.data)
    try:
        return msgspec.msgpack.decode(response.result, type=call.result)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ProtocolError(f"the daemon's answer to {call.method} did not decode: {exc}") from None


def resolve_socket(path: str | Path | None) -> Path:
    return Path(path) if path is not None else default_socket_path()


def not_running(path: Path, exc: OSError) -> DaemonNotRunning:
    reason = "no such socket" if isinstance(exc, FileNotFoundError) else (exc.strerror or str(exc))
    return DaemonNotRunning(
        f"no mcpd daemon is listening on {path} ({reason}); start one with `mcpd serve`",
        {"socket": str(path)},
    )
