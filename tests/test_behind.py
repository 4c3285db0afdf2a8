"""``mcpd.front.behind.Behind``: the resource updates of a subscriber that is behind, held until it
has room, on a real event loop (its timer is the loop's)."""

from __future__ import annotations

import anyio
import pytest

from mcpd.front.behind import ADVICE_RETRY, Behind
from mcpd.updates import HELD_BYTES

pytestmark = pytest.mark.anyio


async def test_updates_held_while_behind_are_sent_once_there_is_room() -> None:
    """Behind, the latest update of each URI is held; once the subscriber has room they go, the
    oldest change first."""
    room = False
    sent: list[str] = []
    behind: Behind[str] = Behind(lambda: room, sent.append, size=len, dropped=list)
    for update in ("a1", "b1", "a2"):
        behind.offer(update[0], update)
    assert sent == []
    room = True
    with anyio.fail_after(5):
        while not sent:
            await anyio.sleep(ADVICE_RETRY / 5)
    assert sent == ["b1", "a2"]
    behind.close()


async def test_an_update_offered_after_close_is_neither_sent_nor_looked_after() -> None:
    """A session closes its ``Behind`` before its subscriptions are dropped (a request of its may
    still run): an update delivered in between, to a subscriber that is behind, is ignored. Before,
    it started the timer again, which looked at the gone subscriber every ``ADVICE_RETRY`` s until
    its connection drained, and then sent to it."""
    room = False
    looks = 0
    sent: list[str] = []

    def has_room() -> bool:
        nonlocal looks
        looks += 1
        return room

    behind: Behind[str] = Behind(has_room, sent.append, size=len, dropped=list)
    behind.offer("a", "a1")
    behind.close()
    behind.offer("a", "a2")
    looked = looks
    room = True
    await anyio.sleep(ADVICE_RETRY * 3)
    assert (sent, looks) == ([], looked)


async def test_an_update_past_the_bounds_of_what_is_held_is_told_as_dropped() -> None:
    """Past ``HELD_BYTES`` (or ``HELD_UPDATES`` URIs) an update of yet another URI is dropped, and
    ``dropped`` hears of each (the subscriber counts and logs it), while updates of URIs already
    held still replace theirs. Before, ``Behind`` ignored ``HeldUpdates.hold``'s False: a socket
    client or host session lost them with no word."""
    sent: list[str] = []
    drops: list[None] = []
    big = HELD_BYTES // 2
    behind: Behind[str] = Behind(
        lambda: False, sent.append, size=lambda u: big, dropped=lambda: drops.append(None)
    )
    for uri in ("a", "b", "c", "a", "d"):
        behind.offer(uri, uri)
    assert len(drops) == 2  # c and d: a and b fill it, and a replaces itself
    behind.close()


async def test_flush_sends_what_is_held_at_once() -> None:
    """``flush`` sends what is held, room or not (a ``list_changed`` must not overtake it), and
    the timer that waited for room is stopped."""
    sent: list[str] = []
    behind: Behind[str] = Behind(lambda: False, sent.append, size=len, dropped=list)
    for update in ("a1", "b1"):
        behind.offer(update[0], update)
    behind.flush()
    assert sent == ["a1", "b1"]
    await anyio.sleep(ADVICE_RETRY * 2)
    assert sent == ["a1", "b1"]
    behind.close()


async def test_the_last_update_of_an_ended_subscription_is_sent_after_those_held_never_dropped() -> None:
    """A subscriber far behind, its held updates at ``HELD_BYTES``: the update that ends one of its
    subscriptions (``final``) is sent at once, after those held, and nothing is dropped. Before, it
    was held like any other, and past the bounds dropped: a socket client never learnt that its
    subscription had ended (the daemon's only word of it), and took it again at its next reconnect."""
    sent: list[str] = []
    drops: list[None] = []
    big = HELD_BYTES // 2
    behind: Behind[str] = Behind(
        lambda: False, sent.append, size=lambda u: big, dropped=lambda: drops.append(None)
    )
    for uri in ("a", "b"):
        behind.offer(uri, uri)
    behind.offer("c", "c ended", final=True)
    assert sent == ["a", "b", "c ended"]
    assert not drops
    behind.close()
