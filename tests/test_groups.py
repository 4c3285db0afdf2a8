"""Grouping capability requests: the same groups as comparing every group, for a fraction of the work."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import pytest

from mcpd.discovery import groups
from mcpd.discovery.groups import Group, analysed, group_similar, jaccard
from mcpd.testing.wordings import one_shared_word, realistic


def every_group_compared(counted: Iterable[tuple[str, int]], threshold: float) -> list[Group]:
    """The greedy grouping by its definition: each wording is compared with every group in the order
    they were founded (what ``group_similar`` did before it filtered, at quadratic cost)."""
    found: list[Group] = []
    for text, count in counted:
        words = analysed(text)
        group = next((g for g in found if jaccard(words, g.terms) >= threshold), None)
        if group is None:
            found.append(Group(text, words, {text: count}))
        else:
            group.members[text] = group.members.get(text, 0) + count
    for group in found:
        group.representative = max(group.members, key=lambda t: (group.members[t], -len(t)))
    found.sort(key=lambda g: (-g.count, g.representative))
    return found


def outcome(found: list[Group]) -> list[tuple[str, int, list[tuple[str, int]]]]:
    return [(g.representative, g.count, list(g.members.items())) for g in found]


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7, 1.0])
def test_groups_on_a_realistic_mix_are_those_of_comparing_every_group(threshold: float) -> None:
    """1,500 wordings of 30 needs (synonyms, word order, filler, details, one-offs): every group,
    its members in order and its representative are what comparing each wording with every group
    gives, at the shipped threshold and at others that round the needed overlap differently."""
    wordings = realistic(1500, seed=round(threshold * 10))
    expected = every_group_compared(wordings, threshold)
    assert outcome(group_similar(wordings, threshold)) == outcome(expected)
    assert 1 < len(expected) < len(wordings)  # groups formed, and not everything merged


@contextmanager
def counted_comparisons() -> Iterator[list[int]]:
    """Counts the calls of ``groups.jaccard`` (the similarity of a wording and a group) meanwhile."""
    seen = [0]
    code = groups.jaccard.__code__

    def profile(frame: FrameType, event: str, _: Any) -> None:
        if event == "call" and frame.f_code is code:
            seen[0] += 1

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)


def test_a_word_every_wording_shares_costs_no_comparisons() -> None:
    """2,000 distinct wordings that share only "convert" found 2,000 groups; each used to be compared
    with every group before it (~2 million similarities, 46 s at 10,000). Now a wording is compared
    only with groups that share one of its rarer words: a handful in all, not one per pair."""
    wordings = one_shared_word(2000)
    with counted_comparisons() as comparisons:
        found = group_similar(wordings)
    assert len(found) == len(wordings)
    assert comparisons[0] < len(wordings)
