"""Resources, resource templates and prompts of the live servers, named for every client, and the
routing of reads, gets, subscriptions and completions back to the server that owns them (names in
``mcpd.registry.names``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

import msgspec

from mcpd.errors import NotApproved, UnknownPrompt, UnknownResource
from mcpd.front.core import Core
from mcpd.model.resources import (
    CompleteParams,
    CompleteResult,
    CompletionRef,
    PromptEntry,
    PromptGetParams,
    PromptRef,
    PromptResult,
    ReadParams,
    ReadResult,
    ResourceEntry,
    Surface,
    SurfaceListParams,
    TemplateEntry,
    TemplateRef,
)
from mcpd.model.states import LIVE_STATES
from mcpd.model.tools import SEPARATOR
from mcpd.model.uris import qualify_uri, split_uri
from mcpd.registry.names import qualify
from mcpd.supervisor import surface_requests
from mcpd.supervisor.actor import ServerActor

E = TypeVar("E")


async def _each(
    core: Core, params: SurfaceListParams, entries: Callable[[str, Surface], Iterable[E]]
) -> list[E]:
    """``entries`` of every live server (or of ``params.servers``) the verifier lets through, by name."""
    actors = (
        [core.supervisor.actor(name) for name in sorted(set(params.servers))]
        if params.servers is not None
        else core.supervisor.actors()
    )
    out: list[E] = []
    for actor in actors:
        if actor.state in LIVE_STATES and not (await core.catalog.review(actor)).blocked:
            out.extend(entries(actor.name, actor.surface))
    return out


async def _check_allowed(core: Core, actor: ServerActor) -> None:
    review = await core.catalog.review(actor)
    if review.blocked:
        raise NotApproved(f"server {actor.name!r} is kept out: {review.blocked}", {"server": actor.name})


async def resources(core: Core, params: SurfaceListParams) -> list[ResourceEntry]:
    return await _each(
        core,
        params,
        lambda server, s: (
            ResourceEntry(uri=qualify_uri(server, r.uri), server=server, resource=r) for r in s.resources
        ),
    )


async def templates(core: Core, params: SurfaceListParams) -> list[TemplateEntry]:
    return await _each(
        core,
        params,
        lambda server, s: (
            TemplateEntry(uri_template=qualify_uri(server, t.uri_template), server=server, template=t)
            for t in s.templates
        ),
    )


async def prompts(core: Core, params: SurfaceListParams) -> list[PromptEntry]:
    return await _each(
        core,
        params,
        lambda server, s: (
            PromptEntry(name=qualify(server, p.name), server=server, prompt=p) for p in s.prompts
        ),
    )


def route_uri(uri: str, server: str | None = None) -> tuple[str, str]:
    """(server, the server's own URI) of a qualified URI, or of ``uri`` as ``server``'s own."""
    if server is not None:
        return server, uri
    split = split_uri(uri)
    if split is None:
        raise UnknownResource(
            f"{uri!r} is not a qualified resource URI (mcpd://<server>/<uri>); or name its server too "
            "(`server` in the client library, `--server` on the command line)",
            {"uri": uri},
        )
    return split


async def _allowed_actor(core: Core, server: str) -> ServerActor:
    actor = core.supervisor.actor(server)
    await _check_allowed(core, actor)
    return actor


async def read(core: Core, params: ReadParams) -> ReadResult:
    """Read a resource; the contents' URIs come back qualified, as the client named it."""
    server, uri = route_uri(params.uri, params.server)
    actor = await _allowed_actor(core, server)
    result = await surface_requests.read_resource(actor, uri, params.timeout, params.meta)
    contents = [msgspec.structs.replace(c, uri=qualify_uri(server, c.uri)) for c in result.contents]
    return msgspec.structs.replace(result, contents=contents)


def qualify_content(server: str, block: dict[str, Any]) -> dict[str, Any]:
    """A content block of ``server``'s (a tool result's, a prompt message's) with the URI of its
    resource link or embedded resource qualified: the name a host reads it back by, as it reads
    what ``resources/list`` gives (the server's own URI reaches no server through mcpd)."""
    kind, resource = block.get("type"), block.get("resource")
    if kind == "resource_link" and isinstance(block.get("uri"), str):
        return {**block, "uri": qualify_uri(server, block["uri"])}
    if kind == "resource" and isinstance(resource, dict) and isinstance(resource.get("uri"), str):
        return {**block, "resource": {**resource, "uri": qualify_uri(server, resource["uri"])}}
    return block


async def subscribe(core: Core, owner: Hashable, params: ReadParams) -> None:
    """Subscribe a registered ``owner`` (see ``Subscriptions``) to a resource's updates. Its wish
    counts from the call on, the server's trust checked before the server is asked: an unsubscribe
    sent after it, without waiting for its answer, comes after it."""
    server, uri = route_uri(params.uri, params.server)
    check = functools.partial(_allowed_actor, core, server)
    await core.subscriptions.subscribe(owner, server, uri, params.timeout, check)


async def unsubscribe(core: Core, owner: Hashable, params: ReadParams) -> bool:
    """Withdraw ``owner``'s subscription; False if it had none."""
    server, uri = route_uri(params.uri, params.server)
    return await core.subscriptions.unsubscribe(owner, server, uri, params.timeout)


async def complete(core: Core, params: CompleteParams) -> CompleteResult:
    """Complete a prompt argument or a template variable: qualified names lead to the server, which
    gets its own name or template."""
    ref = params.ref
    if isinstance(ref, PromptRef):
        actor, name = resolve_prompt(core, ref.name)
        own: CompletionRef = PromptRef(name=name)
    else:
        server, template = route_uri(ref.uri)
        actor, own = core.supervisor.actor(server), TemplateRef(uri=template)
    await _check_allowed(core, actor)
    context = params.context.arguments if params.context is not None else None
    argument = (params.argument.name, params.argument.value)
    return await surface_requests.complete(
        actor, own, argument, context, timeout=params.timeout, meta=params.meta
    )


async def get_prompt(core: Core, params: PromptGetParams) -> PromptResult:
    if params.server is not None:
        actor, name = core.supervisor.actor(params.server), params.name
    else:
        actor, name = resolve_prompt(core, params.name)
    await _check_allowed(core, actor)
    return await surface_requests.get_prompt(actor, name, params.arguments, params.timeout, params.meta)


def resolve_prompt(core: Core, qualified: str) -> tuple[ServerActor, str]:
    """The server that offers prompt ``qualified``, and the prompt's own name there."""
    # Qualified names may be hashed (see ``qualify``): look them up among the live prompts first.
    for actor in core.supervisor.actors():
        for prompt in actor.surface.prompts:
            if qualify(actor.name, prompt.name) == qualified:
                return actor, prompt.name
    server, separator, name = qualified.partition(SEPARATOR)
    if separator and server in core.supervisor.names():
        return core.supervisor.actor(server), name  # the actor says what is wrong (not running, unknown)
    raise UnknownPrompt(f"no prompt named {qualified!r}", {"prompt": qualified})
