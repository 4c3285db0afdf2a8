"""Compatible mode: the reference server selection, reproduced exactly.

The reference scores servers with the ``classifier`` Ruby gem's ``String#word_hash``; so
does this module (``word_hash``). A text becomes a bag of terms in two parts:

- words: every character that is neither an ASCII letter, digit or underscore nor ASCII
  whitespace is deleted ("greeting's" -> "greetings", "file-system" -> "filesystem",
  "café" -> "caf"), the rest is split on whitespace and lowercased; words in the gem's
  stop list (``SKIP_WORDS``) and words of two characters or fewer are dropped, and each
  remaining word is reduced by the original Porter stemmer ("installing" -> "instal");
- symbols: every run of characters that are neither word characters nor whitespace
  ("?", "...", "'", "/", also any non-ASCII letters) counts as a term of its own, as is.

A server's score is the cosine of the term-count vectors of the query and of
``name + " " + description``. Servers whose score reaches the threshold are returned in
their given order. The comparison is exact: the threshold is the decimal it is written as
(0.05 is 1/20) and the cosine is compared in integers, so a score of exactly 1/20 is
selected however floating point rounds it. The whole list comes back unchanged when it
is empty, the query has no terms, no server has a description (blank counts as none), or
no server reaches the threshold: a selection never leaves an agent with nothing.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import Stemmer

from mcpd.model.protocol import SELECT_THRESHOLD

SKIP_WORDS = frozenset(
    """
    a again all along are also an and as at but by came can cant couldnt did didn didnt do doesnt
    dont ever first from have her here him how i if in into is isnt it itll just last least like most
    my new no not now of on or should sinc so some th than this that the their then those to told
    too true try until url us were when whether while with within yes you youll
    """.split()  # noqa: SIM905 - a word list reads best as words
)
"""The gem's ``CORPUS_SKIP_WORDS``, compared with the lowercased word before stemming."""

# Ruby's \w and \s are ASCII-only: [A-Za-z0-9_] and [ \t\n\v\f\r].
_NOT_WORD_OR_SPACE = re.compile(r"[^\w\s]", re.ASCII)
_WORD_CHAR = re.compile(r"\w", re.ASCII)
_SPACE = re.compile(r"\s+", re.ASCII)
_PORTER = Stemmer.Stemmer("porter")


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


def _split(text: str) -> list[str]:
    return [piece for piece in _SPACE.split(text) if piece]


def word_hash(text: str) -> Counter[str]:
    """Term counts of ``text`` as the gem's ``String#word_hash`` makes them (see the module docstring)."""
    counts: Counter[str] = Counter()
    for word in _split(_NOT_WORD_OR_SPACE.sub("", text)):
        lowered = word.lower()
        if lowered not in SKIP_WORDS and len(lowered) > 2:
            counts[_PORTER.stemWord(lowered)] += 1
    counts.update(_split(_WORD_CHAR.sub(" ", text)))
    return counts


def tf_cosine(query: Counter[str], document: Counter[str]) -> float:
    dot = sum(count * document.get(term, 0) for term, count in query.items())
    if not dot:
        return 0.0
    norm = math.sqrt(sum(v * v for v in query.values())) * math.sqrt(sum(v * v for v in document.values()))
    return dot / norm


def reaches(query: Counter[str], document: Counter[str], threshold: float) -> bool:
    """cosine(query, document) >= threshold, decided in exact arithmetic."""
    limit = Fraction(repr(threshold))  # the shortest decimal that is this float: 0.05 -> 1/20
    if limit <= 0:
        return True
    dot = sum(count * document.get(term, 0) for term, count in query.items())
    if dot <= 0:
        return False
    # dot / sqrt(qq * dd) >= p / q  <=>  dot^2 * q^2 >= p^2 * qq * dd, all integers.
    qq = sum(v * v for v in query.values())
    dd = sum(v * v for v in document.values())
    return dot * dot * limit.denominator**2 >= limit.numerator**2 * qq * dd


def select_servers(
    query: str, servers: Sequence[Candidate], threshold: float = SELECT_THRESHOLD
) -> Selection:
    names = [server.name for server in servers]
    query_terms = word_hash(query)
    if not servers or not query_terms or not any((s.description or "").strip() for s in servers):
        return Selection(names, {}, fallback=True)
    documents = {server.name: word_hash(f"{server.name} {server.description or ''}") for server in servers}
    scores = {name: tf_cosine(query_terms, document) for name, document in documents.items()}
    chosen = [name for name in names if reaches(query_terms, documents[name], threshold)]
    if not chosen:
        return Selection(names, scores, fallback=True)
    return Selection(chosen, scores, fallback=False)
