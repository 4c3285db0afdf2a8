"""The state table and the backoff function: pure logic, no processes, no sleeping."""

from __future__ import annotations

import itertools

import pytest

from mcpd.config.model import MIN_RESTART_DELAY, RestartPolicy
from mcpd.model.states import InvalidTransition, ServerState, check_transition
from mcpd.supervisor.backoff import backoff_delay, gives_up

S = ServerState


def test_legal_transitions_return_the_new_state() -> None:
    """Every edge the supervisor walks on a normal life cycle is allowed."""
    path = [
        S.STOPPED,
        S.STARTING,
        S.RUNNING,
        S.DEGRADED,
        S.RUNNING,
        S.BACKOFF,
        S.STARTING,
        S.FAILED,
        S.STARTING,
    ]
    for old, new in itertools.pairwise(path):
        assert check_transition(old, new) is new


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (S.STOPPED, S.RUNNING),  # never running without a handshake
        (S.BACKOFF, S.RUNNING),
        (S.FAILED, S.BACKOFF),  # failed stays failed until an explicit start
        (S.DISABLED, S.RUNNING),
        (S.RUNNING, S.RUNNING),
    ],
)
def test_illegal_transitions_raise(old: ServerState, new: ServerState) -> None:
    """Edges outside the table are bugs and fail loudly."""
    with pytest.raises(InvalidTransition):
        check_transition(old, new)


def test_backoff_grows_exponentially_and_is_capped() -> None:
    """Without jitter the delay doubles per attempt until max_delay."""
    policy = RestartPolicy(initial_delay=1.0, max_delay=10.0, multiplier=2.0, jitter=0.0)
    assert [backoff_delay(n, policy, 0.5) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_backoff_jitter_stays_within_its_fraction() -> None:
    """Below the cap, jitter spreads the delay by at most +/- jitter, in both directions."""
    policy = RestartPolicy(initial_delay=2.0, max_delay=10.0, jitter=0.25)
    assert backoff_delay(1, policy, 0.0) == pytest.approx(1.5)
    assert backoff_delay(1, policy, 0.999999) == pytest.approx(2.5, rel=1e-5)
    assert backoff_delay(1, policy, 0.5) == pytest.approx(2.0)


def test_backoff_jitter_never_takes_a_delay_below_the_crash_loop_floor() -> None:
    """A delay at or above ``MIN_RESTART_DELAY`` stays there whatever the jitter draws (multiplier 1
    never grows the delay: a jitter of 0.9 made 0.01 s of the floor's 0.1 s); one below it (a short
    first delay that grows) is still spread."""
    steady = RestartPolicy(initial_delay=MIN_RESTART_DELAY, max_delay=1.0, multiplier=1.0, jitter=0.9)
    assert min(backoff_delay(n, steady, u) for n in (1, 5, 50) for u in (0.0, 0.3)) == MIN_RESTART_DELAY
    assert backoff_delay(1, steady, 0.999) > MIN_RESTART_DELAY
    growing = RestartPolicy(initial_delay=0.01, max_delay=1.0, jitter=0.5)
    assert backoff_delay(1, growing, 0.0) == pytest.approx(0.005)


def test_backoff_cap_is_exact() -> None:
    """Once the growth reaches the cap, every delay is the cap itself, whatever the jitter draws:
    a crash loop costs one spawn per cap, and never waits longer than the cap."""
    policy = RestartPolicy(initial_delay=1.0, max_delay=8.0, jitter=0.5)
    assert {backoff_delay(n, policy, u) for n in (4, 5, 50) for u in (0.0, 0.5, 0.999)} == {8.0}
    assert backoff_delay(3, policy, 0.999) <= 8.0


def test_backoff_cap_argument_lowers_the_policy_cap() -> None:
    """An explicit cap (remote reconnects) applies below the policy's own, never above it."""
    policy = RestartPolicy(initial_delay=0.5, max_delay=60.0, jitter=0.0)
    assert backoff_delay(10, policy, 0.5, cap=2.0) == 2.0
    assert backoff_delay(10, RestartPolicy(initial_delay=0.5, max_delay=1.0), 0.5, cap=2.0) == 1.0


def test_crash_loop_threshold() -> None:
    """max_retries unstable runs are retried; one more is a crash loop; unset means never."""
    policy = RestartPolicy(max_retries=3)
    assert not gives_up(3, policy)
    assert gives_up(4, policy)
    assert not gives_up(10**9, RestartPolicy())


def test_policy_rejects_nonsense() -> None:
    """A policy that could never work is refused when built."""
    with pytest.raises(ValueError, match="jitter"):
        RestartPolicy(jitter=1.5)
    with pytest.raises(ValueError, match="max_delay"):
        RestartPolicy(initial_delay=5, max_delay=1)


def test_backoff_never_overflows() -> None:
    """A huge attempt count is capped at max_delay instead of raising OverflowError."""
    policy = RestartPolicy(initial_delay=1.0, max_delay=30.0, multiplier=10.0, jitter=0.0)
    assert backoff_delay(10**6, policy, 0.5) == 30.0
    assert backoff_delay(10**6, RestartPolicy(max_delay=30.0, jitter=0.0), 0.5) == 30.0


def test_policy_rejects_non_finite_numbers() -> None:
    """NaN passes `< 0` checks, so it is refused explicitly."""
    with pytest.raises(ValueError, match="finite"):
        RestartPolicy(initial_delay=float("nan"))
