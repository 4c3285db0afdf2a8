"""Restart delays: a pure function of the attempt number, tested without sleeping."""

from __future__ import annotations

from mcpd.config.model import MIN_RESTART_DELAY, RestartPolicy


def backoff_delay(attempt: int, policy: RestartPolicy, unit_random: float, cap: float | None = None) -> float:
    """Seconds to wait before restart ``attempt`` (1-based).

    Exponential growth from ``policy.initial_delay``, spread by +/- ``policy.jitter`` (a
    fraction) so that servers which died together do not all come back in the same
    instant. ``cap`` (default ``policy.max_delay``) is a hard limit: once the growth
    reaches it, every delay is exactly the cap, so a server that keeps crashing costs
    one spawn per cap and is back within the cap of its cause going away.
    ``unit_random`` is a number in [0, 1) supplied by the caller.
    """
    if attempt < 1:
        raise ValueError("attempt is 1-based")
    limit = policy.max_delay if cap is None else min(cap, policy.max_delay)
    try:
        base = policy.initial_delay * policy.multiplier ** (attempt - 1)
    except OverflowError:  # float ** raises instead of giving inf; the cap applies either way
        base = limit
    if base >= limit:
        return limit
    spread = 1.0 + policy.jitter * (2.0 * unit_random - 1.0)
    # The spread never takes a delay at or above the crash-loop floor below it: with multiplier 1
    # the delay never grows, and a jitter of 0.9 drew waits of 0.01 s out of the floor's 0.1 s.
    floor = MIN_RESTART_DELAY if base >= MIN_RESTART_DELAY else 0.0
    return min(limit, max(floor, base * spread))


def gives_up(attempt: int, policy: RestartPolicy) -> bool:
    """Whether ``attempt`` consecutive unstable runs exceed the user's hard stop (none by default)."""
    return policy.max_retries is not None and attempt > policy.max_retries
