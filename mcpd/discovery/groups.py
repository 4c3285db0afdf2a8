"""Grouping near-duplicate free-text requests ("convert pdf to markdown" ~ "PDF to Markdown converter")."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

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


def group_similar(counted: Iterable[tuple[str, int]], threshold: float = SIMILARITY) -> list[Group]:
    """Greedy single pass over (text, times asked): each text joins the first group it is similar
    enough to. Only groups sharing a term with it are compared (similarity needs one), so distinct
    texts cost about one pass, not one comparison per group each.

    Groups come back largest first; a group's representative is its most frequent text.
    """
    groups: list[Group] = []
    by_term: dict[str, list[int]] = {}
    for text, count in counted:
        # Compounds left out: a reworded request ("PDF to Markdown conversion") shares words, not pairs.
        analysed = frozenset(terms(text, compounds=False)) or frozenset([text.strip().lower()])
        candidates = sorted({index for term in analysed for index in by_term.get(term, ())})
        for index in candidates:
            group = groups[index]
            if jaccard(analysed, group.terms) >= threshold:
                group.members[text] = group.members.get(text, 0) + count
                break
        else:
            for term in analysed:
                by_term.setdefault(term, []).append(len(groups))
            groups.append(Group(text, analysed, {text: count}))
    for group in groups:
        group.representative = max(group.members, key=lambda t: (group.members[t], -len(t)))
    groups.sort(key=lambda g: (-g.count, g.representative))
    return groups
