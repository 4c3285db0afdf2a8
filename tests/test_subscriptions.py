"""The shared subscriptions (``mcpd.front.subscriptions``) against a real server whose
``resources/(un)subscribe`` wait while a file exists (``mcpd.testing.fullserver --hold``), or are
refused while another does (``--refuse``; with the code it holds, if any): requests that cross,
are cancelled or withdrawn while one is at the server, refused, or cut off by a restart. After any
of them settles, the server is subscribed to a URI exactly when a subscriber holds it."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import tracemalloc
from collections.abc import AsyncIterator, Callable, Mapping, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import structlog
from test_front import initialize, peer

from mcpd.client.aio import connect
from mcpd.config.model import Config, RestartPolicy
from mcpd.errors import CallTimeout, McpdError, UnknownResource, UnknownServer
from mcpd.front import subscriptions
from mcpd.front.subscriptions import UNSUBSCRIBE_ATTEMPTS, Subscriptions
from mcpd.model.mcp import RESOURCE_UPDATED, SUBSCRIPTIONS_NOTIFICATION, SessionState
from mcpd.model.servers import SUBSCRIPTION_ENDED, ResourceUpdated
from mcpd.model.states import ServerState
from mcpd.supervisor import surface_requests
from mcpd.supervisor.supervisor import Supervisor, open_supervisor
from mcpd.testing import fixture_server, fullserver_config, fullserver_toml
from mcpd.testing.daemon import running_daemon

pytestmark = pytest.mark.anyio


@dataclass
class Held:
    """A running server behind ``subscriptions``; its (un)subscribes wait while ``gate`` exists,
    and are refused while ``refuse`` does."""

    supervisor: Supervisor
    subscriptions: Subscriptions
    gate: Path
    refuse: Path

    async def read(self, uri: str) -> Any:
        """What the server says of itself at ``uri`` (decoded JSON)."""
        result = await surface_requests.read_resource(self.supervisor.actor("full"), uri, timeout=10)
        return json.loads(result.contents[0].text or "null")

    async def server_has(self) -> list[str]:
        """The URIs the server itself is subscribed to."""
        has: list[str] = await self.read("full://subscribed")
        return has

    async def until_held(self, count: int) -> None:
        """Wait until ``count`` (un)subscribes wait at the server."""
        with anyio.fail_after(30):
            while await self.read("full://held") != count:
                await anyio.sleep(0.02)

    async def settles_at(self, expected: Callable[[], list[str]]) -> list[str]:
        """The server's subscriptions once they stop differing from ``expected()`` (or after 5 s):
        the daemon's own requests to it are over by then."""
        with anyio.move_on_after(5):
            while await self.server_has() != expected():
                await anyio.sleep(0.05)
        return await self.server_has()


QUICK_RETRIES = RestartPolicy(initial_delay=0.1, max_delay=0.4)
"""A refused (un)subscription is sent again within 0.5 s."""


@asynccontextmanager
async def held_server(
    tmp_path: Path, retries: RestartPolicy = QUICK_RETRIES, **settings: Any
) -> AsyncIterator[Held]:
    """``settings``: of the server's config."""
    gate, refuse = tmp_path / "gate", tmp_path / "refuse"
    server = fullserver_config("full", "--hold", str(gate), "--refuse", str(refuse), **settings)
    config = Config(source="<test>", servers=(server,))
    async with open_supervisor(config) as supervisor:
        await supervisor.actor("full").wait_state(ServerState.RUNNING, timeout=60)
        subscriptions = Subscriptions(supervisor, retries=retries)
        supervisor.add_listener(subscriptions.on_event)
        async with anyio.create_task_group() as tg:
            await tg.start(subscriptions.run)
            yield Held(supervisor, subscriptions, gate, refuse)
            tg.cancel_scope.cancel()


def ignore(server: str, uri: str, meta: object) -> None:
    pass


async def subscribe_in(scope: anyio.CancelScope, hub: Subscriptions, owner: str, uri: str) -> None:
    """``owner``'s subscribe to ``uri``, until ``scope`` is cancelled; refusals ignored."""
    with scope, contextlib.suppress(McpdError):
        await hub.subscribe(owner, "full", uri)


async def unsubscribe(hub: Subscriptions, owner: str, uri: str) -> None:
    await hub.unsubscribe(owner, "full", uri)


async def test_a_subscribe_cancelled_while_the_server_takes_it_leaves_the_server_unsubscribed(
    tmp_path: Path,
) -> None:
    """A subscriber cancels (its client gave up, or left) while its ``resources/subscribe`` is at
    the server, which takes it all the same: the server is unsubscribed once it answered, nobody
    holding it. Before, the cancelled request released the subscription on the daemon's side only,
    and the server sent updates for it until it stopped."""
    async with held_server(tmp_path) as held:
        held.subscriptions.register("gone", ignore)
        held.gate.touch()
        async with anyio.create_task_group() as tg:
            tg.start_soon(held.subscriptions.subscribe, "gone", "full", "full://r/0")
            await held.until_held(1)
            tg.cancel_scope.cancel()
        held.gate.unlink()
        await held.until_held(0)  # the server took it
        assert await held.settles_at(list) == []
        assert not held.subscriptions.held("gone", "full", "full://r/0")


async def test_a_subscribe_the_server_is_slow_to_take_holds_up_no_other_uris(tmp_path: Path) -> None:
    """One host's subscribe waits at the server (a resource slow to watch, a server that never
    answers it): another host's subscribe to another URI of the server's goes to the server
    meanwhile, not after it. Before, one request at a time went per server: the second host waited
    for the first's answer (19.5 s behind a subscribe the server took 20 s over), or past its own
    deadline, failed by another host's."""
    async with held_server(tmp_path) as held:
        hub = gated(held)
        hub.register("other", ignore)
        async with anyio.create_task_group() as tg:
            tg.start_soon(hub.subscribe, "host", "full", "full://r/0")
            await held.until_held(1)
            tg.start_soon(hub.subscribe, "other", "full", "full://r/1")
            with anyio.fail_after(5):
                await held.until_held(2)
            held.gate.unlink()
        assert hub.held("host", "full", "full://r/0") and hub.held("other", "full", "full://r/1")
        assert await held.settles_at(lambda: ["full://r/0", "full://r/1"]) == ["full://r/0", "full://r/1"]


async def test_a_subscribe_the_owner_withdraws_before_the_servers_turn_is_not_taken(tmp_path: Path) -> None:
    """A host sends subscribe and then unsubscribe of one URI without waiting for the first's answer,
    while another subscription of the server's is at the server: the unsubscribe withdraws the
    subscribe, which returns, nothing taken. Before, the unsubscribe found nothing to drop yet (the
    subscribe waited for the server's turn) and the subscribe then took it: the host got updates it
    had unsubscribed from."""
    async with held_server(tmp_path) as held:
        hub = gated(held)
        async with anyio.create_task_group() as tg:
            tg.start_soon(hub.subscribe, "host", "full", "full://r/1")
            await held.until_held(1)
            tg.start_soon(hub.subscribe, "host", "full", "full://r/0")
            await anyio.wait_all_tasks_blocked()
            assert await hub.unsubscribe("host", "full", "full://r/0")
            held.gate.unlink()
        await held.until_held(0)  # the server took both subscribes: none of them changes it later
        assert [hub.held("host", "full", f"full://r/{i}") for i in range(2)] == [False, True]
        assert await held.settles_at(lambda: ["full://r/1"]) == ["full://r/1"]


async def test_a_subscribe_repeated_and_cancelled_while_the_first_is_at_the_server_holds_nothing_early(
    tmp_path: Path,
) -> None:
    """A host sends the same subscribe twice and cancels the second while the first is at the
    server: it holds nothing until the server answered (what the relay is told follows ``held``),
    then holds it, the server subscribed once. Before, it held it from the first request on, and the
    cancelled one told its relay it was added, even had the server then refused it."""
    async with held_server(tmp_path) as held:
        hub = gated(held)
        async with anyio.create_task_group() as tg:
            tg.start_soon(hub.subscribe, "host", "full", "full://r/0")
            await held.until_held(1)
            again = anyio.CancelScope()
            tg.start_soon(subscribe_in, again, hub, "host", "full://r/0")
            await anyio.wait_all_tasks_blocked()
            again.cancel()
            await anyio.wait_all_tasks_blocked()
            assert not hub.held("host", "full", "full://r/0")
            held.gate.unlink()
        assert hub.held("host", "full", "full://r/0")
        assert await held.settles_at(lambda: ["full://r/0"]) == ["full://r/0"]


async def test_any_interleaving_of_subscribers_settles_with_the_server_subscribed_as_they_hold(
    tmp_path: Path,
) -> None:
    """Three subscribers subscribe, unsubscribe, cancel and leave over three URIs, none waiting for
    another, while the server holds its answers at times: once all is done, the server is subscribed
    to exactly the URIs some subscriber holds. Seeded, so a failure is reproducible."""
    rng = random.Random(20261127)
    uris = [f"full://r/{i}" for i in range(3)]
    async with held_server(tmp_path) as held:
        hub = held.subscriptions
        owners = ["a", "b", "c"]
        for owner in owners:
            hub.register(owner, ignore)

        for _ in range(8):
            held.gate.touch()
            async with anyio.create_task_group() as tg:
                for _ in range(12):
                    owner, uri, what = rng.choice(owners), rng.choice(uris), rng.random()
                    if what < 0.55:
                        scope = anyio.CancelScope()
                        tg.start_soon(subscribe_in, scope, hub, owner, uri)
                        if what < 0.1:  # cancelled once it waits for the server
                            await anyio.wait_all_tasks_blocked()
                            scope.cancel()
                    elif what < 0.9:
                        tg.start_soon(unsubscribe, hub, owner, uri)
                    else:
                        hub.drop(owner)
                        hub.register(owner, ignore)
                    if rng.random() < 0.3:
                        await anyio.wait_all_tasks_blocked()
                held.gate.unlink()
            await held.until_held(0)

            def holding() -> list[str]:
                return sorted(u for u in uris if any(hub.held(o, "full", u) for o in owners))

            assert await held.settles_at(holding) == holding()


async def test_a_subscribe_behind_another_uri_at_the_server_keeps_to_its_own_deadline(tmp_path: Path) -> None:
    """A subscriber's ``timeout`` bounds its whole wait, its turn at the server included: while
    another URI's subscribe is held at the server (and its own too, now that it is not behind it),
    it gets ``CallTimeout`` at its deadline, holds nothing, and the server is not subscribed to it
    once it answered them (the unsubscribe goes after the server's late yes). Before, it waited
    for the URIs before it (each a request with its own deadline: 10 s for an unsubscribe, as many
    as were due), then for its own: 17 s for a subscribe of 1 s behind one of 6 s."""
    async with held_server(tmp_path) as held:
        hub = held.subscriptions
        hub.register("a", ignore)
        hub.register("b", ignore)
        held.gate.touch()
        async with anyio.create_task_group() as tg:
            tg.start_soon(hub.subscribe, "a", "full", "full://r/0")
            await held.until_held(1)
            started = anyio.current_time()
            with pytest.raises(CallTimeout):
                await hub.subscribe("b", "full", "full://r/1", 1.0)
            assert anyio.current_time() - started < 3
            assert not hub.held("b", "full", "full://r/1")
            held.gate.unlink()
        await held.until_held(0)  # the server took both subscribes: none of them changes it later
        assert hub.held("a", "full", "full://r/0")
        assert await held.settles_at(lambda: ["full://r/0"]) == ["full://r/0"]


async def test_a_subscribe_with_a_short_timeout_cuts_no_other_subscribers_request_short(
    tmp_path: Path,
) -> None:
    """Two subscribers join one URI at once, the first with a short timeout: the server's request
    lasts as long as the longer one wants, so the server's late yes reaches the second, and the
    first alone gets ``CallTimeout``. Before, the request took the first's timeout, and its
    ``CallTimeout`` was the answer of every subscriber waiting for it."""
    async with held_server(tmp_path) as held:
        hub = held.subscriptions
        hub.register("short", ignore)
        hub.register("long", ignore)
        held.gate.touch()
        async with anyio.create_task_group() as tg:

            async def short() -> None:
                with pytest.raises(CallTimeout):
                    await hub.subscribe("short", "full", "full://r/0", 1.0)
                await anyio.sleep(1)  # the server holds it past the short one's deadline
                held.gate.unlink()

            tg.start_soon(short)
            tg.start_soon(hub.subscribe, "long", "full", "full://r/0", 30.0)
        assert [hub.held(owner, "full", "full://r/0") for owner in ("short", "long")] == [False, True]
        assert await held.settles_at(lambda: ["full://r/0"]) == ["full://r/0"]


async def test_an_unsubscribe_with_timeout_zero_does_not_wait_for_the_server(tmp_path: Path) -> None:
    """``timeout=0`` means what it means for a subscribe (and a call): no wait. The last holder's
    unsubscribe returns at once while the server holds its ``resources/unsubscribe``, and the server
    is unsubscribed all the same once it answers. Before, 0 fell back to the 10 s default
    (``timeout or UNSUBSCRIBE_TIMEOUT``)."""
    async with held_server(tmp_path) as held:
        hub = held.subscriptions
        hub.register("host", ignore)
        await hub.subscribe("host", "full", "full://r/0")
        held.gate.touch()
        started = anyio.current_time()
        assert await hub.unsubscribe("host", "full", "full://r/0", 0)
        assert anyio.current_time() - started < 2
        await held.until_held(1)  # the server's task goes on with it
        held.gate.unlink()
        assert await held.settles_at(list) == []


async def kill_and_wait_for_the_next_run(held: Held) -> None:
    """SIGKILL the server's process, and wait until its next run is live."""
    actor = held.supervisor.actor("full")
    pid = actor.status().pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    with anyio.fail_after(30):
        while actor.status().pid in (None, pid) or actor.state is not ServerState.RUNNING:
            await anyio.sleep(0.02)


async def until_logged(logged: list[MutableMapping[str, Any]], event: str) -> MutableMapping[str, Any]:
    """The first ``event`` in ``logged``, once there is one."""
    with anyio.fail_after(30):
        while not (found := [e for e in logged if e["event"] == event]):
            await anyio.sleep(0.02)
    return found[0]


async def test_a_resubscribe_the_new_run_refuses_is_retried_while_held(tmp_path: Path) -> None:
    """The server is killed (-9) and its new run refuses the subscription it is asked for again
    (not ready for it yet): the failure is logged once, the request is sent again (with backoff)
    until the server takes it, and the holder then hears that the resource may have changed (its
    updates were lost meanwhile) and gets the new run's updates. Before, the holder kept a
    subscription the server never had again: no update reached it for good."""
    async with held_server(tmp_path) as held:
        hub = held.subscriptions
        heard: list[str] = []
        hub.register("host", lambda server, uri, meta: heard.append(uri))
        await hub.subscribe("host", "full", "full://r/0")
        held.refuse.touch()
        with structlog.testing.capture_logs() as logged:
            await kill_and_wait_for_the_next_run(held)
            failed = await until_logged(logged, "resource.resubscribe_failed")
            await anyio.sleep(1)  # retried meanwhile, refused again: said once
            assert [e["event"] for e in logged].count("resource.resubscribe_failed") == 1
            assert failed["uri"] == "full://r/0"
            held.refuse.unlink()
            assert await held.settles_at(lambda: ["full://r/0"]) == ["full://r/0"]
            assert (await until_logged(logged, "resource.resubscribed"))["attempts"] > 2
        assert hub.held("host", "full", "full://r/0")
        assert heard == ["full://r/0"]  # the news of what it may have missed
        await held.supervisor.actor("full").call_tool("touch", {}, timeout=10)
        with anyio.fail_after(10):
            while len(heard) < 2:
                await anyio.sleep(0.02)


async def test_a_resubscribe_the_new_run_does_not_answer_in_time_is_retried_while_held(
    tmp_path: Path,
) -> None:
    """The server is killed (-9) and its new run does not answer the subscription asked for again
    within the call timeout (busy starting): it is sent again until one is answered, and the holder
    keeps it. Before, the timeout was logged and the subscription left to chance (the late yes of a
    server that takes a request cut short)."""
    async with held_server(tmp_path, call_timeout=0.5) as held:
        hub = held.subscriptions
        hub.register("host", ignore)
        await hub.subscribe("host", "full", "full://r/0")
        held.gate.touch()
        with structlog.testing.capture_logs() as logged:
            await kill_and_wait_for_the_next_run(held)
            failed = await until_logged(logged, "resource.resubscribe_failed")
            assert "did not answer within 0.5s" in failed["error"]
            await held.until_held(2)  # the first one timed out, the next one is at the server
            held.gate.unlink()
            assert (await until_logged(logged, "resource.resubscribed"))["attempts"] >= 2
        assert hub.held("host", "full", "full://r/0")
        assert await held.server_has() == ["full://r/0"]


def gated(held: Held) -> Subscriptions:
    """``host`` registered; the server holds (un)subscribes from now on until ``gate`` goes."""
    hub = held.subscriptions
    hub.register("host", ignore)
    held.gate.touch()
    return hub


async def subscribed_then_refused(held: Held) -> Subscriptions:
    """``host`` holds ``full://r/0`` at the server, which refuses (un)subscribes from now on."""
    hub = held.subscriptions
    hub.register("host", ignore)
    await hub.subscribe("host", "full", "full://r/0")
    held.refuse.touch()
    return hub


async def test_an_unsubscribe_the_server_refuses_is_retried_until_it_takes_it(tmp_path: Path) -> None:
    """The last holder unsubscribes and the server refuses the ``resources/unsubscribe``: it is
    logged once and sent again (with backoff) until the server takes it, as nobody holds the URI.
    Before, the refusal was logged and the server kept the subscription, sending updates for a URI
    nobody held for as long as it ran."""
    async with held_server(tmp_path) as held:
        hub = await subscribed_then_refused(held)
        with structlog.testing.capture_logs() as logged:
            assert await hub.unsubscribe("host", "full", "full://r/0")
            await until_logged(logged, "resource.unsubscribe_failed")
            await anyio.sleep(0.5)  # retried meanwhile, refused again: said once
            assert [e["event"] for e in logged].count("resource.unsubscribe_failed") == 1
            assert await held.server_has() == ["full://r/0"]
            held.refuse.unlink()
            assert await held.settles_at(list) == []
            await until_logged(logged, "resource.unsubscribed")
            assert "resource.unsubscribe_abandoned" not in [e["event"] for e in logged]


async def test_withdrawing_a_subscribe_at_the_server_returns_once_the_server_is_unsubscribed(
    tmp_path: Path,
) -> None:
    """The last subscriber unsubscribes while its subscribe is at the server (which takes it once
    released): the unsubscribe returns once the server heard of the unsubscription too, as it does
    for a subscription the server had. Before, it returned at once, the server still to take the
    subscription and to be told to drop it."""
    async with held_server(tmp_path) as held:
        hub = gated(held)
        returned = anyio.Event()

        async def unsubscribe_then_note() -> None:
            await hub.unsubscribe("host", "full", "full://r/0")
            returned.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(hub.subscribe, "host", "full", "full://r/0")
            await held.until_held(1)
            tg.start_soon(unsubscribe_then_note)
            await anyio.wait_all_tasks_blocked()
            assert not returned.is_set()
            held.gate.unlink()
            with anyio.fail_after(10):
                await returned.wait()
            assert await held.server_has() == []  # at once: not after a while


async def test_an_unsubscribe_the_server_always_refuses_is_left_to_its_next_run(tmp_path: Path) -> None:
    """An unsubscription the server keeps refusing (one that never took the subscription may say
    so each time) is sent ``UNSUBSCRIBE_ATTEMPTS`` times, then left, said in the log: nobody holds
    it, and the server's next run has it no more."""
    async with held_server(tmp_path) as held:
        hub = await subscribed_then_refused(held)
        with structlog.testing.capture_logs() as logged:
            assert await hub.unsubscribe("host", "full", "full://r/0")
            left = await until_logged(logged, "resource.unsubscribe_abandoned")
            assert left["attempts"] == UNSUBSCRIBE_ATTEMPTS
            await anyio.sleep(0.5)  # nothing more is sent
            assert [e["event"] for e in logged].count("resource.unsubscribe_abandoned") == 1
        assert await held.server_has() == ["full://r/0"]


async def test_an_unsubscribe_after_failed_resubscribes_gets_its_own_attempts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder leaves after its resubscribes to a new run that does not answer in time failed
    ``UNSUBSCRIBE_ATTEMPTS`` times: the unsubscription that follows is sent its own
    ``UNSUBSCRIBE_ATTEMPTS`` times, its first failure logged, before it is left. Before, the count
    went on from the subscribes' failures: one unsubscribe was sent, its failure not logged, and the
    log said it was left after more attempts than were made."""
    monkeypatch.setattr(subscriptions, "UNSUBSCRIBE_TIMEOUT", 0.5)
    async with held_server(tmp_path, call_timeout=0.5) as held:
        hub = held.subscriptions
        hub.register("host", ignore)
        await hub.subscribe("host", "full", "full://r/0")
        held.gate.touch()  # every (un)subscribe from now on waits at the server: none is answered
        await kill_and_wait_for_the_next_run(held)
        await held.until_held(UNSUBSCRIBE_ATTEMPTS)  # that many resubscribes were sent
        before = await held.read("full://held")
        with structlog.testing.capture_logs() as logged:
            assert await hub.unsubscribe("host", "full", "full://r/0", timeout=0)
            left = await until_logged(logged, "resource.unsubscribe_abandoned")
        sent = await held.read("full://held") - before  # and a resubscribe sent meanwhile, perhaps
        assert left["attempts"] == UNSUBSCRIBE_ATTEMPTS
        assert sent in (UNSUBSCRIBE_ATTEMPTS, UNSUBSCRIBE_ATTEMPTS + 1)
        assert [e["event"] for e in logged].count("resource.unsubscribe_failed") == 1
        held.gate.unlink()


async def _cycled(hub: Subscriptions, tg: anyio.abc.TaskGroup, uris: list[str]) -> int:
    """Bytes allocated and kept while a host subscribes to and unsubscribes from each of ``uris``,
    one after another, without waiting for the server's answers."""
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for uri in uris:
            tg.start_soon(hub.subscribe, "host", "full", uri)
            await anyio.lowlevel.checkpoint()  # its wish is recorded
            assert await hub.unsubscribe("host", "full", uri, timeout=1e-6)
        return sum(stat.size_diff for stat in tracemalloc.take_snapshot().compare_to(before, "filename"))
    finally:
        tracemalloc.stop()


async def test_unsubscribes_that_stop_waiting_leave_nothing_behind(tmp_path: Path) -> None:
    """A host sends subscribe then unsubscribe of one URI, again and again without waiting for the
    answers, each unsubscribe waiting a moment only, while the server has not answered a request
    for it: the memory they leave stays small. Before, each unsubscribe left an event to set once
    the server answered (about 900 bytes), and a cycling host kept the URI due so that none was
    set: 18 MB for 20,000 of them, for as long as the host went on."""
    async with held_server(tmp_path) as held:
        hub = gated(held)
        async with anyio.create_task_group() as tg:
            tg.start_soon(hub.subscribe, "host", "full", "full://r/0")
            await held.until_held(1)
            grown = await _cycled(hub, tg, ["full://r/0"] * 5_000)
            held.gate.unlink()
        assert grown < 500_000


async def test_an_unsubscribe_of_a_stopped_server_logs_no_unsubscription(tmp_path: Path) -> None:
    """The last holder unsubscribes while the server is stopped: nothing is sent (its next run has
    no subscriptions), and the log does not say the server was unsubscribed. Before,
    ``resource.unsubscribed`` was logged for a request never made."""
    async with held_server(tmp_path) as held:
        hub = held.subscriptions
        hub.register("host", ignore)
        await hub.subscribe("host", "full", "full://r/0")
        await held.supervisor.actor("full").stop()
        with structlog.testing.capture_logs() as logged:
            assert await hub.unsubscribe("host", "full", "full://r/0")
        assert "resource.unsubscribed" not in [e["event"] for e in logged]
        assert not hub.held("host", "full", "full://r/0")


async def test_a_host_cycling_through_distinct_uris_leaves_nothing_behind(tmp_path: Path) -> None:
    """A host subscribes to and unsubscribes from 10,000 distinct URIs, one after another without
    waiting for the server, while the server holds another request: the daemon keeps nothing of
    them. Before, each left its record and its place in the server's queue until the server's task
    came to it (6 MB for 10,000, for as long as the server held its request)."""
    async with held_server(tmp_path) as held:
        hub = gated(held)
        async with anyio.create_task_group() as tg:
            tg.start_soon(hub.subscribe, "host", "full", "full://r/held")
            await held.until_held(1)
            grown = await _cycled(hub, tg, [f"full://r/{i}" for i in range(10_000)])
            held.gate.unlink()
        assert grown < 500_000


async def test_an_unsubscribe_goes_ahead_of_a_restarts_resubscribes(tmp_path: Path) -> None:
    """After a restart the daemon subscribes the new run again to 1,000 URIs, one at a time; a host
    whose own URI was taken again first unsubscribes it meanwhile: the server hears of it next, and
    the unsubscribe returns while most resubscribes are still to come. Before, it waited behind all
    of them (10,000 URIs: its whole 10 s wait, the server still subscribed after)."""
    count = 1_000
    async with held_server(tmp_path) as held:
        hub = held.subscriptions
        hub.register("host", ignore)
        hub.register("many", ignore)
        await hub.subscribe("host", "full", "full://own")
        async with anyio.create_task_group() as tg:
            for i in range(count):
                tg.start_soon(hub.subscribe, "many", "full", f"full://r/{i}")
        await kill_and_wait_for_the_next_run(held)
        with anyio.fail_after(30):
            while "full://own" not in await held.server_has():
                await anyio.sleep(0.01)
        await hub.unsubscribe("host", "full", "full://own")
        has = await held.server_has()
    assert "full://own" not in has
    assert len(has) < count / 2, len(has)


async def test_a_server_that_refuses_every_resubscribe_is_asked_one_at_a_time(tmp_path: Path) -> None:
    """200 URIs are held and the server's new run refuses every resubscribe: while it refuses, the
    daemon sends it one request at a time, after a backoff (a handful in two seconds); once it takes
    them again, all are subscribed, one after another, and the holder hears of each (its updates
    were lost meanwhile). Before, each URI was asked again on a backoff of its own: here every URI
    every 0.4 s (about 1,000 requests in two seconds), in production every 30 s (333 requests/s
    for 10,000 held URIs), for as long as the server refused."""
    uris = sorted(f"full://r/{i}" for i in range(200))
    async with held_server(tmp_path) as held:
        hub = held.subscriptions
        heard: set[str] = set()
        hub.register("host", lambda server, uri, meta: heard.add(uri))
        async with anyio.create_task_group() as tg:
            for uri in uris:
                tg.start_soon(hub.subscribe, "host", "full", uri)
        held.refuse.touch()
        await kill_and_wait_for_the_next_run(held)
        await anyio.sleep(0.5)  # past the first refusals
        before = await held.read("full://asked")
        await anyio.sleep(2)
        assert await held.read("full://asked") - before <= 10
        held.refuse.unlink()
        assert await held.settles_at(lambda: uris) == uris
        with anyio.fail_after(5):
            while heard != set(uris):
                await anyio.sleep(0.02)
        assert all(hub.held("host", "full", uri) for uri in uris)


async def test_resubscribes_refused_together_count_as_one_refusal_for_the_backoff(tmp_path: Path) -> None:
    """The server's new run refuses the ``AT_ONCE`` resubscribes sent to it at once (not ready for
    them yet), and the first sent again, then takes requests again: the next is sent after the
    backoff's second delay, and the others at once after it. Before, each of the refusals sent at
    once counted as one more in a row: the next was sent only after the ninth delay, the backoff's
    cap (here 20 s, 30 s in production), however briefly the server had refused."""
    uris = sorted(f"full://r/{i}" for i in range(subscriptions.AT_ONCE))
    async with held_server(tmp_path, retries=RestartPolicy(initial_delay=0.2, max_delay=20.0)) as held:
        hub = held.subscriptions
        hub.register("host", ignore)
        async with anyio.create_task_group() as tg:
            for uri in uris:
                tg.start_soon(hub.subscribe, "host", "full", uri)
        held.refuse.touch()
        with structlog.testing.capture_logs() as logged:
            await kill_and_wait_for_the_next_run(held)
            with anyio.fail_after(30):
                while [e["event"] for e in logged].count("resource.resubscribe_failed") < len(uris):
                    await anyio.sleep(0.02)
        with anyio.fail_after(30):
            while await held.read("full://asked") <= len(uris):  # the first sent again: refused too
                await anyio.sleep(0.02)
        held.refuse.unlink()
        assert await held.settles_at(lambda: uris) == uris


Heard = list[tuple[str, dict[str, Any] | None]]


def _listening(hub: Subscriptions) -> tuple[Heard, list[str]]:
    """Register ``host`` on ``hub``: the updates it hears (URI, ``_meta``) and the URIs it is told ended."""
    heard: Heard = []
    ended: list[str] = []
    hub.register(
        "host", lambda server, uri, meta: heard.append((uri, meta)), lambda s, uri: ended.append(uri)
    )
    return heard, ended


def _assert_ended(
    told: Mapping[str, Any], hub: Subscriptions, heard: Heard, ended: list[str], why: str
) -> None:
    """``host``'s subscription of full://r/0 ended: logged, held no more, told by ``Ended`` and by a last
    update whose ``_meta`` reason holds ``why``."""
    assert (told["uri"], told["holders"]) == ("full://r/0", 1)
    assert not hub.held("host", "full", "full://r/0")
    assert ended == ["full://r/0"]
    [(uri, meta)] = heard
    assert uri == "full://r/0" and meta is not None and why in meta[SUBSCRIPTION_ENDED]


@pytest.mark.parametrize("code", [-32002, -32602, -32601])
async def test_a_resubscribe_answered_not_found_ends_the_subscription_and_tells_its_holder(
    tmp_path: Path, code: int
) -> None:
    """The server's new run says the resource held does not exist (-32002, as MCP said until
    2025-11-25; -32602 since), or that it has no ``resources/subscribe`` (-32601): asked again it
    would say the same, so the subscription ends. Its holder holds it no more and is told (a last
    update of the URI, its ``_meta`` saying why, and ``Ended``), the server is asked no more, and a
    subscribe of it now gets the server's error. Before, it was refused like a server not ready
    yet: asked again every 30 s for as long as the daemon ran (-32601 until this test had it), the
    holder waiting for updates that would never come."""
    async with held_server(tmp_path) as held:
        hub = held.subscriptions
        heard, ended = _listening(hub)
        await hub.subscribe("host", "full", "full://r/0")
        held.refuse.write_text(str(code))
        with structlog.testing.capture_logs() as logged:
            await kill_and_wait_for_the_next_run(held)
            told = await until_logged(logged, "resource.subscription_ended")
        _assert_ended(told, hub, heard, ended, "full://r/0")
        asked = await held.read("full://asked")
        await anyio.sleep(1)  # a refusal would have been sent again twice by now
        assert await held.read("full://asked") == asked
        with pytest.raises(UnknownResource):
            await hub.subscribe("host", "full", "full://r/0")


async def test_a_new_run_that_offers_no_subscriptions_ends_them_and_tells_their_holder(
    tmp_path: Path,
) -> None:
    """A reload replaces the server by a version that does not declare ``resources.subscribe``
    (the SDK fixture): the subscription its holder kept cannot be taken again on this run, so it
    ends, told as for a resource gone (an update whose ``_meta`` says why, and ``Ended``). Before,
    the holder kept it without a word: no update would come, and nothing said so."""
    async with held_server(tmp_path) as held:
        hub = held.subscriptions
        heard, ended = _listening(hub)
        await hub.subscribe("host", "full", "full://r/0")
        with structlog.testing.capture_logs() as logged:
            await held.supervisor.apply(Config(source="<test>", servers=(fixture_server("full"),)))
            told = await until_logged(logged, "resource.subscription_ended")
        _assert_ended(told, hub, heard, ended, "subscriptions")


async def test_a_server_removed_by_reload_ends_its_subscriptions_for_good(tmp_path: Path) -> None:
    """``mcpd reload`` removes the server whose resource a socket client and an MCP host (behind a
    relay that keeps its subscriptions) hold: each hears a last update saying it ended, the relay
    drops it from the set it resumes sessions with, and when a server of that name is configured
    again (another one, perhaps) it is not subscribed for them. Before, they kept the subscription,
    were told nothing, and the next server of that name was subscribed again for them."""
    uri = "mcpd://full/full://r/0"
    config = tmp_path / "config.toml"
    config.write_text(fullserver_toml("full"))
    async with running_daemon(config) as running:
        await running.wait_for("server.state", server="full", new="running", timeout=60)
        host = await peer(running, SessionState(subscription_deltas=True))

        def host_subscribes() -> None:
            host.request(0, "initialize", initialize("2025-06-18"))
            host.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
            host.request(1, "resources/subscribe", {"uri": uri})
            host.seen.clear()

        def host_told() -> list[dict[str, Any]]:
            while not any(
                m["method"] == SUBSCRIPTIONS_NOTIFICATION and m["params"].get("removed") == [uri]
                for m in host.seen
            ):
                host.seen += [json.loads(frame) for frame in host.receive()]
            return [m["params"] for m in host.seen if m["method"] == RESOURCE_UPDATED]

        try:
            await anyio.to_thread.run_sync(host_subscribes)
            async with connect(running.socket) as client:
                events = client.events()
                await client.subscribe_resource(uri)
                config.write_text("")
                await client.reload()
                with anyio.fail_after(10):
                    event = await events.receive()
                    [updated] = await anyio.to_thread.run_sync(host_told, abandon_on_cancel=True)
                assert isinstance(event, ResourceUpdated) and event.uri == uri
                assert event.meta is not None and "removed" in event.meta[SUBSCRIPTION_ENDED]
                assert updated["uri"] == uri and "removed" in updated["_meta"][SUBSCRIPTION_ENDED]
                mark = len(running.events)
                config.write_text(fullserver_toml("full"))
                await client.reload()
                await running.wait_for("server.state", server="full", new="running", after=mark, timeout=60)
                subscribed = await client.read_resource("mcpd://full/full://subscribed")
                assert json.loads(subscribed.contents[0].text or "") == []
                assert not await client.unsubscribe_resource(uri)
        finally:
            host.channel.close()
        assert "resource.resubscribed" not in [e.get("event") for e in running.events[mark:]]


async def test_a_subscribe_still_in_its_check_when_its_server_is_removed_is_told_at_once(
    tmp_path: Path,
) -> None:
    """A subscribe whose trust check is still running when a reload removes its server gets
    ``UnknownServer`` once the check is done. Before, ``forget`` answered only the subscribes past
    their check, and this one waited its whole deadline (the server's ``call_timeout``, 60 s) for a
    server nobody would ask, then got ``CallTimeout``."""
    async with held_server(tmp_path) as held:
        hub = held.subscriptions
        hub.register("host", ignore)
        checked = anyio.Event()

        async def check() -> None:
            await checked.wait()

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:

                async def subscribe() -> None:
                    with pytest.raises(UnknownServer):
                        await hub.subscribe("host", "full", "full://r/0", check=check)

                tg.start_soon(subscribe)
                await anyio.wait_all_tasks_blocked()
                hub.forget("full")
                checked.set()


async def test_unsubscriptions_waiting_for_a_refusing_server_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host drops more URIs than may wait in line for a server that refuses unsubscribes
    (``MAX_UNSUBSCRIBES_WAITING``, 5 here): the oldest past the bound are left to the server's next
    run at once, said in the log, so that a host cycling through URIs of such a server cannot grow
    the line (nobody holds them). Without the bound each waited for its eight attempts, which the
    server is sent one at a time: every URI in line would stay for minutes."""
    monkeypatch.setattr(subscriptions, "MAX_UNSUBSCRIBES_WAITING", 5)
    uris = [f"full://r/{i}" for i in range(8)]
    async with held_server(tmp_path) as held:
        hub = held.subscriptions
        hub.register("host", ignore)
        for uri in uris:
            await hub.subscribe("host", "full", uri)
        held.refuse.touch()
        with structlog.testing.capture_logs() as logged:
            for uri in uris:
                assert await hub.unsubscribe("host", "full", uri, timeout=0)
            with anyio.fail_after(1.5):
                while sum(e["event"] == "resource.unsubscribe_abandoned" for e in logged) < 3:
                    await anyio.sleep(0.02)
        assert not any(hub.held("host", "full", uri) for uri in uris)


async def test_a_servers_own_update_saying_the_subscription_ended_does_not_end_it(tmp_path: Path) -> None:
    """A server's update whose ``_meta`` carries ``SUBSCRIPTION_ENDED`` (the daemon's key, for the
    last update of a subscription it ended) reaches the holder without that key, the rest of its
    ``_meta`` kept. Before, it went as is: the holder let go of a subscription the daemon still
    held (a socket client's reconnect no longer took it), and each such update passed the bounds of
    a subscriber far behind (``Behind.offer(final=True)``), as many as the server sent."""
    async with held_server(tmp_path) as held:
        hub = held.subscriptions
        heard: list[dict[str, Any] | None] = []
        hub.register("host", lambda server, uri, meta: heard.append(meta))
        await hub.subscribe("host", "full", "full://r/0")
        spoof = {SUBSCRIPTION_ENDED: "the server says so", "k": 1}
        hub.on_event(ResourceUpdated(server="full", uri="full://r/0", meta=spoof))
        hub.on_event(ResourceUpdated(server="full", uri="full://r/0", meta={SUBSCRIPTION_ENDED: "again"}))
        assert heard == [{"k": 1}, None]
        assert hub.held("host", "full", "full://r/0")
