"""Resource updates a relay could not pass on to a host that was behind, kept one per URI.

A relay (the bridge, an HTTP stream's outbox) drops advisory messages (``mcp.ADVISORY``) for a
host that does not read, so that a chatty server cannot queue the host's answers behind megabytes
of them. A progress step or a log line lost that way is superseded by the next one, or was only
ever a record; a ``notifications/resources/updated`` is not: it is the host's one news that the
resource changed, and a host that missed it reads stale contents until the next change. So
instead of dropping one, the relay keeps it here, replacing the one kept for its URI (the latest
``_meta`` wins; the host reads the contents anyway), and sends them all once the host has caught
up: at least one update per changed URI, whatever the flood, in bounded memory.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import msgspec

from mcpd.errors import DECODE_FAILURES
from mcpd.model.mcp import RESOURCE_UPDATED
from mcpd.model.servers import SUBSCRIPTION_ENDED

HELD_UPDATES = 10_000
"""URIs held at most (a host holds at most 10,000 subscriptions, ``MAX_SUBSCRIPTIONS``; updates of
resources under one may name more): past it, an update of yet another URI is dropped."""
HELD_BYTES = 4 * 1024 * 1024
"""Bytes of updates held at most (their ``_meta`` is the server's, of any size)."""

T = TypeVar("T")
_MARK = b'"' + RESOURCE_UPDATED.encode() + b'"'
ENDED_MARK = b'"' + SUBSCRIPTION_ENDED.encode() + b'"'
"""In an update encoded, its ``_meta`` says it is the last of a subscription that ended: a relay
sends it whatever else it holds or drops."""


class _Uri(msgspec.Struct):
    uri: str


class _Updated(msgspec.Struct):
    method: str
    params: _Uri


_updated = msgspec.json.Decoder(_Updated)


def updated_uri(data: bytes) -> str | None:
    """The URI of the ``notifications/resources/updated`` encoded in ``data``; None for any other
    message."""
    if _MARK not in data[:80]:  # the method comes first in what mcpd encodes: cheap for the rest
        return None
    try:
        update = _updated.decode(data)
    except DECODE_FAILURES:
        return None
    return update.params.uri if update.method == RESOURCE_UPDATED else None


class HeldUpdates(Generic[T]):
    """Updates (``T``: as the subscriber is sent them) kept by URI."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[T, int]] = {}
        self._bytes = 0

    def __bool__(self) -> bool:
        return bool(self._held)

    def hold(self, uri: str, update: T, size: int) -> bool:
        """Keep ``update`` (of ``size`` bytes) in place of the one kept for ``uri``; False if there
        is no room left for it (dropped)."""
        before = self._held.get(uri)
        grown = self._bytes - (before[1] if before else 0) + size
        if (before is None and len(self._held) >= HELD_UPDATES) or grown > HELD_BYTES:
            return before is not None  # the update held for it still tells the host it changed
        self._held.pop(uri, None)  # then put last: sent in the order they last changed
        self._held[uri] = (update, size)
        self._bytes = grown
        return True

    def get(self, uri: str) -> T | None:
        """The update held for ``uri``, if any."""
        held = self._held.get(uri)
        return None if held is None else held[0]

    def release(self) -> list[T]:
        """All held, oldest change first; none held afterwards."""
        held, self._held, self._bytes = [update for update, _ in self._held.values()], {}, 0
        return held


def hold_message(held: HeldUpdates[bytes], data: bytes) -> bool:
    """Keep ``data`` in ``held`` if it is a resource update; False if it is not one (or dropped)."""
    uri = updated_uri(data)
    return uri is not None and held.hold(uri, data, len(data))
