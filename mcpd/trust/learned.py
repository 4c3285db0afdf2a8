"""A linear model of what poisoned texts read like, learnt from labelled examples: a sign (``signs``).

The intents of ``rules`` and the signs of ``signs`` are words someone chose; probes written
later, in voices they had not seen, got past more than half of them. A logistic regression
over hashed character n-grams (2 to 5, within words) and word pairs of the folded text,
trained on the poisoning corpus and its probes against honest tool texts
(``bench/verifier_model.py``), finds texts that resemble known attacks in other wording and,
by the n-grams, in related word forms and languages. The 2-grams were added with probe 11: with
each probe left out of training in turn, they raised the mean AUC of its poisoned texts against
its honest look-alikes from 0.918 to 0.937 (and with two other shuffles of the training, 0.931 to
0.935 and 0.918 to 0.930); word unigrams, class weights, 6 or 24 passes, other decays did not.

It is one sign, not a verdict: alone it flagged short honest blurbs ("Your AI powered Ad
Assistant!") that read like the corpus, and as one of the kinds honest tools never need it made
"retries quietly and does not notify you" an attack; so it counts as one of the kinds honest
tools share (``signs``) and makes an attack only with a rare sign and another common one.

The weights ship with the package (``learned.bin``: int8 per bucket and one scale) with two
thresholds chosen by cross-validation over the honest texts: ``sign``, exceeded by 0.5 % of
honest texts the model had not seen, and ``high``, above all of them (reported by the training,
not used to decide).
"""

from __future__ import annotations

import functools
import itertools
import math
import struct
import zlib
from array import array
from importlib import resources
from typing import NamedTuple

BITS = 18
"""Hash buckets: 2**18."""
MASK = (1 << BITS) - 1
NGRAMS = (2, 3, 4, 5)
"""Lengths of the character n-grams, within a word padded as ``<word>``."""
_HEADER = struct.Struct("<4sBfff")
"""magic, bits, weight scale, high threshold, sign threshold"""
MAGIC = b"mcpv"


def _word_buckets(word: str) -> frozenset[int]:
    # Not cached: the verifier asks the model only when its sign would decide, and a cache keyed
    # by words that servers choose would grow by 2 KB a word in a daemon that runs for weeks.
    padded = f"<{word}>"
    return frozenset(
        zlib.crc32(padded[i : i + n].encode()) & MASK for n in NGRAMS for i in range(len(padded) - n + 1)
    )


def features(folded: str) -> set[int]:
    """The hashed features of a folded text (``normalize.prepare``)."""
    words = folded.split()
    found: set[int] = set()
    found.update(*map(_word_buckets, words))
    found.update(zlib.crc32(f"{a} {b}".encode()) & MASK for a, b in itertools.pairwise(words))
    return found


def logistic(z: float) -> float:
    """The probability a linear score stands for (clamped: exp overflows past ~700)."""
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


class Model(NamedTuple):
    weights: array[float]
    high: float
    sign: float

    def probability(self, folded: str) -> float:
        z = sum(map(self.weights.__getitem__, features(folded)))
        return logistic(z)

    def encode(self) -> bytes:
        """The model as ``learned.bin`` holds it."""
        scale = max((abs(w) for w in self.weights), default=1.0) / 127 or 1.0
        quantized = array("b", (round(w / scale) for w in self.weights))
        return _HEADER.pack(MAGIC, BITS, scale, self.high, self.sign) + quantized.tobytes()


def decode(data: bytes) -> Model:
    """A model from ``learned.bin``'s bytes; ``ValueError`` for anything else."""
    if len(data) < _HEADER.size:
        raise ValueError("truncated model")
    magic, bits, scale, high, sign = _HEADER.unpack_from(data)
    if magic != MAGIC or bits != BITS:
        raise ValueError("not a model of this version")
    quantized = array("b")
    quantized.frombytes(data[_HEADER.size :])
    if len(quantized) != 1 << BITS:
        raise ValueError("truncated model")
    return Model(array("d", (q * scale for q in quantized)), high, sign)


@functools.cache
def model() -> Model:
    """The shipped model."""
    return decode(resources.files("mcpd.trust").joinpath("learned.bin").read_bytes())
