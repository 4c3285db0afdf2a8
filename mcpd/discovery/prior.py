"""What past calls say about a tool: the usage prior that discovery adds to text relevance.

Two signals, both bounded so that usage can reorder close candidates but never bury a
strong text match:

- per tool: recent successes raise its score a little (up to +20 %), a high failure rate
  lowers it (down to -30 %); successes fade with a half-life, so a tool that stopped
  being used stops being favoured;
- per query term -> tool: queries that led to a successful call of a tool associate their
  words with it, so a later query with those words finds it even when its own text does
  not say so. The association adds at most ``association_weight`` times the best text
  score of the query.

The daemon's prior learns only from the usage store: the stored totals at start, then
what each committed batch of calls adds (``Store.follow``), so a ranking says the same
before and after a restart.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

Key = tuple[str, str]


@dataclass
class ToolStats:
    successes: int = 0
    failures: int = 0
    last_success: float = 0.0


@dataclass
class UsagePrior:
    half_life_days: float = 30.0
    association_weight: float = 0.5
    clock: Callable[[], float] = time.time
    tools: dict[Key, ToolStats] = field(default_factory=dict)
    associations: dict[str, dict[Key, int]] = field(default_factory=dict)
    """term -> tool -> successful calls whose query held the term"""

    def __bool__(self) -> bool:
        return bool(self.tools)

    def observe(self, server: str, tool: str, ok: bool, query_terms: Iterable[str], ts: float) -> None:
        """Learn from one call (``query_terms``: the analysed query that led to it, if any).

        The daemon learns through ``load`` instead, one batch of stored calls at a time."""
        associated = [(term, server, tool, 1) for term in set(query_terms)] if ok else []
        self.load([(server, tool, int(ok), int(not ok), ts if ok else 0.0)], associated)

    def load(
        self, tools: Iterable[tuple[str, str, int, int, float]], terms: Iterable[tuple[str, str, str, int]]
    ) -> None:
        """Add totals: (server, tool, successes, failures, last success) and (term, server, tool,
        successes). The stored totals at start, then what each batch of calls adds."""
        for server, tool, successes, failures, last in tools:
            stats = self.tools.get((server, tool))
            if stats is None:
                self.tools[server, tool] = ToolStats(successes, failures, last)
            else:
                stats.successes += successes
                stats.failures += failures
                stats.last_success = max(stats.last_success, last)
        for term, server, tool, successes in terms:
            counts = self.associations.setdefault(term, {})
            counts[server, tool] = counts.get((server, tool), 0) + successes

    def reload(
        self, tools: Iterable[tuple[str, str, int, int, float]], terms: Iterable[tuple[str, str, str, int]]
    ) -> None:
        """Forget everything and ``load`` these totals: what the store holds after a prune."""
        self.tools.clear()
        self.associations.clear()
        self.load(tools, terms)

    def tool_factor(self, key: Key) -> float:
        """Relative adjustment of a tool's text score, in [-0.3, +0.2]."""
        stats = self.tools.get(key)
        if stats is None:
            return 0.0
        age_days = max(0.0, self.clock() - stats.last_success) / 86400 if stats.last_success else math.inf
        freshness = 0.5 ** (age_days / self.half_life_days) if math.isfinite(age_days) else 0.0
        boost = 0.2 * (1 - 1 / (1 + stats.successes * freshness / 3))
        penalty = 0.3 * stats.failures / (stats.successes + stats.failures + 2)
        return boost - penalty

    def association(self, query_terms: Iterable[str]) -> dict[Key, float]:
        """Tools the query's words have led to before, each with a strength in (0, 1]."""
        distinct = set(query_terms)
        if not distinct:
            return {}
        totals: dict[Key, float] = {}
        for term in distinct:
            for key, count in self.associations.get(term, {}).items():
                totals[key] = totals.get(key, 0.0) + count / (count + 2)
        return {key: value / len(distinct) for key, value in totals.items()}
