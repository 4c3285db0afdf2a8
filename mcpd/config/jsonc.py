"""JSON with comments (``.jsonc``), as VS Code writes it, made plain JSON for ``json.loads``.

``//`` and ``/* */`` comments become spaces (so the decoder's line and column numbers still
point into the file) and a comma before ``}`` or ``]`` is dropped; strings are left exactly
as they are, whatever they contain.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(
    rb'"(?:[^"\\\n]|\\.)*"'  # a string: kept
    rb"|//[^\n]*"  # a line comment
    rb"|/\*(?:[^*]|\*(?!/))*(?:\*/|\Z)"  # a block comment (unclosed: to the end, json then complains)
    rb"|,(?=(?:\s|//[^\n]*|/\*(?:[^*]|\*(?!/))*\*/)*[}\]])",  # a trailing comma
    re.DOTALL,
)


def plain_json(raw: bytes) -> bytes:
    """``raw`` without comments and trailing commas."""
    return _TOKEN.sub(_blank, raw)


def _blank(match: re.Match[bytes]) -> bytes:
    token = match.group()
    if token.startswith(b'"'):
        return token
    # Newlines stay, everything else is a space: positions in errors stay true.
    return re.sub(rb"[^\n]", b" ", token)
