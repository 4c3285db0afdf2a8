"""JSON lines that strict decoding refuses but a server meant well: mended, or their id found.

JavaScript strings are UTF-16, so a server on the TypeScript SDK that cuts a text mid-emoji sends a
lone surrogate escape (``"\\ud83d"``), which JSON parsers in other languages take but msgspec
refuses: the whole answer was lost for one broken character. ``mend`` puts U+FFFD in its place.
Text a server printed without ending its line (``Loading... ``) is glued to the start of the next
message: ``unglue`` finds that message.
"""

from __future__ import annotations

import re
from collections.abc import Callable

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
    # A search for the backslash alone first (memchr): ``b"\\u" in line`` cost 3.5 us per 4 KiB
    # line of text, most of what a server printing text on its stdout cost the daemon per line.
    backslash = line.find(b"\\")
    if backslash < 0 or line.find(b"\\u", backslash) < 0:
        return None
    mended = _ESCAPES.sub(_keep_pairs, line)
    return mended if mended != line else None


_OBJECT_START = re.compile(rb'\{\s*"')


def unglue(line: bytes, is_message: Callable[[bytes], bool]) -> tuple[bytes, bytes] | None:
    """``line`` cut in two where a message (an object that ``is_message``) filling the rest of it
    begins after other text: (the text, the message); None when there is none. Only the first
    object start is tried: each try decodes up to the whole line, and a 30 MiB log line with
    objects nested in it held the event loop a quarter of a second when four were."""
    # A search for the brace alone first (memchr): the pattern's search cost ~1 us per 4 KiB line.
    brace = line.find(b"{", 1)
    start = _OBJECT_START.search(line, brace) if brace > 0 else None
    if start is None or not is_message(rest := line[start.start() :]):
        return None
    return line[: start.start()], rest
