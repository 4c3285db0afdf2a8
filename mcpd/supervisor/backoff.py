"""Restart delays: a pure function of the attempt number, tested without sleeping."""

from __future__ import annotations

from mcpd.config.model import RestartPolicy


def backoff_delay(attempt: int, policy: RestartPolicy, unit_random: float) -> float:
    """Seconds to wait before restart ``attempt`` (1-based).

    Capped exponential growth, then spread by +/- ``policy.jitter`` (a fraction) so
    that servers which died together do not all come back in the same instant.
    ``unit_random`` is a number in [0, 1) supplied by the caller.
    """
    if attempt < 1:
        raise ValueError("attempt is 1-based")
    try:
        base = min(policy.max_delay, policy.initial_delay * policy.multiplier ** (attempt - 1))
    except OverflowError:  # float ** raises instead of giving inf; the cap applies either way
        base = policy.max_delay
    spread = 1.0 + policy.jitter * (2.0 * unit_random - 1.0)
    return max(0.0, base * spread)


def gives_up(attempt: int, policy: RestartPolicy) -> bool:
    """Whether ``attempt`` consecutive unstable runs mean a crash loop."""
    return attempt > policy.max_retries
