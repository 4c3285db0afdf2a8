"""Misspelt query words: the catalogue's terms one edit away from a word that is no English word.

A query word that no tool uses matches nothing. When it is not an English word either and the
catalogue has terms one edit away from it (a letter left out, added, changed, or two swapped:
Damerau's four kinds, which make most typing errors), those are what the user most likely meant.
Candidates are the terms one edit from the word's stem (Norvig's generator), and the stems of the
word less a letter or with two swapped, so that a slip in a suffix ("calcualte") still meets the
stem of the word meant ("calcul").

A word no tool uses that is two English words written as one ("flowchart", "houseplants") is read
as both (``compounds``): the index already gives two adjacent words their compound ("flow chart"
also means "flowchart"), this is the other way round.

The English words are pyspellchecker's frequency list (160k words), held as sorted hashes (~3 MB where
a set of them took 25 MB). It is read once, in a worker thread (``load``); until then, or without
it, no word is corrected: an English word the catalogue lacks ("meditation", "kindly") is a
request's own word, and "correcting" it to a neighbour ("edit", "find") cost R@5 on both sets.
"""

from __future__ import annotations

import array
import bisect
import gzip
import importlib.resources
import re
import zlib
from collections.abc import Container, Iterable

import Stemmer

from mcpd.discovery.once import ReadOnce
from mcpd.discovery.text import REQUEST_WORDS, STOP_WORDS, stem, without_contractions

MIN_LENGTH = 4
"""Shorter words are left alone: "cod" is one edit from "code", "god", "cot" and many more."""
MAX_WORDS = 8
"""Words corrected in one query at most (each costs ~0.2 ms): a query is client input, and a
4,096-character one of made-up words would hold the loop for 200 ms."""
MAX_LENGTH = 20
"""Longer words are left alone: a word this long is an identifier or a token, not a typo."""

MIN_PART = 4
"""A compound's parts have this many letters at least: with three, "promotional" was pro + motion,
"proper" pro + per, "commission" com + mission, 314 splits of MetaTool's development queries in all,
most of them wrong; with four and English parts, 102, all compounds ("lifestyle", "houseplants")."""

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_PLAIN = re.compile(r"[a-z]+")
# A word as typed: letters between spaces or punctuation, capitalised at most. Not a piece of a
# token (base64, a hash, an identifier), whose splits are no typos.
_TYPED = re.compile(r"(?<!\w)[A-Za-z][a-z]+(?!\w)")
# A path or URL ("/root/markdown/report.md"): its pieces name files and places, not what is asked for.
_PATH = re.compile(r"\S*[/\\]\S*")
_STEMMER = Stemmer.Stemmer("english", 0)


class Lexicon:
    """A set of words held as their sorted hashes: membership by bisection, 8 bytes a word (a set
    of the 160k English words took 25 MB). Hashes are the process's own (``hash``), so a lexicon is
    built where it is used; a false "known" for a word is a 64-bit hash collision."""

    __slots__ = ("_hashes",)

    def __init__(self, words: Iterable[str]) -> None:
        self._hashes = array.array("q", sorted(map(hash, words)))

    def __len__(self) -> int:
        return len(self._hashes)

    def __contains__(self, word: object) -> bool:
        if not isinstance(word, str):
            return False  # before ``hash``, which an unhashable object would fail
        key = hash(word)
        i = bisect.bisect_left(self._hashes, key)
        return i < len(self._hashes) and self._hashes[i] == key


MIN_WORDS = 50_000
"""A list with fewer words is not the English list (pyspellchecker's has 160k): used anyway, it
would leave English words "corrected" to the catalogue's (see the module docstring)."""

# A key of the list's JSON object (a word has no quote nor backslash), however the JSON is laid out.
_KEY = re.compile(rb'"([^"\\]*)"\s*:')


def read_lexicon(data: bytes) -> Lexicon:
    """The words of a pyspellchecker list (gzipped JSON, ``{"word": count, ...}``).

    Keys are taken one match at a time: decoding the JSON whole left ~8 MB more resident for good."""
    return Lexicon(match.group(1).decode() for match in _KEY.finditer(gzip.decompress(data)))


def _read_english() -> Lexicon:
    resource = importlib.resources.files("spellchecker") / "resources" / "en.json.gz"
    lexicon = read_lexicon(resource.read_bytes())
    if len(lexicon) < MIN_WORDS:
        raise ValueError(f"{resource} holds {len(lexicon)} words, not an English list")
    return lexicon


_english = ReadOnce(
    _read_english, (ImportError, OSError, ValueError, EOFError, zlib.error), "spelling.unavailable"
)


def load() -> Lexicon | None:
    """The English lexicon, read at the first call (~0.2 s: call it in a worker thread); None without it."""
    return _english.load()


def tried() -> bool:
    """Whether ``load`` has run (whatever it found)."""
    return _english.tried()


def loaded() -> Lexicon | None:
    """The English lexicon if ``load`` has read it, else None; never waits."""
    return _english.loaded()


def typed(text: str) -> list[str]:
    """The words of ``text`` typed as words (lowercase, distinct), outside paths and URLs, that are
    no stop or request words: the ones that may be misspelt or read as their synonyms."""
    if "/" in text or "\\" in text:
        text = _PATH.sub(" ", text)
    words = dict.fromkeys(word.lower() for word in _TYPED.findall(without_contractions(text)))
    return [word for word in words if word not in STOP_WORDS and word not in REQUEST_WORDS]


def unknown(words: Iterable[str], known: Container[str]) -> list[str]:
    """The ``typed`` ``words`` whose stem is no term in ``known``: those that ``misspelt``,
    ``compounds`` and ``mcpd.discovery.synonyms.readings`` read, found once for the three."""
    return [word for word in words if stem(word) not in known]


def misspelt(words: Iterable[str], english: Container[str]) -> list[str]:
    """The ``unknown`` words (at most ``MAX_WORDS``) that are no English words: the ones to correct."""
    out: list[str] = []
    for word in words:
        if correctable(word) and word not in english:
            out.append(word)
            if len(out) == MAX_WORDS:
                break
    return out


def compounds(
    words: Iterable[str], known: Container[str], english: Container[str]
) -> dict[str, tuple[str, str]]:
    """The ``unknown`` words that are two English words written as one, each a stem of a term in
    ``known`` ("flowchart" -> flow, chart): the word -> the two stems.

    The split with the most even parts wins; a part has ``MIN_PART`` letters at least and is no
    stop word, which leaves alone words that only look split ("pro|motion", "click|able"). At most
    ``MAX_WORDS`` words are tried."""
    out: dict[str, tuple[str, str]] = {}
    tried = 0
    for word in words:
        if not 2 * MIN_PART <= len(word) <= MAX_LENGTH:
            continue
        best = 0
        for i in range(MIN_PART, len(word) - MIN_PART + 1):
            even = min(i, len(word) - i)
            if even > best and _part(word[:i], english) and _part(word[i:], english):
                # Not ``stem``: its cache is for the catalogue's words, not pieces of query words.
                left, right = _STEMMER.stemWords([word[:i], word[i:]])
                if left in known and right in known:
                    out[word], best = (left, right), even
        tried += 1
        if tried == MAX_WORDS:
            break
    return out


def _part(word: str, english: Container[str]) -> bool:
    return word not in STOP_WORDS and word not in REQUEST_WORDS and word in english


def correctable(word: str) -> bool:
    """Whether ``word`` (lowercase) is one this module corrects: plain ASCII letters, of a typing length."""
    return MIN_LENGTH <= len(word) <= MAX_LENGTH and _PLAIN.fullmatch(word) is not None


def corrections(word: str, known: Container[str]) -> list[str]:
    """The terms in ``known`` one edit from ``word``'s stem, and the stems in ``known`` of ``word``
    less a letter or with two swapped (a slip in a suffix: "calcualte" -> "calculate" -> "calcul"),
    sorted; none for a word not ``correctable``."""
    if not correctable(word):
        return []
    stemmed = stem(word)
    found = {term for term in _edits(stemmed) if term in known}
    slips = _deletes(word) | _swaps(word)
    found.update(term for term in _STEMMER.stemWords(list(slips)) if term in known)
    return sorted(found)


def _splits(word: str) -> list[tuple[str, str]]:
    return [(word[:i], word[i:]) for i in range(len(word) + 1)]


def _deletes(word: str) -> set[str]:
    return {left + right[1:] for left, right in _splits(word) if right}


def _swaps(word: str) -> set[str]:
    return {left + right[1] + right[0] + right[2:] for left, right in _splits(word) if len(right) > 1}


def _edits(word: str) -> set[str]:
    """Every string one edit from ``word`` (Norvig's generator: ~54n + 25 of them)."""
    splits = _splits(word)
    edits = _deletes(word) | _swaps(word)
    edits.update(left + c + right[1:] for left, right in splits if right for c in _LETTERS)
    edits.update(left + c + right for left, right in splits for c in _LETTERS)
    edits.discard(word)
    return edits
