"""Resources, resource templates and prompts: as a server lists them, as the daemon names them,
and what reading one or getting one returns."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from mcpd.model.protocol import MAX_CALL_TIMEOUT, Name

Timeout = Annotated[float, msgspec.Meta(gt=0, le=MAX_CALL_TIMEOUT)]

Extra = dict[str, Any] | None
"""The fields of an item that mcpd does not model (``icons``, ``annotations``, ``_meta``, fields of
later protocol revisions), by their wire names and as the server sent them: hosts get them back
beside the modelled ones. None when there are none."""


class ResourceInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One resource as its server lists it (``uri`` is the server's own)."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    extra: Extra = None


class ResourceTemplateInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One RFC 6570 URI template as its server lists it."""

    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    extra: Extra = None


class PromptArgument(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    title: str | None = None
    description: str | None = None
    required: bool | None = None
    """None: the server left it out (the argument is optional, as with ``False``)."""
    extra: Extra = None


class PromptInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One prompt as its server lists it."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: tuple[PromptArgument, ...] | None = None
    """None: the server listed none (it left the field out)."""
    extra: Extra = None


class Surface(msgspec.Struct, frozen=True, kw_only=True):
    """Everything but tools that a server lists; empty where it did not declare the capability."""

    resources: tuple[ResourceInfo, ...] = ()
    templates: tuple[ResourceTemplateInfo, ...] = ()
    prompts: tuple[PromptInfo, ...] = ()


class ResourceContents(msgspec.Struct, frozen=True, kw_only=True):
    """One part of a read: ``text``, or ``blob`` (base64, as on the MCP wire); ``uri`` is qualified."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None
    extra: Extra = None


class ReadResult(msgspec.Struct, frozen=True, kw_only=True):
    contents: list[ResourceContents]
    meta: dict[str, Any] | None = None
    """The result's ``_meta``, as the server sent it."""
    extra: Extra = None
    """The result's fields mcpd does not model (as ``ResourceInfo.extra``)."""


class PromptMessage(msgspec.Struct, frozen=True, kw_only=True):
    role: str
    content: dict[str, Any]
    """One MCP content block (text, image, audio, resource, resource_link), as the server sent it."""


class PromptResult(msgspec.Struct, frozen=True, kw_only=True):
    description: str | None = None
    messages: list[PromptMessage]
    meta: dict[str, Any] | None = None
    """The result's ``_meta``, as the server sent it."""
    extra: Extra = None
    """The result's fields mcpd does not model (as ``ResourceInfo.extra``)."""


# -- socket methods ---------------------------------------------------------------------------


class SurfaceListParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    servers: list[Name] | None = None
    """Only these servers; all live ones when None."""


class ResourceEntry(msgspec.Struct, frozen=True, kw_only=True):
    """A resource under its qualified URI ``mcpd://server/<uri>``."""

    uri: str
    server: str
    resource: ResourceInfo


class TemplateEntry(msgspec.Struct, frozen=True, kw_only=True):
    uri_template: str
    server: str
    template: ResourceTemplateInfo


class PromptEntry(msgspec.Struct, frozen=True, kw_only=True):
    """A prompt under its qualified name ``server__prompt``."""

    name: str
    server: str
    prompt: PromptInfo


class ResourcesListResult(msgspec.Struct, frozen=True, kw_only=True):
    resources: list[ResourceEntry]


class TemplatesListResult(msgspec.Struct, frozen=True, kw_only=True):
    templates: list[TemplateEntry]


class PromptsListResult(msgspec.Struct, frozen=True, kw_only=True):
    prompts: list[PromptEntry]


class ReadParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    uri: Annotated[str, msgspec.Meta(max_length=65536)]
    """Qualified (``mcpd://server/<uri>``), or the server's own with ``server``."""
    server: Name | None = None
    timeout: Timeout | None = None
    """Seconds, including any wait for a restarting server; the server's call_timeout when omitted."""
    meta: dict[str, Any] | None = None
    """``_meta`` for the server's request (a host's tracing or vendor keys), without a progress token."""


class PromptGetParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Name
    """Qualified (``server__prompt``), or the server's own with ``server``."""
    server: Name | None = None
    arguments: dict[str, str] = msgspec.field(default_factory=dict)
    timeout: Timeout | None = None
    meta: dict[str, Any] | None = None
    """``_meta`` for the server's request (a host's tracing or vendor keys), without a progress token."""


# -- completions ------------------------------------------------------------------------------


class PromptRef(msgspec.Struct, frozen=True, tag_field="type", tag="ref/prompt"):
    """Complete an argument of prompt ``name`` (qualified on the socket and for hosts)."""

    name: Name


class TemplateRef(msgspec.Struct, frozen=True, tag_field="type", tag="ref/resource"):
    """Complete a variable of the resource template ``uri`` (qualified on the socket and for hosts)."""

    uri: Annotated[str, msgspec.Meta(max_length=65536)]


CompletionRef = PromptRef | TemplateRef
"""What is being completed, shaped as in MCP's ``completion/complete``."""


class CompletionArgument(msgspec.Struct, frozen=True):
    name: Name
    value: Annotated[str, msgspec.Meta(max_length=65536)]


class CompletionContext(msgspec.Struct, frozen=True):
    arguments: dict[str, str] = msgspec.field(default_factory=dict)
    """Values already chosen for the other arguments."""


class CompleteParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    ref: CompletionRef
    argument: CompletionArgument
    context: CompletionContext | None = None
    timeout: Timeout | None = None
    meta: dict[str, Any] | None = None
    """``_meta`` for the server's request (a host's tracing or vendor keys), without a progress token."""


class Completion(msgspec.Struct, frozen=True, kw_only=True):
    """Suggested values (at most 100, as MCP says); empty when the server offers no completions."""

    values: list[str] = msgspec.field(default_factory=list)
    total: int | None = None
    has_more: bool | None = None


class CompleteResult(msgspec.Struct, frozen=True, kw_only=True):
    completion: Completion
    meta: dict[str, Any] | None = None
    """The result's ``_meta``, as the server sent it."""
    extra: Extra = None
    """The result's fields mcpd does not model (as ``ResourceInfo.extra``)."""
