"""English query words no tool uses (or few do), read as their synonyms and direct hypernyms in the catalogue.

A request asks for an "automobile" where the tool rents a "car", or for the "hour" where it
tells the "time": an English word that no tool of the catalogue uses matches nothing, yet it
often has a synonym (automobile -> car) or a broader word (hour -> time) that tools do use. Such
a word is read also as those of its WordNet relatives that are terms of the catalogue, sharing a
fraction of its weight (``mcpd.discovery.index.Params.synonyms``). A word that a tool uses
already finds what it names; when few tools use it (``mcpd.discovery.index.RARE_WORD_TOOLS``),
another may say the same in other words ("hints" for "clues"), so it is read also as its synonyms,
at a smaller share (``Params.rare_synonyms``). No word of a path ("/root/notes") is read so, nor a
stop or request word ("save", "present": they mostly say how a request is put), nor a word that
is no English word: that is ``mcpd.discovery.spelling``'s (a typo).

The thesaurus (``synonyms.tsv.gz`` beside this module, 1 MB) is derived from WordNet 3.1 by
``bench/synonyms_table.py``, which says how: it maps an index term (a stem) to the terms of its
synonyms and of its direct hypernyms. It is held as the table's text (2.7 MB) with an index of
its lines (~5 MB resident in all), read once in a worker thread at the first ranked query
(``load``, ~0.1 s).

WordNet 3.1's licence, whose notice goes with every copy of it or of what is derived from it:

    WordNet Release 3.0. This software and database is being provided to you, the LICENSEE, by
    Princeton University under the following license. By obtaining, using and/or copying this
    software and database, you agree that you have read, understood, and will comply with these
    terms and conditions.:

    Permission to use, copy, modify and distribute this software and database and its
    documentation for any purpose and without fee or royalty is hereby granted, provided that you
    agree to comply with the following copyright notice and statements, including the disclaimer,
    and that the same appear on ALL copies of the software, database and documentation, including
    modifications that you make for internal use or for distribution.

    WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.

    THIS SOFTWARE AND DATABASE IS PROVIDED "AS IS" AND PRINCETON UNIVERSITY MAKES NO
    REPRESENTATIONS OR WARRANTIES, EXPRESS OR IMPLIED. BY WAY OF EXAMPLE, BUT NOT LIMITATION,
    PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR WARRANTIES OF MERCHANT- ABILITY OR FITNESS FOR
    ANY PARTICULAR PURPOSE OR THAT THE USE OF THE LICENSED SOFTWARE, DATABASE OR DOCUMENTATION WILL
    NOT INFRINGE ANY THIRD PARTY PATENTS, COPYRIGHTS, TRADEMARKS OR OTHER RIGHTS.

    The name of Princeton University or Princeton may not be used in advertising or publicity
    pertaining to distribution of the software and/or database. Title to copyright in this
    software, database and any associated documentation shall at all times remain with Princeton
    University and LICENSEE agrees to preserve same.
"""

from __future__ import annotations

import array
import bisect
import gzip
import importlib.resources
import zlib
from collections.abc import Container, Iterable

from mcpd.discovery import spelling
from mcpd.discovery.once import ReadOnce
from mcpd.discovery.text import stem

MIN_KEYS = 10_000
"""A table with fewer keys is not the thesaurus (it has ~38k): damaged or cut short."""


class Thesaurus:
    """The table's lines (``key<TAB>synonyms<TAB>hypernyms``, space-separated terms) as one bytes
    object, with the starts of its lines ordered by their keys' hashes: a lookup bisects 8-byte
    integers (a miss ~1 us, where comparing keys sliced from the text took 9). Hashes are the process's
    own (``hash``), as ``spelling.Lexicon``'s; a key found is compared whole, so a collision of
    hashes finds nothing rather than another key's line."""

    __slots__ = ("_data", "_hashes", "_starts")

    def __init__(self, data: bytes) -> None:
        # Line by line into arrays: splitting the text into 38k lines and sorting (hash, start)
        # pairs left the process ~3 MB larger for good, though all of it was freed.
        hashes, starts = array.array("q"), array.array("I")
        start = 0
        while start < len(data):
            end = data.find(b"\n", start)
            tab = data.find(b"\t", start, end)
            if end < 0 or tab < 0 or data.count(b"\t", start, end) != 2:
                raise ValueError("a thesaurus line is not a key, its synonyms and its hypernyms")
            hashes.append(hash(data[start:tab]))
            starts.append(start)
            start = end + 1
        order = sorted(range(len(hashes)), key=hashes.__getitem__)
        self._data = data
        self._hashes = array.array("q", (hashes[i] for i in order))
        self._starts = array.array("I", (starts[i] for i in order))

    def __len__(self) -> int:
        return len(self._starts)

    def related(self, term: str, hypernyms: bool = True) -> list[str]:
        """The terms of ``term``'s synonyms, then, with ``hypernyms``, of its direct hypernyms."""
        key = term.encode()
        at = bisect.bisect_left(self._hashes, hash(key))
        if at == len(self._hashes) or self._hashes[at] != hash(key):
            return []
        start = self._starts[at]
        line = self._data[start : self._data.index(b"\n", start)].decode()
        found, synonyms, broader = line.split("\t")
        if found != term:
            return []
        return synonyms.split() + broader.split() if hypernyms else synonyms.split()


def read_thesaurus(data: bytes) -> Thesaurus:
    """The thesaurus in a gzipped table."""
    thesaurus = Thesaurus(gzip.decompress(data))
    if len(thesaurus) < MIN_KEYS:
        raise ValueError(f"the thesaurus holds {len(thesaurus)} keys, too few")
    return thesaurus


def _read() -> Thesaurus:
    return read_thesaurus((importlib.resources.files(__package__) / "synonyms.tsv.gz").read_bytes())


READ_ERRORS = (OSError, ValueError, EOFError, zlib.error)
"""What reading a missing, damaged or cut-short table raises."""

_thesaurus = ReadOnce(_read, READ_ERRORS, "synonyms.unavailable")


def load() -> Thesaurus | None:
    """The thesaurus, read at the first call (~0.1 s: call it in a worker thread); None without it."""
    return _thesaurus.load()


def tried() -> bool:
    """Whether ``load`` has run (whatever it found)."""
    return _thesaurus.tried()


def loaded() -> Thesaurus | None:
    """The thesaurus if ``load`` has read it, else None; never waits."""
    return _thesaurus.loaded()


def readings(
    words: Iterable[str],
    known: Container[str],
    english: Container[str],
    thesaurus: Thesaurus,
    hypernyms: bool = True,
) -> dict[str, list[str]]:
    """The ``words`` (``spelling.typed`` ones) that are English words of a typing length
    (``spelling.correctable``), each with its related terms (``Thesaurus.related``) that are in
    ``known``; a word with none is left out. At most ``spelling.MAX_WORDS`` words are looked up."""
    out: dict[str, list[str]] = {}
    looked_up = 0
    for word in words:
        if not spelling.correctable(word) or word not in english:
            continue
        found = [term for term in thesaurus.related(stem(word), hypernyms) if term in known]
        if found:
            out[word] = found
        looked_up += 1
        if looked_up == spelling.MAX_WORDS:
            break
    return out
