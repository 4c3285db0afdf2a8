"""What reaches a terminal of text mcpd does not control: control, bidi and invisible characters
written out, every other character as it is; JSON keeps the exact text."""

from __future__ import annotations

import json

import pytest

from mcpd.cli.output import emit_json
from mcpd.controls import visible


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Opens invoice_\u202egpj.exe\u202c", "Opens invoice_\\u202egpj.exe\\u202c"),  # shown "exe.jpg"
        ("a\u2066b\u2069c\u200fd\u200ee\u061cf", "a\\u2066b\\u2069c\\u200fd\\u200ee\\u061cf"),
        (
            "ig\u200bnore\u2060 pre\u200cvious\u200d\ufeff",
            "ig\\u200bnore\\u2060 pre\\u200cvious\\u200d\\ufeff",
        ),
        ("ok\U000e0069\U000e0067\U000e007f", "ok\\U000e0069\\U000e0067\\U000e007f"),
        ("soft\u00adhyphen \u3164 filler", "soft\\xadhyphen \\u3164 filler"),
        ("csi \x9b2J esc \x1b]0;t\x07 \r\n", "csi \\x9b2J esc \\x1b]0;t\\x07 \n"),
    ],
)
def test_bidi_controls_and_invisible_characters_are_written_out(text: str, shown: str) -> None:
    """Bidi overrides, isolates and marks, zero-width characters, the byte order mark, tag
    characters, a soft hyphen and a Hangul filler are written as escapes, as control characters
    are, so that a tool's description reads on a terminal as a model reads it."""
    assert visible(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "يعيد النص كما هو",  # Arabic
        "מחזיר את הטקסט ללא שינוי",  # Hebrew
        "Returns שלום and مرحبا unchanged, 3 + 4 = 7",
        "thumbs 👍🏽, heart ❤️ (with its emoji variation selector), café, 日本語",
        "tab\tand\nnewline",
    ],
)
def test_right_to_left_words_and_emoji_are_shown_as_they_are(text: str) -> None:
    """Arabic and Hebrew words (the terminal orders them itself), emoji with their variation
    selector and skin tone, and layout characters are left as they are."""
    assert visible(text) == text


def test_json_keeps_the_exact_text_and_escapes_what_would_reorder_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--json`` output decodes to exactly the text the server sent, but the characters that a
    terminal would obey or hide (C1 controls, bidi controls, tag characters) are JSON escapes;
    right-to-left letters are written as they are."""
    sent = "Opens invoice_\u202egpj.exe\u202c \x9b2J tag\U000e0041 שלום"
    emit_json({"description": sent})
    written = capsys.readouterr().out
    assert json.loads(written) == {"description": sent}
    assert not any(char in written for char in "\u202e\u202c\x9b\U000e0041")
    assert "\\u202e" in written and "שלום" in written
