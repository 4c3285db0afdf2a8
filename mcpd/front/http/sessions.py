"""HTTP sessions: one ``HostSession`` per ``Mcp-Session-Id``, and the stream each message takes.

A ``HostSession`` emits every message through one callback; here each finds its stream.
A response goes to the POST that carried its request (dropped if that POST is gone). A
progress notification goes to the POST whose request gave its progress token, and a server's
request to the host, or its log message, made during one of the host's calls goes to that
call's POST, ahead of its answer, when that POST may answer with an event stream. Everything
else (``list_changed``, other log messages) goes to the session's outbox, which the host's GET
stream drains; it is kept until a GET stream opens. Outboxes are bounded: a host that stops
reading loses the oldest of them (progress is cumulative, ``list_changed`` idempotent), never
the daemon's memory.

Sessions are bounded in number, and one with no request in progress and no GET stream for
``http_session_idle`` seconds is ended. At the bound a new session sets aside the one idle longest
(saved, resumed if its host comes back), so hosts that left without ending their sessions cannot
lock the others out; only when every session is in use is a new one refused. Each lives in a
task of the front end's task group, inside ``Hosts.open_session``, so its calls are cancelled
however it ends.

Sessions outlive the daemon: each one's state (the host's ``initialize``, its connected servers,
its last search; its subscriptions apart, written as they change) is kept in the usage store under
the hash of its id, and a request that names a session this daemon does not hold resumes it from
there, as ``mcpd bridge`` resumes its session in a new daemon. A host never has to notice a
restart (MCP's answer to it, a 404 and a new ``initialize``, is one the SDK's client leaves to its
user). A session ended by its host or by idleness is forgotten; one idle longer than
``http_session_idle`` is not resumed. A session kept loses its subscriptions to a server a reload
removed, as an open one does (``HttpSessions.forget_servers``): its host, back, is not subscribed to
a server of that name configured later.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import re
import secrets
import sqlite3
import time
from collections import deque
from collections.abc import Collection

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup, TaskStatus

from mcpd.errors import DECODE_FAILURES, McpdError
from mcpd.front.core import Caller
from mcpd.front.hosts import Hosts
from mcpd.front.session import HostSession
from mcpd.model import mcp
from mcpd.model.uris import qualify_uri
from mcpd.store.db import Store, StoreUnavailable
from mcpd.store.sessions import drop_subscriptions, prune_sessions, session_row, session_rows
from mcpd.updates import ENDED_MARK, HeldUpdates, updated_uri

log = structlog.get_logger("mcpd.front")

EVENTS_KEPT = 1000
"""Server-initiated messages a session keeps for its GET stream (the oldest go first)."""
REPLAY_BYTES = 1024 * 1024
"""Bytes of sent GET-stream events a session keeps to send again (a session lives for hours)."""
OUTBOX_BYTES = 4 * 1024 * 1024
"""Bytes one outbox keeps for a host that does not read, whatever the count."""
PROGRESS_KEPT = 100
"""Messages kept for one streaming POST whose host does not read them (half of them progress and
log messages at most, as in ``Outbox``)."""
ENDED_KEPT = 10_000
"""Keys of sessions ended in this run that are kept in memory: a store that lost their end (read-only
then) must not resume them, and is told again when it can be written."""
SET_ASIDE_KEPT = 1024
"""Sessions set aside at the bound kept in memory for their hosts' return; the oldest beyond are
looked up in the store when their hosts come back (a host churning sessions made another host's
idle session vanish: 404, its connected servers lost)."""
STORED_SESSIONS = 10_000
"""Rows the store keeps in ``http_sessions`` (the latest saved; those idle too long go anyway)."""
STORE_WAIT = 5.0
"""Seconds a request waits for the store to look up a session (503 beyond: it stays kept)."""
SET_ASIDE_AFTER = 1.0
"""Seconds a session must have been idle to be set aside: one just opened or resumed (its host is
at work) is not, so two hosts cannot keep setting each other aside."""

STREAM_SET_ASIDE_AFTER = 10.0
"""Seconds after its last request that a session whose host holds only a GET stream may be set aside
for a new one (``HttpSession.set_aside_rank``)."""


class _Progress(msgspec.Struct, frozen=True):
    params: mcp.ProgressParams


_route = msgspec.json.Decoder(mcp.Route)
_progress = msgspec.json.Decoder(_Progress)
_request_id = msgspec.json.Decoder(mcp.RequestId)
_state = msgspec.json.Decoder(mcp.SessionState)
# HostSession encodes responses `id` first: recognising one by its head means a 10 MB result
# is never parsed a second time just to find where it goes.
_RESPONSE_HEAD = re.compile(rb'\{"id":(-?\d+|"(?:[^"\\]|\\.)*"),"(?:result|error)":')
_PROGRESS_MARK = mcp.PROGRESS.encode()
REQUEST_CANCELLED = -32800
"""The error that ends the POST of a request its host cancelled (as the SDK's server answers it)."""
_encoder = msgspec.json.Encoder()


class SessionRefused(McpdError):
    """No new session now: ``http_max_sessions`` are open, or the daemon is stopping."""


class Outbox:
    """Messages for one stream, in order, for a single reader; the last one (a request's answer)
    is never dropped. One per request: it waits on a plain asyncio event, made only if it must wait
    (an anyio one costs a backend lookup each).

    Bounded for a host that does not read, in count and in bytes (``OUTBOX_BYTES``): advisory
    messages (``mcp.ADVISORY``: progress, log messages, resource updates) stop at half of either,
    the new ones dropped, so a chatty server cannot push out what matters (a ``list_changed``, a
    server's question); past the bound the oldest messages go. A resource update is not dropped
    but held, the latest per URI, and taken with the next ``take`` (``HeldUpdates``), in the order
    messages came: it is the host's one news of the change. The last update of a subscription that
    ended (``SUBSCRIPTION_ENDED``) is held apart, so that updates held to the bound cannot drop it
    (the host would wait for updates that will not come). Progress and log messages go (the next
    step supersedes a progress step; a log line is a record)."""

    def __init__(self, limit: int, owner: str, *, may_stream: bool = False) -> None:
        self.may_stream = may_stream
        """Its POST may be answered with an event stream (so it can carry requests to the host)."""
        self._items: deque[tuple[int, bool, bytes]] = deque()
        """(the message's number, advisory, the message), in the order they came."""
        self._count = 0
        self._limit = limit
        self._advisory = 0
        """Advisory messages among ``_items``..."""
        self._advisory_bytes = 0
        """... their bytes, and those of all ``_items``."""
        self._bytes = 0
        self._final: bytes | None = None
        self._closed = False
        self._wake: asyncio.Event | None = None
        self._owner = owner
        self._dropping = False
        self._updates: HeldUpdates[tuple[int, bytes]] = HeldUpdates()
        """Updates past the advisory half, or pushed out (numbered as ``_items``)."""
        self._ended: HeldUpdates[tuple[int, bytes]] = HeldUpdates()
        """Those of them that end a subscription: at most one per subscription the host held (10,000
        at once, ``MAX_SUBSCRIPTIONS``), bounded as ``_updates`` are. Not kept among the messages
        that matter, where a server ending thousands of them pushed out the rest, and each other."""

    def _full(self, size: int) -> bool:
        """No room for one more message of ``size`` bytes without dropping an older one."""
        return len(self._items) >= self._limit or self._bytes + size > OUTBOX_BYTES

    def push(self, data: bytes, *, advisory: bool = False) -> None:
        if advisory:
            full = self._advisory >= self._limit // 2 or self._advisory_bytes + len(data) > OUTBOX_BYTES // 2
        else:
            full = self._full(len(data))
        if full and not self._dropping:
            self._dropping = True  # said once: a host that does not read would otherwise flood the log
            log.warning("http.messages_dropped", session=self._owner, kept=len(self._items))
        self._count += 1
        if full and advisory:
            self._hold(self._count, data)
            return
        while self._items and self._full(len(data)):
            number, was_advisory, dropped = self._items.popleft()
            self._advisory -= was_advisory
            self._advisory_bytes -= len(dropped) if was_advisory else 0
            self._bytes -= len(dropped)
            if was_advisory:
                self._hold(number, dropped)
        self._items.append((self._count, advisory, data))
        self._advisory += advisory
        self._advisory_bytes += len(data) if advisory else 0
        self._bytes += len(data)
        self._wakeup()

    def _hold(self, number: int, data: bytes) -> None:
        """Hold the update ``data`` (message ``number``), unless one that came after it is held: an
        update pushed out is older than one held when the advisory half was full."""
        uri = updated_uri(data)
        if uri is None:
            return
        updates = self._ended if ENDED_MARK in data else self._updates
        held = updates.get(uri)
        if held is None or held[0] < number:
            updates.hold(uri, (number, data), len(data))

    @property
    def answer(self) -> bytes | None:
        """The last message, once it has come."""
        return self._final

    def finish(self, data: bytes) -> None:
        self._final = data
        self._wakeup()

    def close(self) -> None:
        self._closed = True
        self._wakeup()

    def _wakeup(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def take(self) -> tuple[list[bytes], bool]:
        """What has arrived (waiting for something), and whether the stream ends with it."""
        while not (self._items or self._final is not None or self._closed):
            self._wake = asyncio.Event()
            await self._wake.wait()
        # In the order they came: an update held before some kept (pushed out) goes before them.
        came = sorted(
            [*((n, data) for n, _, data in self._items), *self._updates.release(), *self._ended.release()]
        )
        items = [data for _, data in came]
        self._items.clear()
        self._advisory = self._advisory_bytes = self._bytes = 0
        if self._final is not None:
            items.append(self._final)
            return items, True
        return items, self._closed


class EventLog:
    """The ids of a session's GET-stream events, and the last events sent (``EVENTS_KEPT``, at most
    ``REPLAY_BYTES`` of them), so a
    host whose stream broke gets again what it missed (``Last-Event-ID``): events taken for a
    stream that then broke would be lost otherwise. Ids are ``EPOCH-N``: a new daemon has a new
    epoch, and an id of another epoch names nothing here."""

    def __init__(self) -> None:
        self._epoch = secrets.token_hex(4)
        self._next = 1
        self._sent: deque[tuple[int, bytes]] = deque()
        self._bytes = 0

    def stamp(self, items: list[bytes]) -> list[tuple[str, bytes]]:
        """Give ``items`` their ids, and keep them for a stream that breaks before they arrive."""
        numbered = list(zip(range(self._next, self._next + len(items)), items, strict=True))
        self._next += len(items)
        self._sent.extend(numbered)
        self._bytes += sum(len(item) for item in items)
        while len(self._sent) > EVENTS_KEPT or (self._bytes > REPLAY_BYTES and len(self._sent) > 1):
            self._bytes -= len(self._sent.popleft()[1])
        return self._named(numbered)

    def since(self, last_event_id: str) -> list[tuple[str, bytes]]:
        """The kept events after ``last_event_id`` (all kept ones if it is older than they are;
        none if it is not an id of this daemon's)."""
        epoch, _, number = last_event_id.partition("-")
        if epoch != self._epoch or not (number.isascii() and number.isdigit()):
            return []
        last = int(number)
        if self._sent and last < self._sent[0][0] - 1:
            log.warning("http.events_lost", lost=self._sent[0][0] - 1 - last)
        return self._named([(n, item) for n, item in self._sent if n > last])

    def _named(self, numbered: list[tuple[int, bytes]]) -> list[tuple[str, bytes]]:
        return [(f"{self._epoch}-{number}", item) for number, item in numbered]


class DuplicateRequest(McpdError):
    """A request id already in progress in this session."""


class HttpSession:
    """One MCP session over HTTP: its ``HostSession`` and the streams its messages go to."""

    def __init__(self, number: int, session_id: str | None = None) -> None:
        self.id = session_id or secrets.token_urlsafe(32)
        """The ``Mcp-Session-Id``: as good as the bearer token for this session, so never logged."""
        self.key = session_key(self.id)
        """What the store keeps it under."""
        self.label = f"http-{number}"
        self._host: HostSession | None = None
        self.events = Outbox(EVENTS_KEPT, self.label)
        self.forgotten = False
        """Ended for good (deleted, idle too long): its state is never saved again."""
        self.event_log = EventLog()
        """Ids and the recent past of ``events``, for a GET stream that resumes."""
        self.streaming = False
        """A GET stream is attached."""
        self.active = 0
        """Requests being served (a POST waiting for its answer)."""
        self.last_seen = time.monotonic()
        self.ended = anyio.Event()
        self.started = anyio.Event()
        """Set once its HostSession runs, or once it ended before that."""
        self._pending: dict[mcp.RequestId, Outbox] = {}
        self._progress: dict[mcp.RequestId, Outbox] = {}

    @property
    def host(self) -> HostSession:
        assert self._host is not None, "HttpSessions.open returns a session once its HostSession runs"
        return self._host

    def attach(self, host: HostSession) -> None:
        self._host = host
        self.started.set()

    def state(self) -> mcp.SessionState | None:
        """What a new daemon needs to carry the session on (None before its HostSession runs)."""
        return self._host.state() if self._host is not None else None

    def idle_for(self, now: float) -> float:
        return 0.0 if self.active or self.streaming else now - self.last_seen

    def set_aside_rank(self, now: float) -> tuple[bool, float] | None:
        """How readily the session is set aside for a new one (the greatest first), None if not.

        Never with a request running, nor within ``SET_ASIDE_AFTER`` of its last. A GET stream alone
        keeps it only for ``STREAM_SET_ASIDE_AFTER`` after its last request, and it goes after every
        session without one: a stream's pings are taken by the host's kernel whether or not the host
        reads them, so 256 never-read streams were "in use" for ever and refused every new host. Its
        stream ends; a host that opens it again resumes the session (it misses the events of the gap).
        """
        if self.active or not self.started.is_set():
            return None
        quiet = now - self.last_seen
        if quiet < (STREAM_SET_ASIDE_AFTER if self.streaming else SET_ASIDE_AFTER):
            return None
        return (not self.streaming, quiet)

    def expect(
        self, request_id: mcp.RequestId, progress_token: mcp.RequestId | None, *, may_stream: bool = False
    ) -> Outbox:
        """Where the answer to ``request_id`` will go (and its progress, if it streams; and what its
        server asks the host, if the host takes a stream for it: ``may_stream``)."""
        if request_id in self._pending:
            raise DuplicateRequest(f"request id {request_id!r} is already in progress in this session")
        outbox = Outbox(PROGRESS_KEPT, self.label, may_stream=may_stream or progress_token is not None)
        self._pending[request_id] = outbox
        if progress_token is not None:
            self._progress[progress_token] = outbox
        return outbox

    def forget(self, request_id: mcp.RequestId, progress_token: mcp.RequestId | None, outbox: Outbox) -> None:
        """The POST of ``request_id`` is done; what it registered goes (not what a later one did)."""
        if self._pending.get(request_id) is outbox:
            del self._pending[request_id]
        if progress_token is not None and self._progress.get(progress_token) is outbox:
            del self._progress[progress_token]

    def deliver(self, data: bytes, related: mcp.RequestId | None = None, /) -> None:
        """The HostSession's ``send``: put ``data`` on its stream (never waits)."""
        head = _RESPONSE_HEAD.match(data)
        if head is not None:
            self._answered(_request_id.decode(head[1]), data)
            return
        try:
            route = _route.decode(data)
        except DECODE_FAILURES:
            return  # HostSession only sends what it encoded: nothing else to route
        if isinstance(route.method, msgspec.UnsetType):
            self._answered(route.id if isinstance(route.id, (int, str)) else None, data)
            return
        if related is None and self._host is not None:
            related = self._host.answers.origin_of(route.id)
        target = self._pending.get(related) if related is not None else None
        if target is not None and target.may_stream:
            # What belongs to one of the host's requests (a server's question, its log messages during
            # the call) goes with that request's answer, before it (MCP's Streamable HTTP: "SHOULD
            # relate to the originating client request"): a host need not open a GET stream to be
            # asked, nor to get them, and a GET stream would bring them after the answer.
            target.push(data, advisory=route.method in mcp.ADVISORY)
            return
        if route.method == mcp.PROGRESS and self._progress and _PROGRESS_MARK in data:
            try:
                token = _progress.decode(data).params.progress_token
            except DECODE_FAILURES:
                token = None
            target = self._progress.get(token) if token is not None else None
            if target is not None:
                target.push(data, advisory=True)
                return
        self.events.push(data, advisory=route.method in mcp.ADVISORY)

    def _answered(self, request_id: mcp.RequestId | None, data: bytes) -> None:
        outbox = self._pending.pop(request_id, None) if request_id is not None else None
        if outbox is not None:
            outbox.finish(data)
        # else its POST is gone (the host hung up, the session ended): nobody to tell

    def cancelled(self, request_id: mcp.RequestId) -> None:
        """The host cancelled ``request_id``: the session sends no answer, so its POST gets this one."""
        error = mcp.ErrorObject(REQUEST_CANCELLED, "request cancelled")
        self._answered(request_id, _encoder.encode(mcp.ErrorResponse(request_id, error)))

    def end(self) -> None:
        """End the session: its HostSession goes, then its streams close and its POSTs get an error
        (``close_streams``, at once if it has no HostSession)."""
        self.started.set()  # nobody waits for a start that will not come
        self.ended.set()
        if self._host is None:
            self.close_streams()

    def close_streams(self) -> None:
        """Close its streams, once its HostSession is gone: that withdraws the questions its
        servers asked the host (``notifications/cancelled``), which must reach it. Closed before,
        they were dropped: a daemon stopping left the host asking its user for nobody."""
        for outbox in (*self._pending.values(), self.events):
            outbox.close()
        self._pending.clear()
        self._progress.clear()


def session_key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def _record(key: str, state: mcp.SessionState, saved_at: float, *, whole: bool = False) -> mcp.SavedSession:
    """``state`` as the store keeps it: its subscriptions apart, given (all of them, replacing those
    kept) only when ``whole``; the store keeps them up to date from each change otherwise."""
    encoded = _encoder.encode(msgspec.structs.replace(state, subscribed=[]))
    return mcp.SavedSession(key, encoded, saved_at, list(state.subscribed) if whole else None)


async def saved_sessions(store: Store, idle: float) -> dict[str, mcp.SavedSession]:
    """The sessions an earlier daemon kept, by key, dropping those idle longer than ``idle``."""
    try:
        rows = await store.run(functools.partial(session_rows, since=time.time() - idle))
    except StoreUnavailable:
        return {}
    except (sqlite3.Error, TypeError) as exc:
        # A damaged table (or a row of the wrong type, ``bytes(text)``) costs the resumption of
        # earlier sessions, never the HTTP front end: this runs before it serves.
        log.warning(
            "http.sessions_unreadable",
            error=str(exc),
            consequence="host sessions of the previous daemon are not resumed",
        )
        return {}
    return {row.key: row for row in rows}


class HttpSessions:
    """The open sessions, by id: bounded in number, idle ones ended, each kept in the store."""

    def __init__(
        self,
        hosts: Hosts,
        tasks: TaskGroup,
        *,
        max_sessions: int,
        idle: float,
        saved: dict[str, mcp.SavedSession] | None = None,
    ) -> None:
        self._hosts = hosts
        self._store = hosts.core.usage
        self._tasks = tasks
        self._max = max_sessions
        self._idle = idle
        self._by_id: dict[str, HttpSession] = {}
        self._saved = saved or {}
        """Sessions of an earlier daemon, not resumed yet."""
        self._ended: dict[str, None] = {}
        """Keys of the sessions ended in this run, oldest first (``ENDED_KEPT`` at most)."""
        self._numbers = itertools.count(1)
        self._stopping = False

    async def find(self, session_id: str) -> HttpSession | None:
        """The session, resumed from the store if an earlier daemon held it; None if there is none.

        Raises ``SessionRefused`` when it would be resumed but no session can be opened now (it
        stays kept for a later request).
        """
        session = self._by_id.get(session_id) or await self._resume(session_id)
        if session is None:
            return None
        if not session.started.is_set():
            # Being resumed by a request of the same host that came just before this one.
            await session.started.wait()
        return None if session.ended.is_set() else session

    async def _resume(self, session_id: str) -> HttpSession | None:
        key = session_key(session_id)
        if key in self._ended:
            return None  # its end may not have reached the store
        saved = self._saved.pop(key, None)
        if saved is None:
            saved = await self._stored(key)
            # Another request of its host may have resumed it while the store looked.
            if (session := self._by_id.get(session_id)) is not None:
                return session
        if saved is None or saved.state is None or time.time() - saved.saved_at > self._idle:
            return None
        try:
            state = _state.decode(saved.state)
        except DECODE_FAILURES as exc:
            log.warning("http.resume_unreadable", error=str(exc))  # another mcpd version's state
            return None
        # Kept whole once, as its later changes and states are not: a state saved by an earlier mcpd
        # holds its subscriptions (they become rows), and a session set aside in memory may have lost
        # its row to pruning meanwhile.
        state = msgspec.structs.replace(
            state, subscribed=list(dict.fromkeys([*state.subscribed, *(saved.subscribed or [])]))
        )
        self._store.save_session(_record(key, state, saved.saved_at, whole=True))
        try:
            session = await self.open(session_id, state, resumed=True)
        except SessionRefused:
            self._saved[key] = saved
            raise
        age = round(time.time() - saved.saved_at, 1)
        log.info("http.session_resumed", session=session.label, saved_s=age)
        return session

    async def _stored(self, key: str) -> mcp.SavedSession | None:
        """The session saved under ``key`` in the store (set aside, no longer in memory), on the
        store's thread; ``SessionRefused`` if the store does not answer in time."""
        lookup = functools.partial(session_row, key=key, since=time.time() - self._idle)
        try:
            async with asyncio.timeout(STORE_WAIT):
                return await self._store.run(lookup)
        except TimeoutError:
            raise SessionRefused("the usage store is busy: try again") from None
        except StoreUnavailable:
            return None
        except (sqlite3.Error, TypeError) as exc:
            log.warning("http.resume_unreadable", error=str(exc))
            return None

    async def prune_stored(self) -> None:
        """Delete the store's sessions idle too long, and the oldest beyond ``STORED_SESSIONS``:
        sessions set aside, or never deleted by their hosts, are not ended here, so nothing else
        would (a churning host left 12.8k rows after 14k sessions). The open ones stay, whatever
        their number (``http_max_sessions`` may exceed ``STORED_SESSIONS``)."""
        open_keys = {session.key for session in self._by_id.values()}
        prune = functools.partial(
            prune_sessions, since=time.time() - self._idle, keep=STORED_SESSIONS, open_keys=open_keys
        )
        try:
            async with asyncio.timeout(STORE_WAIT):
                pruned = await self._store.run(prune)
        except (TimeoutError, StoreUnavailable):
            return  # next time
        except sqlite3.Error as exc:
            log.warning("http.sessions_unprunable", error=str(exc))
            return
        if pruned:
            log.info("http.sessions_pruned", pruned=pruned)

    async def forget_servers(self, servers: Collection[str]) -> None:
        """``servers`` are configured no more (a reload removed them): the sessions set aside, kept
        here or only in the store, lose their subscriptions to them, so a host that comes back is not
        subscribed to a server of one of those names configured later (which may be another one).
        The open sessions' end with ``Subscriptions.forget``, their hosts told."""
        prefixes = tuple(qualify_uri(server, "") for server in servers)
        for key, saved in list(self._saved.items()):
            if saved.subscribed and any(uri.startswith(prefixes) for uri in saved.subscribed):
                kept = [uri for uri in saved.subscribed if not uri.startswith(prefixes)]
                self._saved[key] = msgspec.structs.replace(saved, subscribed=kept)
        # Queued behind every write before it and ahead of any later look-up (``_stored``): a host
        # that comes back meanwhile finds them gone, whether or not this waits for the store.
        drop = functools.partial(drop_subscriptions, prefixes=prefixes)
        try:
            async with asyncio.timeout(STORE_WAIT):
                dropped = await self._store.run(drop)
        except (StoreUnavailable, TimeoutError):
            return  # nothing kept there to resume; or the store is busy, and drops them when it can
        except sqlite3.Error as exc:
            log.warning(
                "http.subscriptions_undropped",
                servers=sorted(servers),
                error=str(exc),
                consequence="a session set aside may be subscribed to a server of that name configured later",
            )
            return
        if dropped:
            log.info("http.subscriptions_dropped", servers=sorted(servers), subscriptions=dropped)

    async def open(
        self, session_id: str | None = None, state: mcp.SessionState | None = None, *, resumed: bool = False
    ) -> HttpSession:
        """A session with its HostSession running (new, or ``resumed`` with ``state``);
        ``SessionRefused`` at the limit or once stopping."""
        if self._stopping:
            raise SessionRefused("the daemon is stopping")
        if len(self._by_id) >= self._max and not self._set_aside_idlest():
            raise SessionRefused(f"{self._max} HTTP sessions are open and in use (http_max_sessions)")
        session = HttpSession(next(self._numbers), session_id)
        self._by_id[session.id] = session
        await self._tasks.start(self._hold, session, state or mcp.SessionState(), resumed)
        return session

    async def _hold(
        self, session: HttpSession, state: mcp.SessionState, resumed: bool, *, task_status: TaskStatus[None]
    ) -> None:
        caller = Caller("http", session.label)
        save = functools.partial(self._save, session)
        try:
            async with self._hosts.open_session(
                session.deliver,
                caller,
                state,
                on_state=save,
                on_subscriptions=functools.partial(self._save_subscriptions, session),
            ) as host:
                session.attach(host)
                if resumed:
                    host.relist()  # as the bridge does when it has a new daemon
                log.info("http.session", session=session.label, open=len(self._by_id))
                task_status.started()
                await session.ended.wait()
        finally:
            self._forget(session)
            session.end()
            session.close_streams()

    def _set_aside_idlest(self) -> bool:
        """Close the session idle longest, keeping it to resume when its host comes back; False
        when every session is in use (``HttpSession.set_aside_rank``)."""
        now = time.monotonic()
        ranked = [(rank, s) for s in self._by_id.values() if (rank := s.set_aside_rank(now)) is not None]
        if not ranked:
            return False
        idlest = max(ranked, key=lambda ranked: ranked[0])[1]
        state = idlest.state()
        if state is not None:
            # The store has its subscriptions already; kept here, it is resumed with them.
            saved = _record(idlest.key, state, time.time(), whole=True)
            self._store.save_session(msgspec.structs.replace(saved, subscribed=None))
            self._saved[idlest.key] = saved
            while len(self._saved) > SET_ASIDE_KEPT:
                del self._saved[next(iter(self._saved))]  # the oldest: dicts keep their order
        self._close(idlest, "set aside for a new session")
        return True

    def resave(self) -> int:
        """Save every session kept, open or set aside, again, with all its subscriptions, and the ends
        of those ended (a store that lost them); how many."""
        now, clock = time.time(), time.monotonic()
        kept = [
            # As of its last use, not now: idle, it must expire when it would have.
            _record(session.key, state, now - session.idle_for(clock), whole=True)
            for session in self._by_id.values()
            if not session.forgotten and (state := session.state()) is not None
        ]
        ended = [mcp.SavedSession(key, None, now) for key in self._ended]
        for saved in [*kept, *self._saved.values(), *ended]:
            self._store.save_session(saved)
        return len(kept) + len(self._saved) + len(ended)

    def _save(self, session: HttpSession, state: mcp.SessionState | None) -> None:
        # A request still running when its host deleted the session must not write it back.
        if state is not None and not session.forgotten:
            self._store.save_session(_record(session.key, state, time.time()))

    def _save_subscriptions(self, session: HttpSession, change: mcp.SubscriptionsChanged) -> None:
        # Written at once, as a state is: the host is answered after this.
        if not session.forgotten:
            self._store.save_subscriptions(mcp.SavedSubscriptions(session.key, change.added, change.removed))

    def end(self, session: HttpSession, why: str) -> None:
        """End ``session`` for good: its host deleted it, or it was idle too long."""
        session.forgotten = True
        self._close(session, why)
        self._store.save_session(mcp.SavedSession(session.key, None, time.time()))
        self._ended[session.key] = None
        while len(self._ended) > ENDED_KEPT:
            del self._ended[next(iter(self._ended))]

    def _close(self, session: HttpSession, why: str) -> None:
        if self._forget(session):
            log.info("http.session_ended", session=session.label, why=why, open=len(self._by_id))
        session.end()

    def _forget(self, session: HttpSession) -> bool:
        """Drop ``session`` from the open ones; False if it was not there. By identity: a session
        set aside and resumed at once is a new one under the same id, which its predecessor's
        ending must not drop."""
        if self._by_id.get(session.id) is not session:
            return False
        del self._by_id[session.id]
        return True

    def end_all(self, why: str) -> None:
        """End every session here, and open no more (the daemon is stopping): each is kept, as of
        now, for the next daemon to resume."""
        self._stopping = True
        for session in list(self._by_id.values()):
            self._save(session, session.state())
            self._close(session, why)

    async def expire(self) -> None:
        """End sessions idle longer than the limit, and keep the others' saves fresh; runs until
        cancelled."""
        interval = min(self._idle / 2, 60.0)
        while True:
            await anyio.sleep(interval)
            now = time.monotonic()
            for session in list(self._by_id.values()):
                idle = session.idle_for(now)
                if idle > self._idle:
                    self.end(session, "idle")
                elif idle < interval:
                    # In use: a daemon killed now must still find it fresh.
                    self._save(session, session.state())
            await self.prune_stored()
