"""What both clients share: the calls (method, params, result type) and the response decoding."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec

from mcpd.errors import (
    DECODE_FAILURES,
    ConfigError,
    DaemonNotRunning,
    DaemonStopped,
    InvalidParams,
    TransportError,
    error_from_wire,
)
from mcpd.ipc.endpoint import MAX_PATH_BYTES, check_server, connect_within
from mcpd.ipc.framing import frame
from mcpd.model.logs import LogLines, LogsParams, LogsResult
from mcpd.model.protocol import (
    MAX_CALL_TIMEOUT,
    MAX_SERVER_CALL_TIMEOUT,
    PROTOCOL_VERSION,
    ApproveParams,
    ApproveResult,
    CancelParams,
    CapabilityParams,
    ConnectResult,
    HelloParams,
    HelloResult,
    Message,
    NoParams,
    Ok,
    Progress,
    ReloadResult,
    ReportParams,
    Request,
    Response,
    SelectParams,
    SelectResult,
    ServerParams,
    SessionTools,
    SnippetResult,
    StatusResult,
    ToolsCallParams,
    ToolsListParams,
    ToolsListResult,
    TrustResult,
)
from mcpd.model.requests import ClientCapabilities, ServerAsk, ServerReplyParams
from mcpd.model.resources import (
    CompleteParams,
    CompleteResult,
    CompletionArgument,
    CompletionContext,
    CompletionRef,
    PromptGetParams,
    PromptResult,
    PromptsListResult,
    ReadParams,
    ReadResult,
    ResourcesListResult,
    SurfaceListParams,
    TemplatesListResult,
)
from mcpd.model.servers import Event, ServerDetail, ServerStatus
from mcpd.model.tools import ToolResult
from mcpd.model.uris import qualify_uri
from mcpd.model.usage import ReportResult

if TYPE_CHECKING:
    from pathlib import Path

T = TypeVar("T")

encoder = msgspec.msgpack.Encoder()
decoder: msgspec.msgpack.Decoder[Message] = msgspec.msgpack.Decoder(Message)

DEFAULT_TIMEOUT = 30.0
"""Seconds to wait for any answer that is not a tool call."""
CALL_MARGIN = 5.0
"""Extra seconds a client waits beyond a tool call's own deadline, for the daemon to say it expired."""
PROBE_AFTER = 10.0
"""Seconds a request may wait without a word from the daemon before the client asks whether it is
there (``ping``): a long call is fine, a frozen daemon (SIGSTOP, a hung loop) is not."""
PROBE_WAIT = 10.0
"""Seconds the daemon has to answer that ``ping`` before the request fails with ``TransportError``."""
LOOK_AFTER = 0.5
"""Seconds the blocking client waits without a word from the daemon before it looks whether the
daemon's process is stopped (``stopped``): one stopped by SIGSTOP is said at once, not after
``PROBE_AFTER + PROBE_WAIT`` (20 s for every CLI command)."""


ProgressHandler = Callable[[Progress], None]


class Call(msgspec.Struct, Generic[T], frozen=True):
    # A Struct, not a dataclass: dataclasses imports inspect, which a bridge need not load.
    method: str
    params: msgspec.Struct
    result: type[T]
    timeout: float = DEFAULT_TIMEOUT
    on_progress: ProgressHandler | None = None
    """Receives the progress notifications the daemon relays for this request."""
    safe: bool = False
    """Only reads: a client that reconnects may send it again when the connection dropped under it."""
    restore: bool = False
    """Part of the session (a subscription, a connected server): sent again after a reconnect."""
    withdraws: Callable[[Call[Any]], bool] | None = None
    """Undoes part of the session: the ``restore`` calls it matches are not sent again."""

    def request(self, request_id: int) -> bytes:
        try:
            params = encoder.encode(self.params)
        except RecursionError:
            # The daemon refuses far less deep anyway; here it is refused before anything is sent.
            raise InvalidParams(f"the arguments of {self.method} are nested too deeply to encode") from None
        except UnicodeEncodeError as exc:  # a lone surrogate (bytes decoded with surrogateescape)
            bad = exc.object[exc.start : exc.end] if isinstance(exc.object, str) else ""
            raise InvalidParams(
                f"the arguments of {self.method} hold {bad!r}, which is not valid UTF-8"
            ) from None
        except (TypeError, OverflowError) as exc:  # a type msgpack has not, an integer past 64 bits
            raise InvalidParams(f"the arguments of {self.method} cannot be sent: {exc}") from None
        return frame(encoder.encode(Request(request_id, self.method, msgspec.Raw(params))))


def hello(client: str, timeout: float = DEFAULT_TIMEOUT) -> Call[HelloResult]:
    return Call("hello", HelloParams(protocol=PROTOCOL_VERSION, client=client), HelloResult, timeout)


def status() -> Call[StatusResult]:
    """Every configured server's state, by name."""
    return Call("status", NoParams(), StatusResult, safe=True)


def show(name: str) -> Call[ServerDetail]:
    """One server's status, recent state changes and the last lines of its stderr."""
    return Call("servers.show", ServerParams(name=name), ServerDetail, safe=True)


_ACTION_TIMEOUT = 120.0


def start(name: str) -> Call[ServerStatus]:
    """Start a server (also a ``failed`` or ``disabled`` one); returns once the start settled."""
    return Call("servers.start", ServerParams(name=name), ServerStatus, _ACTION_TIMEOUT)


def stop(name: str) -> Call[ServerStatus]:
    """Stop a server and wait until it is stopped."""
    return Call("servers.stop", ServerParams(name=name), ServerStatus, _ACTION_TIMEOUT)


def restart(name: str) -> Call[ServerStatus]:
    """Restart a server (resetting its crash-loop count); returns once the start settled."""
    return Call("servers.restart", ServerParams(name=name), ServerStatus, _ACTION_TIMEOUT)


def reload() -> Call[ReloadResult]:
    """Re-read the config and apply what changed; a broken file changes nothing."""
    return Call("reload", NoParams(), ReloadResult, _ACTION_TIMEOUT)


def all_tools(servers: list[str] | None = None) -> Call[ToolsListResult]:
    """Every tool of the live servers (or of ``servers``), by server then name."""
    return Call("tools.list", ToolsListParams(servers=servers), ToolsListResult, safe=True)


def search(
    query: str,
    *,
    servers: list[str] | None = None,
    limit: int | None = None,
    budget_tokens: int | None = None,
    explain: bool = False,
    include_reserved: bool = True,
) -> Call[ToolsListResult]:
    """Tools ranked for ``query``; with ``budget_tokens``, also rendered for a model's context."""
    params = ToolsListParams(
        servers=servers,
        query=query,
        limit=limit,
        budget_tokens=budget_tokens,
        explain=explain,
        include_reserved=include_reserved,
    )
    return Call("tools.list", params, ToolsListResult, safe=True)


def capability_request(capability: str, context: str | None = None) -> Call[ToolResult]:
    """Record that the user needed something no tool provides."""
    return Call("capability.request", CapabilityParams(capability=capability, context=context), ToolResult)


def report(since_s: float | None = None, top: int = 20) -> Call[ReportResult]:
    """Per-tool call statistics and the top missing capabilities (optionally of the last ``since_s``)."""
    return Call("report", ReportParams(since_s=since_s, top=top), ReportResult, safe=True)


def select(query: str, threshold: float | None = None) -> Call[SelectResult]:
    """Compatible-mode server selection (term-frequency cosine, reference behaviour)."""
    params = (
        SelectParams(query=query) if threshold is None else SelectParams(query=query, threshold=threshold)
    )
    return Call("servers.select", params, SelectResult, safe=True)


def tools_call(
    tool: str,
    arguments: dict[str, Any] | None = None,
    *,
    server: str | None = None,
    timeout: float | None = None,
    query: str | None = None,
    on_progress: ProgressHandler | None = None,
) -> Call[ToolResult]:
    """Call ``tool`` (qualified ``server__tool``, or a plain name with ``server=``).

    ``query``: the user request that led to the call, so that ranking learns from it.
    ``on_progress``: receives the server's progress updates for this call.
    A tool that ran and failed is a result with ``is_error`` set, not an exception.
    """
    params = ToolsCallParams(
        tool=tool,
        server=server,
        arguments=arguments or {},
        timeout=timeout,
        query=query,
        progress=on_progress is not None,
    )
    return Call("tools.call", params, ToolResult, _wait(timeout), on_progress)


def _check_timeout(timeout: float | None) -> None:
    if timeout is not None and not 0 < timeout <= MAX_CALL_TIMEOUT:
        raise InvalidParams(f"timeout must be a number of seconds in (0, {MAX_CALL_TIMEOUT}], not {timeout}")


def _wait(timeout: float | None) -> float:
    _check_timeout(timeout)
    # Without an explicit timeout the daemon applies the server's call_timeout, which the client does
    # not know: it waits for the longest one a config may give (a daemon that stops answering
    # meanwhile is found out by ``ping``, see PROBE_AFTER).
    return (timeout if timeout is not None else MAX_SERVER_CALL_TIMEOUT) + CALL_MARGIN


def ping() -> Call[Ok]:
    """Whether the daemon answers at all (an older daemon refuses the method: an answer too)."""
    return Call("ping", NoParams(), Ok, PROBE_WAIT)


def stopped(pid: int | None) -> DaemonStopped | None:
    """The error to raise if the daemon's process ``pid`` is stopped (SIGSTOP, Ctrl-Z), else None.
    Known where ``/proc`` tells it (Linux): elsewhere a stopped daemon is found by ``ping`` alone."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return None
    # "pid (comm) state ...": comm may hold spaces and parentheses, the state follows the last ")".
    if stat.rpartition(b")")[2].split()[:1] != [b"T"]:
        return None
    why = f"the mcpd daemon (pid {pid}) is stopped (SIGSTOP); `kill -CONT {pid}` resumes it"
    return DaemonStopped(f"the daemon stopped answering: {why}", {"pid": pid})


def frozen(why: str | None = None) -> TransportError:
    """A request's end when the daemon stopped answering while it waited (``PROBE_AFTER``)."""
    why = why or f"no answer to a ping within {PROBE_WAIT:g}s"
    return TransportError(f"the daemon stopped answering: {why}")


def session_connect(server: str) -> Call[ConnectResult]:
    """Activate ``server``'s tools for this connection's session."""
    return Call("session.connect", ServerParams(name=server), ConnectResult, restore=True)


def session_tools() -> Call[SessionTools]:
    """The servers this session connected and their tools."""
    return Call("session.tools", NoParams(), SessionTools, safe=True)


def snippet() -> Call[SnippetResult]:
    """An ``<available_mcps>`` block describing the live servers, for a system prompt."""
    return Call("prompt.snippet", NoParams(), SnippetResult, safe=True)


def cancel(request_id: int) -> bytes:
    """The frame that withdraws request ``request_id`` (its answer is not awaited)."""
    return Call("cancel", CancelParams(id=request_id), Ok).request(0)


def approve(server: str, tool: str | None = None) -> Call[ApproveResult]:
    """Accept what holds back ``server``'s tools (or ``tool``): changed definitions and findings."""
    return Call("trust.approve", ApproveParams(server=server, tool=tool), ApproveResult)


def trust(server: str) -> Call[TrustResult]:
    """Held-back changes (with diffs) and verifier findings for ``server``."""
    return Call("trust.show", ServerParams(name=server), TrustResult, safe=True)


def resources(servers: list[str] | None = None) -> Call[ResourcesListResult]:
    """The live servers' (or ``servers``') resources, under ``mcpd://<server>/<uri>``."""
    return Call("resources.list", SurfaceListParams(servers=servers), ResourcesListResult)


def resource_templates(servers: list[str] | None = None) -> Call[TemplatesListResult]:
    """The live servers' resource templates, under ``mcpd://<server>/<template>``."""
    return Call("resources.templates", SurfaceListParams(servers=servers), TemplatesListResult)


def read_resource(uri: str, *, server: str | None = None, timeout: float | None = None) -> Call[ReadResult]:
    """Read a resource: ``uri`` qualified (``mcpd://<server>/<uri>``), or its own with ``server=``."""
    return Call(
        "resources.read", ReadParams(uri=uri, server=server, timeout=timeout), ReadResult, _wait(timeout)
    )


def prompts() -> Call[PromptsListResult]:
    """The live servers' prompts, named ``server__prompt``."""
    return Call("prompts.list", SurfaceListParams(), PromptsListResult)


def get_prompt(
    name: str,
    arguments: dict[str, str] | None = None,
    *,
    server: str | None = None,
    timeout: float | None = None,
) -> Call[PromptResult]:
    """A prompt's messages: ``name`` qualified (``server__prompt``), or the server's own with ``server=``."""
    params = PromptGetParams(name=name, server=server, arguments=arguments or {}, timeout=timeout)
    return Call("prompts.get", params, PromptResult, _wait(timeout))


def subscribe_resource(uri: str, *, server: str | None = None, timeout: float | None = None) -> Call[Ok]:
    """Hear of changes to a resource (qualified ``uri``, or the server's own with ``server=``): they
    arrive as ``ResourceUpdated`` events (qualified URI) on the client's event stream."""
    params = ReadParams(uri=uri, server=server, timeout=timeout)
    return Call("resources.subscribe", params, Ok, _wait(timeout), restore=True)


def unsubscribe_resource(uri: str, *, server: str | None = None) -> Call[Ok]:
    """Stop hearing of a resource's changes; ``ok`` is false if this client was not subscribed."""

    def subscribed(call: Call[Any]) -> bool:
        params = call.params
        return isinstance(params, ReadParams) and (params.uri, params.server) == (uri, server)

    return Call("resources.unsubscribe", ReadParams(uri=uri, server=server), Ok, withdraws=subscribed)


def subscribes_to(call: Call[Any], qualified: str) -> bool:
    """``call`` is a subscribe to the resource ``qualified`` (``mcpd://server/uri``), however it
    named it."""
    params = call.params
    if call.method != "resources.subscribe" or not isinstance(params, ReadParams):
        return False
    return (params.uri if params.server is None else qualify_uri(params.server, params.uri)) == qualified


def complete(
    ref: CompletionRef,
    argument: str,
    value: str,
    *,
    context: dict[str, str] | None = None,
    timeout: float | None = None,
) -> Call[CompleteResult]:
    """Values for ``argument`` of a prompt (``PromptRef("server__prompt")``) or a template variable
    (``TemplateRef("mcpd://server/<template>")``), given what was typed so far (``value``) and the
    other arguments' values (``context``). Empty when the server offers no completions."""
    params = CompleteParams(
        ref=ref,
        argument=CompletionArgument(argument, value),
        context=CompletionContext(context) if context is not None else None,
        timeout=timeout,
    )
    return Call("completion.complete", params, CompleteResult, _wait(timeout), safe=True)


def subscribe() -> Call[Ok]:
    return Call("subscribe", NoParams(), Ok, restore=True)


def declare_capabilities(capabilities: ClientCapabilities) -> Call[Ok]:
    """Tell the daemon which server requests this connection answers (kept across reconnects)."""
    return Call("session.capabilities", capabilities, Ok, restore=True)


def server_reply(reply: ServerReplyParams) -> Call[Ok]:
    """Answer a ``server.request``."""
    return Call("server.reply", reply, Ok)


_ask_decoder = msgspec.msgpack.Decoder(ServerAsk)


def decode_ask(params: msgspec.Raw) -> ServerAsk:
    try:
        return _ask_decoder.decode(params)
    except DECODE_FAILURES as exc:
        raise TransportError(f"the daemon sent a malformed server request: {exc}") from None


def logs(server: str, limit: int | None = None) -> Call[LogsResult]:
    """``server``'s latest ``limit`` log entries (all it keeps when None), oldest first: its stderr
    lines and MCP log messages, across restarts (at most 1,000 lines and 256 KiB are kept)."""
    return Call("logs", LogsParams(server=server, limit=limit), LogsResult, safe=True)


def logs_follow(server: str, limit: int | None = None) -> Call[Ok]:
    """Have the latest ``limit`` entries, then each new one, sent as ``logs`` notifications."""
    return Call("logs.follow", LogsParams(server=server, limit=limit), Ok)


def logs_unfollow(server: str) -> Call[Ok]:
    return Call("logs.unfollow", ServerParams(name=server), Ok)


_event_decoder: msgspec.msgpack.Decoder[Event] = msgspec.msgpack.Decoder(Event)
_log_lines_decoder = msgspec.msgpack.Decoder(LogLines)
_progress_decoder = msgspec.msgpack.Decoder(Progress)


def decode_message(data: bytes) -> Message:
    """One message from the daemon; anything undecodable is a ``TransportError``."""
    try:
        return decoder.decode(data)
    except DECODE_FAILURES as exc:
        raise TransportError(f"the daemon sent a malformed message: {exc}") from None


def decode_event(params: msgspec.Raw) -> Event:
    try:
        return _event_decoder.decode(params)
    except DECODE_FAILURES as exc:
        raise TransportError(f"the daemon sent a malformed event: {exc}") from None


def decode_progress(params: msgspec.Raw) -> Progress:
    try:
        return _progress_decoder.decode(params)
    except DECODE_FAILURES as exc:
        raise TransportError(f"the daemon sent a malformed progress update: {exc}") from None


def decode_log_lines(params: msgspec.Raw) -> LogLines:
    try:
        return _log_lines_decoder.decode(params)
    except DECODE_FAILURES as exc:
        raise TransportError(f"the daemon sent malformed log lines: {exc}") from None


def result_of(response: Response, call: Call[T]) -> T:
    """The decoded result, or the daemon's error rebuilt as the same exception class."""
    if response.error is not None:
        raise error_from_wire(response.error.code, response.error.message, response.error.data)
    try:
        return msgspec.msgpack.decode(response.result, type=call.result)
    except DECODE_FAILURES as exc:
        raise TransportError(f"the daemon's answer to {call.method} did not decode: {exc!r}") from None


def resolve_socket(path: str | Path | None) -> Path:
    # Imported here: a bridge connected through ``likely_socket_path`` never needs pathlib or
    # platformdirs (see ``mcpd.config.paths``).
    from pathlib import Path  # noqa: PLC0415

    from mcpd.config.paths import default_socket_path  # noqa: PLC0415

    return Path(path) if path is not None else default_socket_path()


def connect_blocking(path: str | Path, timeout: float) -> socket.socket:
    """A blocking socket connected to the daemon of this user at ``path`` (the sync clients')."""
    try:
        sock = connect_within(str(path), timeout)
    except OSError as exc:
        raise unreachable(path, exc) from None
    try:
        check_server(sock, path)
    except BaseException:
        sock.close()
        raise
    return sock


def unreachable(path: str | Path, exc: OSError) -> DaemonNotRunning | ConfigError | TransportError:
    """Why connecting to ``path`` failed: no daemon there, a path no daemon could listen on, or a
    listener that did not take the connection in time."""
    if len(os.fsencode(path)) > MAX_PATH_BYTES:
        # Longer than a Unix socket address holds (Python refuses it before any system call).
        # Starting a daemon would not help; a shorter path would.
        message = f"{path}: {exc}; choose a shorter socket path (--socket, or $MCPD_SOCKET)"
        return ConfigError(message, {"socket": str(path)})
    if isinstance(exc, TimeoutError):  # anyio.fail_after's, and socket.timeout (its alias)
        # Something listens there but did not accept in time (a hung daemon, a full backlog):
        # starting another daemon would not help either.
        return TransportError(
            f"connecting to the daemon on {path} timed out: it may be hung or overloaded",
            {"socket": str(path)},
        )
    reason = "no such socket" if isinstance(exc, FileNotFoundError) else (exc.strerror or str(exc))
    return DaemonNotRunning(
        f"no mcpd daemon is listening on {path} ({reason}); start one with `mcpd serve`",
        {"socket": str(path)},
    )
