"""What the listener does while the daemon is out of file descriptors.

``accept`` fails then (EMFILE, ENFILE) and each client stays in the listen queue, unanswered, until
its own timeout: the command line waited 20 s to say the daemon "stopped answering", which sends
the user after a frozen daemon that is not. One descriptor is held in reserve instead (the spare):
given up for a moment, it lets each waiting client be accepted, told why in one error frame, and
closed, and is then taken again. The failure is logged once per spell (each retry logged made ten
lines a second for as long as it lasted), and its end too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import time
from collections.abc import Callable

import structlog

from mcpd.errors import TooManyRequests

log = structlog.get_logger("mcpd.ipc")

TURNED_AWAY_PER_TRY = 64
"""Waiting clients answered per failed accept, at most: the work of one loop turn stays small."""
_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE})


def _reserve() -> int | None:
    with contextlib.suppress(OSError):
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    return None


class Spare:
    """A reserved descriptor, and the spell of failed accepts it serves in (``failed``, ``accepted``)."""

    def __init__(self, refusal: Callable[[TooManyRequests], bytes]) -> None:
        self._refusal = refusal
        self._fd = _reserve()
        self._since: float | None = None
        self._turned_away = 0

    def failed(self, listener: socket.socket, error: OSError) -> None:
        """``accept`` raised ``error``: say so once per spell, and answer who waits if it is for want
        of descriptors."""
        if self._since is None:
            self._since = time.monotonic()
            log.error("ipc.accept_failed", error=str(error))
        if error.errno in _EXHAUSTED:
            self._turned_away += self._turn_away(listener, error)

    def accepted(self) -> None:
        """A client was accepted: a spell of failures, if any, is over."""
        if self._since is not None:
            seconds = round(time.monotonic() - self._since, 1)
            log.info("ipc.accept_recovered", seconds=seconds, turned_away=self._turned_away)
            self._since, self._turned_away = None, 0

    def _turn_away(self, listener: socket.socket, error: OSError) -> int:
        if self._fd is None:
            self._fd = _reserve()  # taken again once a descriptor is free; the next failure uses it
            return 0
        os.close(self._fd)
        refusal = self._refusal(
            TooManyRequests(
                f"the daemon is out of file descriptors ({error.strerror}) and turned this connection "
                "away; try again once other clients have left, or raise its open-file limit",
                {"reason": "descriptors"},
            )
        )
        turned = 0
        try:
            while turned < TURNED_AWAY_PER_TRY:
                try:
                    sock, _ = listener.accept()
                except OSError:
                    break  # nobody else waits (EAGAIN), or the descriptor went elsewhere
                with sock, contextlib.suppress(OSError):
                    sock.setblocking(False)
                    sock.send(refusal)
                turned += 1
        finally:
            self._fd = _reserve()
        return turned

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
