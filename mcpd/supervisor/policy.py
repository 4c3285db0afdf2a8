"""The restart decision: what follows the end of a server's run, as a pure function of plain data.

The actor reports how a run ended (an ``Ending`` and a reason), how many unstable runs
came before it and how long it lasted; ``decide`` answers ``Retry(delay)``,
``GiveUp(reason)`` or ``Stop``. No clock, no randomness of its own, no processes: the
whole policy is tested like ``backoff``.

The policy (Kubernetes' CrashLoopBackOff): every failure that a retry may fix is
retried for as long as the server is wanted, after a capped exponential backoff; a run
that lasted ``stable_after`` resets the count. Only two endings are terminal
(``failed``): a command that the system refuses to execute (not found, not executable,
bad working directory: the config or the machine must change first), and an internal
error of mcpd (retrying would repeat it). ``max_retries``, unset by default, adds a hard
stop for users who want one.
"""

from __future__ import annotations

import enum

import msgspec

from mcpd.config.model import RestartPolicy
from mcpd.supervisor.backoff import backoff_delay, gives_up

UNREACHABLE_MAX_DELAY = 2.0
"""Cap of the delay between reconnects to a remote server that cannot be reached. A reconnect
costs one connection attempt, not a process, so the server is back within seconds of its
return however long it was away."""


RECOVERED_AFTER = 5.0
"""Seconds a remote server's run must be live, after an outage (runs that ended unreachable), for
the outage to count as over: the reconnects it took do not make the backoff after the next outage
longer (a gateway's blip ten seconds after the outage would otherwise wait the outage's delay).
Only a run that itself ended unreachable counts so: one that crashed (failed pings, a refused
login) needs ``stable_after``, or a backend crash-looping behind a gateway (a 502 to each reconnect,
then a crash a few seconds in) would never back off further nor reach ``max_retries``."""


ASKED_WAIT_MAX = 600.0
"""The longest a server's own ``Retry-After`` holds its next run back: one that asks for a day is
still tried again within minutes (a start or restart asked for tries at once)."""


class Ending(enum.StrEnum):
    """How a run ended, as far as the restart decision cares."""

    CRASHED = "crashed"
    """Died, failed its handshake, or stopped answering: a new process may do better."""
    UNREACHABLE = "unreachable"
    """A remote server refused or dropped the connection: reconnect, cheaply and often."""
    UNSPAWNABLE = "unspawnable"
    """The command cannot be executed at all: terminal until the config or the system changes."""
    INTERNAL = "internal"
    """A bug in mcpd: terminal, retrying would repeat it."""


class Retry(msgspec.Struct, frozen=True):
    attempt: int
    """Unstable runs in a row, this one included."""
    delay: float
    """Seconds of backoff before the next start."""


class GiveUp(msgspec.Struct, frozen=True):
    attempt: int
    reason: str
    """The server's ``last_error`` from now on."""


class Stop(msgspec.Struct, frozen=True):
    """Nobody wants the server any more: it ends ``stopped``, whatever the ending was."""


Decision = Retry | GiveUp | Stop


def next_attempt(attempt: int, ran_for: float, policy: RestartPolicy, *, after_outage: bool = False) -> int:
    """The count of unstable runs after one that lasted ``ran_for`` seconds: a stable run resets it,
    and so does a run live for ``RECOVERED_AFTER`` after an outage (``after_outage``: the run before
    it ended unreachable)."""
    stable = policy.stable_after
    if after_outage:
        stable = min(stable, RECOVERED_AFTER)
    return 1 if ran_for >= stable else attempt + 1


def decide(
    ending: Ending,
    reason: str,
    *,
    attempt: int,
    ran_for: float,
    policy: RestartPolicy,
    wanted: bool,
    unit_random: float,
    after_outage: bool = False,
    asked_wait: float = 0.0,
) -> Decision:
    """What to do after a run that ended with ``ending`` (``reason`` says how).

    ``attempt`` is the count of unstable runs before this one, ``ran_for`` how long this
    one was live (0 if it never was), ``unit_random`` a number in [0, 1) for the jitter,
    ``after_outage`` whether the run before this one ended ``UNREACHABLE`` (``RECOVERED_AFTER``
    applies if this one did too), ``asked_wait`` the seconds the server asked to be left alone for
    (a remote's ``Retry-After``): the delay is that at least (up to ``ASKED_WAIT_MAX``), above the
    cap of an outage's reconnects, which would otherwise knock every two seconds.
    """
    if not wanted:
        return Stop()
    # The short threshold is for an outage that ended and a new one (a blip), not for a crash.
    outage_again = after_outage and ending is Ending.UNREACHABLE
    attempt = next_attempt(attempt, ran_for, policy, after_outage=outage_again)
    if ending is Ending.UNSPAWNABLE:
        return GiveUp(attempt, f"cannot start: {reason}")
    if ending is Ending.INTERNAL:
        return GiveUp(attempt, f"internal error in mcpd: {reason}")
    if gives_up(attempt, policy):
        return GiveUp(attempt, f"crash loop: {attempt} failed runs in a row (max_retries); last: {reason}")
    cap = UNREACHABLE_MAX_DELAY if ending is Ending.UNREACHABLE else None
    delay = backoff_delay(attempt, policy, unit_random, cap)
    return Retry(attempt, max(delay, min(asked_wait, ASKED_WAIT_MAX)))
