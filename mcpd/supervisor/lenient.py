"""JSON lines that strict decoding refuses but a server meant well: mended, or their id found.

JavaScript strings are UTF-16, so a server on the TypeScript SDK that cuts a text mid-emoji sends a
lone surrogate escape (``"\\ud83d"``), which JSON parsers in other languages take but msgspec
refuses: the whole answer was lost for one broken character. ``mend`` puts U+FFFD in its place.
"""

from __future__ import annotations

import re

_ESCAPES = re.compile(
    rb"\\\\"  # an escaped backslash: what follows it is text, not an escape
    rb"|\\u[dD][89abAB][0-9a-fA-F]{2}(?:\\u[dD][c-fC-F][0-9a-fA-F]{2})?"  # high, with its low or not
    rb"|\\u[dD][c-fC-F][0-9a-fA-F]{2}"  # a low one alone
)
_REPLACEMENT = rb"\ufffd"


def _keep_pairs(match: re.Match[bytes]) -> bytes:
    escape = match[0]
    return escape if escape == rb"\\" or len(escape) == 12 else _REPLACEMENT


def mend(line: bytes) -> bytes | None:
    """``line`` with its lone surrogate escapes replaced by U+FFFD; None when it has none."""
    if b"\\u" not in line:
        return None
    mended = _ESCAPES.sub(_keep_pairs, line)
    return mended if mended != line else None
