"""The MCP client session to a stdio child, in msgspec: no SDK, no pydantic.

Importing the SDK's client (it loads the server stack and two revisions of pydantic models) was
most of the daemon's start-up CPU, and on a laptop's few cores that CPU is taken from the
children starting beside it; the SDK session also spent most of a millisecond per message. This
session sends every request through the child's ``RawRpc`` and reads what else the server writes
(notifications, its own requests, lines that are not JSON-RPC) in one task, in order. The wire
shapes are the protocol's own (camelCase); only the fields mcpd uses are modelled. The other fields
of what servers list and answer are kept as they came and given to hosts (``session.split``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, TypeVar

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream
from msgspec import UNSET, UnsetType

import mcpd
from mcpd.errors import DECODE_FAILURES
from mcpd.model import mcp
from mcpd.model.logs import LogMessage
from mcpd.model.resources import (
    CompleteResult,
    Completion,
    CompletionRef,
    PromptInfo,
    PromptMessage,
    PromptRef,
    PromptResult,
    ReadResult,
    ResourceInfo,
    ResourceTemplateInfo,
    Surface,
)
from mcpd.model.servers import ServerInfo
from mcpd.model.tools import ToolInfo, ToolResult
from mcpd.supervisor import lenient
from mcpd.supervisor.logring import MAX_LINE
from mcpd.supervisor.rawrpc import RawRpc, Reply
from mcpd.supervisor.server_asks import ServerAsks
from mcpd.supervisor.session import (
    Malformed,
    ProgressCallback,
    Refused,
    SessionHooks,
    carried,
    contents,
    every_page,
    prompt_info,
    resource_info,
    split,
    surface_of,
    template_info,
    tool_info,
)
from mcpd.supervisor.stdio import StdioChild
from mcpd.tally import FIRST, Tally

log = structlog.get_logger("mcpd.supervisor")

T = TypeVar("T")
W = TypeVar("W", bound=msgspec.Struct)
Item = TypeVar("Item")


class _Listed(Protocol):
    """A page of a paginated list."""

    @property
    def next_cursor(self) -> str | None: ...


P = TypeVar("P", bound=_Listed)

_CAPABILITIES: dict[str, Any] = {
    # What mcpd relays to hosts; whether one can answer is decided per request (``front.server_requests``).
    "sampling": {"context": {}, "tools": {}},
    "elicitation": {"form": {}, "url": {}},
    "roots": {"listChanged": True},
}


# -- what servers send -----------------------------------------------------------------------------


class _Implementation(msgspec.Struct, frozen=True):
    name: str
    version: str
    title: str | None = None


class _Initialize(msgspec.Struct, frozen=True, rename="camel"):
    protocol_version: str
    capabilities: dict[str, Any]
    server_info: _Implementation
    instructions: str | None = None


class _CallResult(msgspec.Struct, frozen=True, rename="camel"):
    """A ``tools/call`` result: content blocks are relayed as they came, not re-modelled."""

    content: list[dict[str, Any]] = msgspec.field(default_factory=list)
    structured_content: Any = None
    is_error: bool | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class _PlainCallResult(_CallResult, frozen=True, forbid_unknown_fields=True):
    """A result with only the fields mcpd models: the common case, decoded in one step."""


class _Tools(msgspec.Struct, frozen=True, rename="camel"):
    tools: list[msgspec.Raw]
    """Each read apart (``_valid``): one invalid tool must not take the others with it."""
    next_cursor: str | None = None


class _Resources(msgspec.Struct, frozen=True, rename="camel"):
    resources: list[msgspec.Raw]
    next_cursor: str | None = None


class _Templates(msgspec.Struct, frozen=True, rename="camel"):
    resource_templates: list[msgspec.Raw]
    next_cursor: str | None = None


class _Prompts(msgspec.Struct, frozen=True, rename="camel"):
    prompts: list[msgspec.Raw]
    next_cursor: str | None = None


class _Read(msgspec.Struct, frozen=True):
    contents: list[dict[str, Any]]
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class _PromptMessage(msgspec.Struct, frozen=True):
    role: str
    content: dict[str, Any]


class _GetPrompt(msgspec.Struct, frozen=True):
    messages: list[_PromptMessage]
    description: str | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class _Completion(msgspec.Struct, frozen=True, rename="camel"):
    values: list[str]
    total: int | None = None
    has_more: bool | None = None


class _Complete(msgspec.Struct, frozen=True):
    completion: _Completion
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class _Message(msgspec.Struct, frozen=True):
    """A line the raw path did not take: a notification, a request of the server's, a stray reply."""

    id: mcp.RequestId | UnsetType | None = UNSET
    method: str | UnsetType = UNSET
    params: msgspec.Raw = msgspec.Raw(b"null")
    result: msgspec.Raw | UnsetType = UNSET
    error: msgspec.Raw | UnsetType = UNSET


class _ErrorCode(msgspec.Struct, frozen=True):
    code: int


_error_code = msgspec.json.Decoder(_ErrorCode)


def _json_rpc(line: bytes) -> bool:
    """Whether ``line`` is a JSON-RPC message: a request, a notification or a reply."""
    try:
        message = _message.decode(line)
    except DECODE_FAILURES:
        return False
    return not all(isinstance(field, UnsetType) for field in (message.method, message.result, message.error))


def _unreadable_request(error: msgspec.Raw | UnsetType) -> bool:
    """The error is the one JSON-RPC sends, with id ``null``, for a request it could not read
    (parse error, invalid request); with any other code it answers something else, such as a
    notification (which no answer is due for), not a request of ours."""
    try:
        code = _error_code.decode(error).code if isinstance(error, msgspec.Raw) else None
    except DECODE_FAILURES:
        return False
    return code in (mcp.PARSE_ERROR, mcp.INVALID_REQUEST)


class _LogMessage(msgspec.Struct, frozen=True):
    level: str
    data: Any = None
    logger: str | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class _Updated(msgspec.Struct, frozen=True):
    uri: str
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class _Cancelled(msgspec.Struct, frozen=True, rename="camel"):
    request_id: mcp.RequestId | None = None


# Not strict: a number sent as a string or a float ("size": 1024.0) is taken, as pydantic's SDK took it.
_initialize = msgspec.json.Decoder(_Initialize, strict=False)
_tools = msgspec.json.Decoder(_Tools, strict=False)
_resources = msgspec.json.Decoder(_Resources, strict=False)
_templates = msgspec.json.Decoder(_Templates, strict=False)
_prompts = msgspec.json.Decoder(_Prompts, strict=False)
_item = msgspec.json.Decoder(dict[str, Any])
_anything = msgspec.json.Decoder()
_plain_call_result = msgspec.json.Decoder(_PlainCallResult, strict=False)
_message = msgspec.json.Decoder(_Message)
_batch = msgspec.json.Decoder(list[msgspec.Raw])
_encoder = msgspec.json.Encoder()


def _decoded(method: str, raw: msgspec.Raw) -> Any:
    try:
        return _anything.decode(raw)
    except DECODE_FAILURES as exc:
        raise Malformed(f"an invalid answer to {method}: {exc}") from None


def _split(method: str, result: Any, shape: type[W]) -> tuple[W, dict[str, Any] | None]:
    """``result`` as ``shape``, and its fields ``shape`` does not model (those of later revisions)."""
    try:
        return split(result, shape)
    except DECODE_FAILURES as exc:
        raise Malformed(f"an invalid answer to {method}: {exc}") from None


def _params(raw: msgspec.Raw, shape: type[T]) -> T:
    return msgspec.json.decode(raw, type=shape)


def _valid(items: list[msgspec.Raw], made: Callable[[Any], T], server: str, what: str) -> list[T]:
    """The items of a list page that are what MCP says they are; the others are left out and logged
    (a tool whose ``inputSchema`` is ``true`` used to fail the whole list, and the server with it)."""
    valid = []
    for index, item in enumerate(items):
        try:
            valid.append(carried(made(_item.decode(item)), item))
        except DECODE_FAILURES as exc:
            log.warning("server.list_item_invalid", server=server, list=what, item=index, error=str(exc))
    return valid


def _with_meta(params: dict[str, Any], meta: dict[str, Any] | None) -> dict[str, Any]:
    return {**params, "_meta": meta} if meta else params


def _page(cursor: str | None) -> dict[str, Any] | None:
    return {"cursor": cursor} if cursor else None


_MARKER = 40
"""Characters kept for the marker of a cut line (`` [... 33554432 more bytes cut]``)."""


def _said(what: str, line: bytes) -> str:
    """``[what] line`` as the server's log keeps it: within ``MAX_LINE``, cut with a marker, and
    without decoding all of a line of megabytes (the log would cut it, but count what it decoded)."""
    prefix = f"[{what}] "
    room = MAX_LINE - len(prefix) - _MARKER
    if len(line) <= room:
        return prefix + line.decode("utf-8", "replace").rstrip()
    return f"{prefix}{line[:room].decode('utf-8', 'replace')} [... {len(line) - room} more bytes cut]"


class StdioSession:
    """The session of one child process; made by ``open_stdio_session``."""

    def __init__(self, child: StdioChild, hooks: SessionHooks, tasks: TaskGroup) -> None:
        self._child = child
        self._rpc: RawRpc = child.rpc
        self._hooks = hooks
        self._capabilities: dict[str, Any] = {}
        self._asks = ServerAsks(child.server, hooks.ask, self._send, tasks)
        self._garbage_lines = Tally()
        self._bad_notifications = Tally()
        self._unplaced_errors = Tally()
        self._coerced_ids = Tally()
        self._unreadable_answers = Tally()

    # -- requests -------------------------------------------------------------------------------

    async def _raw_request(
        self,
        method: str,
        params: dict[str, Any] | None,
        deadline: float,
        on_progress: ProgressCallback | None = None,
    ) -> Reply:
        """``RawRpc.request``; an answer it could not read at all is shown in the server's log too."""
        try:
            return await self._rpc.request(method, params, deadline, on_progress)
        except Malformed as exc:
            if exc.answer is not None:
                self._unusable(
                    exc.answer, self._unreadable_answers, f"an answer to {method} mcpd could not read"
                )
            raise

    async def _result(
        self, method: str, params: dict[str, Any] | None, shape: type[W]
    ) -> tuple[W, dict[str, Any] | None]:
        """The result as ``shape``, and its fields ``shape`` does not model as the server sent them."""
        return _split(method, await self._request(method, params, _anything), shape)

    async def _request(
        self, method: str, params: dict[str, Any] | None, decoder: msgspec.json.Decoder[T]
    ) -> T:
        reply = await self._raw_request(method, params, anyio.current_effective_deadline())
        if reply.error is not None:
            raise Refused(reply.error.code, reply.error.message, reply.error.data)
        try:
            return decoder.decode(reply.result)
        except DECODE_FAILURES as exc:
            raise Malformed(f"an invalid answer to {method}: {exc}") from None

    async def initialize(self) -> ServerInfo:
        params = {
            "protocolVersion": mcp.LATEST_PROTOCOL_VERSION,
            "capabilities": _CAPABILITIES,
            "clientInfo": {"name": "mcpd", "version": mcpd.__version__},
        }
        result = await self._request("initialize", params, _initialize)
        if result.protocol_version not in mcp.PROTOCOL_VERSIONS:
            raise Malformed(
                f"the server speaks protocol revision {result.protocol_version!r}, which mcpd does not"
            )
        self._capabilities = result.capabilities
        self._send(mcp.Notification("notifications/initialized"))
        info = result.server_info
        return ServerInfo(
            name=info.name,
            version=info.version,
            title=info.title or None,
            instructions=result.instructions or None,
        )

    def _declared(self, capability: str) -> dict[str, Any] | None:
        declared = self._capabilities.get(capability)
        return declared if isinstance(declared, dict) else None

    async def _every_page(
        self,
        method: str,
        pages: msgspec.json.Decoder[P],
        *,
        items: Callable[[P], list[msgspec.Raw]],
        made: Callable[[Any], Item],
        key: Callable[[Item], str],
    ) -> tuple[Item, ...]:
        """Every valid item (``_valid``) of the paginated list ``method`` (``every_page``)."""
        server = self._child.server

        async def fetch(cursor: str | None) -> tuple[list[Item], str | None]:
            page = await self._request(method, _page(cursor), pages)
            return _valid(items(page), made, server, method), page.next_cursor

        return await every_page(fetch, key, server=server, what=method, paged=self._hooks.paged)

    async def list_tools(self) -> tuple[ToolInfo, ...]:
        return await self._every_page(
            "tools/list", _tools, items=lambda p: p.tools, made=tool_info, key=lambda t: t.name
        )

    async def list_surface(self) -> Surface:
        resources = self._declared("resources") is not None
        return await surface_of(
            self._resources if resources else None,
            self._templates if resources else None,
            self._prompts if self._declared("prompts") is not None else None,
        )

    async def _resources(self) -> tuple[ResourceInfo, ...]:
        return await self._every_page(
            "resources/list",
            _resources,
            items=lambda p: p.resources,
            made=resource_info,
            key=lambda r: r.uri,
        )

    async def _templates(self) -> tuple[ResourceTemplateInfo, ...]:
        return await self._every_page(
            "resources/templates/list",
            _templates,
            items=lambda p: p.resource_templates,
            made=template_info,
            key=lambda t: t.uri_template,
        )

    async def _prompts(self) -> tuple[PromptInfo, ...]:
        return await self._every_page(
            "prompts/list",
            _prompts,
            items=lambda p: p.prompts,
            made=prompt_info,
            key=lambda p: p.name,
        )

    async def ping(self) -> None:
        await self._request("ping", None, _anything)

    async def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any],
        deadline: float,
        on_progress: ProgressCallback | None,
        meta: dict[str, Any] | None = None,
    ) -> ToolResult:
        """The per-call hot path: one encode, one decode (two for a result with fields mcpd does not
        model, which are kept); content blocks relayed as they came."""
        params = _with_meta({"name": tool, "arguments": arguments}, meta)
        reply = await self._raw_request("tools/call", params, deadline, on_progress)
        if reply.error is not None:
            # A JSON-RPC error response: the server handled the request and refused it.
            return ToolResult.refused(reply.error.code, reply.error.message, reply.error.data)
        try:
            result: _CallResult = _plain_call_result.decode(reply.result)
            extra = None
        except msgspec.ValidationError:
            # Fields of a later revision, or not a result at all: the slower split tells them apart.
            result, extra = _split("tools/call", _decoded("tools/call", reply.result), _CallResult)
        except DECODE_FAILURES as exc:
            raise Malformed(f"an invalid answer to tools/call: {exc}") from None
        return ToolResult(
            content=result.content,
            structured_content=result.structured_content,
            is_error=result.is_error,
            meta=result.meta,
            extra=extra,
        )

    def can_subscribe(self) -> bool:
        resources = self._declared("resources")
        return resources is not None and bool(resources.get("subscribe"))

    async def read_resource(self, uri: str, meta: dict[str, Any] | None = None) -> ReadResult:
        result, extra = await self._result("resources/read", _with_meta({"uri": uri}, meta), _Read)
        try:
            parts = [contents(c) for c in result.contents]
        except DECODE_FAILURES as exc:
            raise Malformed(f"an invalid answer to resources/read: {exc}") from None
        return ReadResult(contents=parts, meta=result.meta, extra=extra)

    async def get_prompt(
        self, name: str, arguments: dict[str, str], meta: dict[str, Any] | None = None
    ) -> PromptResult:
        params: dict[str, Any] = {"name": name, **({"arguments": arguments} if arguments else {})}
        result, extra = await self._result("prompts/get", _with_meta(params, meta), _GetPrompt)
        messages = [PromptMessage(role=m.role, content=m.content) for m in result.messages]
        return PromptResult(description=result.description, messages=messages, meta=result.meta, extra=extra)

    async def subscribe_resource(self, uri: str) -> None:
        await self._request("resources/subscribe", {"uri": uri}, _anything)

    async def unsubscribe_resource(self, uri: str) -> None:
        await self._request("resources/unsubscribe", {"uri": uri}, _anything)

    async def roots_changed(self) -> None:
        self._send(mcp.Notification(mcp.ROOTS_LIST_CHANGED))

    async def set_log_level(self, level: mcp.LogLevel) -> bool:
        if self._declared("logging") is None:
            return False
        await self._request("logging/setLevel", {"level": level}, _anything)
        return True

    async def complete(
        self,
        ref: CompletionRef,
        argument: tuple[str, str],
        context: dict[str, str] | None,
        meta: dict[str, Any] | None = None,
    ) -> CompleteResult:
        if self._declared("completions") is None:
            return CompleteResult(completion=Completion())
        reference = (
            {"type": "ref/prompt", "name": ref.name}
            if isinstance(ref, PromptRef)
            else {"type": "ref/resource", "uri": ref.uri}
        )
        name, value = argument
        params: dict[str, Any] = {"ref": reference, "argument": {"name": name, "value": value}}
        if context is not None:
            params["context"] = {"arguments": context}
        result, extra = await self._result("completion/complete", _with_meta(params, meta), _Complete)
        found = result.completion
        completion = Completion(values=found.values, total=found.total, has_more=found.has_more)
        return CompleteResult(completion=completion, meta=result.meta, extra=extra)

    # -- what the server sends on its own -------------------------------------------------------

    async def receive(self, lines: MemoryObjectReceiveStream[bytes]) -> None:
        """Take every line the raw path left, in order, until the child's stdout ends."""
        async with lines:
            while True:
                # The lines queued are taken without a turn of the event loop each (``receive``
                # takes one, even with lines waiting): a server printing text on its stdout cost the
                # daemon a loop turn per line, 40% of a core at 30,000 lines a second. The queue
                # holds few, and the reading task refills it only after a turn.
                try:
                    line = lines.receive_nowait()
                except anyio.WouldBlock:
                    try:
                        line = await lines.receive()
                    except anyio.EndOfStream:
                        return
                except anyio.EndOfStream:
                    return
                self._line(line)
                # Not kept while the server is silent: a 30 MiB line stayed until the next one came.
                del line

    def _line(self, line: bytes) -> None:
        if line.lstrip()[:1] == b"[":
            self._batch(line)
        elif not self._rpc.route(line):  # a reply that waited behind earlier lines
            self._take(line)

    def _take(self, line: bytes, *, glued: bool = False) -> None:
        """Act on a message line the raw path did not take. ``glued``: found after other text, which
        may be a log line quoting another party's message (a proxy's upstream), so a reply is
        taken only by its own id (``_undecodable``), never by a number or as the one waiting."""
        try:
            message = _message.decode(line)
        except DECODE_FAILURES:
            self._undecodable(line)
            return
        if isinstance(message.method, UnsetType):
            if isinstance(message.result, UnsetType) and isinstance(message.error, UnsetType):
                self._garbage(line)  # JSON, but not JSON-RPC (a structured log line)
            elif glued:
                self._garbage(line)
            elif message.id is None:
                # JSON-RPC's error to a request whose id the server could not read: often every
                # request of ours (a server that takes only numeric ids). With one request waiting
                # and none withdrawn unanswered (``route_sole``) it can be no other's, and that
                # request ends with it rather than at its deadline.
                answered = _unreadable_request(message.error) and self._rpc.route_sole(line)
                if self._unplaced_errors.due():
                    log.warning(
                        "server.error_without_id",
                        server=self._child.server,
                        error=bytes(message.error or b"")[:300].decode("utf-8", "replace"),
                        answered=answered,
                        count=self._unplaced_errors.count,
                    )
                    self._show(line, self._unplaced_errors, "an error tied to no request")
            elif isinstance(message.id, int | str) and self._rpc.route_coerced(message.id, line):
                if self._coerced_ids.due():
                    log.warning(
                        "server.coerced_id",
                        server=self._child.server,
                        id=message.id,
                        count=self._coerced_ids.count,
                    )
            else:
                # A reply nobody waits for: to a request that timed out or was cancelled.
                log.debug("server.stray_reply", server=self._child.server, id=message.id)
        elif isinstance(message.id, UnsetType) or message.id is None:
            self._notified(message.method, message.params)
        else:
            self._asks.received(message.id, message.method, message.params)

    def _undecodable(self, line: bytes) -> None:
        """A line that is not JSON: mended, its message found after other text, or garbage."""
        mended = lenient.mend(line)
        if mended is not None:
            self._take(mended)
        elif (glued := lenient.unglue(line, _json_rpc)) is not None:
            # Text printed with no newline after it: the message after it is still read (a
            # reply's call waited out its deadline), the text is said as what it is.
            text, message_line = glued
            self._garbage(text)
            if not self._rpc.route(message_line):  # a reply to one of ours, by its own id
                self._take(message_line, glued=True)
        else:
            self._garbage(line)

    def _batch(self, line: bytes) -> None:
        """A JSON-RPC batch (revision 2025-03-26 allows them): each message as if it had a line of
        its own, replies to our requests through the raw path."""
        try:
            messages = _batch.decode(line)
        except DECODE_FAILURES:
            self._garbage(line)
            return
        for raw in messages:
            message = bytes(raw)
            if not self._rpc.route(message):
                self._take(message)

    @property
    def garbage_lines(self) -> int:
        """Lines of its stdout that were not JSON-RPC."""
        return self._garbage_lines.count

    def _garbage(self, line: bytes) -> None:
        # Servers that print banners or debug output on stdout break the protocol for that line
        # only; skip it, say so, and keep the connection.
        self._unusable(line, self._garbage_lines, "not JSON-RPC")

    def _unusable(self, line: bytes, tally: Tally, what: str) -> None:
        """Say a line of stdout mcpd could not use in the daemon's log and the server's own (where
        the person debugging the server looks), a few of a flood (``tally``)."""
        if not tally.due():
            return
        log.warning(
            "server.stdout_garbage",
            server=self._child.server,
            count=tally.count,
            what=what,
            line=line[:200].decode("utf-8", "replace").rstrip(),
        )
        self._show(line, tally, what)

    def _show(self, line: bytes, tally: Tally, what: str) -> None:
        """Add ``line``, which mcpd could not use, to the server's own log, saying what it was."""
        if self._hooks.stdout is not None:
            self._hooks.stdout(_said(f"{what}, the {tally.count}th" if tally.count > FIRST else what, line))

    def _notified(self, method: str, params: msgspec.Raw) -> None:
        hooks = self._hooks
        try:
            if method == mcp.TOOLS_LIST_CHANGED:
                hooks.tools_changed()
            elif method in (mcp.RESOURCES_LIST_CHANGED, mcp.PROMPTS_LIST_CHANGED):
                hooks.surface_changed()
            elif method == mcp.RESOURCE_UPDATED and hooks.resource_updated is not None:
                updated = _params(params, _Updated)
                hooks.resource_updated(updated.uri, updated.meta)
            elif method == mcp.MESSAGE and hooks.log is not None:
                entry = _params(params, _LogMessage)
                hooks.log(
                    LogMessage(level=entry.level, data=entry.data, logger=entry.logger, meta=entry.meta)
                )
            elif method == mcp.CANCELLED:
                request_id = _params(params, _Cancelled).request_id
                if request_id is not None:
                    self._asks.cancelled(request_id)
        except DECODE_FAILURES as exc:
            if self._bad_notifications.due():
                log.warning(
                    "server.bad_notification",
                    server=self._child.server,
                    method=method,
                    error=str(exc),
                    count=self._bad_notifications.count,
                )

    def _send(self, message: msgspec.Struct) -> None:
        """Queue one message for the child; dropped when it has stopped reading (it would never see it)."""
        if self._child.stdin.not_reading():
            return
        try:
            self._child.stdin.write(_encoder.encode(message) + b"\n")
        except OSError:
            # The pipe is closed: the child is gone, which its watchers report.
            return


@contextlib.asynccontextmanager
async def open_stdio_session(
    child: StdioChild, lines: MemoryObjectReceiveStream[bytes], hooks: SessionHooks
) -> AsyncIterator[StdioSession]:
    """The session over ``child``; ``lines`` are the lines of its stdout that the raw path left."""
    async with anyio.create_task_group() as tasks:
        session = StdioSession(child, hooks, tasks)
        tasks.start_soon(session.receive, lines)
        try:
            yield session
        finally:
            tasks.cancel_scope.cancel()
