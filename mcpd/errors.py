"""The one exception tree of mcpd; each class carries the code it has on the wire.

::

    McpdError                     1000  anything mcpd itself raises on purpose
    ├── ConfigError               1001  a config file or entry is invalid
    ├── ProtocolError             1002  a malformed frame or message, a version mismatch
    │   └── PeerRejected          1013  the other end of the socket runs as another uid
    ├── UnknownMethod             1003
    ├── InvalidParams             1004
    ├── UnknownServer             1005  no server of that name is configured
    ├── ServerNotRunning          1006  the server is stopped, failed, disabled or still starting
    ├── UnknownTool               1007
    ├── ToolError                 1008  the tool ran and reported failure
    ├── TransportError            1009  the server went away or answered nonsense mid-call
    │   └── DaemonStopped         1018  (client side) the daemon's process is stopped (SIGSTOP)
    ├── CallTimeout               1010  no answer within the deadline
    ├── DaemonNotRunning          1011  (client side) nothing listens on the socket
    ├── NotApproved               1012  the tool is held back by the trust gate
    ├── UnknownResource           1014  no server of that name, or the server has no such resource
    ├── UnknownPrompt             1015
    ├── Unsupported               1016  the server did not declare the capability (resources.subscribe)
    └── TooManyRequests           1017  the connection's requests all run and as many wait: send it later

Lower-layer errors (a server session's ``RequestFailed``, the SDK's ``MCPError`` of a remote
server, ``OSError``, anyio's stream errors) are converted once, where they cross into mcpd, to the
most specific class here. A server's own JSON-RPC error to a request mcpd relayed (a read, a prompt,
a completion) keeps its code, message and data in the error's ``data`` (``SERVER_ERROR``): hosts are
answered with that error itself. Hosts' MCP sessions answer the others with JSON-RPC's and MCP's codes
(``mcpd.front.rpc_errors``), not these.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

DECODE_FAILURES = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)
"""What decoding untrusted bytes with msgspec may raise: a ``DecodeError`` (a ``ValidationError``
is one), invalid UTF-8 in a string inside a field left undecoded until now (``Raw``), or nesting
deeper than Python's recursion limit. Every decode of what a server, a host or a client sent
catches all three: missing one let a single line end a server's session."""


class McpdError(Exception):
    """Base class; ``code`` identifies the class on the wire, ``data`` is extra detail."""

    code: ClassVar[int] = 1000

    def __init__(self, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data or {}


class ConfigError(McpdError):
    code = 1001


class ProtocolError(McpdError):
    code = 1002


class PeerRejected(ProtocolError):
    """A client found the socket served by another uid, or the daemon refused a client of another uid."""

    code = 1013


class UnknownMethod(McpdError):
    code = 1003


class InvalidParams(McpdError):
    code = 1004


class UnknownServer(McpdError):
    code = 1005


class ServerNotRunning(McpdError):
    code = 1006


class UnknownTool(McpdError):
    code = 1007


class ToolError(McpdError):
    code = 1008


class TransportError(McpdError):
    code = 1009


class DaemonStopped(TransportError):
    """The daemon's process is stopped (SIGSTOP, Ctrl-Z): it answers nothing until it is continued.
    ``data["pid"]`` is its pid."""

    code = 1018


class CallTimeout(McpdError):
    code = 1010


class DaemonNotRunning(McpdError):
    code = 1011


class NotApproved(McpdError):
    code = 1012


class UnknownResource(McpdError):
    code = 1014


class UnknownPrompt(McpdError):
    code = 1015


class Unsupported(McpdError):
    code = 1016


class TooManyRequests(McpdError):
    """A limit of the client is reached: ``max_in_flight`` requests of the connection run and as many
    wait for a slot (this one was not started: send it again once some are answered), or it holds
    as many subscriptions as one may."""

    code = 1017


ERRORS_BY_CODE: dict[int, type[McpdError]] = {
    cls.code: cls
    for cls in (
        McpdError,
        ConfigError,
        ProtocolError,
        UnknownMethod,
        InvalidParams,
        UnknownServer,
        ServerNotRunning,
        UnknownTool,
        ToolError,
        TransportError,
        DaemonStopped,
        CallTimeout,
        DaemonNotRunning,
        NotApproved,
        UnknownResource,
        UnknownPrompt,
        Unsupported,
        TooManyRequests,
        PeerRejected,
    )
}


SERVER_ERROR = "server_error"
"""The key of an error's ``data`` that holds the JSON-RPC error the server answered with
(``ServerRefusal``): the server refused the request, in its own words."""


class ServerRefusal(msgspec.Struct, frozen=True, omit_defaults=True):
    """A server's JSON-RPC error, as it sent it."""

    code: int
    message: str
    data: Any = None


def server_refusal(exc: McpdError) -> ServerRefusal | None:
    """The server's own error behind ``exc``, if a server refused (see ``SERVER_ERROR``)."""
    found = exc.data.get(SERVER_ERROR)
    if found is None:
        return None
    try:
        return msgspec.convert(found, ServerRefusal)
    except msgspec.ValidationError:
        return None


def error_from_wire(code: int, message: str, data: dict[str, Any] | None) -> McpdError:
    """Rebuild the exception a daemon sent; unknown codes become the base class."""
    return ERRORS_BY_CODE.get(code, McpdError)(message, data)
