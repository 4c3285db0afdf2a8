"""One request over a live link, on either transport, with one mapping of what can go wrong.

A tool call ends with a ``ToolResult`` (a JSON-RPC error answer is a tool error, ``is_error``
set); another request (``send_request``: resources/read, prompts/get, ...) with its result or
``Refused`` (the server's JSON-RPC error answer). Either may end with ``NotDelivered`` when the
server cannot have seen the request (the caller may send it again once the server is back), or
one ``McpdError``: ``CallTimeout``, ``InvalidParams`` or ``TransportError``. ``StatusRefused`` (an HTTP
status refused this request only) leaves the link usable; any other ``NotDelivered`` ends its run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import anyio
import msgspec

from mcpd.errors import CallTimeout, InvalidParams, McpdError, TransportError
from mcpd.model.tools import ToolResult
from mcpd.supervisor.link import Link
from mcpd.supervisor.rawrpc import NotReading
from mcpd.supervisor.session import (
    ConnectionLost,
    Malformed,
    NotDelivered,
    ProgressCallback,
    Refused,
    Session,
    StatusRefused,
    TransportFailed,
)

_EXIT_WAIT = 0.5
"""How long a lost call waits for the exit status, which makes the better message."""

_ON_SERVER = 0.9
"""The share of a timed-out call's time it must have spent on the server to count as hung there."""

T = TypeVar("T")


class CallWatch(Protocol):
    """Told what tool calls say of the server's health (``Link.hung``)."""

    def calls_hung(self, link: Link, what: str) -> None:
        """A call ran out the server's ``call_timeout`` unanswered (``link.hung`` counts it)."""

    def calls_answered(self, link: Link) -> None:
        """A call was answered after calls that hung (``link.hung`` is reset)."""


async def send_call(
    link: Link,
    *,
    server: str,
    tool: str,
    arguments: dict[str, Any],
    deadline: float,
    limit: float,
    on_progress: ProgressCallback | None,
    meta: dict[str, Any] | None = None,
    hung_after: float,
    watch: CallWatch,
) -> ToolResult:
    """Call ``tool`` over ``link`` until ``deadline`` (event-loop time, ``limit`` seconds after the start).

    A call that timed out although its caller allowed ``hung_after`` seconds (the server's
    ``call_timeout``) or more, most of it (``_ON_SERVER``) spent on the server rather than waiting
    for a start, is told to ``watch``: the server's doing. One that timed out by its caller's shorter
    deadline says nothing of the server (a tool may legitimately take minutes).

    Raises ``NotDelivered`` or an ``McpdError`` (see the module docstring).
    """
    token = object()
    link.calls[token] = deadline - limit
    sent = asyncio.get_running_loop().time()
    try:
        result = await link.session.call_tool(tool, arguments, deadline, on_progress, meta)
    except NotDelivered as exc:
        _refused(link, exc)
        raise
    except Exception as exc:
        if isinstance(exc, TimeoutError) and limit >= hung_after and deadline - sent >= _ON_SERVER * limit:
            link.hung += 1
            watch.calls_hung(link, f"{server}/{tool} gave no answer within {deadline - sent:.3g}s")
        raise await _error(exc, link, server, tool, limit, data={"server": server, "tool": tool}) from None
    finally:
        del link.calls[token]
    link.answered += 1
    if link.hung:
        link.hung = 0
        watch.calls_answered(link)
    return result


async def send_request(
    link: Link,
    request: Callable[[Session], Awaitable[T]],
    *,
    server: str,
    what: str,
    data: dict[str, Any],
    deadline: float,
    limit: float,
) -> T:
    """Send one request over ``link`` until ``deadline``; raises ``Refused``, ``NotDelivered`` or
    an ``McpdError`` (see the module docstring)."""
    try:
        with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
            return await request(link.session)
    except (NotDelivered, Refused) as exc:
        if isinstance(exc, NotDelivered):
            _refused(link, exc)
        raise
    except Exception as exc:
        raise await _error(exc, link, server, what, limit, data=data) from None


def _refused(link: Link, exc: NotDelivered) -> None:
    """The connection refuses requests: the run is over. Not so for one request an HTTP status
    refused (a 403 for this tool only, a gateway's 503): the others go on."""
    if not isinstance(exc, StatusRefused):
        link.refused.set()


async def _error(
    exc: Exception, link: Link, server: str, tool: str, limit: float, *, data: dict[str, Any]
) -> McpdError:
    """The one mapping of a failed request to the error its caller gets (``tool``: what was asked)."""
    if isinstance(exc, TimeoutError):
        return CallTimeout(f"{server}/{tool} did not answer within {limit:g}s", data)
    if isinstance(exc, msgspec.EncodeError | TypeError) and link.child is not None:
        return InvalidParams(f"arguments for {tool} cannot be sent as JSON: {exc}")
    if isinstance(exc, TransportFailed):
        return TransportError(f"{server} failed {tool}: {exc}", data)
    if isinstance(exc, NotReading):
        return TransportError(f"{server}: {exc}", data)
    if isinstance(exc, Malformed | msgspec.DecodeError | msgspec.ValidationError | TypeError):
        return TransportError(f"{server} sent a malformed answer to {tool}: {exc}", data)
    if isinstance(exc, ConnectionLost | OSError):
        if link.child is not None and link.child.ended_by_mcpd:
            # A restart, a stop, a reload or failed pings, after the server had read the request;
            # the pings are said (the others were asked for), or the caller is left to guess.
            why = f": {link.child.ended_for}" if link.child.ended_for else ""
            return TransportError(f"mcpd stopped {server} during {tool}, before it answered{why}", data)
        why = await _why_lost(link, exc)
        return TransportError(f"{server} closed the connection during {tool}: {why}", data)
    return TransportError(f"{server} failed during {tool}: {type(exc).__name__}: {exc}", data)


async def _why_lost(link: Link, exc: Exception) -> str:
    child = link.child
    if child is None:
        return str(exc) if isinstance(exc, ConnectionLost) else f"{type(exc).__name__}: {exc}"
    with anyio.move_on_after(_EXIT_WAIT):
        await child.exited.wait()
    return child.exit_reason()
