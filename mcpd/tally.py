"""How often a warning that repeats is said: one by one at first, then once a thousand, so that a
server sending twenty thousand bad lines does not write twenty thousand lines of the daemon's log."""

from __future__ import annotations

FIRST = 10
"""Occurrences said one by one."""


class Tally:
    """Counts the occurrences of one warning; ``due()`` counts one and says whether to log it."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def due(self) -> bool:
        self.count += 1
        return self.count <= FIRST or self.count % 1000 == 0
