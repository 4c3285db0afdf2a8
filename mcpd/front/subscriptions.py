"""Resource subscriptions shared by every client: each server is subscribed once per URI.

Subscribers (socket connections, host sessions) subscribe by (server, the server's own URI).
What they want is recorded as their requests come, in that order; what the server has is brought
in line with it by one task per server (``_work``), one request at a time for each URI (a few URIs
at once, ``AT_ONCE``, so that one the server is slow to take holds up no other): ``resources/subscribe`` while
somebody wants a URI the server may lack, ``resources/unsubscribe`` once nobody wants one it may
have. The requests are that task's, never a subscriber's: a subscriber that cancels, unsubscribes
or disconnects meanwhile cuts none short, it only changes what the task does next. So whatever
the interleaving, once it settles the server is subscribed to a URI exactly when some subscriber
holds it. A subscriber holds a URI from the server's yes on, and is answered then.

A server that starts a new run (a restart, a reload) knows no subscriptions, so they are sent again
as soon as it runs. A request the server refused or did not answer in time, that leaves its side
differing from what is wanted (a subscription the holders keep, an unsubscription nobody wants
undone), is sent again for as long as it differs; the first failure is logged (warning), the
recovery too, and the holders of a subscription taken back late are sent an update of its URI,
since changes made meanwhile were told to nobody. While a server refuses, the requests it is sent
again (and the new run's resubscribes) wait in line, and one of them at a time is let through,
after a backoff per server (``RETRIES``): a server refusing 10,000 held URIs is asked once per 30 s,
not 10,000 times. Once one is taken, the next goes at once. A subscriber's own request (a subscribe,
the last holder's unsubscribe) is never held back: its answer is awaited.

A server that says the resource does not exist (``NOT_FOUND``), or that offers no subscriptions (it
does not declare them, or answers "method not found": a new run of another version, say), ends its
subscription: asking again would not change it, and a holder must not wait for updates that will
never come. Nor do those of a server removed from the config (``forget``): a server of that name
later may be another one. The holders of an ended subscription hold it no more, and are told as MCP
lets a host be told: an update of the URI (a host that reads it again learns that it is gone), whose
``_meta`` says why (``SUBSCRIPTION_ENDED``), and ``Ended`` for a subscriber that keeps its own list
(a relay).

Any other failure waits for the server's next run (it stopped), or is sent again while held (it
refused: not ready yet, or with a code that names no reason, as the Python SDK's 1.x answers 0 for
whatever its handler raised). ``ResourceUpdated`` events go to the subscribers of that URI, and of
any URI it lies under (MCP allows an update for a sub-resource of the one subscribed).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

import anyio
import structlog

from mcpd.config.model import RestartPolicy
from mcpd.errors import (
    CallTimeout,
    McpdError,
    ServerNotRunning,
    TooManyRequests,
    TransportError,
    UnknownResource,
    UnknownServer,
    Unsupported,
    server_refusal,
)
from mcpd.front.background import Background
from mcpd.model import mcp
from mcpd.model.servers import SUBSCRIPTION_ENDED, ResourceUpdated, ServerEvent, StateChanged
from mcpd.model.states import ServerState
from mcpd.supervisor import surface_requests
from mcpd.supervisor.backoff import backoff_delay
from mcpd.supervisor.supervisor import Supervisor

log = structlog.get_logger("mcpd.front")

Deliver = Callable[[str, str, dict[str, Any] | None], None]
"""Tells one subscriber of an update: (server, the server's own URI, the notification's ``_meta``);
must not block."""
Ended = Callable[[str, str], None]
"""Tells one subscriber that it holds a subscription no more: (server, the server's own URI); told
after the update that says so (``SUBSCRIPTION_ENDED``); must not block."""
Key = tuple[str, str]
Check = Callable[[], Awaitable[object]]

NOT_FOUND = frozenset({mcp.RESOURCE_NOT_FOUND, mcp.INVALID_PARAMS})
"""A server's codes for "no such resource": -32002 in MCP up to 2025-11-25, -32602 from 2026-07-28
on (SEP-2164, which asks clients to take both)."""
_FINAL = frozenset({*NOT_FOUND, mcp.METHOD_NOT_FOUND})
"""A server's codes for a refusal that asking again would not change: ``NOT_FOUND``, and "method not
found" from a server that offers no subscriptions."""

UNSUBSCRIBE_TIMEOUT = 10.0
"""Seconds an ``resources/unsubscribe`` may take, and an unsubscriber waits for it."""

MAX_SUBSCRIPTIONS = 10_000
"""Subscriptions one subscriber may hold (a host watches a handful): each costs memory for as long
as it is held, and a client taking millions would grow the daemon without bound."""

RETRIES = RestartPolicy(initial_delay=0.5, max_delay=30.0)
"""Delays between a server's refusals (or silences) and the next request let through to it: at
most every 30 s while it refuses, for as long as one is due, as a crashing server is restarted."""

AT_ONCE = 8
"""URIs of one server brought in line at once (each its own request): a subscribe the server is
slow to take (or never answers) held up every other one of the server's, other hosts' too, for as
long as it took. Bounded: a new run's resubscribes of thousands of URIs go a few at a time."""

MAX_UNSUBSCRIBES_WAITING = 1_000
"""Unsubscriptions of one server's that wait in line while it refuses; past it the oldest is left to
its next run. Nobody holds them, so nothing else bounds them: a host cycling through distinct URIs
of a server that takes subscribes and refuses unsubscribes would add one a cycle."""

UNSUBSCRIBE_ATTEMPTS = 8
"""Attempts at an unsubscription the server refuses before it is left to the server's next run
(about a minute with ``RETRIES`` when it waits in line alone, longer behind others): nobody hears
its updates meanwhile, and a server that never had it may refuse it for good, while a
subscription is asked for as long as somebody holds it."""

_MAYBE_SENT = (CallTimeout, TransportError)
"""Failures of a request that may have reached the server and taken effect there."""
_RETRIED = (*_MAYBE_SENT, UnknownResource)
"""Failures another attempt on the same run may mend: the server refused (not ready yet, say; not
because the resource does not exist, ``NOT_FOUND``) or did not answer this time."""


def covers(subscribed: str, updated: str) -> bool:
    """``updated`` is ``subscribed`` or a resource under it (``file:///d/`` covers ``file:///d/a``)."""
    if updated == subscribed:
        return True
    if not updated.startswith(subscribed):
        return False
    return subscribed.endswith("/") or updated[len(subscribed)] in "/?#"


class _Join:
    """A subscriber's wish for a URI it does not hold yet, answered at the server's turn."""

    __slots__ = ("allowed", "askers", "done", "error", "timeout")

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        """Seconds the subscriber waits for it, from its call on."""
        self.allowed = False
        """The subscriber may have it (``subscribe``'s check passed): until then the server is not asked."""
        self.askers = 0
        """Requests of the subscriber's waiting for it (a host may send the same subscribe twice)."""
        self.done = anyio.Event()
        self.error: McpdError | None = None
        """Why the server did not take it; None once taken, or withdrawn by the subscriber."""


class _Uri:
    """One URI of one server: who wants it, and what the server has."""

    __slots__ = ("failures", "holders", "joining", "rerun", "server", "settled", "unsubscribing")

    def __init__(self) -> None:
        self.holders: set[Hashable] = set()
        """Subscribers holding it: the server took it for them (or for one before them)."""
        self.joining: dict[Hashable, _Join] = {}
        self.server: bool | None = False
        """The server is subscribed (True), is not (False), or may be (None: a request that timed
        out or lost its connection may have reached it)."""
        self.rerun = False
        """A new run of the server's has to be subscribed again for the holders."""
        self.settled: anyio.Event | None = None
        """Set once the server heard of it, for the unsubscribers waiting: one for all of them, as
        one that stops waiting cannot take its own back, and a host's unsubscribes may be many."""
        self.failures = 0
        """Attempts in a row that left the server's side differing from what is wanted (on this run),
        all of one kind (``unsubscribing``)."""
        self.unsubscribing = False
        """The kind of attempts ``failures`` counts: unsubscribes, or subscribes."""

    def wanted(self) -> bool:
        return bool(self.holders) or any(join.allowed for join in self.joining.values())

    def attempt(self, unsubscribing: bool) -> None:
        """A request of this kind goes out: a row of failures of the other kind ends there (the
        unsubscribes that follow resubscribes a server did not answer are counted from one)."""
        if self.unsubscribing is not unsubscribing:
            self.unsubscribing, self.failures = unsubscribing, 0

    def idle(self) -> bool:
        return not self.holders and not self.joining and self.server is False

    def again(self, unsubscribing: bool) -> bool:
        """A request of this kind would be the daemon's own, sent again: no subscriber waits for it
        (none joins), and it is a new run's resubscribe or follows a failure of its kind."""
        if unsubscribing:
            return bool(self.failures) and self.unsubscribing
        if any(join.allowed for join in self.joining.values()):
            return False
        return self.rerun or (bool(self.failures) and not self.unsubscribing)


class _Pace:
    """One server's requests sent again while it refuses: they wait in line, one let through at a time."""

    __slots__ = ("failures", "probe", "resubscribes", "timer", "unsubscribes")

    def __init__(self) -> None:
        self.failures = 0
        """Requests in a row the server refused or did not answer, those out at the same time
        counted once: the backoff's attempt."""
        self.resubscribes: dict[str, None] = {}
        """URIs whose subscription waits in line, oldest first; let through before ``unsubscribes``
        (holders wait for their updates, nobody for an unsubscription)."""
        self.unsubscribes: dict[str, None] = {}
        self.probe: str | None = None
        """The URI let through, until its turn (``_settle``)."""
        self.timer: asyncio.TimerHandle | None = None
        """When the next is let through."""

    def leave(self, uri: str) -> bool:
        """``uri`` comes to its turn: it waits in line no more; whether it did (or was let through)."""
        if self.probe == uri:
            self.probe = None
            return True
        for line in (self.resubscribes, self.unsubscribes):
            if uri in line:
                del line[uri]
                return True
        return False


class _Due:
    """One server's URIs whose server side may differ from what is wanted, in the order they changed:
    those a subscriber waits for (its subscribe, the last holder's unsubscribe) before the daemon's
    own (a new run's resubscribes, one let through while the server refuses). Before, a host's
    unsubscribe waited behind every resubscribe of a restart: behind 10,000, its whole wait
    (``UNSUBSCRIBE_TIMEOUT``), the server still subscribed after. Up to ``AT_ONCE`` URIs are
    brought in line at once (``busy``), one request at a time for each."""

    __slots__ = ("asked", "busy", "changed", "own")

    def __init__(self) -> None:
        self.asked: dict[str, None] = {}
        self.own: dict[str, None] = {}
        self.busy: set[str] = set()
        """URIs whose request is under way: none is taken again before it is done."""
        self.changed = anyio.Event()
        """Set when a URI becomes due, or one under way is done."""

    def __contains__(self, uri: str) -> bool:
        return uri in self.asked or uri in self.own

    def __bool__(self) -> bool:
        return bool(self.asked or self.own)

    def add(self, uri: str, *, asked: bool) -> None:
        if asked:
            self.own.pop(uri, None)
            self.asked[uri] = None
        elif uri not in self.asked:
            self.own[uri] = None
        self.changed.set()

    def discard(self, uri: str) -> None:
        self.asked.pop(uri, None)
        self.own.pop(uri, None)

    def take(self) -> str | None:
        """The next URI to bring in line, no longer due and now ``busy``; None if every one due is
        busy (at most ``AT_ONCE`` are passed over)."""
        for line in (self.asked, self.own):
            for uri in line:
                if uri not in self.busy:
                    del line[uri]
                    self.busy.add(uri)
                    return uri
        return None

    def done(self, uri: str) -> None:
        self.busy.discard(uri)
        self.changed.set()

    async def wait_changed(self) -> None:
        await self.changed.wait()
        self.changed = anyio.Event()

    def left(self) -> list[str]:
        return [*self.asked, *self.own]

    def clear(self) -> None:
        self.asked.clear()
        self.own.clear()


class Subscriptions:
    """``on_event`` must be a supervisor listener, and ``run()`` a task of the daemon."""

    def __init__(
        self, supervisor: Supervisor, limit: int = MAX_SUBSCRIPTIONS, retries: RestartPolicy = RETRIES
    ) -> None:
        self._supervisor = supervisor
        self._limit = limit
        self._retries = retries
        self._uris: dict[str, dict[str, _Uri]] = {}
        """Each URI somebody wants or its server may have, by server: an update looks at its own
        server's only (a server that sends updates by the thousand, beside thousands of other
        subscriptions, costs what its own cost)."""
        self._owned: dict[Hashable, set[Key]] = {}
        """What each subscriber holds or is joining (the limit counts both)."""
        self._deliver: dict[Hashable, Deliver] = {}
        self._ended: dict[Hashable, Ended] = {}
        self._paces: dict[str, _Pace] = {}
        """The servers that refused (or did not answer) their last request, or have requests in line."""
        self._due: dict[str, _Due] = {}
        """By server, the URIs whose server side may differ from what is wanted; a server is here
        while its ``_work`` task runs. One task per server, not per URI:
        a client of thousands of URIs that leaves would start thousands of tasks in one loop
        iteration, which stalled every other client; and one per server keeps them bounded."""
        self._background = Background()
        self.run = self._background.run
        """Own the tasks that bring the servers in line, until cancelled."""

    def register(self, owner: Hashable, deliver: Deliver, ended: Ended | None = None) -> bool:
        """Make ``owner`` a subscriber that hears through ``deliver`` (and ``ended``, see
        ``Ended``); False if it already was one."""
        if owner in self._deliver:
            return False
        self._deliver[owner] = deliver
        if ended is not None:
            self._ended[owner] = ended
        self._owned[owner] = set()
        return True

    def held(self, owner: Hashable, server: str, uri: str) -> bool:
        """Whether ``owner`` holds the subscription to ``server``'s ``uri`` (the server took it)."""
        state = self._uris.get(server, {}).get(uri)
        return state is not None and owner in state.holders

    async def subscribe(
        self,
        owner: Hashable,
        server: str,
        uri: str,
        timeout: float | None = None,
        check: Check | None = None,
    ) -> None:
        """Subscribe a registered ``owner``, answered once the server took it (at once if it holds
        it). Raises what ``check`` (may ``owner`` have it?) and ``ServerActor.subscribe_resource``
        raise (and ``UnknownServer``; ``TooManyRequests`` past the limit), the subscription then
        not taken. The wish counts from the call on, before ``check`` is done: the owner's
        ``unsubscribe`` that comes meanwhile withdraws it (the subscribe then returns, nothing
        taken), so that a host's requests sent without waiting for each other take effect in the
        order sent. Cancelled, it withdraws its wish (not what ``owner`` held already), as it does
        past ``timeout`` (default: the server's ``call_timeout``), raising ``CallTimeout``."""
        actor = self._supervisor.actor(server)  # UnknownServer, before anything is recorded
        limit = timeout if timeout is not None else actor.config.call_timeout
        owned = self._owned.get(owner)
        if owned is None:
            return  # dropped: nobody is left to hold it
        key = (server, uri)
        if key not in owned and len(owned) >= self._limit:
            raise TooManyRequests(
                f"this client holds {len(owned)} subscriptions, the most one may: unsubscribe some first",
                {"limit": self._limit},
            )
        state = self._uris.setdefault(server, {}).setdefault(uri, _Uri())
        if owner in state.holders:
            return
        join = state.joining.get(owner)
        if join is None:
            join = state.joining[owner] = _Join(limit)
            owned.add(key)
        join.askers += 1
        try:
            # The subscriber's own deadline, as a call's: the server's turn may come after other URIs'
            # requests, each with a deadline of its own (10 s for an unsubscribe), as many as are due.
            with anyio.move_on_after(limit):
                if check is not None:
                    await check()
                if state.joining.get(owner) is join and not join.allowed:
                    join.allowed = True
                    self._wanted(key, state)
                await join.done.wait()
            if not join.done.is_set():
                raise CallTimeout(
                    f"{server} did not take the subscription to {uri!r} within {limit:g}s",
                    {"server": server, "uri": uri},
                )
        finally:
            join.askers -= 1
            if not join.askers and state.joining.get(owner) is join:  # cancelled, or refused by ``check``
                self._withdraw(owner, key, state)
        if join.error is not None:
            raise join.error

    async def unsubscribe(self, owner: Hashable, server: str, uri: str, timeout: float | None = None) -> bool:
        """Withdraw ``owner``'s subscription (or its subscribe still on the way); False if it had
        neither. When ``owner`` was the last subscriber, returns once the server heard of it (of
        a subscribe still at the server too; a refusal is not the unsubscriber's: it is logged,
        and the unsubscription sent again), or after ``timeout`` (None: ``UNSUBSCRIBE_TIMEOUT``;
        0: no wait, as for a subscribe); else at once."""
        state = self._uris.get(server, {}).get(uri)
        if state is None or not self._withdraw(owner, (server, uri), state):
            return False
        if not state.wanted() and state.server is not False and uri in self._due.get(server, ()):
            if state.settled is None:
                state.settled = anyio.Event()
            settled = state.settled
            # A wait cut short cuts nothing else short: the server's task goes on.
            with anyio.move_on_after(UNSUBSCRIBE_TIMEOUT if timeout is None else timeout):
                await settled.wait()
        return True

    def drop(self, owner: Hashable) -> None:
        """``owner`` is gone: release all it held or was joining; what nobody wants any more is
        unsubscribed."""
        self._deliver.pop(owner, None)
        self._ended.pop(owner, None)
        for server, uri in self._owned.pop(owner, set()):
            state = self._uris.get(server, {}).get(uri)
            if state is not None:
                self._withdraw(owner, (server, uri), state)

    def on_event(self, event: ServerEvent) -> None:
        """Deliver updates to their subscribers; subscribe again when a server starts a new run."""
        if isinstance(event, ResourceUpdated):
            owners: set[Hashable] = set()  # once each, however many of its subscriptions cover the URI
            for uri, state in self._uris.get(event.server, {}).items():
                if covers(uri, event.uri):
                    owners |= state.holders
            meta = event.meta
            if meta is not None and SUBSCRIPTION_ENDED in meta:
                # The daemon's word alone (``_end``): from a server, its holders would let go of a
                # subscription still held, and the update would pass every bound a subscriber far
                # behind has (``Behind.offer(final=True)``), as many as the server sends.
                meta = {key: value for key, value in meta.items() if key != SUBSCRIPTION_ENDED} or None
            self._tell(owners, event.server, event.uri, meta)
        elif isinstance(event, StateChanged) and (event.old, event.new) == (
            ServerState.STARTING,
            ServerState.RUNNING,
        ):
            self._forget_pace(event.server)  # a new run may take them all: each is sent again once
            for uri, state in self._uris.get(event.server, {}).items():
                state.server = False  # a new run knows no subscriptions
                state.rerun = bool(state.holders)
                state.failures = 0  # its own failures are said again
                self._make_due((event.server, uri), asked=False)

    def forget(self, server: str) -> None:
        """``server`` is configured no more (a reload removed it): its subscriptions end, their
        holders told, subscribes waiting for it get ``UnknownServer``, and nothing of it is sent to
        a server of that name later (which may be another one)."""
        uris = self._uris.pop(server, {})
        self._forget_pace(server)
        due = self._due.get(server)
        if due is not None:
            due.clear()  # its task ends after the request under way, which finds nothing of it after
        error = UnknownServer(f"server {server!r} was removed from the config", {"server": server})
        ended = 0
        for uri, state in uris.items():
            # Those still in their check too: nobody would answer them after, and they would wait
            # out their deadline for a server nobody asks.
            self._answer((server, uri), state, error, checking=True)
            ended += bool(self._end((server, uri), state, error))
            if state.settled is not None:
                state.settled.set()
        if ended:  # one line, not one per URI: a host may have held thousands
            log.warning("resource.subscriptions_ended", server=server, uris=ended, error=error.message)

    def _tell(self, owners: set[Hashable], server: str, uri: str, meta: dict[str, Any] | None) -> None:
        for owner in owners:
            deliver = self._deliver.get(owner)
            if deliver is None:
                continue
            try:
                deliver(server, uri, meta)
            except Exception:
                # One subscriber's failure must not keep the update from the others.
                log.exception("subscription.delivery_failed", server=server, uri=uri)

    # -- inside ------------------------------------------------------------------------------------

    def _wanted(self, key: Key, state: _Uri) -> None:
        """A join became allowed: taken at once if the server has it and nothing is due for it."""
        if state.server is True and key[1] not in self._due.get(key[0], ()):
            self._answer(key, state, None)
        else:
            self._make_due(key)

    def _withdraw(self, owner: Hashable, key: Key, state: _Uri) -> bool:
        """Take ``key`` from ``owner``, held or joining; False if it had neither."""
        held = owner in state.holders
        state.holders.discard(owner)
        join = state.joining.pop(owner, None)
        if join is not None:
            join.done.set()  # its subscribe returns: withdrawn before the server's turn
        if not held and join is None:
            return False
        self._owned.get(owner, set()).discard(key)
        if not state.idle():
            self._make_due(key)
            return True
        # Nothing to send: gone at once, not kept until the server's task comes to it (which may be
        # busy for a while: a host cycling through URIs meanwhile would leave one for each).
        due = self._due.get(key[0])
        if due is not None:
            due.discard(key[1])
        pace = self._paces.get(key[0])
        if pace is not None and pace.leave(key[1]):
            self._go_on(key[0])
        self._settled(key, state)
        return True

    def _end(self, key: Key, state: _Uri, error: McpdError) -> int:
        """The holders of ``key`` hold it no more, and are told why (``SUBSCRIPTION_ENDED``); how
        many there were."""
        holders, state.holders = state.holders, set()
        server, uri = key
        for owner in holders:
            self._owned.get(owner, set()).discard(key)
        self._tell(holders, server, uri, {SUBSCRIPTION_ENDED: error.message})
        for owner in holders:
            ended = self._ended.get(owner)
            if ended is None:
                continue
            try:
                ended(server, uri)
            except Exception:
                log.exception("subscription.delivery_failed", server=server, uri=uri)
        return len(holders)

    def _answer(self, key: Key, state: _Uri, error: McpdError | None, *, checking: bool = False) -> None:
        """The server's answer to the allowed joins (and those still ``checking``, told ``error``):
        each holds it now, or is told ``error``."""
        for owner, join in list(state.joining.items()):
            if not join.allowed and not checking:
                continue
            del state.joining[owner]
            if error is None:
                state.holders.add(owner)
            else:
                join.error = error
                self._owned.get(owner, set()).discard(key)
            join.done.set()

    def _make_due(self, key: Key, *, asked: bool = True) -> None:
        """``asked``: by a subscriber, who waits for it (see ``_Due``)."""
        server, uri = key
        due = self._due.get(server)
        if due is None:
            due = self._due[server] = _Due()
            if not self._background.start(self._work, server):
                del self._due[server]  # the daemon stops (or never ran): no server will be asked
                self._give_up(key)
                return
        due.add(uri, asked=asked)

    async def _work(self, server: str) -> None:
        """Bring ``server``'s URIs in line, ``AT_ONCE`` at most at a time, until none is due."""
        due = self._due[server]
        try:
            # Looked at again once the group is left: a URI made due while it closed is not given up.
            while due or due.busy:
                async with anyio.create_task_group() as tg:
                    while due or due.busy:
                        while len(due.busy) < self._at_once(server) and (uri := due.take()) is not None:
                            tg.start_soon(self._settle_due, due, (server, uri))
                        await due.wait_changed()
        finally:
            del self._due[server]
            # Cancelled (the daemon stops), or a bug: nobody else would answer those left.
            for left in due.left():
                self._give_up((server, left))

    def _at_once(self, server: str) -> int:
        """``AT_ONCE`` while the server runs, else one: a request that waits for the server's start
        goes out once it runs, wanted or not by then, while those behind it are looked at then."""
        try:
            running = self._supervisor.actor(server).state is ServerState.RUNNING
        except UnknownServer:
            running = False
        return AT_ONCE if running else 1

    async def _settle_due(self, due: _Due, key: Key) -> None:
        settled = False
        try:
            await self._settle(key)
            settled = True
        finally:
            due.done(key[1])
            if not settled:
                self._give_up(key)

    def _give_up(self, key: Key) -> None:
        state = self._uris.get(key[0], {}).get(key[1])
        if state is not None:
            self._answer(key, state, ServerNotRunning("the daemon is stopping", {"server": key[0]}))
            self._settled(key, state)

    async def _settle(self, key: Key) -> None:
        server, uri = key
        pace = self._paces.get(server)
        probe = pace is not None and pace.probe == uri
        late = pace is not None and pace.leave(uri)  # its updates were told to nobody while it waited
        try:
            state = self._uris.get(server, {}).get(uri)
            if state is not None:
                await self._bring_in_line(key, state, probe, late)
        finally:
            self._go_on(server)

    async def _bring_in_line(self, key: Key, state: _Uri, probe: bool, late: bool) -> None:
        failure: McpdError | None = None
        seen = self._refusals(key[0])
        if state.wanted():
            if state.server is True:
                state.rerun = False  # a subscribe under way at the restart reached the new run
                self._answer(key, state, None)
            elif probe or not self._waits(key, state, unsubscribing=False):
                failure = await self._subscribe(key, state, late)
                if self._uris.get(key[0], {}).get(key[1]) is not state:
                    return  # its server was removed meanwhile (``forget``)
        # Also right after a subscription that everyone withdrew from while the server took it (or
        # that may have reached it, failing): nothing else would undo it.
        if (
            not state.wanted()
            and state.server is not False
            and (probe or not self._waits(key, state, unsubscribing=True))
        ):
            state.server = None  # while the request is out: a subscriber joining now waits for it
            seen = self._refusals(key[0])
            failure = await self._unsubscribe(key, state)
            if self._uris.get(key[0], {}).get(key[1]) is not state:
                return
            state.server = None if failure is not None else False
        self._after(key, state, failure, seen)
        if key[1] not in self._due.get(key[0], ()):
            self._settled(key, state)

    def _refusals(self, server: str) -> int:
        """The server's refusals in a row so far (``_Pace.failures``)."""
        pace = self._paces.get(server)
        return 0 if pace is None else pace.failures

    def _after(self, key: Key, state: _Uri, failure: McpdError | None, seen: int) -> None:
        """Count the failure that leaves the server's side differing, and put the request in line.
        ``seen``: the server's refusals in a row when the request went out."""
        if state.server is state.wanted():
            state.failures = 0  # in line: subscribed exactly when wanted
        elif isinstance(failure, _RETRIED):
            state.failures += 1
            pace = self._paces.setdefault(key[0], _Pace())
            if pace.failures == seen:
                # One more in a row, unless another request out at the same time (``AT_ONCE``) was
                # counted: refused together, they say once that the server refuses now. Counted
                # each, 8 refused at once put the backoff at its cap (30 s) from the second retry on.
                pace.failures += 1
            if state.wanted():
                pace.resubscribes[key[1]] = None
            elif state.failures < UNSUBSCRIBE_ATTEMPTS:
                self._wait_unsubscribe(key, pace)
            else:
                # Perhaps it never took it (a subscribe that timed out) and says so each time.
                self._abandon(key, state)

    def _waits(self, key: Key, state: _Uri, unsubscribing: bool) -> bool:
        """Whether the request of this kind waits in line (and now does): the daemon's own, sent
        again to a server that refuses."""
        pace = self._paces.get(key[0])
        if pace is None or not pace.failures or not state.again(unsubscribing):
            return False
        if unsubscribing:
            self._wait_unsubscribe(key, pace)
        else:
            pace.resubscribes[key[1]] = None
        return True

    def _wait_unsubscribe(self, key: Key, pace: _Pace) -> None:
        pace.unsubscribes[key[1]] = None
        if len(pace.unsubscribes) > MAX_UNSUBSCRIBES_WAITING:
            oldest = next(iter(pace.unsubscribes))
            del pace.unsubscribes[oldest]
            state = self._uris.get(key[0], {}).get(oldest)
            if state is not None:
                self._abandon((key[0], oldest), state)
                self._settled((key[0], oldest), state)

    def _abandon(self, key: Key, state: _Uri) -> None:
        """An unsubscription is left to the server's next run, said in the log."""
        log.warning("resource.unsubscribe_abandoned", server=key[0], uri=key[1], attempts=state.failures)
        state.server, state.failures = False, 0

    def _taken(self, server: str) -> None:
        """The server took a request: the next one waiting goes at once (``_go_on``)."""
        pace = self._paces.get(server)
        if pace is not None:
            pace.failures = 0
            if pace.timer is not None:
                pace.timer.cancel()
                pace.timer = None

    def _go_on(self, server: str) -> None:
        """Let the next request waiting in line through when its time comes: one at a time, at once
        after the server took one, after the backoff while it refuses."""
        pace = self._paces.get(server)
        if pace is None or pace.probe is not None or pace.timer is not None:
            return
        if not pace.resubscribes and not pace.unsubscribes:
            del self._paces[server]  # a refusal after this starts from the first delay again
        elif pace.failures:
            delay = backoff_delay(pace.failures, self._retries, random.random())
            pace.timer = asyncio.get_running_loop().call_later(delay, self._let_through, server)
        else:
            self._let_through(server)

    def _let_through(self, server: str) -> None:
        pace = self._paces.get(server)
        if pace is None:
            return
        pace.timer = None
        line = pace.resubscribes or pace.unsubscribes
        if pace.probe is None and line:
            uri = next(iter(line))
            del line[uri]
            pace.probe = uri
            self._make_due((server, uri), asked=False)

    def _forget_pace(self, server: str) -> None:
        pace = self._paces.pop(server, None)
        if pace is not None and pace.timer is not None:
            pace.timer.cancel()

    def _settled(self, key: Key, state: _Uri) -> None:
        if state.settled is not None:
            state.settled.set()
            state.settled = None
        uris = self._uris.get(key[0], {})
        if state.idle() and uris.get(key[1]) is state:
            del uris[key[1]]
            if not uris:
                self._uris.pop(key[0], None)

    async def _subscribe(self, key: Key, state: _Uri, late: bool) -> McpdError | None:
        server, uri = key
        rerun, state.rerun = state.rerun, False
        patience = [join.timeout for join in state.joining.values() if join.allowed]
        # May be, while the request is out (and after, if it is cancelled: the daemon stops): the
        # last subscriber's unsubscribe meanwhile waits for the server to hear of it, as it would
        # had the server answered already.
        state.server = None
        state.attempt(unsubscribing=False)
        try:
            actor = self._supervisor.actor(server)
            # As long as the most patient subscriber waits (each gives up at its own deadline), and
            # the server's call timeout at least: the server's late yes still reaches it, none is
            # told of another's timeout, and the unsubscribe after a subscriber who gave up goes
            # once the server answered. Sent while the subscribe was still at the server, one that
            # takes a cancellation as advice could take the two the other way round, and stay
            # subscribed for nobody.
            timeout = max([actor.config.call_timeout, *patience])
            await surface_requests.subscribe_resource(actor, uri, timeout)
        except McpdError as exc:
            if self._uris.get(server, {}).get(uri) is not state:
                return exc  # its server was removed meanwhile (``forget``)
            state.server = None if isinstance(exc, _MAYBE_SENT) else False
            gone = _gone(exc)
            if gone:
                self._taken(server)  # an answer, if not a yes: the server takes requests
            elif state.holders and not state.failures and not late:
                # Said once (the first that waited in line was said): the holders keep their
                # subscription, asked for again (``_settle``).
                log.warning("resource.resubscribe_failed", server=server, uri=uri, error=exc.message)
            self._answer(key, state, exc)
            if gone and (holders := self._end(key, state, exc)):
                log.warning(
                    "resource.subscription_ended", server=server, uri=uri, holders=holders, error=exc.message
                )
            return exc
        if self._uris.get(server, {}).get(uri) is not state:
            return None
        state.server = True
        self._taken(server)
        missed = set(state.holders) if state.failures or late else set()
        event = "resource.resubscribed" if rerun or missed else "resource.subscribed"
        log.info(event, server=server, uri=uri, attempts=state.failures + 1)
        # The changes made while the server had no subscription were told to nobody.
        self._tell(missed, server, uri, None)
        self._answer(key, state, None)
        return None

    async def _unsubscribe(self, key: Key, state: _Uri) -> McpdError | None:
        server, uri = key
        state.attempt(unsubscribing=True)
        try:
            actor = self._supervisor.actor(server)
            sent = await surface_requests.unsubscribe_resource(actor, uri, UNSUBSCRIBE_TIMEOUT)
        except UnknownServer:
            return None  # gone, and its subscriptions with it
        except McpdError as exc:
            if _gone(exc):
                self._taken(server)
                return None  # no such resource: no subscription to it either
            if not state.failures:  # said once: asked again while nobody wants it (``_settle``)
                log.warning("resource.unsubscribe_failed", server=server, uri=uri, error=exc.message)
            return exc
        if sent:  # else the server is not live: its next run has no subscriptions to undo
            self._taken(server)
            log.info("resource.unsubscribed", server=server, uri=uri)
        return None


def _gone(exc: McpdError) -> bool:
    """The server refused for good: the resource does not exist, or subscriptions do not (``_FINAL``,
    or ``Unsupported``: the run did not declare them)."""
    if isinstance(exc, Unsupported):
        return True
    refusal = server_refusal(exc)
    return isinstance(exc, UnknownResource) and refusal is not None and refusal.code in _FINAL
