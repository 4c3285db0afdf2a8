"""A latency sketch: a fixed log-bucket histogram that merges by adding counts.

Bucket ``i`` holds durations in ``[MIN_MS * 2**(i/8), MIN_MS * 2**((i+1)/8))``: eight
buckets per doubling, 256 buckets from 1 us to about 71.6 minutes. A percentile is the
geometric middle of the bucket holding the value of that rank, so for any duration in
that range it is within a factor of ``2**(1/16)`` of the exact value, a relative error of
at most ``ERROR_BOUND`` (4.43 %). Durations below 1 us count in the first bucket (an
absolute error of at most 1.05 us); above the range, in the last one (no bound).

Stored as msgpack ``{bucket: count}`` with only the non-empty buckets, typically a few
dozen bytes for an hour of one tool's calls.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import msgspec

MIN_MS = 0.001
PER_DOUBLING = 8
BUCKETS = 256
ERROR_BOUND = 2 ** (1 / (2 * PER_DOUBLING)) - 1
"""Largest relative error of a percentile within [MIN_MS, MIN_MS * 2**32)."""

_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(dict[int, int]).decode


def bucket(duration_ms: float) -> int:
    """The bucket a duration falls in."""
    if duration_ms <= MIN_MS:
        return 0
    return min(BUCKETS - 1, int(math.log2(duration_ms / MIN_MS) * PER_DOUBLING))


def middle(index: int) -> float:
    """The value a bucket stands for: the geometric middle of its bounds."""
    return MIN_MS * 2 ** ((index + 0.5) / PER_DOUBLING)


def encode(counts: dict[int, int]) -> bytes:
    return _encode(counts)


def decode(blob: bytes) -> dict[int, int]:
    return _decode(blob)


def merge_blobs(left: bytes | None, right: bytes | None) -> bytes:
    """Two stored sketches as one (an SQL function for rollup upserts)."""
    counts = decode(left) if left else {}
    for index, count in (decode(right) if right else {}).items():
        counts[index] = counts.get(index, 0) + count
    return encode(counts)


class Sketch:
    """Counts per bucket, filled from durations or merged from stored sketches."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}

    def add(self, duration_ms: float) -> None:
        index = bucket(duration_ms)
        self.counts[index] = self.counts.get(index, 0) + 1

    def merge(self, blob: bytes) -> None:
        counts = self.counts
        for index, count in decode(blob).items():
            counts[index] = counts.get(index, 0) + count

    def percentiles(self, qs: Iterable[float]) -> list[float]:
        """The value of rank ``min(n - 1, int(q * n))`` in sorted order, for each ``q`` (0 when empty)."""
        total = sum(self.counts.values())
        if not total:
            return [0.0 for _ in qs]
        ordered = sorted(self.counts.items())
        out = []
        for q in qs:
            rank = min(total - 1, int(q * total))
            seen = 0
            for index, count in ordered:
                seen += count
                if seen > rank:
                    out.append(middle(index))
                    break
        return out

    def blob(self) -> bytes:
        return encode(self.counts)


class SketchAggregate:
    """``latency_sketch(duration_ms)``: an SQL aggregate building a stored sketch (for backfills)."""

    def __init__(self) -> None:
        self.sketch = Sketch()

    def step(self, duration_ms: float | None) -> None:
        if duration_ms is not None:
            self.sketch.add(duration_ms)

    def finalize(self) -> bytes:
        return self.sketch.blob()
