"""A client's answers to what servers ask during its tool calls: sampling, elicitation, roots.

A server handling a tool call may ask its client for a model completion, for input from
the user, or for its roots. The daemon passes such a request to the client whose call
is running as a ``server.request`` notification; ``Answers`` turns it into the
``server.reply`` that goes back. A kind without a callback is not declared to the daemon,
so the server is told that this client cannot answer it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from mcpd.model.requests import (
    ELICITATION,
    ROOTS,
    SAMPLING,
    ClientCapabilities,
    ReplyError,
    ServerAsk,
    ServerReplyParams,
)

AskHandler = Callable[[ServerAsk], Awaitable[dict[str, Any]]]
"""Answers one request (``AsyncClient``): its result as the MCP spec has it (e.g. a
``CreateMessageResult`` as a dict). Raising refuses the request: the server gets a JSON-RPC
error with the exception's text."""
SyncAskHandler = Callable[[ServerAsk], dict[str, Any]]
"""The same for the blocking ``Client`` (it runs while the client waits for its tool call)."""

H = TypeVar("H", AskHandler, SyncAskHandler)
INTERNAL_ERROR = -32603


def root_entries(roots: Sequence[str | Mapping[str, str]]) -> list[dict[str, str]]:
    """``roots/list`` entries: a string is a root's URI, a mapping a whole root (``uri``, ``name``)."""
    return [{"uri": root} if isinstance(root, str) else dict(root) for root in roots]


@dataclass(frozen=True)
class Answers(Generic[H]):
    """What this client answers; ``None`` for a kind it does not."""

    on_sampling: H | None = None
    on_elicitation: H | None = None
    roots: Sequence[str | Mapping[str, str]] | None = None

    def capabilities(self) -> ClientCapabilities:
        return ClientCapabilities(
            sampling=self.on_sampling is not None,
            elicitation=self.on_elicitation is not None,
            roots=self.roots is not None,
        )

    def plan(self, ask: ServerAsk) -> H | ServerReplyParams:
        """The handler that answers ``ask``, or the reply when none needs to run."""
        if ask.method == ROOTS and self.roots is not None:
            return ServerReplyParams(id=ask.id, result={"roots": root_entries(self.roots)})
        handler = {SAMPLING: self.on_sampling, ELICITATION: self.on_elicitation}.get(ask.method)
        if handler is None:
            return failed(ask, LookupError(f"this client does not answer {ask.method}"))
        return handler


def failed(ask: ServerAsk, exc: Exception) -> ServerReplyParams:
    """The client's own failure is the server's answer, not the client's crash."""
    return ServerReplyParams(id=ask.id, error=ReplyError(INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"))


async def answer(answers: Answers[AskHandler], ask: ServerAsk) -> ServerReplyParams:
    """The reply to ``ask``: the callback's result, or the error it raised."""
    handler = answers.plan(ask)
    if isinstance(handler, ServerReplyParams):
        return handler
    try:
        return ServerReplyParams(id=ask.id, result=await handler(ask))
    except Exception as exc:
        return failed(ask, exc)


def answer_sync(answers: Answers[SyncAskHandler], ask: ServerAsk) -> ServerReplyParams:
    """``answer`` for the blocking client."""
    handler = answers.plan(ask)
    if isinstance(handler, ServerReplyParams):
        return handler
    try:
        return ServerReplyParams(id=ask.id, result=handler(ask))
    except Exception as exc:
        return failed(ask, exc)
