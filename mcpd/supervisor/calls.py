"""One request over a live link, on either transport, with one mapping of what can go wrong.

Tool calls to stdio servers take the raw path (``rawrpc``: msgspec, no pydantic); tool
calls to remote servers, and every other request (``send_request``: resources/read,
prompts/get), the SDK session. A tool call ends with a ``ToolResult`` (a JSON-RPC error
answer is a tool error, ``is_error`` set); another request with its result or ``Refused``
(the server's JSON-RPC error answer). Either may end with ``NotDelivered`` when the server
cannot have seen the request (the caller may send it again once the server is back), or
one ``McpdError``: ``CallTimeout``, ``InvalidParams`` or ``TransportError``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import msgspec

from mcpd.errors import CallTimeout, InvalidParams, McpdError, TransportError
from mcpd.model.tools import ToolResult
from mcpd.supervisor.link import Link
from mcpd.supervisor.rawrpc import (
    MAX_BACKLOG,
    CallResult,
    ConnectionLost,
    NotReading,
    NotSent,
    ProgressCallback,
    RawRpc,
)
from mcpd.supervisor.sdkload import sdk

_call_result = msgspec.json.Decoder(CallResult)
_EXIT_WAIT = 0.5
"""How long a lost call waits for the exit status, which makes the better message."""


class NotDelivered(Exception):
    """The request never reached the server (refused, or the connection was already gone)."""


class Refused(Exception):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


T = TypeVar("T")


class _Malformed(Exception):
    """The server's answer could not be read."""


async def send_call(
    link: Link,
    *,
    server: str,
    tool: str,
    arguments: dict[str, Any],
    deadline: float,
    limit: float,
    on_progress: ProgressCallback | None,
) -> ToolResult:
    """Call ``tool`` over ``link`` until ``deadline`` (event-loop time, ``limit`` seconds after the start).

    Raises ``NotDelivered`` or an ``McpdError`` (see the module docstring).
    """
    try:
        if link.child is not None:
            return await _call_raw(link.child.rpc, tool, arguments, deadline, on_progress)
        return await _through_sdk(link.session, lambda s: sdk.call_tool(s, tool, arguments), deadline)
    except NotDelivered:
        link.refused.set()
        raise
    except Exception as exc:
        raise await _error(exc, link, server, tool, limit, data={"server": server, "tool": tool}) from None


async def send_request(
    link: Link,
    request: Callable[[sdk.ClientSession], Awaitable[T]],
    *,
    server: str,
    what: str,
    data: dict[str, Any],
    deadline: float,
    limit: float,
) -> T:
    """Send one SDK request over ``link`` until ``deadline``; raises ``Refused``, ``NotDelivered`` or
    an ``McpdError`` (see the module docstring)."""
    try:
        return await _through_sdk(link.session, request, deadline)
    except (NotDelivered, Refused) as exc:
        if isinstance(exc, NotDelivered):
            link.refused.set()
        raise
    except Exception as exc:
        raise await _error(exc, link, server, what, limit, data=data) from None


async def _call_raw(
    rpc: RawRpc, tool: str, arguments: dict[str, Any], deadline: float, on_progress: ProgressCallback | None
) -> ToolResult:
    try:
        reply = await rpc.request("tools/call", {"name": tool, "arguments": arguments}, deadline, on_progress)
    except NotSent:
        raise NotDelivered from None
    if reply.error is not None:
        # A JSON-RPC error response: the server handled the request and refused it.
        return ToolResult(content=[{"type": "text", "text": reply.error.message}], is_error=True)
    try:
        result = _call_result.decode(reply.result)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise _Malformed(f"an invalid result: {exc}") from None
    return ToolResult(
        content=result.content, structured_content=result.structured_content, is_error=result.is_error
    )


async def _through_sdk(
    session: sdk.ClientSession, request: Callable[[sdk.ClientSession], Awaitable[T]], deadline: float
) -> T:
    with anyio.fail_after(max(0.0, deadline - anyio.current_time())), sdk.track_call() as mark:
        try:
            return await request(session)
        except sdk.MCPError as exc:
            if exc.code != sdk.CONNECTION_CLOSED:
                raise Refused(exc.code, exc.error.message) from None
            if mark.refused:
                raise NotDelivered from None
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            # The session was closed before the request could be handed to the transport.
            raise NotDelivered from None


async def _error(
    exc: Exception, link: Link, server: str, tool: str, limit: float, *, data: dict[str, Any]
) -> McpdError:
    """The one mapping of a failed request to the error its caller gets (``tool``: what was asked)."""
    if isinstance(exc, TimeoutError):
        return CallTimeout(f"{server}/{tool} did not answer within {limit:g}s", data)
    if isinstance(exc, msgspec.EncodeError | TypeError) and link.child is not None:
        return InvalidParams(f"arguments for {tool} cannot be sent as JSON: {exc}")
    if isinstance(exc, NotReading):
        queued = f"over {MAX_BACKLOG} bytes of requests queued"
        return TransportError(f"{server} is not reading its stdin ({queued})", data)
    if isinstance(exc, _Malformed | msgspec.DecodeError | msgspec.ValidationError | TypeError):
        return TransportError(f"{server} sent a malformed answer to {tool}: {exc}", data)
    if isinstance(exc, ConnectionLost | sdk.MCPError | OSError):
        why = await _why_lost(link, exc)
        return TransportError(f"{server} closed the connection during {tool}: {why}", data)
    return TransportError(f"{server} failed during {tool}: {type(exc).__name__}: {exc}", data)


async def _why_lost(link: Link, exc: Exception) -> str:
    child = link.child
    if child is None:
        if isinstance(exc, sdk.MCPError):
            return sdk.describe_mcp_error(exc)
        return f"{type(exc).__name__}: {exc}"
    with anyio.move_on_after(_EXIT_WAIT):
        await child.exited.wait()
    return child.exit_reason()
