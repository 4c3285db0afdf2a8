"""Resource updates for a subscriber that falls behind: held, not dropped, until it catches up.

A host session, or a socket client, that does not take what it is sent has no room for advisory
notifications (``mcp.ADVISORY``): progress and log messages are dropped then, but a resource update
is the subscriber's one news that the resource changed, so it is held (``HeldUpdates``: the latest
per URI, bounded) and sent once the subscriber has room again, or at once (``flush``) ahead of a
message that must not overtake them: a resource list change, which may remove their resources.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from mcpd.updates import HeldUpdates

T = TypeVar("T")

ADVICE_RETRY = 0.25
"""Seconds between looks at a subscriber that is behind, while updates wait for it."""


class Advice(Protocol):
    """A subscriber's side of advisory notifications (a daemon socket connection's)."""

    def room_for_advice(self) -> bool:
        """Whether it has room for them now; asking drops nothing (an update is held, not dropped)."""
        ...

    def drop_advice(self, method: str) -> None:
        """One of ``method`` was dropped for it: counted, and said (once) in the log."""
        ...


class _AlwaysRoom:
    def room_for_advice(self) -> bool:
        return True

    def drop_advice(self, method: str) -> None:
        pass  # never asked: there is always room


ALWAYS_ROOM: Advice = _AlwaysRoom()
"""For a front end that bounds what it keeps for a host itself (HTTP's outboxes)."""


class Behind(Generic[T]):
    """The updates of one subscriber, which says whether it has ``room`` (cheap: it is asked at
    each update, and every ``ADVICE_RETRY`` s while some are held), and takes them with ``send``
    (never waits); ``size`` tells an update's bytes, about (asked only of one held: it may cost an
    encoding); ``dropped`` is told of each update there was no room to hold (``HeldUpdates``'
    bounds). ``close`` it with the subscriber."""

    def __init__(
        self,
        room: Callable[[], bool],
        send: Callable[[T], object],
        *,
        size: Callable[[T], int],
        dropped: Callable[[], object],
    ) -> None:
        self._room = room
        self._send = send
        self._size = size
        self._dropped = dropped
        self._held: HeldUpdates[T] = HeldUpdates()
        self._due: asyncio.TimerHandle | None = None
        self._closed = False

    def offer(self, uri: str, update: T, *, final: bool = False) -> None:
        """Send ``update`` of ``uri``, or hold it; one held for the same URI is replaced by it, and
        the others go first (they are older). Ignored once closed. A ``final`` one (the last of a
        subscription that ended, ``ends_subscription``) is sent at once, after those held, room or
        not: held, it could be dropped past ``HeldUpdates``' bounds, and the subscriber would not
        learn that it lost the subscription (a socket client's reconnect took it again). There is at
        most one for each subscription the subscriber held."""
        if self._closed:
            return
        if final:
            self.flush()
            self._send(update)
            return
        if not self._held and self._room():
            self._send(update)
            return
        if not self._held.hold(uri, update, self._size(update)):
            self._dropped()
        self._release()

    def flush(self) -> None:
        """Send what is held now, room or not: for a message that must not overtake them (a
        ``list_changed`` that may remove their resources). Bounded: ``HeldUpdates``."""
        self._stop()
        for update in self._held.release():
            self._send(update)

    def close(self) -> None:
        """For good: an update still delivered (the subscriber is dropped after its session closes
        this) would otherwise start the timer again, looking at a gone subscriber every
        ``ADVICE_RETRY`` s for as long as its connection's unsent bytes stay."""
        self._closed = True
        self._stop()
        self._held.release()

    def _stop(self) -> None:
        if self._due is not None:
            self._due.cancel()
            self._due = None

    def _release(self) -> None:
        self._stop()
        if self._room():
            self.flush()
        else:
            self._due = asyncio.get_running_loop().call_later(ADVICE_RETRY, self._release)
