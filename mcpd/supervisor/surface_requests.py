"""Requests about a server's resources, prompts and completions, sent on its live link.

Each waits for a (re)starting server and keeps to its deadline exactly as a tool call does
(``ServerActor.on_live``), checks the target against the server's current lists first, and turns
the server's refusal into the error a caller can act on (``UnknownResource``, ``UnknownPrompt``,
``InvalidParams``), the server's own error kept in its data (``errors.SERVER_ERROR``) for hosts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from mcpd.errors import (
    SERVER_ERROR,
    InvalidParams,
    McpdError,
    ServerRefusal,
    UnknownPrompt,
    UnknownResource,
    Unsupported,
)
from mcpd.model.mcp import LogLevel
from mcpd.model.resources import CompleteResult, CompletionRef, PromptRef, PromptResult, ReadResult
from mcpd.model.states import LIVE_STATES
from mcpd.supervisor.calls import send_request
from mcpd.supervisor.link import Link
from mcpd.supervisor.session import Refused, Session

if TYPE_CHECKING:
    from mcpd.supervisor.actor import ServerActor

T = TypeVar("T")


async def read_resource(
    actor: ServerActor, uri: str, timeout: float | None = None, meta: dict[str, Any] | None = None
) -> ReadResult:
    """``resources/read`` of the server's own ``uri``, with ``call_tool``'s waiting and deadline (and
    ``meta`` as its ``_meta``, as ``get_prompt`` and ``complete`` take it).

    Raises ``UnknownResource`` (the server refused), ``ServerNotRunning``, ``CallTimeout`` or
    ``TransportError``.
    """
    return await _on_resource(
        actor, uri, "resources/read", lambda s: s.read_resource(uri, meta), timeout=timeout
    )


async def get_prompt(
    actor: ServerActor,
    name: str,
    arguments: dict[str, str],
    timeout: float | None = None,
    meta: dict[str, Any] | None = None,
) -> PromptResult:
    """``prompts/get``, with ``call_tool``'s waiting and deadline.

    Raises ``UnknownPrompt``, ``InvalidParams`` (the server refused the arguments),
    ``ServerNotRunning``, ``CallTimeout`` or ``TransportError``.
    """
    data = {"server": actor.name, "prompt": name}
    return await _request(
        actor,
        lambda s: s.get_prompt(name, arguments, meta),
        what=f"prompts/get {name}",
        data=data,
        timeout=timeout,
        known=lambda current: _known_prompt(current, name),
        refused=lambda why, error: InvalidParams(
            f"{actor.name} refused prompt {name!r}: {why}", {**data, SERVER_ERROR: error}
        ),
    )


def _known_prompt(actor: ServerActor, name: str) -> None:
    if all(p.name != name for p in actor.surface.prompts):
        raise UnknownPrompt(
            f"server {actor.name!r} has no prompt {name!r}", {"server": actor.name, "prompt": name}
        )


async def subscribe_resource(actor: ServerActor, uri: str, timeout: float | None = None) -> None:
    """``resources/subscribe`` to the server's own ``uri``; updates arrive as ``ResourceUpdated``
    events. The caller subscribes again after a restart (a new run knows no subscriptions).

    Raises ``Unsupported`` (the server did not declare ``resources.subscribe``),
    ``UnknownResource`` (it refused), ``ServerNotRunning``, ``CallTimeout`` or ``TransportError``.
    """

    def known(current: ServerActor) -> None:
        link = current.link
        if link is not None and not link.session.can_subscribe():
            raise Unsupported(
                f"server {current.name!r} does not offer resource subscriptions",
                {"server": current.name, "uri": uri},
            )

    subscribe = "resources/subscribe"
    await _on_resource(
        actor, uri, subscribe, lambda s: s.subscribe_resource(uri), timeout=timeout, known=known
    )


async def unsubscribe_resource(actor: ServerActor, uri: str, timeout: float) -> bool:
    """``resources/unsubscribe``, only if the server is live now: a new run has no subscriptions to
    undo. True once the server took it, False when nothing was sent. Raises what
    ``subscribe_resource`` does."""
    if actor.link is None or actor.state not in LIVE_STATES:
        return False
    unsubscribe = "resources/unsubscribe"
    await _on_resource(actor, uri, unsubscribe, lambda s: s.unsubscribe_resource(uri), timeout=timeout)
    return True


async def set_log_level(actor: ServerActor, level: LogLevel, timeout: float) -> bool:
    """``logging/setLevel``, only if the server is live now (a new run is asked when it runs);
    False when it did not declare ``logging`` or is not live. Raises ``InvalidParams`` (the server
    refused), ``CallTimeout`` or ``TransportError``."""
    if actor.link is None or actor.state not in LIVE_STATES:
        return False
    data = {"server": actor.name, "level": level}
    return await _request(
        actor,
        lambda s: s.set_log_level(level),
        what="logging/setLevel",
        data=data,
        timeout=timeout,
        known=lambda current: None,
        refused=lambda why, error: InvalidParams(
            f"{actor.name} refused logging/setLevel {level}: {why}", {**data, SERVER_ERROR: error}
        ),
    )


async def _on_resource(
    actor: ServerActor,
    uri: str,
    method: str,
    request: Callable[[Session], Awaitable[T]],
    *,
    timeout: float | None,
    known: Callable[[ServerActor], None] = lambda current: None,
) -> T:
    """A request about the server's own ``uri``; its refusal is ``UnknownResource``."""
    data = {"server": actor.name, "uri": uri}
    return await _request(
        actor,
        request,
        what=f"{method} {uri}",
        data=data,
        timeout=timeout,
        known=known,
        refused=lambda why, error: UnknownResource(
            f"{actor.name} refused {method} {uri!r}: {why}", {**data, SERVER_ERROR: error}
        ),
    )


async def complete(
    actor: ServerActor,
    ref: CompletionRef,
    argument: tuple[str, str],
    context: dict[str, str] | None = None,
    *,
    timeout: float | None = None,
    meta: dict[str, Any] | None = None,
) -> CompleteResult:
    """``completion/complete`` for the server's own prompt or template ``ref``; empty when the
    server offers no completions.

    Raises ``UnknownPrompt`` / ``UnknownResource`` (no such prompt or template), ``InvalidParams``
    (the server refused), ``ServerNotRunning``, ``CallTimeout`` or ``TransportError``.
    """
    data = {"server": actor.name, "ref": msgspec.to_builtins(ref)}

    def known(current: ServerActor) -> None:
        if isinstance(ref, PromptRef):
            _known_prompt(current, ref.name)
        elif all(t.uri_template != ref.uri for t in current.surface.templates):
            raise UnknownResource(f"server {current.name!r} has no resource template {ref.uri!r}", data)

    return await _request(
        actor,
        lambda s: s.complete(ref, argument, context, meta),
        what="completion/complete",
        data=data,
        timeout=timeout,
        known=known,
        refused=lambda why, error: InvalidParams(
            f"{actor.name} refused to complete: {why}", {**data, SERVER_ERROR: error}
        ),
    )


async def _request(
    actor: ServerActor,
    request: Callable[[Session], Awaitable[T]],
    *,
    what: str,
    data: dict[str, Any],
    timeout: float | None,
    known: Callable[[ServerActor], None],
    refused: Callable[[str, dict[str, Any]], McpdError],
) -> T:
    """One request on a live link; the server's refusal becomes ``refused(its message, its error)``,
    its error (``ServerRefusal``) as builtins for the error's data."""

    async def send(link: Link, deadline: float, limit: float) -> T:
        try:
            return await send_request(
                link, request, server=actor.name, what=what, data=data, deadline=deadline, limit=limit
            )
        except Refused as exc:
            error = ServerRefusal(exc.code, exc.message, exc.data)
            raise refused(exc.message, msgspec.to_builtins(error)) from None

    return await actor.on_live(timeout, known, send)
