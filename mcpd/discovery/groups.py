"""Grouping near-duplicate free-text requests ("convert pdf to markdown" ~ "PDF to Markdown converter")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from mcpd.discovery.text import terms

SIMILARITY = 0.5
"""Jaccard similarity of analysed terms at which two requests count as the same need."""


@dataclass
class Group:
    representative: str
    terms: frozenset[str]
    members: list[str] = field(default_factory=list)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def group_similar(texts: Sequence[str], threshold: float = SIMILARITY) -> list[Group]:
    """Greedy single pass: each text joins the first group it is similar enough to.

    Groups come back largest first; a group's representative is its most frequent text.
    """
    groups: list[Group] = []
    for text in texts:
        # Compounds left out: a reworded request ("PDF to Markdown conversion") shares words, not pairs.
        analysed = frozenset(terms(text, compounds=False)) or frozenset([text.strip().lower()])
        for group in groups:
            if jaccard(analysed, group.terms) >= threshold:
                group.members.append(text)
                break
        else:
            groups.append(Group(text, analysed, [text]))
    for group in groups:
        group.representative = max(set(group.members), key=lambda t: (group.members.count(t), -len(t)))
    groups.sort(key=lambda g: (-len(g.members), g.representative))
    return groups
