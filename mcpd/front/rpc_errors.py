"""mcpd's own errors as hosts' MCP sessions answer them: the one table of their JSON-RPC codes.

The socket protocol gives each ``McpdError`` class a code of its own (``mcpd.errors``); an MCP host
knows JSON-RPC's and MCP's codes only, and its SDK (or its model) acts on those. So each class
answers a host with the code MCP names for what went wrong, its message as it is (no class name:
hosts show it to people), and mcpd's typed details in ``data``: the class as ``type`` and what the
error carries (server, tool, state, last error). A server's own JSON-RPC error behind an
``McpdError`` (``server_refusal``) is answered as the server sent it instead.
"""

from __future__ import annotations

from typing import Any

import msgspec

from mcpd.errors import (
    CallTimeout,
    InvalidParams,
    McpdError,
    TooManyRequests,
    UnknownMethod,
    UnknownPrompt,
    UnknownResource,
    UnknownServer,
    UnknownTool,
    Unsupported,
    server_refusal,
)
from mcpd.model import mcp
from mcpd.model.requests import TIMED_OUT

RPC_CODES: dict[type[McpdError], int] = {
    UnknownMethod: mcp.METHOD_NOT_FOUND,
    Unsupported: mcp.METHOD_NOT_FOUND,  # the server did not declare the capability asked for
    InvalidParams: mcp.INVALID_PARAMS,
    UnknownServer: mcp.INVALID_PARAMS,
    UnknownTool: mcp.INVALID_PARAMS,  # MCP: "Unknown tool" is invalid params
    UnknownPrompt: mcp.INVALID_PARAMS,
    UnknownResource: mcp.RESOURCE_NOT_FOUND,
    CallTimeout: TIMED_OUT,  # no answer in time: what the MCP SDKs give a request that timed out
    TooManyRequests: mcp.TOO_MANY_REQUESTS,
}
"""Each class's JSON-RPC code (a subclass has its parent's unless listed); any other is -32603, an
internal error: the request was sound and mcpd could not carry it out (a server not running or
gone, one the trust gate holds back, a configuration it cannot use)."""


class RpcError(Exception):
    """Ends a request with a JSON-RPC error response."""

    def __init__(self, code: int, message: str, data: Any = msgspec.UNSET) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def rpc_code(exc: McpdError) -> int:
    """The JSON-RPC code of ``exc``'s class (``RPC_CODES``), that of its nearest listed parent."""
    for cls in type(exc).__mro__:
        code = RPC_CODES.get(cls)
        if code is not None:
            return code
    return mcp.INTERNAL_ERROR


def rpc_error(exc: McpdError) -> RpcError:
    """``exc`` as a host is answered: the server's own error if a server refused, else its code,
    message and details (``data``: ``type``, the class, and ``exc.data``)."""
    refusal = server_refusal(exc)
    if refusal is not None:
        return RpcError(
            refusal.code, refusal.message, msgspec.UNSET if refusal.data is None else refusal.data
        )
    return RpcError(rpc_code(exc), exc.message, {"type": type(exc).__name__, **exc.data})


def server_error(code: int, message: str, data: Any) -> RpcError:
    """A server's own JSON-RPC error as it sent it (without ``data`` where it gave none)."""
    return RpcError(code, message, msgspec.UNSET if data is None else data)
