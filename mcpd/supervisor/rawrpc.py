"""Tool calls straight over a stdio server's JSON-RPC stream, beside the SDK session.

The SDK's ``ClientSession.call_tool`` spends most of a millisecond of CPU per call
(pydantic models both ways, output-schema validation, tracing spans). mcpd only
relays the result, so the hot path writes the request line itself with msgspec and
routes the answer back before the SDK sees it. Its ids are strings prefixed
``mcpd-``, a space the SDK (integer ids) never uses. Everything else on the stream
(the handshake, pings, notifications, server-to-client requests) stays with the SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from typing import Any

import msgspec

PREFIX = "mcpd-"
_PREFIX_BYTES = PREFIX.encode()


class RpcError(msgspec.Struct, frozen=True):
    code: int
    message: str
    data: Any = None


class Reply(msgspec.Struct, frozen=True):
    """A JSON-RPC response with its result left undecoded."""

    result: msgspec.Raw = msgspec.Raw(b"null")
    error: RpcError | None = None


class CallResult(msgspec.Struct, frozen=True, rename="camel"):
    """A ``tools/call`` result: content blocks are relayed as they came, not re-modelled."""

    content: list[dict[str, Any]] = msgspec.field(default_factory=list)
    structured_content: Any = None
    is_error: bool = False


class _Route(msgspec.Struct, frozen=True):
    id: int | str | None = None
    method: str | None = None


class _ProgressParams(msgspec.Struct, frozen=True, rename="camel"):
    progress_token: int | str
    progress: float
    total: float | None = None
    message: str | None = None


class _ProgressNotification(msgspec.Struct, frozen=True):
    params: _ProgressParams


ProgressCallback = Callable[[float, float | None, str | None], None]
"""(progress, total, message) of a running request."""


class _Request(msgspec.Struct, frozen=True):
    id: str
    method: str
    params: Any
    jsonrpc: str = "2.0"


class _Cancelled(msgspec.Struct, frozen=True):
    params: dict[str, Any]
    method: str = "notifications/cancelled"
    jsonrpc: str = "2.0"


_route = msgspec.json.Decoder(_Route)
_progress = msgspec.json.Decoder(_ProgressNotification)
_reply = msgspec.json.Decoder(Reply)
_encoder = msgspec.json.Encoder()


class ConnectionLost(Exception):
    """The stream closed after the request was written and before the answer came."""


class NotSent(Exception):
    """The request was never written: the stream was already closed, or the pipe refused it.

    The server cannot have seen it, so a caller may send it again to the next process.
    """


class NotReading(Exception):
    """The server has left more than ``MAX_BACKLOG`` bytes of requests unread on its stdin."""


MAX_BACKLOG = 4 * 1024 * 1024


_EXPIRED = b""
"""What a waiter receives when its deadline passes (a real reply is never empty)."""


def _settle(waiter: asyncio.Future[bytes | None], line: bytes | None) -> None:
    if not waiter.done():
        waiter.set_result(line)


class RawRpc:
    """Requests this side writes itself; ``route()`` must see every line the server prints."""

    def __init__(self, write: Callable[[bytes], None], backlog: Callable[[], int]) -> None:
        """``write`` queues bytes for the server and raises ``ConnectionError`` or ``OSError`` when
        the stream refuses them; ``backlog`` says how many bytes are queued but not yet sent."""
        self._write = write
        self._backlog = backlog
        self._ids = itertools.count(1)
        self._waiters: dict[str, asyncio.Future[bytes | None]] = {}
        self._progress: dict[str, ProgressCallback] = {}
        self._closed = False

    def route(self, line: bytes) -> bool:
        """Take ``line`` if it answers one of our requests; False leaves it to the SDK.

        The id decides, never a substring: a reply whose text mentions
        ``notifications/progress`` is still a reply.
        """
        if not self._waiters or _PREFIX_BYTES not in line:
            return False
        try:
            route = _route.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return False
        if route.method is None:
            waiter = self._waiters.pop(route.id, None) if isinstance(route.id, str) else None
            if waiter is None:
                return False
            _settle(waiter, line)
            return True
        if route.method == "notifications/progress" and self._progress:
            return self._route_progress(line)
        return False

    def _route_progress(self, line: bytes) -> bool:
        try:
            params = _progress.decode(line).params
        except (msgspec.DecodeError, msgspec.ValidationError):
            return False
        callback = self._progress.get(str(params.progress_token))
        if callback is None:
            return False
        callback(params.progress, params.total, params.message)
        return True

    def close(self) -> None:
        """The stream ended: every waiting request fails with ``ConnectionLost``."""
        self._closed = True
        for waiter in self._waiters.values():
            _settle(waiter, None)
        self._waiters.clear()

    def _withdraw(self, request_id: str) -> None:
        """Forget a request nobody waits for any more, and tell the server so."""
        if self._waiters.pop(request_id, None) is not None and not self._closed:
            cancel = _Cancelled({"requestId": request_id, "reason": "cancelled by the caller"})
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                self._write(_encoder.encode(cancel) + b"\n")

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        deadline: float,
        on_progress: ProgressCallback | None = None,
    ) -> Reply:
        """Send one request and wait for its reply until ``deadline`` (event-loop time).

        Raises ``TimeoutError`` past the deadline, ``NotSent`` if the stream refused the
        request, ``ConnectionLost`` if it ended after the request was written, ``NotReading``
        when the server leaves its input unread. A timed-out or cancelled request is
        withdrawn with ``notifications/cancelled``. The
        deadline is a loop timer, not a cancel scope: this is the per-call hot path, and a
        timer costs a fraction of a scope.
        """
        if self._closed:
            raise NotSent
        # Never wait for the pipe to drain: a server that stopped reading would hold the call
        # past its deadline. Refuse instead once too much is queued for it.
        if self._backlog() > MAX_BACKLOG:
            raise NotReading
        request_id = f"{PREFIX}{next(self._ids)}"
        if on_progress is not None:
            # Our request id doubles as the progress token: unique, and ours.
            params = {**params, "_meta": {"progressToken": request_id}}
        # Encoded before anything is registered, so arguments JSON cannot carry fail cleanly here.
        line = _encoder.encode(_Request(request_id, method, params)) + b"\n"
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bytes | None] = loop.create_future()
        try:
            self._write(line)
        except (ConnectionError, OSError, RuntimeError):
            raise NotSent from None
        self._waiters[request_id] = waiter
        if on_progress is not None:
            self._progress[request_id] = on_progress
        timer = loop.call_at(deadline, _settle, waiter, _EXPIRED)
        try:
            reply = await waiter
        except BaseException:
            self._withdraw(request_id)
            raise
        finally:
            timer.cancel()
            self._progress.pop(request_id, None)
        if reply is _EXPIRED:
            self._withdraw(request_id)
            raise TimeoutError
        if reply is None:
            raise ConnectionLost
        return _reply.decode(reply)
