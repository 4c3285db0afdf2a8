"""Lexical ranking variants measured against the shipped one: what was tried and not kept (the
earlier weights of request words are parameter sets in ``bench/retrieval.py``'s grid).

``bench/retrieval.py`` cross-validates each against the shipped ranking (``variants()``), so
the record of what was tried stays runnable. Each builds a ``ToolIndex`` and changes only how
a query is analysed or scored; none is part of mcpd.

- request words, no name exception: the general stop list dropped even where tool names use it;
- query compounds x0.5: joined word pairs of the query (a bigram/proximity match) at half weight;
- + query likelihood: BM25F fused with Dirichlet-smoothed query likelihood (Zhai & Lafferty),
  min-max scaled, 0.7 / 0.3;
- + co-occurrence expansion: each query term adds the 10 terms that co-occur with it in the
  most tools (P(u|t) x idf(u), PMI > 0, at least two tools), at 0.2 of a query term's weight;
- + fuzzy expansion: each query word adds up to 3 catalogue words within Levenshtein ratio 80
  (rapidfuzz, if installed), at 0.3 x the ratio.
"""

from __future__ import annotations

import heapq
import importlib.util
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from functools import cache

from mcpd.discovery.index import Params, ToolIndex, ToolText
from mcpd.discovery.text import REQUEST_WORDS, STOP_WORDS, terms, weighted_query_terms

Ranker = Callable[[str], list[str]]
Analyser = Callable[[str], Mapping[str, float]]
"""query -> term -> weight"""


def _index(by_server: dict[str, list[ToolText]]) -> ToolIndex:
    index = ToolIndex(Params())
    index.replace_servers(by_server)
    return index


def _top(index: ToolIndex, scores: dict[int, float]) -> list[str]:
    best = heapq.nlargest(50, scores, key=scores.__getitem__)
    best.sort(key=lambda doc_id: (-scores[doc_id], index._docs[doc_id].key))
    return ["/".join(index._docs[doc_id].key) for doc_id in best]


def _scored_by(index: ToolIndex, analyse: Analyser) -> Ranker:
    return lambda query: _top(index, index._scores(analyse(query)))


def request_words_always(by_server: dict[str, list[ToolText]]) -> Ranker:
    stop = STOP_WORDS | REQUEST_WORDS
    return _scored_by(_index(by_server), lambda query: Counter(set(terms(query, stop=stop))))


def _shipped_terms(index: ToolIndex) -> Callable[[str, bool], dict[str, float]]:
    """The shipped query analysis (as ``ToolIndex.search`` does it), with or without compounds."""
    names, weight = index._name_words, index.params.request_weight

    def analysed(query: str, compounds: bool = True) -> dict[str, float]:
        return weighted_query_terms(query, names, weight, compounds)

    return analysed


def query_compounds_half(by_server: dict[str, list[ToolText]]) -> Ranker:
    index = _index(by_server)
    analysed = _shipped_terms(index)

    def analyse(query: str) -> dict[str, float]:
        words = analysed(query, False)
        return {
            term: weight if term in words else 0.5 * weight for term, weight in analysed(query, True).items()
        }

    return _scored_by(index, analyse)


def query_likelihood_fusion(
    by_server: dict[str, list[ToolText]], mu: float = 300, share: float = 0.7
) -> Ranker:
    index = _index(by_server)
    analysed = _shipped_terms(index)
    lengths = {doc_id: sum(doc.lengths) for doc_id, doc in index._docs.items()}
    collection: Counter[str] = Counter()
    for doc in index._docs.values():
        collection.update({term: sum(tfs) for term, tfs in doc.tfs.items()})
    total = sum(lengths.values())

    def rank(query: str) -> list[str]:
        words = analysed(query, True)
        bm25 = index._scores(words)
        if not bm25:
            return []
        known = {term: weight for term, weight in words.items() if collection[term]}
        likelihood = {}
        for doc_id in bm25:
            tfs = index._docs[doc_id].tfs
            score = sum(known.values()) * math.log(mu / (lengths[doc_id] + mu))
            for term, weight in known.items():
                if term in tfs:
                    score += weight * math.log(1 + sum(tfs[term]) / (mu * collection[term] / total))
            likelihood[doc_id] = score
        best, low, high = max(bm25.values()), min(likelihood.values()), max(likelihood.values())
        span = (high - low) or 1.0
        fused = {
            doc_id: share * bm25[doc_id] / best + (1 - share) * (likelihood[doc_id] - low) / span
            for doc_id in bm25
        }
        return _top(index, fused)

    return rank


def _expanded(
    index: ToolIndex, related: Callable[[str], Iterable[tuple[str, float]]], weight: float
) -> Ranker:
    analysed = _shipped_terms(index)

    def analyse(query: str) -> dict[str, float]:
        words = analysed(query, True)
        weights = dict(words)
        for term in words:
            for other, strength in related(term):
                if other not in words:
                    weights[other] = max(weights.get(other, 0.0), weight * strength)
        return weights

    return _scored_by(index, analyse)


def cooccurrence_expansion(by_server: dict[str, list[ToolText]], per_term: int = 10) -> Ranker:
    index = _index(by_server)
    count = len(index._docs)
    df = {term: len(posting) for term, posting in index._postings.items()}
    pairs: dict[str, Counter[str]] = {}
    for doc in index._docs.values():
        for term in doc.tfs:
            pairs.setdefault(term, Counter()).update(other for other in doc.tfs if other != term)
    table: dict[str, list[tuple[str, float]]] = {}
    for term, together in pairs.items():
        scored = [
            (n / df[term] * math.log(1 + count / df[other]), other)
            for other, n in together.items()
            if n >= 2 and count * n > df[term] * df[other]
        ]
        top = heapq.nlargest(per_term, scored)
        mass = sum(score for score, _ in top) or 1.0
        table[term] = [(other, score / mass) for score, other in top]
    return _expanded(index, lambda term: table.get(term, ()), 0.2)


def fuzzy_expansion(by_server: dict[str, list[ToolText]]) -> Ranker:
    from rapidfuzz import fuzz, process  # noqa: PLC0415 - optional: rapidfuzz is no dependency of mcpd

    index = _index(by_server)
    vocabulary = sorted(
        {
            word
            for tools in by_server.values()
            for tool in tools
            for word in terms(f"{tool.tool}. {tool.description}", compounds=False)
            if len(word) >= 4 and word.isalpha()
        }
    )

    @cache
    def near(term: str) -> tuple[tuple[str, float], ...]:
        if len(term) < 4 or not term.isalpha():
            return ()
        found = process.extract(term, vocabulary, scorer=fuzz.ratio, score_cutoff=80, limit=4)
        return tuple((word, score / 100) for word, score, _ in found if word != term)[:3]

    return _expanded(index, near, 0.3)


def variants() -> dict[str, Callable[[dict[str, list[ToolText]]], Ranker]]:
    """The variants by name (fuzzy expansion only where rapidfuzz is installed)."""
    out: dict[str, Callable[[dict[str, list[ToolText]]], Ranker]] = {
        "request words, no name exception": request_words_always,
        "query compounds x0.5": query_compounds_half,
        "+ query likelihood": query_likelihood_fusion,
        "+ co-occurrence expansion": cooccurrence_expansion,
    }
    if importlib.util.find_spec("rapidfuzz") is not None:
        out["+ fuzzy expansion"] = fuzzy_expansion
    return out
