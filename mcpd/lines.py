"""The host's newline-delimited input cut into lines, in time linear in its size and memory bounded.

``mcpd bridge`` reads its stdin ``READ_SIZE`` at a time. Joining each read to what was held and
splitting the whole again cost time quadratic in a line's length (a 50 MB line took the bridge 20 s,
every other call of its host waiting behind it) and kept a line without a newline for ever,
however long. Here each read is searched once, and a line longer than the daemon reads is not
kept: only its ``EDGE`` first and last bytes, enough to name the request the host sent in it
(``Oversized.request_id``), so the host is answered rather than left waiting.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import msgspec

from mcpd.errors import DECODE_FAILURES
from mcpd.model import mcp

EDGE = 4096
"""Bytes kept of each end of a line too long to keep: where its id is."""

_STRING = rb'"(?:[^"\\]|\\.)*"'
# An id is an integer or a string: a number that goes on (``1.5``) is neither, not its ``1``.
_VALUE = rb"(?:-?\d+(?![\d.eE])|" + _STRING + rb")"
_MEMBER = rb'"(?:jsonrpc|method|id)"\s*:\s*' + _VALUE
_MEMBERS = _MEMBER + rb"(?:\s*,\s*" + _MEMBER + rb")*"
# The top-level ``jsonrpc``, ``method`` and ``id`` written before the first other member (the Python
# SDK's order), or after the last one, closing the object (the TypeScript SDK writes ``id`` last).
# Anchored at the line's ends, neither can match one inside ``params`` (or in a string).
_HEAD = re.compile(rb"\s*\{\s*(" + _MEMBERS + rb")")
_TAIL = re.compile(rb"[{,]\s*(" + _MEMBERS + rb")\s*\}\s*$")
_NAMED = re.compile(rb'"(jsonrpc|method|id)"\s*:\s*(' + _VALUE + rb")")
_request_id: msgspec.json.Decoder[mcp.RequestId] = msgspec.json.Decoder(mcp.RequestId)


class Oversized(msgspec.Struct, frozen=True):
    """A line longer than the limit, of which only the ends were kept."""

    size: int
    head: bytes
    tail: bytes

    def request_id(self) -> mcp.RequestId | None:
        """The id of the request the line held, if its ends show it: None for a notification, and for
        a response (no ``method``), whose id is one of the daemon's requests, not the host's."""
        return self._id(request=True)

    def response_id(self) -> mcp.RequestId | None:
        """The id of the daemon's request the line answered, if its ends show an ``id`` and no
        ``method``. A request whose ``method`` lies in neither end is taken for a response too: the
        caller answers only ids the daemon asked and the host has not answered."""
        return self._id(request=False)

    def _id(self, *, request: bool) -> mcp.RequestId | None:
        members: dict[bytes, bytes] = {}
        for found in (_HEAD.match(self.head), _TAIL.search(self.tail.rstrip(b"\r"))):
            if found is not None:
                members.update((key, value) for key, value in _NAMED.findall(found[1]))
        if (b"method" in members) is not request or b"id" not in members:
            return None
        try:
            return _request_id.decode(members[b"id"])
        except DECODE_FAILURES:
            return None


class LineReader:
    """Lines from successive reads; those over ``limit()`` bytes (asked at each read: the daemon of
    the moment says it) come out as ``Oversized``."""

    def __init__(self, limit: Callable[[], int]) -> None:
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._head: bytes | None = None
        """The first bytes of the line being skipped (too long), else None."""
        self._tail = b""

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        """The lines ``chunk`` completes, without their newlines."""
        lines: list[bytes | Oversized] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._add(chunk[start:end])
            lines.append(self._take())
            start = end + 1
        if start < len(chunk):
            self._add(chunk[start:])
        return lines

    def end(self) -> bytes | Oversized | None:
        """The last line, if the input ended without its newline."""
        return self._take() if self._size else None

    def _add(self, part: bytes) -> None:
        self._size += len(part)
        if self._head is not None:
            self._tail = (self._tail + part)[-EDGE:]
            return
        self._parts.append(part)
        if self._size > self._limit():
            line = b"".join(self._parts)
            self._head, self._tail = line[:EDGE], line[-EDGE:]
            self._parts = []

    def _take(self) -> bytes | Oversized:
        if self._head is not None:
            line: bytes | Oversized = Oversized(self._size, self._head, self._tail)
        else:
            line = b"".join(self._parts)
        self._parts, self._size, self._head, self._tail = [], 0, None, b""
        return line
