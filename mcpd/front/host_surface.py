"""Resources, templates, prompts and completions in MCP's own shapes, for host sessions.

The lists are those of ``mcpd.front.surface`` (qualified names, trust applied) for the
servers a session sees; reads, gets and completions go through the same routing.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from mcpd.front import surface
from mcpd.front.core import Core
from mcpd.model import mcp
from mcpd.model.resources import CompleteParams, PromptGetParams, ReadParams, SurfaceListParams

_U = msgspec.UNSET
T = TypeVar("T")


def _opt(value: T | None) -> T | msgspec.UnsetType:
    return _U if value is None else value


async def resources(core: Core, servers: list[str] | None) -> list[mcp.Resource]:
    return [
        mcp.Resource(
            uri=entry.uri,
            name=r.name,
            title=_opt(r.title),
            description=_opt(r.description),
            mime_type=_opt(r.mime_type),
            size=_opt(r.size),
        )
        for entry in await surface.resources(core, SurfaceListParams(servers=servers))
        for r in (entry.resource,)
    ]


async def templates(core: Core, servers: list[str] | None) -> list[mcp.ResourceTemplate]:
    return [
        mcp.ResourceTemplate(
            uri_template=entry.uri_template,
            name=t.name,
            title=_opt(t.title),
            description=_opt(t.description),
            mime_type=_opt(t.mime_type),
        )
        for entry in await surface.templates(core, SurfaceListParams(servers=servers))
        for t in (entry.template,)
    ]


async def prompts(core: Core, servers: list[str] | None) -> list[mcp.Prompt]:
    return [
        mcp.Prompt(
            name=entry.name,
            title=_opt(p.title),
            description=_opt(p.description),
            arguments=[
                mcp.PromptArgument(name=a.name, description=_opt(a.description), required=a.required)
                for a in p.arguments
            ],
        )
        for entry in await surface.prompts(core, SurfaceListParams(servers=servers))
        for p in (entry.prompt,)
    ]


async def read(core: Core, uri: str) -> mcp.ReadResourceResult:
    result = await surface.read(core, ReadParams(uri=uri))
    return mcp.ReadResourceResult(
        contents=[
            mcp.ResourceContents(uri=c.uri, mime_type=_opt(c.mime_type), text=_opt(c.text), blob=_opt(c.blob))
            for c in result.contents
        ]
    )


async def get_prompt(core: Core, params: mcp.GetPromptParams) -> mcp.GetPromptResult:
    get = PromptGetParams(name=params.name, arguments=params.arguments or {})
    result = await surface.get_prompt(core, get)
    return mcp.GetPromptResult(
        description=_opt(result.description),
        messages=[mcp.PromptMessage(role=m.role, content=m.content) for m in result.messages],
    )


async def complete(core: Core, params: mcp.CompleteRequestParams) -> mcp.CompleteResult:
    ask = CompleteParams(ref=params.ref, argument=params.argument, context=params.context)
    result = await surface.complete(core, ask)
    found = result.completion
    return mcp.CompleteResult(
        completion=mcp.CompletionValues(
            values=found.values, total=_opt(found.total), has_more=_opt(found.has_more)
        )
    )
