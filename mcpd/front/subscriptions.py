"""Resource subscriptions shared by every client: each server is subscribed once per URI.

Subscribers (socket connections, host sessions) subscribe by (server, the server's own
URI). The first subscriber of a URI makes the daemon send ``resources/subscribe`` to the
server; the last one to leave (or to disconnect: ``drop``) makes it send
``resources/unsubscribe``. A server that starts a new run (a restart, a reload) knows no
subscriptions, so they are sent again as soon as it runs. ``ResourceUpdated`` events go to
the subscribers of that URI, and of any URI it lies under (MCP allows an update for a
sub-resource of the one subscribed).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Hashable
from typing import Any

import anyio
import structlog

from mcpd.errors import McpdError, TooManyRequests
from mcpd.front.background import Background
from mcpd.model.servers import ResourceUpdated, ServerEvent, StateChanged
from mcpd.model.states import ServerState
from mcpd.supervisor import surface_requests
from mcpd.supervisor.supervisor import Supervisor

log = structlog.get_logger("mcpd.front")

Deliver = Callable[[str, str, dict[str, Any] | None], None]
"""Tells one subscriber of an update: (server, the server's own URI, the notification's ``_meta``);
must not block."""
Key = tuple[str, str]

UNSUBSCRIBE_TIMEOUT = 10.0
"""Seconds an ``resources/unsubscribe`` nobody waits for may take."""

MAX_SUBSCRIPTIONS = 10_000
"""Subscriptions one subscriber may hold (a host watches a handful): each costs memory for as long
as it is held, and a client taking millions would grow the daemon without bound."""


async def _each(work: Callable[[Key], Coroutine[Any, Any, None]], keys: list[Key]) -> None:
    for key in keys:
        await work(key)


def covers(subscribed: str, updated: str) -> bool:
    """``updated`` is ``subscribed`` or a resource under it (``file:///d/`` covers ``file:///d/a``)."""
    if updated == subscribed:
        return True
    if not updated.startswith(subscribed):
        return False
    return subscribed.endswith("/") or updated[len(subscribed)] in "/?#"


class Subscriptions:
    """``on_event`` must be a supervisor listener, and ``run()`` a task of the daemon."""

    def __init__(self, supervisor: Supervisor, limit: int = MAX_SUBSCRIPTIONS) -> None:
        self._supervisor = supervisor
        self._limit = limit
        self._holders: dict[Key, set[Hashable]] = {}
        """Who holds each subscription; a key is here from the first subscriber's request on."""
        self._uris: dict[str, set[str]] = {}
        """The URIs of ``_holders`` by server: an update looks at its own server's only (a server
        that sends updates by the thousand, beside thousands of other subscriptions, costs what its
        own cost)."""
        self._owned: dict[Hashable, set[Key]] = {}
        self._deliver: dict[Hashable, Deliver] = {}
        self._locks: dict[str, anyio.Lock] = {}
        """One (un)subscription per server at a time, so that it sees them in the order decided here
        (one lock per server rather than per URI: their number stays bounded)."""
        self._background = Background()
        self.run = self._background.run
        """Own the unsubscriptions and re-subscriptions nobody waits for, until cancelled."""

    def register(self, owner: Hashable, deliver: Deliver) -> bool:
        """Make ``owner`` a subscriber that hears through ``deliver``; False if it already was one."""
        if owner in self._deliver:
            return False
        self._deliver[owner] = deliver
        self._owned[owner] = set()
        return True

    def held(self, owner: Hashable, server: str, uri: str) -> bool:
        """Whether ``owner`` holds the subscription to ``server``'s ``uri`` (or is taking it now)."""
        return (server, uri) in self._owned.get(owner, ())

    async def subscribe(
        self,
        owner: Hashable,
        server: str,
        uri: str,
        timeout: float | None = None,
        wanted: Callable[[], bool] | None = None,
    ) -> None:
        """Subscribe a registered ``owner``; raises what ``ServerActor.subscribe_resource`` raises
        (and ``UnknownServer``; ``TooManyRequests`` past the limit), the subscription then not taken.
        With ``wanted``, nothing is taken unless it still says True when the server's turn comes: a
        subscription the owner withdrew while this one waited (``unsubscribe`` found none to drop)."""
        key = (server, uri)
        actor = self._supervisor.actor(server)
        async with self._lock(key):
            if wanted is not None and not wanted():
                return
            owned = self._owned[owner]
            if key not in owned and len(owned) >= self._limit:
                raise TooManyRequests(
                    f"this client holds {len(owned)} subscriptions, the most one may: unsubscribe some first",
                    {"limit": self._limit},
                )
            holders = self._holders.setdefault(key, set())
            self._uris.setdefault(server, set()).add(uri)
            first = not holders
            holders.add(owner)
            owned.add(key)
            if not first:
                return
            try:
                await surface_requests.subscribe_resource(actor, uri, timeout)
            except BaseException:
                self._release(owner, key)
                raise
        log.info("resource.subscribed", server=server, uri=uri)

    async def unsubscribe(self, owner: Hashable, server: str, uri: str, timeout: float | None = None) -> bool:
        """Withdraw ``owner``'s subscription; False if it held none. The server hears of it when
        ``owner`` was the last subscriber (its refusal is logged: nobody wants the updates any more)."""
        key = (server, uri)
        if key not in self._owned.get(owner, ()):
            return False
        async with self._lock(key):
            if self._release(owner, key):
                await self._unsubscribe(key, timeout or UNSUBSCRIBE_TIMEOUT)
        return True

    def drop(self, owner: Hashable) -> None:
        """``owner`` is gone: release all it held, and unsubscribe what nobody holds any more."""
        self._deliver.pop(owner, None)
        freed = [key for key in list(self._owned.get(owner, ())) if self._release(owner, key)]
        self._in_background(self._unsubscribe_later, freed)
        self._owned.pop(owner, None)

    def on_event(self, event: ServerEvent) -> None:
        """Deliver updates to their subscribers; subscribe again when a server starts a new run."""
        if isinstance(event, ResourceUpdated):
            owners: set[Hashable] = set()  # once each, however many of its subscriptions cover the URI
            for uri in self._uris.get(event.server, ()):
                if covers(uri, event.uri):
                    owners |= self._holders[event.server, uri]
            for owner in owners:
                deliver = self._deliver.get(owner)
                if deliver is None:
                    continue
                try:
                    deliver(event.server, event.uri, event.meta)
                except Exception:
                    # One subscriber's failure must not keep the update from the others.
                    log.exception("subscription.delivery_failed", server=event.server, uri=event.uri)
        elif isinstance(event, StateChanged) and (event.old, event.new) == (
            ServerState.STARTING,
            ServerState.RUNNING,
        ):
            uris = sorted(self._uris.get(event.server, ()))
            self._in_background(self._resubscribe, [(event.server, uri) for uri in uris])

    # -- inside ------------------------------------------------------------------------------------

    def _lock(self, key: Key) -> anyio.Lock:
        return self._locks.setdefault(key[0], anyio.Lock())

    def _release(self, owner: Hashable, key: Key) -> bool:
        """Take ``key`` from ``owner``; True if nobody holds it any more."""
        self._owned.get(owner, set()).discard(key)
        holders = self._holders.get(key, set())
        holders.discard(owner)
        if holders:
            return False
        self._holders.pop(key, None)
        uris = self._uris.get(key[0], set())
        uris.discard(key[1])
        if not uris:
            self._uris.pop(key[0], None)
        return True

    def _in_background(self, work: Callable[[Key], Coroutine[Any, Any, None]], keys: list[Key]) -> None:
        """``work`` on each of ``keys``, a server's one after another in one task: they take the
        server's lock in turn anyway, and a task per key (thousands, for a client that subscribed to
        thousands of URIs) ran its first step all in one loop iteration, a second for 5,000, during
        which no other client was answered."""
        by_server: dict[str, list[Key]] = {}
        for key in keys:
            by_server.setdefault(key[0], []).append(key)
        for server_keys in by_server.values():
            self._background.start(_each, work, server_keys)

    async def _unsubscribe_later(self, key: Key) -> None:
        async with self._lock(key):
            if key not in self._holders:  # nobody subscribed again meanwhile
                await self._unsubscribe(key, UNSUBSCRIBE_TIMEOUT)

    async def _unsubscribe(self, key: Key, timeout: float) -> None:
        server, uri = key
        try:
            await surface_requests.unsubscribe_resource(self._supervisor.actor(server), uri, timeout)
        except McpdError as exc:
            log.info("resource.unsubscribe_failed", server=server, uri=uri, error=exc.message)
        else:
            log.info("resource.unsubscribed", server=server, uri=uri)

    async def _resubscribe(self, key: Key) -> None:
        server, uri = key
        async with self._lock(key):
            if not self._holders.get(key):
                return
            try:
                await surface_requests.subscribe_resource(self._supervisor.actor(server), uri)
            except McpdError as exc:
                # The subscribers keep their subscription: the next run is asked again.
                log.warning("resource.resubscribe_failed", server=server, uri=uri, error=exc.message)
            else:
                log.info("resource.resubscribed", server=server, uri=uri)
