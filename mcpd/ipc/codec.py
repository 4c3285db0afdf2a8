"""Frames -> messages, at a cost one client cannot inflate.

Every way a frame can fail to decode (malformed msgpack, invalid UTF-8 in a string,
nesting past the interpreter's recursion limit, a wrong shape) is one of
``DECODE_FAILURES``; ``decode_request`` turns them all into ``ProtocolError``.

msgspec decodes a buffer in one call that holds the GIL, so neither a thread nor a
yield can cut it short: 1 MiB of empty msgpack maps takes ~150-300 ms to build, and even
skipping params as ``Raw`` walks every value in them. Frames up to ``LARGE_FRAME``
bound that cost by their size (well under a millisecond); larger ones take another path:

- the envelope ``[0, id, method, params]`` is read by hand and params kept raw, so
  nothing walks them before the method's byte limit is checked;
- ``walk`` counts the values and depth of params in slices the caller yields between,
  and refuses params over ``MAX_VALUES`` values or ``MAX_DEPTH`` levels before msgspec
  builds a single object (65,536 values decode in ~1-3 ms).
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from mcpd.errors import DECODE_FAILURES, InvalidParams, ProtocolError
from mcpd.model.protocol import Message, Request

LARGE_FRAME = 16 * 1024
"""Frames above this are decoded the careful way; below it, a frame's size bounds its cost."""
MAX_VALUES = 65_536
"""Most values (scalars and containers) large params may hold."""
MAX_DEPTH = 64
"""Deepest nesting large params may have."""
WALK_SLICE = 2048
"""Values ``walk`` counts between two yields (~1 ms)."""
MAX_METHOD = 64
"""Longest method name, in bytes."""

_decoder = msgspec.msgpack.Decoder(Message)

_SKIP, _SIZED, _COUNTED, _FIXED_COUNT, _INVALID = range(5)


def _kinds() -> list[tuple[int, int, int]]:
    """For each first byte of a msgpack value: how to step over it, as (kind, a, b).

    ``_SKIP``: ``a`` more bytes. ``_SIZED`` (str, bin, ext): a length of ``a`` bytes, then
    ``b`` type bytes and the data. ``_COUNTED`` (array16/32, map16/32): a count of ``a``
    bytes, ``b`` values per entry. ``_FIXED_COUNT`` (fixarray, fixmap): ``a`` values.
    """
    kinds = [(_INVALID, 0, 0)] * 256
    for first in (*range(0x80), *range(0xE0, 0x100)):  # fixint
        kinds[first] = (_SKIP, 0, 0)
    for first in range(0x80, 0x90):
        kinds[first] = (_FIXED_COUNT, 2 * (first & 0x0F), 0)
    for first in range(0x90, 0xA0):
        kinds[first] = (_FIXED_COUNT, first & 0x0F, 0)
    for first in range(0xA0, 0xC0):
        kinds[first] = (_SKIP, first & 0x1F, 0)
    # nil, bools, floats, ints, fixext
    for first, size in {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4}.items():
        kinds[first] = (_SKIP, size, 0)
    for first, size in {0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8, 0xD4: 2, 0xD5: 3, 0xD6: 5}.items():
        kinds[first] = (_SKIP, size, 0)
    kinds[0xD7], kinds[0xD8] = (_SKIP, 9, 0), (_SKIP, 17, 0)
    for first, width in {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4}.items():  # bin, str
        kinds[first] = (_SIZED, width, 0)
    for first, width in {0xC7: 1, 0xC8: 2, 0xC9: 4}.items():  # ext
        kinds[first] = (_SIZED, width, 1)
    for first, (width, per_entry) in {0xDC: (2, 1), 0xDD: (4, 1), 0xDE: (2, 2), 0xDF: (4, 2)}.items():
        kinds[first] = (_COUNTED, width, per_entry)
    return kinds


_KINDS = _kinds()
_INT_SIZES = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}


def decode_request(data: bytes) -> Message:
    """The message in one frame; ``ProtocolError`` for anything undecodable."""
    try:
        if len(data) > LARGE_FRAME:
            return _large_request(data)
        message: Message = _decoder.decode(data)
    except DECODE_FAILURES as exc:
        raise ProtocolError(f"undecodable message: {_describe(exc)}") from None
    return message


def _describe(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)


def _large_request(data: bytes) -> Request:
    """Tag, id and method read by hand; params left raw (a view, not a copy) for the method to check."""
    if data[0] != 0x94 or data[1] != 0x00:
        raise ProtocolError("clients may only send requests: a fixarray [0, id, method, params]")
    pos = 2
    first = data[pos]
    size = _INT_SIZES.get(first, 0)
    if size == 0 and 0x80 <= first < 0xE0:
        raise ProtocolError("undecodable message: the request id is not an integer")
    request_id = msgspec.msgpack.decode(data[pos : pos + 1 + size], type=int)
    pos += 1 + size
    first = data[pos]
    if 0xA0 <= first <= 0xBF:
        length, pos = first & 0x1F, pos + 1
    elif first == 0xD9:
        length, pos = data[pos + 1], pos + 2
    else:
        raise ProtocolError("undecodable message: the method is not a short string")
    if length > MAX_METHOD:
        raise ProtocolError(f"undecodable message: method names are at most {MAX_METHOD} bytes")
    method = data[pos : pos + length].decode()
    return Request(request_id, method, msgspec.Raw(memoryview(data)[pos + length :]))


def walk(data: msgspec.Raw, max_values: int = MAX_VALUES, max_depth: int = MAX_DEPTH) -> Iterator[None]:
    """Count the values of one msgpack value without building them; yields every ``WALK_SLICE``.

    Raises ``InvalidParams`` naming the limit once there are more than ``max_values``
    values or deeper nesting than ``max_depth``. Stops quietly at malformed or truncated
    input: decoding it afterwards reports that precisely.
    """
    buffer = memoryview(data)
    end = len(buffer)
    pending = [1]  # values still expected at each open level
    pos = values = 0
    while pending:
        if pending[-1] == 0:
            pending.pop()
            continue
        pending[-1] -= 1
        if pos >= end:
            return
        kind, a, b = _KINDS[buffer[pos]]
        pos += 1
        values += 1
        if values % WALK_SLICE == 0:
            _check_values(values, max_values)
            yield
        if kind == _SKIP:
            pos += a
            continue
        if kind == _SIZED:
            pos += a + b + int.from_bytes(buffer[pos : pos + a], "big")
            continue
        if kind == _FIXED_COUNT:
            count = a
        elif kind == _COUNTED:
            count = int.from_bytes(buffer[pos : pos + a], "big") * b
            pos += a
        else:
            return
        if count:
            if len(pending) > max_depth:
                raise InvalidParams(
                    f"params are nested deeper than {max_depth} levels", {"limit": max_depth, "kind": "depth"}
                )
            pending.append(count)
    _check_values(values, max_values)


def _check_values(values: int, limit: int) -> None:
    if values > limit:
        raise InvalidParams(f"params hold more than {limit} values", {"limit": limit, "kind": "values"})
