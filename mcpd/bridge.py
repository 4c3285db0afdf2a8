"""``mcpd bridge``: relays a host's MCP stdio to the daemon, where the host's session lives.

The daemon speaks MCP to the host (``mcpd.front``); this process only carries bytes:
newline-delimited JSON-RPC from stdin becomes one frame each on a daemon connection
upgraded to ``mcp``, and frames from the daemon become lines on stdout. One thread and
``poll``, no event loop, no MCP SDK: a bridge costs a few MB per host.

It parses only what it must (with msgspec): the ids and methods of the host's requests,
to answer them itself during a gap, and the daemon's private notifications: the session's
state and the changes of its subscriptions, which together it hands a new daemon to carry the
session on (as many subscriptions as the hello may hold: the rest are dropped, never the session).

When the daemon goes away (a restart, a crash), or does not answer its first hello (stopped,
stalled), the bridge stays: it reconnects with backoff, starting a daemon itself after
``AUTOSTART_AFTER`` unless ``--no-autostart``, resumes the session and sends the host
``notifications/tools/list_changed``. A request
that arrives during the gap waits up to ``GAP_WAIT`` and is then sent (or answered with
an error); a request the daemon held when it went away is answered with an error, except
read-only ones (``RESENDABLE``), which are simply sent again; a request the daemon made of the
host (a server's elicitation) and the host had not answered is withdrawn (``notifications/cancelled``):
only the daemon that asked could take its answer. stdin EOF ends the bridge once
the requests it relayed have their answers (``EOF_WAIT`` at most: ``printf REQUEST | mcpd bridge``
gets its answer) and the host has read them (``EXIT_FLUSH`` at most).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import stat
import sys
import time

import msgspec

from mcpd.client.autostart import ensure_daemon
from mcpd.client.channel import Channel, max_frame_of, open_channel
from mcpd.errors import DECODE_FAILURES, DaemonNotRunning, McpdError, TransportError
from mcpd.lines import LineReader, Oversized
from mcpd.model import mcp
from mcpd.model.protocol import RESUME_MAX
from mcpd.readsize import READ_SIZE
from mcpd.updates import ENDED_MARK, HeldUpdates, hold_message

GAP_WAIT = 60.0
"""Seconds a host request waits for a daemon to come back (a host's usual request timeout)."""
AUTOSTART_AFTER = 1.0
"""Seconds without a daemon before the bridge starts one (a service manager may be restarting it)."""
AUTOSTART_RETRY = 10.0
"""Seconds between two attempts to start a daemon that did not come up."""
AUTOSTART_MAX = 60.0
"""The longest a gap waits before a start when daemons keep dying soon after they came up: the wait
doubles from ``AUTOSTART_AFTER`` at each daemon that lived less than ``AUTOSTART_RETRY``."""
FIRST_DELAY, MAX_DELAY = 0.05, 1.0
"""Reconnect backoff: the first retry, doubled up to this."""
OUT_LIMIT = 32 * 1024 * 1024
"""Bytes for the host kept while it does not read; beyond, the daemon's answers wait in its socket.
A host that pauses (a UI busy, a debugger) must not cost its calls: a bridge that blocked on its
stdout stopped reading the daemon, which then dropped it as a client that does not read."""
ADVISORY_LIMIT = 1024 * 1024
"""Bytes kept for a host that does not read past which log messages, progress and resource updates
(``mcp.ADVISORY``) are not added: a chatty server at ``logging/setLevel debug`` would otherwise fill
``OUT_LIMIT`` in seconds and the daemon would drop the bridge, failing the host's calls (as the
daemon does on its side). Log messages and progress are dropped (the next step supersedes a
progress step; a log line is a record, kept in the server's own log); resource updates are held,
the latest per URI, and sent once the host took what was kept (``HeldUpdates``)."""
GAP_LIMIT = 16 * 1024 * 1024
"""Bytes of host messages kept for the next daemon during a gap, each counted with ``_HELD_COST``
beside its length; a message past it is refused (a request answered with an error, anything else
dropped), unless none is kept: one message as long as the daemon reads always waits. Without it, a
host writing fast while the daemon was away (up to ``GAP_WAIT``) grew the bridge without bound."""
_HELD_COST = 256
"""Bytes a message kept in a gap costs beside its own (its entry, route and time): a flood of
``{}`` would otherwise cost a hundred times what it is counted."""
_EXPIRY_BATCH = 1.0
"""Seconds early a request held in a gap may be answered: those due that soon go with the one due,
so that ``waiting`` is passed over once a second at most, not at every wake (a host writing a line a
millisecond in a gap made each wake look at every line held: 80 s of CPU to hold 60,000)."""
EXIT_FLUSH = 5.0
"""Seconds the bridge keeps writing what the host has not read yet, once stdin has closed."""
EOF_WAIT = GAP_WAIT
"""Seconds the bridge waits, once stdin has closed, for the answers to requests the host sent;
then those still unanswered are answered with an error."""
RESENDABLE = frozenset(
    {
        "initialize",
        "ping",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
    }
)
"""Requests with no effect besides their answer: sent again after a reconnect."""

_route = msgspec.json.Decoder(mcp.Route)
_session = msgspec.json.Decoder(mcp.SessionEnvelope)
_subscriptions = msgspec.json.Decoder(mcp.SubscriptionsEnvelope)
_state = msgspec.json.Decoder(mcp.SessionState)
_encoder = msgspec.json.Encoder()
_SESSION_MARK = mcp.SESSION_NOTIFICATION.encode()
_SUBSCRIPTIONS_MARK = mcp.SUBSCRIPTIONS_NOTIFICATION.encode()
_LIST_CHANGED = b"".join(
    _encoder.encode(mcp.Notification(method)) + b"\n"
    for method in (mcp.TOOLS_LIST_CHANGED, mcp.RESOURCES_LIST_CHANGED, mcp.PROMPTS_LIST_CHANGED)
)


def _log(event: str, **fields: object) -> None:
    """One JSON line on stderr (stdout is the MCP channel)."""
    sys.stderr.write(_encoder.encode({"event": event, "level": "warning", **fields}).decode() + "\n")
    sys.stderr.flush()


class _Cancelled(msgspec.Struct, frozen=True):
    params: mcp.CancelledParams = mcp.CancelledParams()


_cancelled = msgspec.json.Decoder(_Cancelled)


def _cancelled_id(line: bytes) -> mcp.RequestId | None:
    try:
        return _cancelled.decode(line).params.request_id
    except DECODE_FAILURES:
        return None


def _route_of(line: bytes) -> mcp.Route | None:
    try:
        return _route.decode(line)
    except DECODE_FAILURES:
        return None  # the daemon answers what it cannot parse


def _request_id(route: mcp.Route | None) -> mcp.RequestId | None:
    """The id of a request (not a notification, not a response)."""
    if route is None or isinstance(route.method, msgspec.UnsetType):
        return None
    if isinstance(route.id, msgspec.UnsetType) or route.id is None:
        return None
    return route.id


def _response_id(route: mcp.Route | None) -> mcp.RequestId | None:
    """The id a response answers (None for requests and notifications)."""
    if route is None or not isinstance(route.method, msgspec.UnsetType):
        return None
    return None if isinstance(route.id, msgspec.UnsetType) else route.id


def _error_line(request_id: mcp.RequestId, code: int, message: str) -> bytes:
    return _encoder.encode(mcp.ErrorResponse(request_id, mcp.ErrorObject(code, message))) + b"\n"


def _cancel_line(request_id: mcp.RequestId, reason: str) -> bytes:
    return _encoder.encode(mcp.Notification(mcp.CANCELLED, mcp.CancelledParams(request_id, reason))) + b"\n"


class Relay:
    """One host's stdio and one daemon connection, and what waits while there is none."""

    def __init__(
        self,
        socket_path: str | None,
        *,
        config: str | None,
        state: mcp.SessionState,
        autostart: bool,
        stdin: int = 0,
        stdout: int = 1,
    ) -> None:
        self.socket_path = socket_path
        self.config = config
        self.autostart = autostart
        self.state = _encoder.encode(state)
        """What the daemon needs to carry the session on: our options at first, then its latest state."""
        self.subscribed: dict[str, None] = {}
        """The session's subscriptions (qualified URIs), as the daemon told their changes: they go
        back with ``state``, which leaves them out."""
        self._options = state
        self.channel: Channel | None = None
        self.inflight: dict[mcp.RequestId, tuple[str, bytes | None]] = {}
        """Requests the daemon holds: their method, and their line if they may be sent again."""
        self.asked: set[mcp.RequestId] = set()
        """Requests the daemon made of the host that the host has not answered yet."""
        self.waiting: list[tuple[float, bytes, mcp.Route | None]] = []
        """Host messages read while there is no daemon: when, the line, its route."""
        self._waiting_size = 0
        """What ``waiting`` costs, as ``GAP_LIMIT`` counts it."""
        self._refused_in_gap = False
        self._first_held = math.inf
        """When the oldest of ``waiting`` was held: what a wake looks at, not each one held."""
        self._requests_held: set[mcp.RequestId] = set()
        """The ids of the requests in ``waiting``, but those the host cancelled (``_withdrawn``)."""
        self._withdrawn: set[mcp.RequestId] = set()
        """Requests in ``waiting`` the host cancelled: neither sent nor answered, and gone from it at
        its next rebuild (``_set_waiting``), not each at its cancel (a pass over all held)."""
        self.initialized = False
        """A daemon has answered the host's ``initialize``: after a reconnect the host is told to list
        tools again. Not before: the host must have its answer before any notification, and one read
        while there was no daemon, or that a daemon held when it went away, goes to the next one."""
        self._stdin, self._stdout = stdin, stdout
        self._out = bytearray()
        """What the host has not taken yet (its stdout is a full pipe)."""
        self._dropped_advisory = False
        self._held_updates: HeldUpdates[bytes] = HeldUpdates()
        self._reading_daemon = False
        # poll, not epoll: epoll refuses a regular file or /dev/null (`mcpd bridge < requests.jsonl`,
        # a service's StandardInput=null) with EPERM, an internal error before any request was
        # read; poll says they are ready, as they are. With three descriptors, poll costs no more.
        # ``select.poll`` itself, not ``selectors.PollSelector``: its keys and event mapping cost
        # ~10 us of a bridged call's ~120 (two waits a call), for three descriptors we know.
        self._poll = select.poll()
        self._watched: set[int] = set()
        self._gap_since = 0.0
        self._retry_at = 0.0
        self._delay = FIRST_DELAY
        self._autostart_at = 0.0
        self._autostart_wait = AUTOSTART_AFTER
        self._max_frame = max_frame_of(None)
        """The largest message the daemon of the last connection reads (its hello, at each ``_attach``)."""
        self._max_frame_said = False
        """A daemon's hello said ``_max_frame``: until then it is the default, which a daemon
        configured above it (``[daemon] max_frame_bytes``, up to 256 MiB) may not share. Kept as
        the bound anyway (a stalled daemon at start leaves the bridge guessing), but said so."""
        self._daemon_up_since = 0.0
        """When the daemon of the current connection came up (by its hello), else when it was attached."""

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> int:
        """Relay until the host closes stdin; returns the exit status."""
        if stat.S_ISFIFO(os.fstat(self._stdout).st_mode) or stat.S_ISSOCK(os.fstat(self._stdout).st_mode):
            # A pipe (as hosts give): writes that never block. Not a terminal's, which a shell shares.
            os.set_blocking(self._stdout, False)
        try:
            if self.autostart:
                ensure_daemon(self.socket_path, config=self.config)
            self._attach(self._open(self._resume()))
        except TransportError as exc:
            # A daemon that listens and does not answer (stopped, stalled): a gap like any, which the
            # host's requests wait out (``GAP_WAIT``). Ended here, the host lost its server for good.
            _log("bridge.daemon_unresponsive", error=str(exc))
            self._gap_since = time.monotonic()
            self._autostart_at = self._gap_since + self._autostart_wait
        self._watch(self._stdin, select.POLLIN)
        lines = LineReader(lambda: self._max_frame)
        input_ended: float | None = None
        while True:
            if input_ended is not None and (
                not self._unanswered() or time.monotonic() >= input_ended + EOF_WAIT
            ):
                self._answer_unanswered(
                    f"no answer within {EOF_WAIT:g}s of the host closing the bridge's stdin"
                )
                self._close()
                self._finish_writing()
                return 0
            for fd, _ in self._poll.poll(self._timeout(input_ended)):
                if fd == self._stdin:
                    chunk = os.read(self._stdin, READ_SIZE)
                    if not chunk:
                        # No more requests, but those already sent still get their answers: a
                        # host (or a script) may close its end right after writing its last line.
                        self._unwatch(self._stdin)
                        last = lines.end()  # a last line without its newline
                        if last is not None:
                            self._from_host(last)
                        input_ended = time.monotonic()
                        continue
                    for line in lines.feed(chunk):
                        self._from_host(line)
                elif fd == self._stdout:
                    self._flush()
                elif self.channel is not None:
                    self._from_daemon()
            self._tick()

    def _timeout(self, input_ended: float | None) -> int | None:
        """Milliseconds ``poll`` may wait (None: until something is ready), rounded up: a wait
        rounded down would end just before what it waits for, and spin."""
        due: list[float] = [] if input_ended is None else [input_ended + EOF_WAIT]
        if self.channel is None:
            due.append(self._retry_at)
        if self.waiting:
            due.append(self._first_held + GAP_WAIT)
        return math.ceil(max(0.0, min(due) - time.monotonic()) * 1000) if due else None

    def _tick(self) -> None:
        now = time.monotonic()
        if self.channel is None and now >= self._retry_at:
            self._reconnect(now)
        if now - self._first_held < GAP_WAIT:
            return
        due = now - GAP_WAIT + _EXPIRY_BATCH
        expired = [
            request_id
            for held, _, route in self.waiting
            if held <= due and (request_id := _request_id(route)) in self._requests_held
        ]
        self._set_waiting([item for item in self.waiting if item[0] > due])
        message = f"no mcpd daemon came back within {GAP_WAIT:g}s; try again later"
        self._write(b"".join(_error_line(i, mcp.DAEMON_UNAVAILABLE, message) for i in expired))

    def _unanswered(self) -> bool:
        """Requests of the host that have no answer yet: held by the daemon, or waiting for one."""
        return bool(self.inflight) or bool(self._requests_held)

    def _answer_unanswered(self, message: str) -> None:
        ids = [*self.inflight, *self._requests_held]
        self.inflight.clear()
        self._set_waiting([])
        self._write(b"".join(_error_line(i, mcp.DAEMON_UNAVAILABLE, message) for i in ids))

    # -- host -> daemon ---------------------------------------------------------------------

    def _from_host(self, line: bytes | Oversized) -> None:
        if isinstance(line, Oversized):
            # Never kept whole (``LineReader``), so never sent, whatever daemon comes.
            self._too_large(line.size, line.request_id(), None)
            self._answer_too_large(line.size, line.response_id())
            return
        if not line.strip():
            return
        route = _route_of(line)
        answered = _response_id(route)
        if answered is not None:
            self.asked.discard(answered)
        if self.channel is None:
            if route is not None and route.method == mcp.CANCELLED:
                # The request it cancels never reached a daemon (one that went away answered or
                # handed back what it held): it is withdrawn, not sent to the next one and run. The
                # cancel has nobody left to tell, and is not held: past ``GAP_LIMIT`` it was dropped
                # while the call it cancelled, held before, still went.
                cancelled = _cancelled_id(line)
                if cancelled in self._requests_held:
                    self._requests_held.discard(cancelled)
                    self._withdrawn.add(cancelled)
                return
            if self.waiting and self._waiting_size + len(line) + _HELD_COST > GAP_LIMIT:
                self._refuse_in_gap(route)
            else:
                self._hold((time.monotonic(), line, route))
            return
        self._forward(line, route)

    def _hold(self, item: tuple[float, bytes, mcp.Route | None], *, first: bool = False) -> None:
        self.waiting.insert(0 if first else len(self.waiting), item)
        self._waiting_size += len(item[1]) + _HELD_COST
        self._first_held = min(self._first_held, item[0])
        request_id = _request_id(item[2])
        if request_id is not None:
            self._requests_held.add(request_id)

    def _set_waiting(self, items: list[tuple[float, bytes, mcp.Route | None]]) -> None:
        """``waiting`` becomes ``items``, but the requests the host withdrew."""
        if self._withdrawn:
            items = [item for item in items if _request_id(item[2]) not in self._withdrawn]
            self._withdrawn.clear()
        self.waiting = items
        self._waiting_size = sum(len(line) + _HELD_COST for _, line, _ in items)
        self._first_held = min((held for held, _, _ in items), default=math.inf)
        self._requests_held = {i for _, _, route in items if (i := _request_id(route)) is not None}

    def _refuse_in_gap(self, route: mcp.Route | None) -> None:
        """A message past ``GAP_LIMIT``: a request is answered, anything else dropped (said once a gap)."""
        if not self._refused_in_gap:
            _log("bridge.gap_full", held=self._waiting_size, limit=GAP_LIMIT)
            self._refused_in_gap = True
        request_id = _request_id(route)
        if request_id is not None:
            message = (
                f"the mcpd daemon is away and the bridge already holds {self._waiting_size} bytes of"
                f" requests for it (at most {GAP_LIMIT}); try again later"
            )
            self._write(_error_line(request_id, mcp.DAEMON_UNAVAILABLE, message))

    def _forward(self, line: bytes, route: mcp.Route | None) -> None:
        assert self.channel is not None
        request_id = _request_id(route)
        if len(line) > self._max_frame:
            # The daemon would cut the connection at it, and every next one as the message was
            # sent again: refused here, the rest of the session goes on. Here too, not only as read: a
            # line read in a gap was measured against the last daemon's limit, not this one's.
            self._too_large(len(line), request_id, route)
            return
        if request_id is not None and route is not None and isinstance(route.method, str):
            self.inflight[request_id] = (route.method, line if route.method in RESENDABLE else None)
        elif route is not None and route.method == mcp.CANCELLED:
            # A cancelled request gets no answer: nothing is left to answer or resend for it.
            cancelled = _cancelled_id(line)
            if cancelled is not None:
                self.inflight.pop(cancelled, None)
        try:
            self.channel.send(line)
        except McpdError:
            # Never delivered: it waits for the next daemon like any message of the gap.
            if request_id is not None:
                self.inflight.pop(request_id, None)
            self._hold((time.monotonic(), line, route), first=True)
            self._lost()

    def _too_large(self, size: int, request_id: mcp.RequestId | None, route: mcp.Route | None) -> None:
        limit = self._max_frame
        method = route.method if route is not None and isinstance(route.method, str) else None
        _log("bridge.message_too_large", bytes=size, limit=limit, method=method)
        if request_id is not None:
            message = f"a message of {size} bytes is over {self._limit_said()}"
            self._write(_error_line(request_id, mcp.INVALID_REQUEST, message))

    def _limit_said(self) -> str:
        if self._max_frame_said:
            return f"the daemon's limit of {self._max_frame} ([daemon] max_frame_bytes)"
        return (
            f"the default limit of {self._max_frame} ([daemon] max_frame_bytes): no daemon has said"
            " its own yet"
        )

    def _answer_too_large(self, size: int, answered: mcp.RequestId | None) -> None:
        """The host's answer to a request of the daemon's (a server's sampling, say) that is too long
        to send: the daemon is told it failed, or the request waited out its whole deadline."""
        if answered not in self.asked:
            return
        message = f"the host's answer of {size} bytes is over {self._limit_said()}"
        self._from_host(_error_line(answered, mcp.INTERNAL_ERROR, message).rstrip(b"\n"))

    # -- daemon -> host ---------------------------------------------------------------------

    def _from_daemon(self) -> None:
        assert self.channel is not None
        try:
            frames = self.channel.receive()
        except McpdError:
            self._lost()
            return
        self._deliver(frames)

    def _deliver(self, frames: list[bytes]) -> None:
        out: list[bytes] = []
        for data in frames:
            if self._kept(data):
                continue  # private to the relay: the host never sees it
            route = _route_of(data)
            answered = _response_id(route)
            if answered is not None:
                if self.inflight.pop(answered, ("", None))[0] == "initialize":
                    self.initialized = True
            elif (asking := _request_id(route)) is not None:
                self.asked.add(asking)
            elif route is not None and route.method == mcp.CANCELLED:
                withdrawn = _cancelled_id(data)
                if withdrawn is not None:
                    self.asked.discard(withdrawn)
            elif route is not None and (
                route.method == mcp.RESOURCES_LIST_CHANGED
                or (route.method == mcp.RESOURCE_UPDATED and ENDED_MARK in data)
            ):
                # The updates held came before it, as at the server: after a list change, one may
                # name a resource the new list no longer has. Nor is the last update of a subscription
                # that ended held with them: past ``HeldUpdates``' bounds it would be dropped, and the
                # host never told that no update of the URI will come.
                out.append(self._release_held())
            elif len(self._out) > ADVISORY_LIMIT and route is not None and route.method in mcp.ADVISORY:
                if hold_message(self._held_updates, data):
                    continue
                if not self._dropped_advisory:  # said once: a flood would flood the log too
                    _log("bridge.advisory_dropped", behind=len(self._out))
                    self._dropped_advisory = True
                continue
            out.append(data)
            out.append(b"\n")
        self._write(b"".join(out))

    def _kept(self, data: bytes) -> bool:
        """Keep the daemon's private notification ``data`` is (True), if it is one."""
        head = data[:80]
        try:
            if _SESSION_MARK in head:
                self.state = bytes(_session.decode(data).params)
                self._whole_states(self.state)
                return True
            if _SUBSCRIPTIONS_MARK in head:
                change = _subscriptions.decode(data).params
                self.subscribed.update(dict.fromkeys(change.added))
                for uri in change.removed:
                    self.subscribed.pop(uri, None)
                return True
        except DECODE_FAILURES:
            pass  # a message for the host that happens to name them
        return False

    def _whole_states(self, state: bytes) -> None:
        """A daemon that sends whole states (an earlier mcpd's, or one that could not read our resume
        and began afresh) tells no changes: the list in its state is the session's."""
        with contextlib.suppress(*DECODE_FAILURES):
            whole = _state.decode(state)
            if not whole.subscription_deltas:
                self.subscribed = dict.fromkeys(whole.subscribed)

    def _write(self, data: bytes) -> None:
        if not data:
            return
        if not self._out:
            # The usual case, a host that reads: one write, nothing kept.
            try:
                written = os.write(self._stdout, data)
            except BlockingIOError:
                written = 0
            if written == len(data):
                return
            data = data[written:]
        self._out += data
        self._flush()

    def _flush(self) -> None:
        """Write what the host will take now; the rest when its pipe has room (a full one, past
        ``OUT_LIMIT``, pauses reading the daemon)."""
        try:
            while self._out:
                del self._out[: os.write(self._stdout, self._out)]  # cheap: bytearray moves its start
        except BlockingIOError:
            pass
        if self._held_updates and len(self._out) <= ADVISORY_LIMIT:
            self._out += self._release_held()
            self._flush()
            return
        self._watch_stdout(bool(self._out))
        self._read_daemon(len(self._out) < OUT_LIMIT)

    def _release_held(self) -> bytes:
        """The resource updates held for the host, as lines; none held afterwards."""
        return b"".join(update + b"\n" for update in self._held_updates.release())

    def _watch_stdout(self, full: bool) -> None:
        registered = self._stdout in self._watched
        if full and not registered:
            self._watch(self._stdout, select.POLLOUT)
        elif not full and registered:
            self._unwatch(self._stdout)

    def _read_daemon(self, wanted: bool) -> None:
        if self.channel is None or wanted == self._reading_daemon:
            return
        if wanted:
            self._watch(self.channel.fileno(), select.POLLIN)
        else:
            self._unwatch(self.channel.fileno())
        self._reading_daemon = wanted

    def _watch(self, fd: int, events: int) -> None:
        self._poll.register(fd, events)
        self._watched.add(fd)

    def _unwatch(self, fd: int) -> None:
        self._poll.unregister(fd)
        self._watched.discard(fd)

    def _finish_writing(self) -> None:
        """stdin closed: what the host has not read yet still goes, for ``EXIT_FLUSH`` at most."""
        deadline = time.monotonic() + EXIT_FLUSH
        while self._out and time.monotonic() < deadline:
            select.select([], [self._stdout], [], max(0.0, deadline - time.monotonic()))
            self._flush()

    # -- the daemon connection --------------------------------------------------------------

    def _open(self, resume: bytes) -> Channel:
        # A daemon that does not read is stopped or stalled (it reads its hosts whatever they send),
        # and given up on only as late as a gap is: at 10 s, a SIGSTOP of 15 s failed the calls in
        # flight as "the daemon restarted" whenever the host had sent more than the socket holds.
        return open_channel(
            self.socket_path,
            mode="mcp",
            name="mcpd-bridge",
            resume=resume,
            timeout=10.0,
            write_timeout=GAP_WAIT,
        )

    def _resume(self) -> bytes:
        """``state`` with our subscriptions, as many as the daemon takes in a hello (``RESUME_MAX``),
        the first ones; those beyond are dropped, said in the log: the session (its ``initialize``,
        its connected servers) is never refused for the sake of its subscriptions."""
        try:
            state = msgspec.structs.replace(_state.decode(self.state), subscription_deltas=True)
        except DECODE_FAILURES:
            return self.state  # another mcpd's: the daemon says whether it can carry it on
        subscribed = list(self.subscribed)
        resume = _encoder.encode(msgspec.structs.replace(state, subscribed=subscribed))
        if len(resume) > RESUME_MAX:
            room = RESUME_MAX - len(_encoder.encode(msgspec.structs.replace(state, subscribed=[])))
            kept: list[str] = []
            for uri in subscribed:
                room -= len(_encoder.encode(uri)) + 1  # and its comma
                if room < 0:
                    break
                kept.append(uri)
            _log("bridge.subscriptions_dropped", dropped=len(subscribed) - len(kept), kept=len(kept))
            subscribed = kept
            resume = _encoder.encode(msgspec.structs.replace(state, subscribed=kept))
        self.subscribed = dict.fromkeys(subscribed)
        return resume

    def _attach(self, channel: Channel) -> None:
        self.channel = channel
        self._max_frame = channel.max_frame
        self._max_frame_said = channel.hello.max_frame is not None
        now = time.monotonic()
        uptime = channel.hello.uptime_s
        self._daemon_up_since = now if uptime is None else now - uptime
        self._read_daemon(len(self._out) < OUT_LIMIT)
        self._deliver(channel.backlog)

    def _close(self) -> None:
        if self.channel is not None:
            self._read_daemon(False)
            self.channel.close()
            self.channel = None

    def _take_last(self) -> None:
        """Deliver what the daemon sent before it went away and is still in the socket: one found
        gone by a send (a broken pipe) may have answered calls the relay had not read yet."""
        assert self.channel is not None
        with contextlib.suppress(McpdError):
            while select.select([self.channel], [], [], 0)[0]:
                self._deliver(self.channel.receive())

    def _lost(self) -> None:
        """The daemon went away: answer or keep what it held, and start reconnecting."""
        self._take_last()
        self._close()
        now = time.monotonic()
        resend: list[tuple[float, bytes, mcp.Route | None]] = []
        answers: list[bytes] = []
        for request_id, (method, line) in self.inflight.items():
            if line is not None:
                resend.append((now, line, mcp.Route(request_id, method)))
            else:
                message = f"the mcpd daemon restarted during {method}; it may or may not have run"
                answers.append(_error_line(request_id, mcp.DAEMON_RESTARTED, message))
        self.inflight.clear()
        self._set_waiting(resend + self.waiting)
        # The daemon's questions go with it: the host should stop asking its user, and an answer
        # would reach only a daemon that never asked it.
        withdrawn = [
            _cancel_line(request_id, "the mcpd daemon that asked went away") for request_id in self.asked
        ]
        self.asked.clear()
        self._write(b"".join(answers + withdrawn))
        self._gap_since = now
        self._retry_at = now
        self._delay = FIRST_DELAY
        # This daemon came up, whoever started it: a new gap, not a start that failed, so the next
        # start comes ``AUTOSTART_AFTER`` into it (a daemon killed twice in a row cost the hosts
        # 10 s); later at each daemon that dies soon after it came up (one that crashes on what it
        # is sent would otherwise be started every second, by every bridge). Its life counts from its
        # own start: one restarted by hand soon after this bridge attached had lived, however briefly seen.
        lived = now - self._daemon_up_since
        self._autostart_wait = (
            AUTOSTART_AFTER if lived >= AUTOSTART_RETRY else min(AUTOSTART_MAX, 2 * self._autostart_wait)
        )
        self._autostart_at = now + self._autostart_wait
        _log(
            "bridge.daemon_lost",
            failed=len(answers),
            resent=len(resend),
            withdrawn=len(withdrawn),
            # None with --no-autostart: this bridge starts no daemon, whatever the wait would be.
            autostart_in=self._autostart_wait if self.autostart else None,
        )

    def _fresh_state(self) -> bytes:
        """A session from our options alone; one the host has initialized, as of unknown capabilities."""
        if not self.initialized:
            return _encoder.encode(self._options)
        return _encoder.encode(msgspec.structs.replace(self._options, initialize=mcp.InitializeParams()))

    def _reconnect(self, now: float) -> None:
        resume = self._resume()
        try:
            if self.autostart and now - self._gap_since >= AUTOSTART_AFTER and now >= self._autostart_at:
                self._autostart_at = now + AUTOSTART_RETRY
                ensure_daemon(self.socket_path, config=self.config, timeout=AUTOSTART_RETRY)
            channel = self._open(resume)
        except McpdError as exc:
            fresh = self._fresh_state()
            if resume != fresh and not isinstance(exc, DaemonNotRunning | TransportError):
                # A daemon that refuses to carry the session on (its state too large, or one it
                # cannot read) still serves a new one: better than retrying the refusal for ever.
                _log("bridge.resume_refused", error=str(exc))
                self.state = fresh
                self.subscribed = {}
                return
            self._retry_at = time.monotonic() + self._delay
            self._delay = min(MAX_DELAY, self._delay * 2)
            return
        self._attach(channel)
        _log(
            "bridge.reconnected",
            gap_s=round(time.monotonic() - self._gap_since, 3),
            waiting=len(self.waiting),
        )
        if self.initialized:
            # The new daemon's servers may differ: the host should list tools, resources and prompts again
            # (after the updates held, which came before).
            self._write(self._release_held() + _LIST_CHANGED)
        self._send_waiting(now)

    def _send_waiting(self, now: float) -> None:
        """What waited for a daemon goes to the one just attached, but what the host withdrew."""
        self._set_waiting(self.waiting)
        waiting = self.waiting
        self._set_waiting([])
        self._refused_in_gap = False
        for _, line, route in waiting:
            if self.channel is None:  # lost again while sending: keep the rest for the next one
                self._hold((now, line, route))
            else:
                self._forward(line, route)


def run_bridge(
    socket_path: str | None, *, config: str | None, preconnect: list[str], expose_all: bool, autostart: bool
) -> int:
    """Serve a host on stdin/stdout until it closes stdin."""
    state = mcp.SessionState(
        preconnect=sorted(set(preconnect)), expose_all=expose_all, subscription_deltas=True
    )
    return Relay(socket_path, config=config, state=state, autostart=autostart).run()
