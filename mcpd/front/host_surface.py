"""Resources, templates and prompts and completions in MCP's own shapes, for host sessions.

The lists are those of ``mcpd.front.surface`` (qualified names, trust applied) for the
servers a session sees; reads, gets and completions go through the same routing. What mcpd
models of an item is written over the item as its server sent it (``mcp.with_extra``): fields mcpd
does not use (``icons``, ``annotations``, ``_meta``, those of later revisions) reach hosts unchanged,
as do the ``_meta`` of results. The resources a prompt's messages embed are named by qualified URI,
as the contents of a read are.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from mcpd.front import surface
from mcpd.front.core import Core
from mcpd.model import mcp
from mcpd.model.resources import (
    CompleteParams,
    PromptArgument,
    PromptGetParams,
    ReadParams,
    SurfaceListParams,
)

_U = msgspec.UNSET
T = TypeVar("T")

Resource = mcp.Resource | dict[str, Any]
Template = mcp.ResourceTemplate | dict[str, Any]
Prompt = mcp.Prompt | dict[str, Any]


def _opt(value: T | None) -> T | msgspec.UnsetType:
    return _U if value is None else value


async def resources(core: Core, servers: list[str] | None) -> list[Resource]:
    return [
        mcp.with_extra(
            mcp.Resource(
                uri=entry.uri,
                name=r.name,
                title=_opt(r.title),
                description=_opt(r.description),
                mime_type=_opt(r.mime_type),
                size=_opt(r.size),
            ),
            r.extra,
        )
        for entry in await surface.resources(core, SurfaceListParams(servers=servers))
        for r in (entry.resource,)
    ]


async def templates(core: Core, servers: list[str] | None) -> list[Template]:
    return [
        mcp.with_extra(
            mcp.ResourceTemplate(
                uri_template=entry.uri_template,
                name=t.name,
                title=_opt(t.title),
                description=_opt(t.description),
                mime_type=_opt(t.mime_type),
            ),
            t.extra,
        )
        for entry in await surface.templates(core, SurfaceListParams(servers=servers))
        for t in (entry.template,)
    ]


def _argument(a: PromptArgument) -> mcp.PromptArgument | dict[str, Any]:
    argument = mcp.PromptArgument(
        name=a.name,
        title=_opt(a.title),
        description=_opt(a.description),
        required=_opt(a.required),
    )
    return mcp.with_extra(argument, a.extra)


async def prompts(core: Core, servers: list[str] | None) -> list[Prompt]:
    return [
        mcp.with_extra(
            mcp.Prompt(
                name=entry.name,
                title=_opt(p.title),
                description=_opt(p.description),
                arguments=_U if p.arguments is None else [_argument(a) for a in p.arguments],
            ),
            p.extra,
        )
        for entry in await surface.prompts(core, SurfaceListParams(servers=servers))
        for p in (entry.prompt,)
    ]


async def read(core: Core, params: mcp.ReadResourceParams) -> mcp.ReadResourceResult | dict[str, Any]:
    result = await surface.read(core, ReadParams(uri=params.uri, meta=mcp.passed_meta(params.meta)))
    read = mcp.ReadResourceResult(
        contents=[
            mcp.with_extra(
                mcp.ResourceContents(
                    uri=c.uri, mime_type=_opt(c.mime_type), text=_opt(c.text), blob=_opt(c.blob)
                ),
                c.extra,
            )
            for c in result.contents
        ],
        meta=_opt(result.meta),
    )
    return mcp.with_extra(read, result.extra)


async def get_prompt(core: Core, params: mcp.GetPromptParams) -> mcp.GetPromptResult | dict[str, Any]:
    actor, name = surface.resolve_prompt(core, params.name)
    get = PromptGetParams(
        name=name, server=actor.name, arguments=params.arguments or {}, meta=mcp.passed_meta(params.meta)
    )
    result = await surface.get_prompt(core, get)
    got = mcp.GetPromptResult(
        description=_opt(result.description),
        messages=[
            mcp.PromptMessage(role=m.role, content=surface.qualify_content(actor.name, m.content))
            for m in result.messages
        ],
        meta=_opt(result.meta),
    )
    return mcp.with_extra(got, result.extra)


async def complete(core: Core, params: mcp.CompleteRequestParams) -> mcp.CompleteResult | dict[str, Any]:
    ask = CompleteParams(
        ref=params.ref, argument=params.argument, context=params.context, meta=mcp.passed_meta(params.meta)
    )
    result = await surface.complete(core, ask)
    found = result.completion
    completed = mcp.CompleteResult(
        completion=mcp.CompletionValues(
            values=found.values, total=_opt(found.total), has_more=_opt(found.has_more)
        ),
        meta=_opt(result.meta),
    )
    return mcp.with_extra(completed, result.extra)
