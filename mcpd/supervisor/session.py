"""What the supervisor asks of the MCP session to one server, whatever carries it.

Two sessions keep this contract: ``stdio_session.StdioSession`` speaks JSON-RPC to a child with
msgspec (so a daemon whose servers are all local never imports the MCP SDK or pydantic), and
``sdk.SdkSession`` wraps the SDK's ``ClientSession`` for remote servers (streamable HTTP). Both
raise the errors below and nothing else of their own, so calls, watchers and the actor handle one
set, besides ``TimeoutError``: requests keep to the caller's cancel scope (``anyio.fail_after``).
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, overload

import anyio
import msgspec
import structlog

from mcpd.model.logs import LogMessage
from mcpd.model.mcp import METHOD_NOT_FOUND, LogLevel
from mcpd.model.requests import ServerReply
from mcpd.model.resources import (
    CompleteResult,
    CompletionRef,
    PromptArgument,
    PromptInfo,
    PromptResult,
    ReadResult,
    ResourceContents,
    ResourceInfo,
    ResourceTemplateInfo,
    Surface,
)
from mcpd.model.servers import ServerInfo
from mcpd.model.tools import ToolInfo, ToolResult

log = structlog.get_logger("mcpd.supervisor")

MAX_PAGES = 100
"""Pages of one list fetched at most: a server whose list never ends is cut there."""

Item = TypeVar("Item")

_LONG_NUMBER = re.compile(rb"\d{19}")
"""19 digits: the fewest of an integer msgpack may not carry (-2**63 - 1)."""


def carried(item: Item, raw: bytes | msgspec.Raw | None = None) -> Item:
    """``item`` if mcpd's socket can carry it; ``msgspec.ValidationError`` if it holds an integer
    beyond 64 bits, which would fail every listing it is in (``tools.list`` of every server).
    ``raw``, its JSON, spares the check where no number is that long."""
    if raw is not None and not _LONG_NUMBER.search(raw):
        return item
    try:
        msgspec.msgpack.encode(item)
    except (OverflowError, msgspec.EncodeError) as exc:
        raise msgspec.ValidationError(f"it cannot be carried over mcpd's socket: {exc}") from None
    return item


class RequestFailed(Exception):
    """A request to the server ended without a usable answer."""


class Refused(RequestFailed):
    """The server answered with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"MCP error {code}: {message}")
        self.code = code
        self.message = message
        self.data = data


class NotDelivered(RequestFailed):
    """The request never reached the server (refused, or the connection was already gone): it cannot
    have acted on it, so the caller may send it again once the server is back."""


class StatusRefused(NotDelivered):
    """An HTTP status refused this one request before the server ran it (401/403, or a gateway's
    502/503 to a request that is safe to repeat): the connection is fine, so the run goes on; the
    request is sent again once, then fails naming the status."""

    def __init__(self, reason: str, status: int, what: str) -> None:
        super().__init__(reason)
        self.status = status
        self.what = what


class ConnectionLost(RequestFailed):
    """The connection ended after the server read the request (or may have), before the answer."""


class TransportFailed(RequestFailed):
    """The transport failed the request with a reason of its own (an HTTP error status) after the
    server may have read it: not resent."""


class Malformed(RequestFailed):
    """The answer cannot be used: not the shape its method has, or a protocol revision mcpd does not speak."""

    def __init__(self, reason: str, answer: bytes | None = None) -> None:
        super().__init__(reason)
        self.answer = answer
        """The answer as it came, when it could not be read at all (its server's log shows it)."""


class CancelReason(str):
    """Why a caller cancelled its request: cancelling the request's task with one as the message
    (``task.cancel(CancelReason(...))``) gives it to the server in ``notifications/cancelled``. A plain
    message, such as anyio's, is not one."""

    __slots__ = ()


def cancel_reason(exc: BaseException | None) -> str | None:
    """The reason the caller gave with its cancellation ``exc`` (``CancelReason``), if it gave one."""
    if isinstance(exc, asyncio.CancelledError) and exc.args and isinstance(exc.args[0], CancelReason):
        return str(exc.args[0])
    return None


def is_lost(exc: BaseException) -> bool:
    """The connection is gone, not just this request."""
    return isinstance(exc, ConnectionLost | NotDelivered)


class ProgressParams(msgspec.Struct, frozen=True, rename="camel"):
    """A server's ``notifications/progress``, its numbers as it wrote them (an integer stays one)."""

    progress_token: int | str
    progress: int | float
    total: int | float | None = None
    message: str | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


ProgressCallback = Callable[[int | float, int | float | None, str | None, dict[str, Any] | None], None]
"""(progress, total, message, _meta) of a running request, as the server sent them."""

Ask = Callable[[str, dict[str, Any]], Awaitable[ServerReply]]
"""Answers one request from the server: (method, params as JSON) -> the reply."""

LogCallback = Callable[[LogMessage], None]
"""Hears a server's ``notifications/message``."""


@dataclass(frozen=True)
class ListCut:
    """A paginated list that mcpd ended, not the server (``every_page``): what came is part of it."""

    what: str
    """The list's method (``tools/list``)."""
    pages: int
    items: int
    repeated: bool
    """Ended at a cursor the server had given before; else at ``MAX_PAGES`` pages."""

    def __str__(self) -> str:
        why = "a cursor it had given before came again" if self.repeated else "its pages did not end"
        return f"{self.what} cut at {self.items} items after {self.pages} pages: {why}"


Paged = Callable[[str, ListCut | None], None]
"""Told how each paginated list was read to its end: (its method, None if whole, else its cut)."""


class ListCuts:
    """The lists of a run that mcpd cut, by method, as its session told them (``SessionHooks.paged``):
    a list read whole again is no longer cut."""

    def __init__(self) -> None:
        self._cuts: dict[str, ListCut] = {}

    def paged(self, what: str, cut: ListCut | None) -> None:
        if cut is None:
            self._cuts.pop(what, None)
        else:
            self._cuts[what] = cut

    def clear(self) -> None:
        self._cuts.clear()

    def said(self) -> str | None:
        """Each cut, or None if there is none."""
        return "; ".join(str(cut) for _, cut in sorted(self._cuts.items())) or None


@dataclass(frozen=True)
class SessionHooks:
    """What a server's session reports to its actor, and who answers the server's own requests."""

    tools_changed: Callable[[], None]
    """A ``tools/list_changed`` came."""
    surface_changed: Callable[[], None]
    """A resource or prompt ``list_changed`` came."""
    ask: Ask | None = None
    """Answers the server's requests (sampling, elicitation, roots)."""
    log: LogCallback | None = None
    """Hears the server's log messages (``notifications/message``)."""
    stdout: Callable[[str], None] | None = None
    """Hears, as text, a line of the server's stdout that mcpd could not use (not JSON-RPC, or an
    answer it could not read): the first few, then one in a thousand (``Tally``)."""
    resource_updated: Callable[[str, dict[str, Any] | None], None] | None = None
    """Hears that a subscribed resource changed (``notifications/resources/updated``): its URI and
    the notification's ``_meta``."""
    paged: Paged | None = None
    """Told whether each list was read whole or cut (its pages never ended)."""


class Session(Protocol):
    """One live MCP session to a server. A request that fails raises a ``RequestFailed`` (or the
    caller's ``TimeoutError``)."""

    async def initialize(self) -> ServerInfo:
        """``initialize``, then ``notifications/initialized``."""
        ...

    async def list_tools(self) -> tuple[ToolInfo, ...]:
        """Every page of ``tools/list``, sorted by name."""
        ...

    async def list_surface(self) -> Surface:
        """Resources, templates and prompts, each only if the server declared the capability."""
        ...

    async def ping(self) -> None: ...

    async def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any],
        deadline: float,
        on_progress: ProgressCallback | None,
        meta: dict[str, Any] | None = None,
    ) -> ToolResult:
        """``tools/call`` until ``deadline`` (event-loop time), with ``meta`` as its ``_meta``; a
        JSON-RPC error answer is a tool error that keeps the error (``ToolResult.refusal``)."""
        ...

    def can_subscribe(self) -> bool:
        """The server declared ``resources.subscribe`` in initialize."""
        ...

    async def read_resource(self, uri: str, meta: dict[str, Any] | None = None) -> ReadResult:
        """``resources/read``, with ``meta`` as its ``_meta`` (as ``get_prompt`` and ``complete``)."""
        ...

    async def get_prompt(
        self, name: str, arguments: dict[str, str], meta: dict[str, Any] | None = None
    ) -> PromptResult: ...

    async def subscribe_resource(self, uri: str) -> None: ...

    async def unsubscribe_resource(self, uri: str) -> None: ...

    async def roots_changed(self) -> None:
        """Tell the server the roots may have changed (``notifications/roots/list_changed``)."""

    async def set_log_level(self, level: LogLevel) -> bool:
        """``logging/setLevel``; False, nothing sent, when the server did not declare ``logging``."""
        ...

    async def complete(
        self,
        ref: CompletionRef,
        argument: tuple[str, str],
        context: dict[str, str] | None,
        meta: dict[str, Any] | None = None,
    ) -> CompleteResult:
        """``completion/complete`` of ``argument`` (name, value) for ``ref``; empty, nothing sent, when
        the server did not declare ``completions``."""
        ...


async def handshake(session: Session) -> tuple[ServerInfo, tuple[ToolInfo, ...], Surface]:
    """``initialize``, then the first ``tools/list`` and the resources and prompts the server declares,
    asked together (``together``). Tools are asked for whether declared or not (a server may serve
    them undeclared); one that does not serve them (prompts or resources only: the SDK's low-level
    server without a tools handler says "method not found") has none, as with an undeclared list."""
    info = await session.initialize()
    tools, surface = await together(lambda: if_served(session.list_tools()), session.list_surface)
    return info, tools, surface


A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")


@overload
async def together(
    first: Callable[[], Awaitable[A]], second: Callable[[], Awaitable[B]], /
) -> tuple[A, B]: ...


@overload
async def together(
    first: Callable[[], Awaitable[A]],
    second: Callable[[], Awaitable[B]],
    third: Callable[[], Awaitable[C]],
    /,
) -> tuple[A, B, C]: ...


async def together(*asks: Callable[[], Awaitable[Any]]) -> tuple[Any, ...]:
    """Each ask's result, in their order, the asks in flight at once: a server's lists after
    ``initialize`` took a round trip each, one after the other. It fails as asking them one after
    the other did: with the error of the first ask (in their order) that failed, unwrapped; the asks
    after a failed one are cancelled (they would not have been sent), those before it run on (their
    error would have come first)."""
    results: list[Any] = [None] * len(asks)
    errors: list[Exception | None] = [None] * len(asks)
    scopes = [anyio.CancelScope() for _ in asks]

    async def run(index: int) -> None:
        with scopes[index]:
            try:
                results[index] = await asks[index]()
            except Exception as exc:
                errors[index] = exc
                for later in scopes[index + 1 :]:
                    later.cancel()

    async with anyio.create_task_group() as tg:
        for index in range(len(asks)):
            tg.start_soon(run, index)
    for error in errors:
        if error is not None:
            raise error
    return tuple(results)


Listing = Callable[[], Awaitable[tuple[Item, ...]]]
"""Asks for every page of one list."""


async def surface_of(
    resources: Listing[ResourceInfo] | None,
    templates: Listing[ResourceTemplateInfo] | None,
    prompts: Listing[PromptInfo] | None,
) -> Surface:
    """The surface from the lists the server declared (None: not declared, so empty), asked together
    (``together``); each one declared but not served is empty (``if_served``)."""

    def served(listing: Listing[Item] | None) -> Listing[Item]:
        async def ask() -> tuple[Item, ...]:
            return await if_served(listing()) if listing is not None else ()

        return ask

    listed = await together(served(resources), served(templates), served(prompts))
    return Surface(resources=listed[0], templates=listed[1], prompts=listed[2])


async def every_page(
    fetch: Callable[[str | None], Awaitable[tuple[Sequence[Item], str | None]]],
    key: Callable[[Item], str],
    *,
    server: str,
    what: str,
    paged: Paged | None = None,
) -> tuple[Item, ...]:
    """Every item of a paginated list ``what``, sorted by ``key``, each key once (the first listed):
    ``fetch(cursor)`` gives a page and the next cursor. A cursor the server gave before, or more
    than ``MAX_PAGES`` pages, ends the list with what came so far: logged and told to ``paged``,
    which hears ``None`` of a list read whole. Items listed twice are logged."""
    found: dict[str, Item] = {}
    listed = 0
    cursors: set[str] = set()
    cursor: str | None = None
    cut: ListCut | None = None
    for pages in range(1, MAX_PAGES + 1):
        page, cursor = await fetch(cursor)
        listed += len(page)
        for item in page:
            found.setdefault(key(item), item)
        if not cursor:
            break
        if cursor in cursors:
            log.warning("server.list_cursor_repeated", server=server, list=what, items=len(found))
            cut = ListCut(what, pages, len(found), repeated=True)
            break
        cursors.add(cursor)
    else:
        log.warning("server.list_cut", server=server, list=what, pages=MAX_PAGES, items=len(found))
        cut = ListCut(what, MAX_PAGES, len(found), repeated=False)
    if paged is not None:
        paged(what, cut)
    if listed > len(found):
        log.warning("server.list_duplicates", server=server, list=what, duplicates=listed - len(found))
    return tuple(sorted(found.values(), key=key))


async def if_served(listing: Awaitable[tuple[Item, ...]]) -> tuple[Item, ...]:
    """A list the server does not serve: empty. A server with resources but no templates may answer
    ``resources/templates/list`` "method not found", one with prompts only ``tools/list``; that must
    not fail its handshake, and with it what it does serve."""
    try:
        return await listing
    except Refused as exc:
        if exc.code != METHOD_NOT_FOUND:
            raise
        return ()


# -- what servers list, read apart the same way on either session --------------------------------
#
# Each item is modelled only as far as mcpd uses it; every other field of it (``icons``,
# ``annotations``, ``_meta``, fields of later revisions) is kept as the server sent it (``extra``), and
# hosts get it back. A remote server's items come as the SDK's models, dumped to the JSON the server
# sent (``sdk``), so both sessions keep the same fields.


class ToolAnnotations(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """The hints MCP defines, and only those, as the SDK's model keeps them: a key a server adds must
    not change what the verifier read and accepted of the tool (``trust.gate``)."""

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None


class WireTool(msgspec.Struct, frozen=True, rename="camel"):
    name: str
    input_schema: dict[str, Any]
    description: str | None = None
    title: str | None = None
    annotations: ToolAnnotations | None = None
    output_schema: dict[str, Any] | None = None
    icons: list[dict[str, Any]] | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class WireResource(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None


class WireTemplate(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None


class WirePrompt(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    title: str | None = None
    description: str | None = None
    arguments: list[dict[str, Any]] | None = None


class WireArgument(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    title: str | None = None
    description: str | None = None
    required: bool | None = None


class WireContents(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


W = TypeVar("W", bound=msgspec.Struct)


@functools.cache
def _modelled(shape: type[msgspec.Struct]) -> frozenset[str]:
    return frozenset(field.encode_name for field in msgspec.structs.fields(shape))


def split(item: Any, shape: type[W]) -> tuple[W, dict[str, Any] | None]:
    """``item`` (one JSON object) as ``shape``, leniently as the SDK reads it (``"size": 1024.0``), and
    its other fields (None: none). Raises ``msgspec.ValidationError`` for an item that is not ``shape``."""
    modelled = msgspec.convert(item, shape, strict=False)
    known = _modelled(shape)
    extra = {key: value for key, value in item.items() if key not in known}
    return modelled, extra or None


def tool_info(item: Any) -> ToolInfo:
    t, extra = split(item, WireTool)
    return ToolInfo(
        name=t.name,
        description=t.description or "",
        input_schema=t.input_schema,
        title=t.title,
        annotations=msgspec.to_builtins(t.annotations) if t.annotations is not None else None,
        output_schema=t.output_schema,
        icons=t.icons,
        meta=t.meta,
        extra=extra,
    )


def resource_info(item: Any) -> ResourceInfo:
    r, extra = split(item, WireResource)
    return ResourceInfo(
        uri=r.uri,
        name=r.name,
        title=r.title,
        description=r.description,
        mime_type=r.mime_type,
        size=r.size,
        extra=extra,
    )


def template_info(item: Any) -> ResourceTemplateInfo:
    t, extra = split(item, WireTemplate)
    return ResourceTemplateInfo(
        uri_template=t.uri_template,
        name=t.name,
        title=t.title,
        description=t.description,
        mime_type=t.mime_type,
        extra=extra,
    )


def _argument(item: Any) -> PromptArgument:
    a, extra = split(item, WireArgument)
    return PromptArgument(
        name=a.name, title=a.title, description=a.description, required=a.required, extra=extra
    )


def prompt_info(item: Any) -> PromptInfo:
    p, extra = split(item, WirePrompt)
    arguments = tuple(_argument(a) for a in p.arguments) if p.arguments is not None else None
    return PromptInfo(name=p.name, title=p.title, description=p.description, arguments=arguments, extra=extra)


def contents(item: Any) -> ResourceContents:
    c, extra = split(item, WireContents)
    return ResourceContents(uri=c.uri, mime_type=c.mime_type, text=c.text, blob=c.blob, extra=extra)
