"""Keeps the daemon reachable at its socket path for as long as it runs.

The socket and its lock are files anyone of this user can delete: a logout or a temp cleaner
that empties the runtime directory, or a hand. A daemon that did not notice would serve
nobody, and the next client's autostart would start a second daemon beside it with a second
copy of every server. Every ``socket_check_interval`` (2 s) the guard looks (two ``lstat``
calls): a missing lock is taken again and a missing socket bound again, with the clients already
connected left as they are; if another daemon took the path meanwhile, this one is the extra and
stops. A path that cannot be looked at or taken again yet (its directory unsearchable, a file in
its place) is logged once as ``daemon.socket_lost`` and tried again at every look, the daemon
serving on.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import anyio
import structlog

from mcpd.errors import McpdError
from mcpd.ipc.endpoint import AddressInUse, Claim

log = structlog.get_logger("mcpd.daemon")


async def guard_socket(
    claim: Claim, listen: Callable[[socket.socket], None], displaced: Callable[[], None], interval: float
) -> None:
    """Look at ``claim`` every ``interval`` seconds and renew it whenever part of it is lost, handing
    a new listener to ``listen``; ``displaced()`` (after logging why) once another daemon holds the
    path. (The children's ledger beside it is looked at as often by its own task: ``orphans``.)"""
    reported: str | None = None
    while True:
        await anyio.sleep(interval)
        try:
            # In a worker thread: a socket path on a network filesystem that hangs must not stop the loop.
            lost = await anyio.to_thread.run_sync(claim.lost)
        except OSError as exc:
            # The directory cannot be searched (chmod 000): whether lock and socket are still ours
            # cannot be told, and nothing can be renewed in there; clients already connected go on.
            reported = _report(claim, "the socket directory cannot be looked into", exc, reported)
            continue
        if lost is None:
            if reported is not None:
                log.warning("daemon.socket_restored", socket=str(claim.path), reason=reported)
                reported = None
            continue
        try:
            # On the loop, where children are spawned: binding sets the process umask for an
            # instant, and a child spawned in that instant would inherit it.
            listener = claim.renew()
        except AddressInUse as exc:
            log.error("daemon.displaced", socket=str(claim.path), reason=lost, error=exc.message)
            displaced()
            return
        except (McpdError, OSError) as exc:
            # The directory cannot be made again yet (e.g. the runtime directory of a logged-out
            # user, or a file now in its place).
            reported = _report(claim, lost, exc, reported)
            continue
        reported = None
        if listener is not None:
            listen(listener)
        log.warning("daemon.socket_restored", socket=str(claim.path), reason=lost)


def _report(claim: Claim, reason: str, exc: McpdError | OSError, reported: str | None) -> str:
    """Log ``daemon.socket_lost`` unless the same trouble was the last one logged; returns what is
    now reported. Said once, tried again at every look."""
    # An OSError's words without the file it names: a look fails on the lock or on the socket,
    # whichever it reached when the trouble began, and that is no new trouble to say again.
    error = exc.message if isinstance(exc, McpdError) else (exc.strerror or str(exc))
    if f"{reason}: {error}" != reported:
        log.error("daemon.socket_lost", socket=str(claim.path), reason=reason, error=error)
    return f"{reason}: {error}"
