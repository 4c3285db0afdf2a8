"""Grouping near-duplicate free-text requests ("convert pdf to markdown" ~ "PDF to Markdown converter").

Greedy: each wording, most asked first, joins the first group whose founding wording it is similar
enough to, else founds a group. Which groups are compared is the cost: comparing every group that
shares a term was quadratic when one word is everywhere (10,000 wordings of "convert ...": 46 s,
past the report's 30 s timeout, on the store's thread). Prefix filtering (Bayardo et al., "Scaling
up all pairs similarity search", WWW 2007) finds the same matches from a few rare terms per
wording: with the terms of every wording in one fixed order, two sets whose Jaccard similarity
reaches the threshold share a term among the first ``n - overlap + 1`` of each, where ``overlap``
is the least number of common terms that similarity needs. Ordering terms rarest first keeps those
prefixes to words few wordings use, so a word that is everywhere is never looked up. The result is
the greedy result exactly (the filter only drops groups that could not match).

``python bench/groups.py --baseline DIR`` (the grouping before this, at DIR), best of 3-5 runs on two
shared cores under other load, analysis of the wordings included (most of what is left):

===============================  ========  ========  ========
wordings                         1,000     3,000     10,000
===============================  ========  ========  ========
one shared word, shared term     0.92 s    5.0 s     66.6 s
one shared word, prefixes        0.032 s   0.13 s    0.32 s
realistic mix, shared term       0.014 s   0.048 s   0.37 s
realistic mix, prefixes          0.013 s   0.040 s   0.16 s
===============================  ========  ========  ========

The whole ``report`` over a store of 10,000 one-shared-word wordings answers in 0.3-0.6 s (was no
answer within the client's 30 s); 3,000 took 3.9-7.4 s before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache

from mcpd.discovery.text import terms

SIMILARITY = 0.5
"""Jaccard similarity of analysed terms at which two requests count as the same need."""


@dataclass
class Group:
    representative: str
    terms: frozenset[str]
    members: dict[str, int] = field(default_factory=dict)
    """Each wording in the group, with how often it was asked, in the order they joined."""

    @property
    def count(self) -> int:
        return sum(self.members.values())


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def analysed(text: str) -> frozenset[str]:
    """The terms a request is compared by."""
    # Compounds left out: a reworded request ("PDF to Markdown conversion") shares words, not pairs.
    return frozenset(terms(text, compounds=False)) or frozenset([text.strip().lower()])


@cache
def _least_overlap(size: int, threshold: float) -> int:
    """The fewest common terms with which a set of ``size`` terms can reach ``threshold``.

    ``jaccard`` divides by the union, never smaller than ``size``, so a match needs
    ``common / size >= threshold`` in the same float arithmetic; found by trying, not by
    ``ceil(threshold * size)``, whose rounding could ask one term too many and miss a match.
    """
    return next((common for common in range(size + 1) if common / size >= threshold), size + 1)


def group_similar(counted: Iterable[tuple[str, int]], threshold: float = SIMILARITY) -> list[Group]:
    """Greedy single pass over (text, times asked): each text joins the first group it is similar
    enough to (see the module docstring for how candidates are found).

    Groups come back largest first; a group's representative is its most frequent text.
    """
    wordings = [(text, count, analysed(text)) for text, count in counted]
    frequency = Counter(term for _, _, words in wordings for term in words)
    # Rarest first, ties by the term itself: the one order every prefix is taken in.
    rank = {term: place for place, (_, term) in enumerate(sorted((n, t) for t, n in frequency.items()))}
    groups: list[Group] = []
    by_term: dict[str, list[int]] = {}
    """Each term, the groups with it in their founder's prefix, in the order they were founded."""
    for text, count, words in wordings:
        ordered = sorted(words, key=rank.__getitem__)
        prefix = ordered[: len(ordered) - _least_overlap(len(ordered), threshold) + 1]
        candidates = sorted({index for term in prefix for index in by_term.get(term, ())})
        for index in candidates:
            group = groups[index]
            if jaccard(words, group.terms) >= threshold:
                group.members[text] = group.members.get(text, 0) + count
                break
        else:
            for term in prefix:
                by_term.setdefault(term, []).append(len(groups))
            groups.append(Group(text, words, {text: count}))
    for group in groups:
        group.representative = max(group.members, key=lambda t: (group.members[t], -len(t)))
    groups.sort(key=lambda g: (-g.count, g.representative))
    return groups
