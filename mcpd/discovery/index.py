"""A field-weighted BM25 (BM25F) index over tools, updated one server at a time.

Each tool is a document with four fields: its server (name and description), its name,
its description, and its parameters (names and descriptions). A term's frequencies in
the fields are length-normalised per field, weighted, summed, and saturated once
(Robertson & Zaragoza's BM25F), so a word in a short field such as the tool name counts
more than the same word in a long parameter description, and repeating a word cannot
dominate. Each distinct query term counts once; idf is ln(1 + (N - df + 0.5) / (df + 0.5)).
A query is analysed by ``weighted_query_terms``: request words weigh ``Params.request_weight``,
except those that the catalogue's tool names use (the index counts them), which weigh 1 as
the other terms do. A two-letter query word that no tool uses may be an initialism ("PR"):
it is read as the catalogue's compounds with those initials (``Params.initialisms``).

The saturated weight of each (term, tool) is computed when the tool is indexed, so a
query is a sum over posting lists. Field length averages drift as servers change; the
stored weights are refreshed for everything once they drift by more than 10 %, and
otherwise only the changed server's tools are (re)computed.
"""

from __future__ import annotations

import heapq
import math
import operator
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcpd.discovery import spelling, synonyms
from mcpd.discovery.prior import UsagePrior
from mcpd.discovery.text import (
    learned_terms,
    name_words,
    stem,
    terms,
    two_letter_words,
    weighted_query_terms,
)

if TYPE_CHECKING:
    # Only for the annotation: the semantic extra is imported by whoever switches it on.
    from mcpd.discovery.semantic import SemanticIndex

FIELDS = ("server", "name", "description", "params")

SYNONYM_POSTINGS = 100
"""A query word's synonym or hypernym used by more tools than this is not read: its posting list
costs ~0.3 us a tool, and it hardly tells tools apart. Without this bound, reading synonyms cost
44 % of a query's mean time at 10k tools ("time", "make", "support" are in thousands); with it,
9 % (p50 and mean, the lexicons loaded), ~5 % against the ranking before synonyms, which looked
for the query's unknown words twice. Neither benchmark's development queries moved (their
catalogues have 199 and 527 tools)."""

RARE_WORD_TOOLS = 20
"""A query word that at most this many tools use is read also as its synonyms
(``Params.rare_synonyms``); one that more use already finds what it names among them. On both
benchmarks' development queries and the unseen sets' halves A, 10 to 40 rank alike; at 100 (every
word, in catalogues of 199 and 527 tools) LiveMCPBench's third unseen set loses 0.5 of nDCG@10."""

FEEDBACK_DEPTH = 100
"""Tools that pseudo-relevance feedback re-ranks (the best by the original query)."""


@dataclass(frozen=True)
class Params:
    """BM25F parameters: every field weighted alike, less length normalisation than the textbook's.

    k1 2.0 and b 0.3 were chosen on MetaTool's 10,605 development queries (R@5 64.4 against 63.6
    for the textbook k1 1.2, b 0.75; the plateau k1 >= 1.6, b 0.2-0.35 is within 0.2 points) and
    checked on LiveMCPBench untouched (43.6 -> 44.5). Tool texts are short and their length says
    little about their scope, so a long description is penalised less, as is usual for short
    documents. Field weights tuned to one benchmark's development queries did not carry over
    to its unseen queries; ``bench/retrieval.py`` cross-validates these against the alternatives
    it lists.
    """

    k1: float = 2.0
    weights: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)
    b: tuple[float, ...] = (0.3, 0.3, 0.3, 0.3)
    request_weight: float = 0.2
    """A query's request words (``mcpd.discovery.text.REQUEST_WORDS`` that no tool name uses), and
    the compounds they form, weigh this much against 1 for its other terms; 0 drops them.

    The general stop list they come from also holds words that are some requests' topic ("name" in
    "domain name", "gov" of "Data.gov", "site", "computer", "number"). On MetaTool's development
    queries weighing them lifts R@5 over dropping them at every weight from 0.05 to 0.75 (64.4 ->
    64.6 at 0.05, 64.9 at 0.2, 65.1 at 0.5; 64.0 at 1, as before they were dropped); 0.2 is the
    lowest weight within 0.2 points of the best (the bench's cross-validation picks 0.5 on every
    fold). LiveMCPBench, untouched: R@5 44.5 -> 44.7, nDCG@10 41.2 -> 40.8 (R@5 43.3 at 0.5).
    Their posting lists are read again: about 0.2 ms more per query over 10k tools at p50.
    """
    spelling: bool = True
    """Query words no tool uses are read as their one-edit neighbours in the catalogue (typos)."""
    synonyms: float = 0.5
    """An English query word that no tool uses is read also as its WordNet synonyms and (with
    ``hypernyms``) direct hypernyms that the catalogue has, sharing this weight (0: not read so);
    see ``mcpd.discovery.synonyms``.

    MetaTool's development queries: R@5 65.0 -> 66.0, nDCG@10 57.9 -> 58.8; the bench's 5-fold
    cross-validation keeps 0.5 against off, 0.25 (65.7) and 0.75 (66.0, held-out 65.9), and
    hypernyms against none (65.3). LiveMCPBench's, untouched: R@5 44.7 unchanged, nDCG@10
    40.8 -> 40.9. Request words ("save", "present") are not read so: reading them at the request
    weight moved neither set's R@5.
    """
    hypernyms: bool = True
    """``synonyms`` takes in the word's direct hypernyms too ("hour" -> "time")."""
    rare_synonyms: float = 0.25
    """An English query word that some tools use, but at most ``RARE_WORD_TOOLS``, is read also as
    its WordNet synonyms that the catalogue has (no hypernyms), sharing this weight (0: not read
    so): a tool may say "hints" where the request says "clues", while another tool uses "clue".

    0.25 was chosen on the unseen sets' halves A and both development sets, R@5 and nDCG@10
    neutral or better on each: MetaTool's development R@5 66.0 -> 66.1, its halves A nDCG@10
    81.0 -> 82.5 (set 1), 79.6 -> 79.9 (set 2), R@5 91.2 -> 93.8 (set 3); LiveMCPBench's set 2
    R@5 85.8 -> 87.1, its development R@5 44.7 and nDCG@10 40.9 unchanged (SR@5 65.4 -> 63.6: one
    query's fifth server). 0.1 loses set 3's gain; 0.5 loses 0.2 of nDCG@10 on LiveMCPBench's
    development queries, with hypernyms 0.6. On the halves held out (B), scored once after the
    choice: R@5 / nDCG@10 +3.3 / +1.4 (MetaTool set 1), +1.2 / +1.4 (set 2), 0 / +0.4 (set 3);
    LiveMCPBench 0 / -0.5 (set 1), 0 / 0 (set 2), 0 / +0.8 (set 3). ``bench/retrieval.py``
    cross-validates 0.1, 0.5 and off against it.
    """
    initialisms: bool = True
    """A two-letter query word that no tool uses ("PR", "CI") is read as the compounds of two
    adjacent words with those initials in the catalogue's tool names and descriptions ("pull
    request"), sharing a query word's weight, as it means one of them.

    On the real servers' catalogue (``bench/realcat``) half A: R@5 74.7 -> 76.0, nDCG@10 69.1 ->
    70.3 ("open a PR"); both benchmarks' development queries, and the unseen sets' halves A,
    unchanged (their requests hardly abbreviate so); ``bench/retrieval.py`` cross-validates it
    against off (alike on both). Half B, held out: 71.3 / 65.0 -> 71.3 / 65.7."""
    feedback_docs: int = 0
    """Pseudo-relevance feedback (RM3): the query is expanded from this many best tools (0: off).

    Off: with the terms and weight below (the best on MetaTool, where it gains 0.5 points of
    R@5), it loses 0.7 on LiveMCPBench; ``bench/retrieval.py`` keeps it in its cross-validation."""
    feedback_terms: int = 20
    """Expansion terms taken from them."""
    feedback_weight: float = 0.8
    """The original query's share of the expanded one."""


@dataclass(frozen=True)
class ToolText:
    """What is indexed of one tool."""

    server: str
    tool: str
    description: str = ""
    server_description: str = ""
    params: Sequence[tuple[str, str]] = ()
    """(name, description) of each input parameter."""


@dataclass
class _Doc:
    key: tuple[str, str]
    lengths: tuple[int, ...]
    tfs: dict[str, tuple[int, ...]]
    name_words: frozenset[str]
    initials: frozenset[tuple[str, str]]
    """(initials, compound term) of its name's and description's adjacent word pairs"""


@dataclass
class Hit:
    server: str
    tool: str
    score: float
    parts: dict[str, float] | None = None
    """How the score was made, when usage took part: text, usage_factor, association, association_lift."""


@dataclass
class ToolIndex:
    params: Params = field(default_factory=Params)
    _docs: dict[int, _Doc] = field(default_factory=dict)
    _by_server: dict[str, list[int]] = field(default_factory=dict)
    _postings: dict[str, dict[int, float]] = field(default_factory=dict)
    _length_sums: list[int] = field(default_factory=lambda: [0] * len(FIELDS))
    _averages: tuple[float, ...] = (1.0,) * len(FIELDS)
    _next_id: int = 0
    _key_doc: dict[tuple[str, str], int] = field(default_factory=dict)
    _name_words: dict[str, int] = field(default_factory=dict)
    """word -> tools whose name has it: the request words that weigh fully in a query"""
    _initials: dict[str, dict[str, int]] = field(default_factory=dict)
    """two letters -> compound term with those initials -> tools that have it (``Params.initialisms``)"""
    semantic: SemanticIndex | None = None
    """The optional semantic ranking fused with this one (``mcpd.discovery.semantic``)."""

    def __len__(self) -> int:
        return len(self._docs)

    # -- updates ----------------------------------------------------------------------------

    def replace_server(self, server: str, tools: Iterable[ToolText]) -> None:
        """Index ``server``'s tools in place of whatever it had; other servers are untouched."""
        for exc in self.replace_servers({server: tools}).values():
            raise exc

    def replace_servers(self, changes: Mapping[str, Iterable[ToolText]]) -> dict[str, Exception]:
        """Re-index several servers at once, weighing the new documents in one pass.

        A server whose texts fail (a bug they trip, in building or analysing them) is left out of
        the index, the others go in: returned, with what it raised.
        """
        failed: dict[str, Exception] = {}
        listed: dict[str, list[ToolText]] = {}
        analysed: dict[str, list[_Doc]] = {}
        for server, texts in changes.items():
            # Every tool of a server repeats the server's text: analyse it once.
            server_fields: dict[str, Counter[str]] = {}
            try:
                listed[server] = list(texts)
                analysed[server] = [_analyse(tool, server_fields) for tool in listed[server]]
            except Exception as exc:
                failed[server] = exc
                listed[server], analysed[server] = [], []
        if self.semantic is not None:
            self.semantic.replace_servers(listed)
        added: list[int] = []
        for server, docs in analysed.items():
            self.remove_server(server)
            ids = [self._add(doc) for doc in docs]
            if ids:
                self._by_server[server] = ids
            added.extend(ids)
        if self._drifted():
            self._reweigh(self._docs)
        else:
            self._reweigh({doc_id: self._docs[doc_id] for doc_id in added})
        return failed

    def _add(self, doc: _Doc) -> int:
        doc_id = self._next_id
        self._next_id += 1
        self._docs[doc_id] = doc
        self._key_doc[doc.key] = doc_id
        for i, length in enumerate(doc.lengths):
            self._length_sums[i] += length
        for word in doc.name_words:
            self._name_words[word] = self._name_words.get(word, 0) + 1
        for letters, term in doc.initials:
            compounds = self._initials.setdefault(letters, {})
            compounds[term] = compounds.get(term, 0) + 1
        return doc_id

    def remove_server(self, server: str) -> None:
        for doc_id in self._by_server.pop(server, []):
            doc = self._docs.pop(doc_id)
            self._key_doc.pop(doc.key, None)
            for i, length in enumerate(doc.lengths):
                self._length_sums[i] -= length
            for word in doc.name_words:
                left = self._name_words[word] - 1
                if left:
                    self._name_words[word] = left
                else:
                    del self._name_words[word]
            for letters, term in doc.initials:
                compounds = self._initials[letters]
                compounds[term] -= 1
                if not compounds[term]:
                    del compounds[term]
                    if not compounds:
                        del self._initials[letters]
            for term in doc.tfs:
                posting = self._postings[term]
                del posting[doc_id]
                if not posting:
                    del self._postings[term]

    def _current_averages(self) -> tuple[float, ...]:
        count = max(1, len(self._docs))
        return tuple(max(total / count, 1.0) for total in self._length_sums)

    def _drifted(self) -> bool:
        now = self._current_averages()
        return any(abs(a - b) > 0.1 * b for a, b in zip(now, self._averages, strict=True))

    def _reweigh(self, docs: dict[int, _Doc]) -> None:
        if len(docs) == len(self._docs):
            self._averages = self._current_averages()
        k1 = self.params.k1
        weights, bs, averages = self.params.weights, self.params.b, self._averages
        norms_by_doc = {
            doc_id: [
                w / (1 - b + b * length / avg)
                for w, b, length, avg in zip(weights, bs, doc.lengths, averages, strict=True)
            ]
            for doc_id, doc in docs.items()
        }
        postings = self._postings
        for doc_id, doc in docs.items():
            norms = norms_by_doc[doc_id]
            for term, tfs in doc.tfs.items():
                tf = sum(map(operator.mul, norms, tfs))
                posting = postings.get(term)
                if posting is None:
                    posting = postings[term] = {}
                posting[doc_id] = tf / (k1 + tf)

    # -- queries ----------------------------------------------------------------------------

    def _scores(self, query_terms: Mapping[str, float]) -> dict[int, float]:
        count = len(self._docs)
        weighted = []
        for term, weight in query_terms.items():
            posting = self._postings.get(term)
            if posting:
                df = len(posting)
                weighted.append((weight * math.log(1.0 + (count - df + 0.5) / (df + 0.5)), posting))
        if not weighted:
            return {}
        # Seed from the longest posting list in one comprehension, then add the others in.
        weighted.sort(key=lambda item: len(item[1]), reverse=True)
        idf, posting = weighted[0]
        scores = {doc_id: idf * saturated for doc_id, saturated in posting.items()}
        get = scores.get
        for idf, posting in weighted[1:]:
            for doc_id, saturated in posting.items():
                scores[doc_id] = get(doc_id, 0.0) + idf * saturated
        return scores

    def _add_feedback(self, scores: dict[int, float], query_weight: float) -> None:
        """Re-rank the best ``FEEDBACK_DEPTH`` tools by RM3 (Lavrenko & Croft's relevance model,
        interpolated): the best ``feedback_docs`` tools' term distributions, weighted by their
        scores, give expansion terms, whose BM25F scores are added at ``(1 - w) / w`` of the
        original query's weight: that ranks as ``w * original + (1 - w) * expansion``.

        Only the candidates are re-scored, by a lookup per (term, tool), never a posting list:
        the expansion costs microseconds where a second full query cost three times the first.
        """
        feedback = self.params.feedback_docs
        top = heapq.nlargest(max(feedback, FEEDBACK_DEPTH), scores, key=scores.__getitem__)
        total = sum(scores[doc_id] for doc_id in top[:feedback])
        model: dict[str, float] = {}
        for doc_id in top[:feedback]:
            doc = self._docs[doc_id]
            share = scores[doc_id] / total / max(1, sum(doc.lengths))
            for term, tfs in doc.tfs.items():
                model[term] = model.get(term, 0.0) + share * sum(tfs)
        chosen = heapq.nlargest(self.params.feedback_terms, model.items(), key=operator.itemgetter(1))
        mass = sum(weight for _, weight in chosen) or 1.0
        w = self.params.feedback_weight
        # The original terms weigh ``query_weight`` in all: the expansion gets its share of that.
        scale = (1 - w) / w * query_weight / mass
        count = len(self._docs)
        for term, weight in chosen:
            posting = self._postings[term]
            df = len(posting)
            lift = scale * weight * math.log(1.0 + (count - df + 0.5) / (df + 0.5))
            for doc_id in top:
                saturated = posting.get(doc_id)
                if saturated is not None:
                    scores[doc_id] += lift * saturated

    def _read_unknown(self, query: str, analysed: dict[str, float]) -> None:
        """Add the likely meant terms of query words no tool uses. With ``Params.spelling``
        (``mcpd.discovery.spelling``): both parts of a compound ("flowchart": flow, chart) at full
        weight, as they are both meant; else each misspelt word's candidates, sharing its weight, as
        it means one of them. With ``Params.synonyms`` (``mcpd.discovery.synonyms``): an English
        word's relatives in the catalogue, sharing that weight, as they are near what it means.
        With ``Params.rare_synonyms``: a word few tools use, read also as its synonyms the query
        lacks, sharing that weight, as a tool may name the same thing otherwise."""
        english = spelling.loaded()
        if english is None:
            return
        postings = self._postings
        typed = spelling.typed(query)
        words = spelling.unknown(typed, postings)
        split = spelling.compounds(words, postings, english) if self.params.spelling else {}
        for parts in split.values():
            for term in parts:
                analysed[term] = 1.0
        if self.params.spelling:
            for word in spelling.misspelt(words, english):
                found = [] if word in split else spelling.corrections(word, postings)
                self._add_shared(analysed, found, 1.0)
        thesaurus = synonyms.loaded()
        if self.params.synonyms and thesaurus is not None:
            hypernyms = self.params.hypernyms
            for word, found in synonyms.readings(words, postings, english, thesaurus, hypernyms).items():
                if word not in split:
                    common = [term for term in found if len(postings[term]) <= SYNONYM_POSTINGS]
                    self._add_shared(analysed, common, self.params.synonyms)
        if self.params.rare_synonyms and thesaurus is not None:
            rare = [word for word in typed if 0 < len(postings.get(stem(word), ())) <= RARE_WORD_TOOLS]
            for found in synonyms.readings(rare, postings, english, thesaurus, hypernyms=False).values():
                # Only what the query lacks: a synonym it has already is no reading of the word.
                new = [
                    term for term in found if term not in analysed and len(postings[term]) <= SYNONYM_POSTINGS
                ]
                if new:
                    self._add_shared(analysed, new, self.params.rare_synonyms)

    def _read_initialisms(self, query: str, analysed: dict[str, float]) -> None:
        """Add the compounds a two-letter query word no tool uses may stand for (``Params.initialisms``)."""
        for word in two_letter_words(query):
            if stem(word) not in self._postings:
                self._add_shared(analysed, sorted(self._initials.get(word, ())), 1.0)

    @staticmethod
    def _add_shared(analysed: dict[str, float], terms: list[str], weight: float) -> None:
        # A term the query has already keeps the greater weight.
        for term in terms:
            analysed[term] = max(analysed.get(term, 0.0), weight / len(terms))

    def search(
        self,
        query: str,
        limit: int | None = None,
        servers: set[str] | None = None,
        prior: UsagePrior | None = None,
    ) -> list[Hit]:
        """Tools ranked by relevance to ``query``: those matching a query term, or tied to one by usage.

        The text score is the tool's BM25F score. A non-empty ``prior`` scales it by the tool's
        usage factor and adds its association with the query's words (see ``mcpd.discovery.prior``).
        """
        # Each distinct query term counts once, as in standard BM25: a long task description
        # that repeats a word ("markdown ... /root/markdown/x.md") must not weigh it twice.
        analysed = weighted_query_terms(query, self._name_words, self.params.request_weight)
        if self.params.spelling or self.params.synonyms or self.params.rare_synonyms:
            self._read_unknown(query, analysed)
        if self.params.initialisms:
            self._read_initialisms(query, analysed)
        scores = self._scores(analysed)
        if self.params.feedback_docs and scores:
            self._add_feedback(scores, sum(analysed.values()))
        if servers is not None:
            scores = {d: s for d, s in scores.items() if self._docs[d].key[0] in servers}
        parts: dict[int, dict[str, float]] = {}
        if prior:
            # The prior learnt each query's words as the daemon records them (``terms``), request
            # words included: "say something back" is all request words, and still leads somewhere.
            scores, parts = self._with_usage(scores, Counter(learned_terms(query)), prior, servers)
        if self.semantic is not None:
            scores = self._fused(query, scores, servers, limit)
        if limit is not None and limit < len(scores):
            # Ties at the cut go by posting order, which is deterministic for a given index.
            best = [
                (doc_id, scores[doc_id]) for doc_id in heapq.nlargest(limit, scores, key=scores.__getitem__)
            ]
        else:
            best = list(scores.items())
        hits = [Hit(*self._docs[doc_id].key, score, parts.get(doc_id)) for doc_id, score in best]
        hits.sort(key=lambda hit: (-hit.score, hit.server, hit.tool))
        return hits

    def _fused(
        self, query: str, scores: dict[int, float], servers: set[str] | None, limit: int | None
    ) -> dict[int, float]:
        assert self.semantic is not None
        # The lexical top ``depth`` (>= limit) goes into the fusion; below it a tool's lexical
        # share is already smaller than each of theirs.
        depth = len(scores) if limit is None else max(limit, self.semantic.depth)
        best = heapq.nlargest(depth, scores, key=scores.__getitem__)
        docs = self._docs
        fused = self.semantic.fused({docs[doc_id].key: scores[doc_id] for doc_id in best}, query, servers)
        return {self._key_doc[key]: score for key, score in fused.items() if key in self._key_doc}

    def _with_usage(
        self, scores: dict[int, float], query_terms: Counter[str], prior: UsagePrior, servers: set[str] | None
    ) -> tuple[dict[int, float], dict[int, dict[str, float]]]:
        best = max(scores.values(), default=0.0) or 1.0
        lift = prior.association_weight * best
        strength = prior.association(query_terms)
        candidates = dict.fromkeys(scores, 0.0)
        for key, value in strength.items():
            doc_id = self._key_doc.get(key)
            if doc_id is not None and (servers is None or key[0] in servers):
                candidates[doc_id] = value
        final: dict[int, float] = {}
        parts: dict[int, dict[str, float]] = {}
        for doc_id, association in candidates.items():
            text = scores.get(doc_id, 0.0)
            factor = prior.tool_factor(self._docs[doc_id].key)
            final[doc_id] = (text + lift * association) * (1 + factor)
            # Enough to rebuild the score: (text + association_lift x association) x (1 + usage_factor).
            parts[doc_id] = {
                "text": text,
                "usage_factor": factor,
                "association": association,
                "association_lift": lift,
            }
        return final, parts


def _analyse(tool: ToolText, server_fields: dict[str, Counter[str]]) -> _Doc:
    # Full stops between the pieces of a field, so no compound is formed across them.
    server_text = f"{tool.server}. {tool.server_description}"
    server_field = server_fields.get(server_text)
    if server_field is None:
        server_field = server_fields[server_text] = Counter(terms(server_text))
    initials: set[tuple[str, str]] = set()
    counters = (
        server_field,
        Counter(terms(tool.tool, initials=initials)),
        Counter(terms(tool.description, initials=initials)),
        Counter(terms(". ".join(f"{name}. {text}" for name, text in tool.params))),
    )
    tfs: dict[str, list[int]] = {}
    for field_no, counter in enumerate(counters):
        for term, count in counter.items():
            row = tfs.get(term)
            if row is None:
                row = tfs[term] = [0] * len(FIELDS)
            row[field_no] = count
    return _Doc(
        key=(tool.server, tool.tool),
        lengths=tuple(c.total() for c in counters),
        tfs={term: tuple(row) for term, row in tfs.items()},
        name_words=frozenset(name_words(tool.tool)),
        initials=frozenset(initials),
    )


def schema_params(schema: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(name, description) of each top-level property of an input schema."""
    properties = (schema or {}).get("properties")
    if not isinstance(properties, dict):
        return []
    return [(str(name), _description(spec)) for name, spec in properties.items()]


def _description(spec: object) -> str:
    # A server may send null (or a number) where a string belongs: "None" is no word of the tool's.
    description = spec.get("description") if isinstance(spec, dict) else None
    return description if isinstance(description, str) else ""
