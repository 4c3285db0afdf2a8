"""Text analysis for discovery: identifiers split into words, stop words out, light stemming, CJK bigrams.

``terms()`` is what the ranking index sees. ``plain_terms()`` is the reference tokenizer of
the compatible server selection (lowercase, split on anything not a letter or digit) and
must not change: that mode promises the reference behaviour exactly.
"""

from __future__ import annotations

import re
from functools import lru_cache

# camelCase and acronym boundaries: "getHTTPResponse" -> get HTTP Response
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[^\W_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")

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


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light English stemmer: plurals, -ing, -ed, -ly and a few derivational endings.

    Deliberately conservative (it only has to make "files"/"file" and "searching"/"search"
    meet); aggressive stemmers merge unrelated tool names.
    """
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    for suffix, replacement, minimum in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= minimum:
            base = word[: -len(suffix)] + replacement
            if suffix in ("ing", "ed") and len(base) > 3 and base[-1] == base[-2] and base[-1] not in "lsz":
                base = base[:-1]  # running -> run, stopped -> stop
            return base
    return word


_SUFFIXES: tuple[tuple[str, str, int], ...] = (
    ("ational", "ate", 3),
    ("ization", "ize", 3),
    ("ations", "ate", 3),
    ("ation", "ate", 3),
    ("iveness", "ive", 3),
    ("fulness", "ful", 3),
    ("ments", "", 4),
    ("ment", "", 4),
    ("ities", "ity", 3),
    ("ies", "y", 3),
    ("sses", "ss", 2),
    ("ing", "", 3),
    ("ers", "", 3),
    ("er", "", 3),
    ("edly", "", 3),
    ("ed", "", 3),
    ("ly", "", 4),
    ("es", "", 4),
    ("s", "", 3),
)


def split_identifier(text: str) -> list[str]:
    """Words of a name or sentence: snake_case, camelCase, dots and dashes all separate words."""
    return _WORD.findall(_CAMEL.sub(" ", text))


def _cjk_grams(run: str) -> list[str]:
    # No spaces between words: overlapping character bigrams match without a dictionary.
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def terms(text: str) -> list[str]:
    """Index terms of ``text``: lowercased, stop words dropped, stemmed; CJK as character bigrams."""
    out: list[str] = []
    for word in split_identifier(text):
        lowered = word.lower()
        if _CJK.search(lowered):
            for piece in _CJK.split(lowered):
                if piece and piece not in STOP_WORDS:
                    out.append(stem(piece))
            for run in _CJK.findall(lowered):
                out.extend(_cjk_grams(run))
            continue
        if lowered not in STOP_WORDS:
            out.append(stem(lowered))
    return out


def plain_terms(text: str) -> list[str]:
    """The reference tokenizer: lowercase, split on every character that is not a letter or digit."""
    return _WORD.findall(text.lower())
