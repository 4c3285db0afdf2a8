"""Requests to a stdio server over its JSON-RPC stream, with msgspec: ids, deadlines, replies.

Every request the daemon sends a child goes through here (``stdio_session``): the request line is
written at once (never awaiting the pipe), and the reply is taken off the child's stdout in the
pipe's read callback (``replies``) and handed to its waiting caller, before any other line is
looked at. Ids are strings prefixed ``mcpd-`` (a reply that drops the prefix is still taken:
``route_coerced``). Whether the server can have read a request is known from the bytes it read
(``close``): a request it never read fails with ``NotDelivered``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import heapq
import itertools
import math
import re
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import msgspec
import structlog
from msgspec import UNSET

from mcpd.errors import DECODE_FAILURES
from mcpd.supervisor import lenient
from mcpd.supervisor.session import (
    ConnectionLost,
    Malformed,
    NotDelivered,
    ProgressCallback,
    ProgressParams,
    RequestFailed,
    cancel_reason,
)
from mcpd.supervisor.stdin import MAX_BACKLOG, STALLED_AFTER

log = structlog.get_logger("mcpd.supervisor")

PREFIX = "mcpd-"
_PREFIX_BYTES = PREFIX.encode()
_HEAD = 160
"""Bytes at a line's start where a notification's method stands."""
_OUR_ID_FIRST = re.compile(
    rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*"(' + _PREFIX_BYTES + rb'\d+)"'
)
"""A reply's own id where most encoders put it: the first key, or the second after ``jsonrpc``."""
_OUR_ID_LAST = re.compile(rb'"id"\s*:\s*"(' + _PREFIX_BYTES + rb'\d+)"\s*\}\s*$')
"""... or where the TypeScript SDK does: the last key, closing the line. An id of ours anywhere else
may be an echo of it inside a result or a notification's params."""


class RpcError(msgspec.Struct, frozen=True):
    code: int
    message: str
    data: Any = None


class Reply(msgspec.Struct, frozen=True):
    """A JSON-RPC response with its result left undecoded."""

    result: msgspec.Raw = msgspec.Raw(b"null")
    error: RpcError | None = None


class _Route(msgspec.Struct, frozen=True):
    id: int | str | None = None
    method: str | None = None


class _ProgressNotification(msgspec.Struct, frozen=True):
    params: ProgressParams


class _Request(msgspec.Struct, frozen=True):
    id: str
    method: str
    params: Any = UNSET
    jsonrpc: str = "2.0"


class _Cancelled(msgspec.Struct, frozen=True):
    params: dict[str, Any]
    method: str = "notifications/cancelled"
    jsonrpc: str = "2.0"


_route = msgspec.json.Decoder(_Route)
_progress = msgspec.json.Decoder(_ProgressNotification)
_reply = msgspec.json.Decoder(Reply)
_encoder = msgspec.json.Encoder()


WITHDRAWN = "cancelled by the caller"
"""The reason a withdrawn request is given when its caller gave none (or it timed out)."""


def _reason(exc: BaseException) -> str:
    """The reason the caller gave with its cancellation, or ``WITHDRAWN``."""
    return cancel_reason(exc) or WITHDRAWN


class NotReading(RequestFailed):
    """The server has left requests unread on its stdin (``StdinPipe.not_reading``)."""

    def __init__(self) -> None:
        super().__init__(
            f"the server is not reading its stdin (over {MAX_BACKLOG} bytes of requests queued, none "
            f"taken for {STALLED_AFTER:g} s)"
        )


class _End(enum.Enum):
    """How a request ended without a reply."""

    EXPIRED = enum.auto()
    """Its deadline passed."""
    LOST = enum.auto()
    """The stream ended after the server had read it."""
    UNREAD = enum.auto()
    """The stream ended before the server had read it whole."""


_Waiter = asyncio.Future[bytes | _End]


def _settle(waiter: _Waiter, outcome: bytes | _End) -> None:
    if not waiter.done():
        waiter.set_result(outcome)


class RawRpc:
    """Requests this side writes itself; ``route()`` must see every line the server prints."""

    def __init__(self, write: Callable[[bytes], int], not_reading: Callable[[], bool]) -> None:
        """``write`` queues bytes for the server and returns how many bytes it has queued in all,
        or raises ``OSError`` when the stream refuses them; ``not_reading`` says whether the server
        has stopped reading what is queued (it is then sent no more requests). Made on the event
        loop of the stream's pipes."""
        self._write = write
        self._not_reading = not_reading
        self._loop = asyncio.get_running_loop()
        """The loop of the stream's pipes, looked up once: on Python 3.11 each ``get_running_loop()``
        is a ``getpid`` system call, and ``request`` is every call's path."""
        self._ids = itertools.count(1)
        self._waiters: dict[str, tuple[_Waiter, int]] = {}
        """Each request waiting for its reply, with the offset of its last byte in the stream."""
        self._progress: dict[str, ProgressCallback] = {}
        self._closed = False
        self._withdrew_unanswered = False
        """A request was withdrawn before its reply: the server may read it yet, and an error with id
        null may be its (MCP has it send no reply once cancelled, so none ever says it is done)."""
        self._deadlines: list[tuple[float, str]] = []
        """(deadline, request id) of the requests sent with one, a heap. One loop timer stands for
        them all (``_alarm``, for the earliest), not one per request: a timer's making, ordering in the
        loop's heap and cancelling were one in twenty of the Python calls of a proxied tool call. An entry
        outlives its request (answered, withdrawn) until it comes up or the heap is compacted."""
        self._alarm: asyncio.TimerHandle | None = None
        self._alarm_at = math.inf

    def route(self, line: bytes) -> bool:
        """Take ``line`` if it answers one of our requests; False leaves it to the session.

        The id decides, never a substring: a reply whose text mentions
        ``notifications/progress`` is still a reply.
        """
        # The brace first, a one-byte search: the prefix's cost 2.2 us per 4 KiB line of text, paid
        # by every line a server prints on its stdout while a request of ours waits.
        if not self._waiters or b"{" not in line or _PREFIX_BYTES not in line or line.lstrip()[:1] == b"[":
            return False  # a batch is the session's to take apart
        try:
            route = _route.decode(line)
        except DECODE_FAILURES:
            mended = lenient.mend(line)
            if mended is not None:
                return self.route(mended)
            # Not even its id can be read (nested too deep, not UTF-8): if it names one of ours
            # where a reply's own id stands (and no method), that request ends now (as
            # ``Malformed``), not at its deadline. Only a line that is one object: a reply glued
            # to text before it is the session's to find (``lenient.unglue``), and would end so.
            named = None
            if b'"method"' not in line[:_HEAD] and line.lstrip()[:1] == b"{":
                named = _OUR_ID_FIRST.match(line) or _OUR_ID_LAST.search(line, max(0, len(line) - _HEAD))
            waiting = self._waiters.pop(named[1].decode(), None) if named else None
            if waiting is None:
                return False
            _settle(waiting[0], line)
            return True
        if route.method is None:
            waiting = self._waiters.pop(route.id, None) if isinstance(route.id, str) else None
            if waiting is None:
                return False
            _settle(waiting[0], line)
            return True
        if route.method == "notifications/progress" and self._progress:
            return self._route_progress(line)
        return False

    def route_coerced(self, request_id: int | str, line: bytes) -> bool:
        """Take ``line``, a reply whose id is one of ours with its prefix dropped (``5`` or ``"5"`` for
        ``mcpd-5``: some servers turn ids into numbers); False if no request of ours has that number.

        Unambiguous: the server answers no requests but ours on this stream, and our numbers are unique.
        """
        number = str(request_id)
        if not (number.isascii() and number.isdigit()):
            return False
        waiting = self._waiters.pop(PREFIX + number, None)
        if waiting is None:
            return False
        _settle(waiting[0], line)
        return True

    def route_sole(self, line: bytes) -> bool:
        """Take ``line``, an error whose id the server could not read (``null``), as the answer to our
        one waiting request; False if none or several wait, or since one was withdrawn unanswered
        (which one it answers is unknowable)."""
        if self._withdrew_unanswered or len(self._waiters) != 1:
            return False
        (request_id,) = self._waiters
        _settle(self._waiters.pop(request_id)[0], line)
        return True

    def _route_progress(self, line: bytes) -> bool:
        try:
            params = _progress.decode(line).params
        except DECODE_FAILURES:
            return False
        callback = self._progress.get(str(params.progress_token))
        if callback is None:
            return False
        try:
            callback(params.progress, params.total, params.message, params.meta)
        except Exception:
            # This runs in the pipe's read callback: a relay that fails must not cost the replies
            # behind it in the same read.
            log.exception("progress.relay_failed", token=str(params.progress_token))
        return True

    def close(self, read: int | None) -> None:
        """The stream ended: every waiting request fails.

        ``read``: how many bytes the server read of those written, once that is final (None:
        unknown). A request whose last byte lies past it fails with ``NotDelivered``, the others
        with ``ConnectionLost``. The last byte, not the newline after it: a server that parses
        without waiting for the newline still needs the whole message.
        """
        self._closed = True
        for waiter, end in self._waiters.values():
            _settle(waiter, _End.UNREAD if read is not None and end > read else _End.LOST)
        self._waiters.clear()
        self._deadlines.clear()
        self._disarm()

    def _expect_by(self, loop: asyncio.AbstractEventLoop, deadline: float, request_id: str) -> None:
        """Have the request end as ``_End.EXPIRED`` at ``deadline`` unless it has ended before."""
        heapq.heappush(self._deadlines, (deadline, request_id))
        if deadline < self._alarm_at:
            self._disarm()
            self._alarm, self._alarm_at = loop.call_at(deadline, self._expire, loop), deadline
        elif len(self._deadlines) > 2 * len(self._waiters) + 64:
            # Entries of requests long answered: dropped, or they would pile up for as long as
            # the call timeout while calls keep coming.
            self._deadlines = [entry for entry in self._deadlines if entry[1] in self._waiters]
            heapq.heapify(self._deadlines)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        """The alarm: end the requests whose deadline has come, and set it for the next one still waiting."""
        self._alarm, self._alarm_at = None, math.inf
        now = loop.time()
        while self._deadlines:
            deadline, request_id = self._deadlines[0]
            waiting = self._waiters.get(request_id)
            if waiting is not None and deadline > now:
                self._alarm, self._alarm_at = loop.call_at(deadline, self._expire, loop), deadline
                return
            heapq.heappop(self._deadlines)
            if waiting is not None:
                _settle(waiting[0], _End.EXPIRED)

    def _disarm(self) -> None:
        if self._alarm is not None:
            self._alarm.cancel()
            self._alarm, self._alarm_at = None, math.inf

    def _withdraw(self, request_id: str, tell: bool, reason: str = WITHDRAWN) -> None:
        """Forget a request nobody waits for any more, and tell the server so (``tell``), and why."""
        if self._waiters.pop(request_id, None) is None:
            return  # answered meanwhile
        self._withdrew_unanswered = True
        if tell and not self._closed:
            cancel = _Cancelled({"requestId": request_id, "reason": reason})
            with contextlib.suppress(OSError):
                self._write(_encoder.encode(cancel) + b"\n")

    def _refuse_unsendable(self) -> None:
        if self._closed:
            raise NotDelivered
        # Never wait for the pipe to drain: a server that stopped reading would hold the call
        # past its deadline. Refuse instead once too much is queued for it.
        if self._not_reading():
            raise NotReading

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None,
        deadline: float = math.inf,
        on_progress: ProgressCallback | None = None,
    ) -> Reply:
        """Send one request and wait for its reply until ``deadline`` (event-loop time; inf: none
        but the caller's cancel scope).

        Raises ``TimeoutError`` past the deadline (nothing is sent if it is past already), the
        caller's cancellation if its scope is cancelled already (its deadline is then -inf),
        ``NotDelivered`` if the stream refused the request or ended before the server read it,
        ``ConnectionLost`` if it ended after the server read it (or may have), ``NotReading`` when
        the server leaves its input unread, ``Malformed`` for a reply that is not JSON-RPC. A
        timed-out or cancelled request is withdrawn with ``notifications/cancelled`` (but
        ``initialize``, which MCP forbids). The deadline is a loop timer shared by the stream's
        requests (``_expect_by``), not a cancel scope: this is the per-call hot path, and a timer
        costs a fraction of a scope.
        """
        self._refuse_unsendable()
        loop = self._loop
        if deadline <= loop.time():
            # Not written: the server would start on it (a tool call's side effects) only to be
            # told at once to drop it.
            await anyio.lowlevel.checkpoint()
            raise TimeoutError
        request_id = f"{PREFIX}{next(self._ids)}"
        if on_progress is not None:
            # Our request id doubles as the progress token: unique, and ours.
            params = params or {}
            params = {**params, "_meta": {**params.get("_meta", {}), "progressToken": request_id}}
        # Encoded before anything is registered, so arguments JSON cannot carry fail cleanly here.
        line = _encoder.encode(_Request(request_id, method, UNSET if params is None else params)) + b"\n"
        waiter: _Waiter = loop.create_future()
        try:
            end = self._write(line) - 1
        except OSError:
            raise NotDelivered from None
        self._waiters[request_id] = (waiter, end)
        if on_progress is not None:
            self._progress[request_id] = on_progress
        if deadline < math.inf:
            self._expect_by(loop, deadline, request_id)
        # MCP forbids cancelling initialize: the server would be left half set up.
        tell = method != "initialize"
        try:
            reply = await waiter
        except BaseException as exc:
            self._withdraw(request_id, tell, _reason(exc))
            raise
        finally:
            self._progress.pop(request_id, None)
        if reply is _End.EXPIRED:
            self._withdraw(request_id, tell)
            raise TimeoutError
        if reply is _End.UNREAD:
            raise NotDelivered
        if reply is _End.LOST:
            raise ConnectionLost
        try:
            return _reply.decode(reply)
        except DECODE_FAILURES as exc:
            raise Malformed(f"an invalid answer to {method}: {exc}", reply) from None
