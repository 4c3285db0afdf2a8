"""Text mcpd does not control, safe on a terminal: control and invisible characters written out.

A server's stderr, a tool's description or result, an agent's request, a client's name: any of it
may hold escape sequences that retitle a terminal, write its clipboard (OSC 52) or clear the
screen, or characters that show nothing or reorder what follows: a tool's description can read one
way on the terminal of the user who approves it and another to the model ("Trojan Source":
``report_\\u202efdp.exe`` shows as ``report_exe.pdf``), or carry instructions a model reads and
a person never sees (tag characters). Wherever such text reaches a terminal it goes through
``visible``: the command line's output (``mcpd.cli.output.visible``) and the daemon's console log.
"""

from __future__ import annotations

import re

# C0 controls but newline and tab, DEL, and the C1 controls (0x9b is a CSI of its own to some
# terminals): the bytes that start escape sequences or move the cursor.
_C0_C1 = "\x00-\x08\x0b-\x1f\x7f-\x9f"
# Unicode's default-ignorable code points (drawn as nothing) and the bidirectional controls: soft
# hyphen, the Hangul fillers, Khmer's invisible vowels, zero-width space and joiners, the bidi
# marks, embeddings, overrides and isolates, word joiner and invisible operators, byte order mark,
# the interlinear annotation marks, shorthand format controls, musical formatting, the tag
# characters and the ideographic variation selectors. Kept apart: the variation selectors
# U+FE00-U+FE0F and Mongolian's U+180B-U+180D, U+180F, which choose how a visible character is
# drawn (an emoji's colour form) and honest texts use. The joiners are written out even inside an
# emoji sequence or a Persian word: its parts then show apart, but nothing shows as less than it is.
# Arabic and Hebrew letters are in no range: a terminal orders them itself.
INVISIBLE = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufeff\uffa0\ufff0-\ufffb\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
"""The invisible characters as a regex character-class body: the trust verifier finds hidden text by the
same list, so that what it flags and what the review shows written out are one set."""
HIDDEN = re.compile(f"[{_C0_C1}{INVISIBLE}]")
"""One character ``visible`` writes out."""


def _written(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


_ASCII_HIDDEN = {code: _written(chr(code)) for code in range(0x80) if HIDDEN.match(chr(code))}


def visible(text: str) -> str:
    """``text`` with its control and invisible characters written out as ``\\xNN``, ``\\uNNNN`` or
    ``\\UNNNNNNNN`` (a CRLF line end as a newline); any other character, right-to-left letters
    included, as it is."""
    text = text.replace("\r\n", "\n")
    if text.isascii():
        # Most text is ASCII, and a translation table reads a long one several times quicker.
        return text.translate(_ASCII_HIDDEN)
    return HIDDEN.sub(lambda found: _written(found[0]), text)
