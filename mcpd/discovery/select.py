"""Compatible mode: the reference server selection, reproduced exactly.

Term-frequency cosine between the query and ``name + " " + description`` of each server;
servers at or above the threshold are returned in their given order. The whole list comes
back unchanged when it is empty, the query is blank, no server has a description, or no
server reaches the threshold: a selection never leaves an agent with nothing.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from mcpd.discovery.text import plain_terms
from mcpd.model.protocol import SELECT_THRESHOLD


@dataclass(frozen=True)
class Candidate:
    name: str
    description: str | None


@dataclass(frozen=True)
class Selection:
    names: list[str]
    scores: dict[str, float]
    fallback: bool
    """True when the full list was returned because nothing could be selected."""


def tf_cosine(query: Counter[str], document: Counter[str]) -> float:
    dot = sum(count * document.get(term, 0) for term, count in query.items())
    if not dot:
        return 0.0
    norm = math.sqrt(sum(v * v for v in query.values())) * math.sqrt(sum(v * v for v in document.values()))
    return dot / norm


def select_servers(
    query: str, servers: Sequence[Candidate], threshold: float = SELECT_THRESHOLD
) -> Selection:
    names = [server.name for server in servers]
    query_terms = Counter(plain_terms(query))
    if not servers or not query_terms or not any(server.description for server in servers):
        return Selection(names, {}, fallback=True)
    scores = {
        server.name: tf_cosine(query_terms, Counter(plain_terms(f"{server.name} {server.description or ''}")))
        for server in servers
    }
    chosen = [name for name in names if scores[name] >= threshold]
    if not chosen:
        return Selection(names, scores, fallback=True)
    return Selection(chosen, scores, fallback=False)
