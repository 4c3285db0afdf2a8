"""A stdio server's own requests (sampling, elicitation, roots, ping): checked, handed to whoever
answers them (``SessionHooks.ask``), bounded and cancellable, and the answer checked on its way back.

A request without the params its method needs is refused (-32602), and a host's answer without
what its method returns becomes an error (-32603), as the SDK's models did: a host never gets a
request it cannot read, and a server never gets a result its own SDK would reject. At most
``MAX_SERVER_REQUESTS`` wait on hosts at once; more are refused at once (-32012), so a flood
costs no tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import msgspec
import structlog
from anyio import CancelScope
from anyio.abc import TaskGroup
from msgspec import UNSET

from mcpd.errors import DECODE_FAILURES
from mcpd.model import mcp
from mcpd.model.requests import ELICITATION, ROOTS, SAMPLING, ServerReply
from mcpd.supervisor.session import Ask
from mcpd.tally import Tally

log = structlog.get_logger("mcpd.supervisor")

MAX_SERVER_REQUESTS = 16
"""Requests from one server answered at once."""
TOO_MANY_ASKS = "mcpd: too many requests from this server at once"


class _SamplingParams(msgspec.Struct, frozen=True, rename="camel"):
    messages: list[dict[str, Any]]
    max_tokens: int


class _ElicitParams(msgspec.Struct, frozen=True):
    message: str


class _RootsParams(msgspec.Struct, frozen=True):
    pass


class _SamplingResult(msgspec.Struct, frozen=True):
    role: str
    content: Any
    model: str


class _ElicitResult(msgspec.Struct, frozen=True):
    action: str


class _RootsResult(msgspec.Struct, frozen=True):
    roots: list[dict[str, Any]]


_SHAPES: dict[str, tuple[type[msgspec.Struct], type[msgspec.Struct]]] = {
    SAMPLING: (_SamplingParams, _SamplingResult),
    ELICITATION: (_ElicitParams, _ElicitResult),
    ROOTS: (_RootsParams, _RootsResult),
}
"""method -> (its params, its result)"""


class ServerAsks:
    """The requests one server has sent, answered in tasks of ``tasks`` (the session's)."""

    def __init__(
        self, server: str, ask: Ask | None, send: Callable[[msgspec.Struct], None], tasks: TaskGroup
    ) -> None:
        self._server = server
        self._ask = ask
        self._send = send
        self._tasks = tasks
        self._duplicates = Tally()
        self._answering: dict[mcp.RequestId, CancelScope] = {}
        """The requests being answered, so that the server's ``notifications/cancelled`` can stop one."""

    def received(self, request_id: mcp.RequestId, method: str, params: msgspec.Raw) -> None:
        """A request from the server: answered at once, or in a task of its own."""
        if request_id in self._answering:
            # One answer per id: the request already running under it gets it.
            if self._duplicates.due():
                log.warning(
                    "server.duplicate_request_id",
                    server=self._server,
                    id=request_id,
                    count=self._duplicates.count,
                )
        elif method == "ping":
            self._send(mcp.Response(request_id, {}))
        elif method not in _SHAPES or self._ask is None:
            self._error(request_id, mcp.METHOD_NOT_FOUND, f"Method not found: {method}")
        else:
            self._take(self._ask, request_id, method, params)

    def _take(self, ask: Ask, request_id: mcp.RequestId, method: str, params: msgspec.Raw) -> None:
        """Refuse a request without the params its method needs, or one past the bound; answer the
        others in a task. Checked here, before it takes a place: one refused for its params held a
        place until its task ran, and a burst of requests read in one go had the last refused."""
        try:
            given = msgspec.json.decode(params, type=dict[str, Any] | None) or {}
            # Absent, not null, as the SDK's models passed them on: ``"tools": null`` is no tools.
            asked = {key: value for key, value in given.items() if value is not None}
            msgspec.convert(asked, _SHAPES[method][0])
        except DECODE_FAILURES as exc:
            self._error(request_id, mcp.INVALID_PARAMS, f"mcpd: invalid params for {method}: {exc}")
            return
        if len(self._answering) >= MAX_SERVER_REQUESTS:
            self._error(request_id, mcp.TOO_MANY_REQUESTS, TOO_MANY_ASKS)
            return
        scope = anyio.CancelScope()
        self._answering[request_id] = scope
        self._tasks.start_soon(self._answer, ask, scope, request_id, method, asked)

    def cancelled(self, request_id: mcp.RequestId) -> None:
        """The server withdrew a request: stop asking, answer nothing (MCP's rule for a cancelled one)."""
        scope = self._answering.get(request_id)
        if scope is not None:
            scope.cancel()

    async def _answer(
        self, ask: Ask, scope: CancelScope, request_id: mcp.RequestId, method: str, asked: dict[str, Any]
    ) -> None:
        try:
            with scope:
                try:
                    reply = await ask(method, asked)
                except Exception:
                    # The server gets an answer whatever went wrong here, and the session goes on.
                    log.exception("server.request_failed", server=self._server, method=method)
                    self._error(request_id, mcp.INTERNAL_ERROR, f"mcpd could not relay {method}")
                    return
                self._reply(request_id, method, reply)
        finally:
            del self._answering[request_id]

    def _reply(self, request_id: mcp.RequestId, method: str, reply: ServerReply) -> None:
        if reply.error is not None:
            error = reply.error
            data = UNSET if error.data is None else error.data
            self._send(mcp.ErrorResponse(request_id, mcp.ErrorObject(error.code, error.message, data)))
            return
        result = reply.result or {}
        try:
            msgspec.convert(result, _SHAPES[method][1])
        except msgspec.ValidationError as exc:
            message = f"mcpd: the host's answer to {method} is not a valid result: {exc}"
            self._error(request_id, mcp.INTERNAL_ERROR, message)
            return
        self._send(mcp.Response(request_id, result))

    def _error(self, request_id: mcp.RequestId, code: int, message: str) -> None:
        self._send(mcp.ErrorResponse(request_id, mcp.ErrorObject(code, message)))
