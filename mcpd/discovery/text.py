"""Text analysis for discovery: what the ranking index, the usage prior and request grouping see.

``terms()`` turns a name or a sentence into index terms, in this order:

1. identifiers split into words: snake_case, camelCase, dots and dashes (``getHTTPResponse`` ->
   get HTTP Response); an upper-case acronym keeps a plural ``s`` to itself (``PDFs`` -> PDF,
   ``APIs`` -> API, ``IDs`` -> ID), so it is not split into ``PD Fs``;
2. lowercased, English stop words dropped;
3. stemmed with the Snowball English stemmer (Porter2), so that singular and plural and the
   common inflections meet (images/image, creates/create, searching/search) while its
   exception list keeps words such as "news" whole;
4. compounds both ways: every two adjacent words are also indexed joined (``mind map`` also
   gives ``mindmap``), so a query "mind map" meets a tool "mindmap" or ``MindMap`` and a query
   "mindmap" meets "mind map";
5. text in scripts written without spaces (Chinese, Japanese, Korean) as overlapping character
   bigrams, which match without a dictionary.

A query (``query_terms()``) also drops the words of a general English stop list (the
``stop-words`` package's, some 1,300 words: "help", "find", "show", "tell", "latest" ...),
which mostly say how a request is put rather than what it is about, except words that a tool's
name in the catalogue uses: there they are the domain's own words ("search", "website", "date").
The list also holds words that are sometimes the topic ("name", "computer", "number", "gov"),
so the ranking does not drop them but weighs them less (``weighted_query_terms()``). Tool texts
keep them all, so the index does not depend on the catalogue.
"""

from __future__ import annotations

import re
from collections.abc import Container
from functools import lru_cache

import Stemmer
from stop_words import get_stop_words

# An acronym's plural: "PDFs", "APIs", "URLs" -> the acronym alone (it must not become "PD Fs").
_ACRONYM_PLURAL = re.compile(r"(?<![A-Za-z])([A-Z]{2,})s(?![a-z])")
# ... and typed in lower case: consonants and digits only, then a single "s" ("pdfs", not "css").
_ACRONYM_PLURAL_LOWER = re.compile(r"[b-df-hj-np-tv-xz0-9]+[b-df-hj-np-rtv-xz0-9]s")
# camelCase and acronym boundaries: "getHTTPResponse" -> get HTTP Response
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
# Contractions and possessives: "I'm", "can't", "company's" -> I, can, company.
_CONTRACTION = re.compile(r"(?<=[A-Za-z])['\u2019](?:s|m|t|d|ve|re|ll)\b", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+")
_BREAK = re.compile(r"[^\w \-]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
# A two-letter word typed on its own: not a piece of "sci-fi", "v1.2", "a/b" or "I've", nor one a
# dot follows: "vs." and the "II." of "World War II." are no initialisms (read so, one of MetaTool's
# development queries lost its tool from the top 5), at the cost of a sentence's last "PR.".
_TWO_LETTERS = re.compile(r"(?<![\w\-./\\'\u2019])[A-Za-z]{2}(?![\w\-./\\'\u2019])")

STOP_WORDS = frozenset(
    """
    a about above after again all also am an and any are as at be been before being below between both
    but by can could did do does doing down during each else few for from further get gets got had has
    have having he her here hers him his how i if in into is it its itself just let me more most my no
    nor not now of off on once only or other our ours out over own please same she should so some such
    than that the their theirs them then there these they this those through to too under until up use
    used uses using very via want was we were what when where which while who whom why will with would
    you your yours need needs
    """.split()  # noqa: SIM905 - a word list reads best as words
)

REQUEST_WORDS = frozenset(get_stop_words("en")) - STOP_WORDS
"""General English stop words that only a query drops (see ``query_terms``)."""

# PyStemmer's own cache is off: it made a miss cost 2.4 us instead of 0.9, and ours is bounded better.
_STEMMER = Stemmer.Stemmer("english", 0)

STEM_CACHE = 8192
"""Stems kept: a catalogue's vocabulary is a few thousand words; a miss costs about a microsecond."""
CACHED_WORD = 32
"""Longer words are stemmed afresh each time. Queries are client input: a cache of every word
ever asked for, up to the 4,096 characters a query may have, would let a client pin memory."""


def stem(word: str) -> str:
    """The Snowball English stem of a lowercase word; "pdfs" is "pdf" too.

    Snowball strips a plural "s" only after a vowel, which leaves the plural of an
    acronym typed in lower case ("pdfs", "csvs", "llms") alone: a word with no vowel that
    ends in a single "s" is taken for one.
    """
    return _cached_stem(word) if len(word) <= CACHED_WORD else _stem(word)


def _stem(word: str) -> str:
    if len(word) > 3 and _ACRONYM_PLURAL_LOWER.fullmatch(word):
        return word[:-1]
    return str(_STEMMER.stemWord(word))


_cached_stem = lru_cache(maxsize=STEM_CACHE)(_stem)


def split_identifier(text: str) -> list[str]:
    """Words of a name or sentence: snake_case, camelCase, dots and dashes all separate words."""
    return _WORD.findall(_CAMEL.sub(" ", _ACRONYM_PLURAL.sub(r"\1", text)))


def _runs(text: str) -> list[list[str]]:
    """Runs of words that may form compounds: only spaces, dashes, underscores or camelCase
    boundaries separate the words of a run; any other punctuation ends it."""
    text = _CAMEL.sub(" ", without_contractions(_ACRONYM_PLURAL.sub(r"\1", text)))
    return [_WORD.findall(run.lower()) for run in _BREAK.split(text)]


def without_contractions(text: str) -> str:
    """``text`` less its contractions and possessives: "I'm", "can't", "company's" -> I, can, company."""
    return _CONTRACTION.sub("", text)


def _cjk_grams(run: str) -> list[str]:
    # No spaces between words: overlapping character bigrams match without a dictionary.
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


class _QueryStops:
    """``STOP_WORDS``, and ``REQUEST_WORDS`` less the words in ``keep``."""

    __slots__ = ("_keep",)

    def __init__(self, keep: Container[str]) -> None:
        self._keep = keep

    def __contains__(self, word: object) -> bool:
        return word in STOP_WORDS or (word in REQUEST_WORDS and word not in self._keep)


def terms(
    text: str,
    compounds: bool = True,
    stop: Container[str] = STOP_WORDS,
    initials: set[tuple[str, str]] | None = None,
) -> list[str]:
    """Index terms of ``text`` (see the module docstring); ``compounds=False`` leaves out the joined pairs.

    ``initials`` gets (initials, compound) of each compound whose words start with Latin letters:
    ("pr", "pullrequest") for "pull request", what an initialism may stand for."""
    out: list[str] = []
    for run in _runs(text):
        previous = ""  # the word before, if it was a term of its own (not a stop word, not CJK)
        for word in run:
            if word in stop or len(word) == 1:
                previous = ""
            elif _CJK.search(word):
                out.extend(stem(piece) for piece in _CJK.split(word) if piece and piece not in stop)
                for cjk in _CJK.findall(word):
                    out.extend(_cjk_grams(cjk))
                previous = ""
            else:
                out.append(stem(word))
                if compounds and previous:
                    compound = stem(previous + word)
                    out.append(compound)
                    letters = previous[0] + word[0]
                    if initials is not None and letters.isascii() and letters.isalpha():
                        initials.add((letters, compound))
                previous = word
    return out


def query_terms(text: str, keep: Container[str] = frozenset(), compounds: bool = True) -> list[str]:
    """Terms of a query: ``terms()`` less ``REQUEST_WORDS``, except the lowercase words in ``keep``
    (the words of the catalogue's tool names)."""
    return terms(text, compounds, _QueryStops(keep))


def weighted_query_terms(
    text: str, keep: Container[str] = frozenset(), request_weight: float = 0.0, compounds: bool = True
) -> dict[str, float]:
    """Each distinct term of a query with its weight: 1 for those of ``query_terms()``,
    ``request_weight`` for the rest of ``terms()`` (the request words that ``query_terms`` drops,
    and the compounds they form); none of the rest when ``request_weight`` is 0."""
    weights = dict.fromkeys(terms(text, compounds), request_weight) if request_weight else {}
    weights.update(dict.fromkeys(query_terms(text, keep, compounds), 1.0))
    return weights


def two_letter_words(query: str) -> list[str]:
    """The distinct two-letter words of a query typed on their own, lowercase, that are no stop words
    ("PR", "ci", not "of", nor the "fi" of "sci-fi"): those that may be initialisms. The request
    words stay: the general stop list holds every two-letter code ("pr", "ci", "ai", "ml")."""
    words = dict.fromkeys(word.lower() for word in _TWO_LETTERS.findall(query))
    return [word for word in words if word not in STOP_WORDS]


LEARNED_TERMS = 32
"""Distinct terms of a query that usage learns from: an agent's request is a sentence or two, and
every term learned is kept (in the store and in memory) for as long as the call it came with."""


def learned_terms(query: str) -> list[str]:
    """The terms usage learns from a query and looks up again: its first ``LEARNED_TERMS`` distinct
    ``terms()``. A 4,096-character query gave a thousand; a few hundred such calls grew the
    daemon by hundreds of MB."""
    return list(dict.fromkeys(terms(query)))[:LEARNED_TERMS]


def name_words(name: str) -> list[str]:
    """The lowercase words of a tool's name, as ``query_terms`` compares them with ``keep``."""
    return [word.lower() for word in split_identifier(name)]


def plain_terms(text: str) -> list[str]:
    """Lowercase words split on every character that is not a letter or digit (the baselines' tokenizer)."""
    return _WORD.findall(text.lower())
