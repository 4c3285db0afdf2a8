"""Text mcpd does not control, made safe to show on a terminal: control characters written out.

A server's stderr, a tool's description or result, an agent's request, a client's name: any of it
may hold escape sequences that retitle a terminal, write its clipboard (OSC 52) or clear the
screen. Wherever such text reaches a terminal it goes through ``visible``: the command line's output
(``mcpd.cli.output.visible``) and the daemon's console log.
"""

from __future__ import annotations

# C0 controls but newline and tab, DEL, and the C1 controls (0x9b is a CSI of its own to some
# terminals): the bytes that start escape sequences or move the cursor.
_CONTROLS = {
    code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if chr(code) not in "\n\t"
}


def visible(text: str) -> str:
    """``text`` with its control characters written out as ``\\xNN`` (a CRLF line end as a newline)."""
    return text.replace("\r\n", "\n").translate(_CONTROLS)
