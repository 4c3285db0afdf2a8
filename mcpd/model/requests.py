"""Requests from servers to the host: what a server asks, how it is answered, and the socket's part.

A server may ask its client for a model completion (``sampling/createMessage``), for input
from the user (``elicitation/create``) or for its roots (``roots/list``) while it handles a
tool call. mcpd is that client: it passes the request to whoever made the call (a host's
MCP session, or a client-library connection) and the answer back to the server.

On the socket the daemon sends a ``server.request`` notification (``ServerAsk``) and the
client answers with the ``server.reply`` method (``ServerReplyParams``); a client declares
what it can answer with ``session.capabilities`` (``ClientCapabilities``).
"""

from __future__ import annotations

from typing import Any

import msgspec

SAMPLING = "sampling/createMessage"
ELICITATION = "elicitation/create"
ROOTS = "roots/list"
CAPABILITY_OF = {SAMPLING: "sampling", ELICITATION: "elicitation", ROOTS: "roots"}
"""The client capability a host must have declared before mcpd passes it each kind of request."""
SAMPLING_TOOLS = "sampling.tools"
"""What a host must have declared to be passed a sampling request that offers tools."""
ELICITATION_URL = "elicitation.url"
"""What a host must have declared to be passed a URL-mode elicitation (``elicitation: {}`` is
form mode only)."""

SERVER_REQUEST_NOTIFICATION = "server.request"

NOT_AVAILABLE = -32601
"""JSON-RPC code for "nobody here can answer that" (no call in flight, or no capability): the
code a client that does not implement the method would answer with."""
TIMED_OUT = -32001
"""JSON-RPC code the MCP SDKs use for a request that got no answer in time."""


class ServerRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One request a server sent to mcpd, its params as the server sent them (JSON)."""

    server: str
    method: str
    params: dict[str, Any] = msgspec.field(default_factory=dict)


class ReplyError(msgspec.Struct, frozen=True):
    """A JSON-RPC error object, as the server receives it."""

    code: int
    message: str
    data: Any = None


class ServerReply(msgspec.Struct, frozen=True, kw_only=True):
    """The answer for the server: a JSON-RPC ``result``, or an ``error``."""

    result: dict[str, Any] | None = None
    error: ReplyError | None = None


# -- on the socket ------------------------------------------------------------------------------


class ClientCapabilities(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Params of ``session.capabilities``: which server requests this connection answers."""

    sampling: bool = False
    elicitation: bool = False
    roots: bool = False

    def names(self) -> frozenset[str]:
        """The capabilities declared; a library's sampling callback gets tool-enabled requests too,
        and its elicitation callback URL-mode ones."""
        names = {name for name in ("sampling", "elicitation", "roots") if getattr(self, name)}
        if self.sampling:
            names.add(SAMPLING_TOOLS)
        if self.elicitation:
            names.add(ELICITATION_URL)
        return frozenset(names)


class ServerAsk(msgspec.Struct, frozen=True, kw_only=True):
    """Params of a ``server.request`` notification: answer it with ``server.reply`` and this ``id``."""

    id: int
    server: str
    method: str
    params: dict[str, Any] = msgspec.field(default_factory=dict)


class ServerReplyParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Params of ``server.reply``: the answer to the ``server.request`` with this ``id``."""

    id: int
    result: dict[str, Any] | None = None
    error: ReplyError | None = None
