"""The restart decision as a pure function, and the bounds on every wait: no processes, no sleeping."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from mcpd.config.model import MAX_STOP_GRACE, DaemonSettings, RestartPolicy, ServerConfig
from mcpd.supervisor.actor import stop_bound
from mcpd.supervisor.policy import (
    ASKED_WAIT_MAX,
    RECOVERED_AFTER,
    UNREACHABLE_MAX_DELAY,
    Decision,
    Ending,
    GiveUp,
    Retry,
    Stop,
    decide,
)
from mcpd.supervisor.supervisor import STOP_BOUND

POLICY = RestartPolicy(initial_delay=1.0, max_delay=60.0, multiplier=2.0, jitter=0.0, stable_after=30.0)


def after(
    ending: Ending, attempt: int, ran_for: float = 0.0, policy: RestartPolicy = POLICY, **kw: bool
) -> object:
    return decide(
        ending,
        "why",
        attempt=attempt,
        ran_for=ran_for,
        policy=policy,
        wanted=kw.get("wanted", True),
        unit_random=0.5,
    )


def test_a_crash_loop_is_retried_for_ever_at_the_cap() -> None:
    """By default nothing gives up on a crashing server: delays double up to the cap and stay there."""
    delays = [after(Ending.CRASHED, n) for n in range(12)]
    assert delays[:7] == [Retry(n + 1, d) for n, d in enumerate([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0])]
    assert all(d == Retry(n + 1, 60.0) for n, d in enumerate(delays) if n >= 6)
    assert after(Ending.CRASHED, 10**6) == Retry(10**6 + 1, 60.0)


def test_a_stable_run_resets_the_count() -> None:
    """A run that lasted stable_after starts the count again: the next delay is the first one."""
    assert after(Ending.CRASHED, 9, ran_for=30.0) == Retry(1, 1.0)
    assert after(Ending.CRASHED, 9, ran_for=29.9) == Retry(10, 60.0)


def test_max_retries_is_a_hard_stop_when_set() -> None:
    """With max_retries set, the run after the last allowed retry gives up with the reason."""
    policy = RestartPolicy(initial_delay=1.0, max_retries=2, jitter=0.0)
    assert isinstance(after(Ending.CRASHED, 1, policy=policy), Retry)
    decision = after(Ending.CRASHED, 2, policy=policy)
    assert isinstance(decision, GiveUp) and decision.attempt == 3
    assert "crash loop" in decision.reason and "why" in decision.reason


@pytest.mark.parametrize("ending", [Ending.UNSPAWNABLE, Ending.INTERNAL])
def test_what_retrying_cannot_fix_gives_up_at_once(ending: Ending) -> None:
    """A command that cannot be executed, and a bug in mcpd, are terminal on the first run."""
    decision = after(ending, 0)
    assert isinstance(decision, GiveUp) and decision.attempt == 1


def test_an_unreachable_remote_is_probed_often() -> None:
    """Reconnects to a remote server are cheap: their delay is capped low, however long the outage."""
    assert after(Ending.UNREACHABLE, 0) == Retry(1, 1.0)
    assert after(Ending.UNREACHABLE, 500) == Retry(501, UNREACHABLE_MAX_DELAY)


def test_nobody_wants_it_means_stop_whatever_the_ending() -> None:
    """A run that ended while a stop was wished is a stop, not a retry or a failure."""
    for ending in Ending:
        assert after(ending, 3, wanted=False) == Stop()


def test_jitter_spreads_below_the_cap_only() -> None:
    """Jitter varies the early delays (servers that died together come back apart), never the cap."""
    jittery = RestartPolicy(initial_delay=1.0, max_delay=60.0, jitter=0.2)
    low = decide(Ending.CRASHED, "x", attempt=1, ran_for=0, policy=jittery, wanted=True, unit_random=0.0)
    high = decide(Ending.CRASHED, "x", attempt=1, ran_for=0, policy=jittery, wanted=True, unit_random=0.99)
    assert isinstance(low, Retry) and isinstance(high, Retry) and low.delay < high.delay
    capped = decide(Ending.CRASHED, "x", attempt=40, ran_for=0, policy=jittery, wanted=True, unit_random=0.0)
    assert capped == Retry(41, 60.0)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("stop_grace", 1e6),
        ("connect_timeout", 601.0),
        ("call_timeout", 86400.0),
        ("ping_interval", 1e9),
        ("ping_timeout", 301.0),
        ("unhealthy_after", 1000),
    ],
)
def test_waits_beyond_their_bound_are_refused(field: str, value: float) -> None:
    """Every timeout and grace of a server has an upper limit; beyond it the entry is refused, naming
    the field and the limit."""
    settings: dict[str, Any] = {field: value}
    with pytest.raises(ValueError, match=f"`{field}` must be > 0 and <= "):
        ServerConfig(name="x", command="x", **settings)


def test_restart_and_daemon_waits_are_bounded_too() -> None:
    """The backoff cap, the stable period and the client write timeout have limits as well."""
    with pytest.raises(ValueError, match="max_delay"):
        RestartPolicy(max_delay=1e7)
    with pytest.raises(ValueError, match="stable_after"):
        RestartPolicy(stable_after=1e9)
    with pytest.raises(ValueError, match="multiplier"):
        RestartPolicy(multiplier=1e200)
    with pytest.raises(ValueError, match="client_write_timeout"):
        DaemonSettings(client_write_timeout=1e6)


def test_no_config_can_make_a_stop_outlast_the_supervisor_bound() -> None:
    """The largest stop_grace allowed still stops within STOP_BOUND: reload and shutdown are bounded."""
    slowest = ServerConfig(name="x", command="x", stop_grace=MAX_STOP_GRACE)
    assert stop_bound(slowest.stop_grace) <= STOP_BOUND


def test_a_run_live_for_a_while_after_an_outage_resets_the_count() -> None:
    """The reconnects of an outage do not weigh on the backoff after the next failure once the
    server has been live RECOVERED_AFTER seconds since (a stdio server needs stable_after)."""
    policy = RestartPolicy(initial_delay=1.0, max_delay=60.0, jitter=0.0)
    after = functools.partial(decide, Ending.UNREACHABLE, "x", policy=policy, wanted=True, unit_random=0.5)
    recovered = after(attempt=12, ran_for=RECOVERED_AFTER, after_outage=True)
    assert recovered == Retry(1, 1.0)
    too_soon = after(attempt=12, ran_for=RECOVERED_AFTER - 1, after_outage=True)
    assert too_soon == Retry(13, 2.0)
    no_outage = after(attempt=12, ran_for=RECOVERED_AFTER)
    assert no_outage == Retry(13, 2.0)


def test_the_wait_a_server_asked_for_holds_its_next_run_back() -> None:
    """A remote's ``Retry-After`` (a 429 or 503) is the least delay before its next run, above the
    two-second cap of an outage's reconnects, up to ASKED_WAIT_MAX; a longer backoff stays."""
    policy = RestartPolicy(initial_delay=1.0, max_delay=60.0, jitter=0.0)
    after = functools.partial(decide, reason="x", ran_for=0, policy=policy, wanted=True, unit_random=0.5)
    assert after(Ending.CRASHED, attempt=0, asked_wait=30.0) == Retry(1, 30.0)
    assert after(Ending.UNREACHABLE, attempt=0, asked_wait=30.0) == Retry(1, 30.0)
    assert after(Ending.CRASHED, attempt=0, asked_wait=86400.0) == Retry(1, ASKED_WAIT_MAX)
    assert after(Ending.CRASHED, attempt=7, asked_wait=0.5) == Retry(8, 60.0)


def test_a_crash_loop_behind_a_gateway_backs_off_and_gives_up() -> None:
    """A backend crash-looping behind a gateway: each reconnect first meets a 502 (unreachable), then
    the run lives 6 s and crashes. The crash after the outage does not reset the count, so the backoff
    grows and max_retries is reached (before: the count reset at each crash, 0.5 s delays forever)."""
    policy = RestartPolicy(initial_delay=1.0, max_delay=60.0, jitter=0.0, max_retries=10)
    attempt, last, delays = 0, None, []
    decision: Decision | None = None
    for _ in range(6):
        for ending, ran in ((Ending.UNREACHABLE, 0.0), (Ending.CRASHED, 6.0)):
            decision = decide(
                ending, "x", attempt=attempt, ran_for=ran, policy=policy, wanted=True,
                unit_random=0.5, after_outage=last is Ending.UNREACHABLE,
            )  # fmt: skip
            assert isinstance(decision, Retry | GiveUp)
            attempt, last = decision.attempt, ending
            if isinstance(decision, Retry) and ending is Ending.CRASHED:
                delays.append(decision.delay)
    assert delays[:3] == [2.0, 8.0, 32.0]
    assert isinstance(decision, GiveUp)
