"""Text as the verifier reads it: invisible characters out, Unicode folded, encodings opened.

``prepare`` turns a raw string into a ``Prepared``: the characters that hide text (zero-width,
bidi controls, tag characters, soft hyphens) are removed and remembered; NFKC folds fullwidth
and compatibility forms; letters from Cyrillic or Greek inside an otherwise Latin word are
mapped to the Latin letter they imitate; case is lowered and every run of whitespace, line
breaks included, becomes one space. ``hidden_layers`` finds text hidden in base64, hex,
URL-encoding, HTML entities, ``\\u`` escapes, tag characters and ROT13 and yields it decoded;
``unleet`` spells out leetspeak ("1gn0r3 pr3v10us") and ``untypo`` corrects misspelt key words.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import re
import unicodedata
from collections.abc import Iterator
from typing import NamedTuple
from urllib.parse import unquote

from mcpd import controls

# Characters that render as nothing or reorder text; kept apart from ordinary format
# characters such as the emoji variation selector U+FE0F, which honest texts use.
INVISIBLE = re.compile(f"[{controls.INVISIBLE}]")
_TAG_RUN = re.compile("[\U000e0020-\U000e007e]{4,}")
# ZWJ joins emoji (family, flags); only between letters or digits does it hide anything.
_ZWJ_IN_WORD = re.compile(r"(?<=\w)\u200d(?=\w)")
# Between two characters of a script whose letters join (Arabic, Syriac, the Indic scripts), the
# non-joiner and joiner are spelling: Persian writes U+200C inside words, Hindi both in half forms.
_JOINING = "\u0600-\u077f\u08a0-\u08ff\u0900-\u0dff\ufb50-\ufdff\ufe70-\ufefc"
_SPELLING_JOINER = re.compile(f"(?<=[{_JOINING}])[\u200c\u200d](?=[{_JOINING}])")

# Cyrillic and Greek letters that look like Latin ones; applied only inside words that
# also contain Latin letters, so Russian and Greek text stays as it is.
_CONFUSABLES = str.maketrans(
    "асеорхуіјѕԁһкмнтвАВЕКМНОРСТХУІЈЅοαικνρτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
    "aceopxyijsdhkmhtbabekmhopctxyijsoaikvptuxabezhikmnoptyx",
)
# A whole word holding both: each lookahead reads the word once. Written as
# ``\w*[a-z]\w*[^\W\x00-\x7f]\w*|...``, a long ASCII word in a non-ASCII text cost its length cubed.
_MIXED_WORD = re.compile(r"\b(?=\w*?[a-z])(?=\w*?[^\W\x00-\x7f])\w+")
_CONFUSABLE_CHARS = frozenset("асеорхуіјѕԁһкмнтвАВЕКМНОРСТХУІЈЅοαικνρτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ".lower())
_HAS_CONFUSABLE = re.compile(f"[{''.join(sorted(_CONFUSABLE_CHARS))}]")


# A line break ends a sentence only where layout says so (a blank line, a list item); any
# other line break is whitespace, so "Ignore\nprevious\ninstructions" reads as one phrase.
_HARD_BREAK = re.compile(r"\n\s*\n|\n[ \t]*(?=[-*•#>]|\d+[.)]\s)")


# Typographic quotes as plain ones, so "don\u2019t" reads as "don't".
_QUOTES = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201b": "'", "\u02bc": "'", "\u201c": '"', "\u201d": '"'}
)


class Prepared(NamedTuple):
    folded: str
    """NFKC, invisible characters out, confusables mapped, lower case, whitespace collapsed
    (hard line breaks kept as one ``\\n``)."""
    visible: str
    """NFKC with invisible characters removed (case and layout kept): where encodings are sought."""
    hidden: tuple[int, str] | None
    """Offset and character of the first invisible character in the raw text."""
    homoglyphs: str | None
    """The first word that mixed Latin letters with look-alikes from another script."""


def _unmix(folded: str) -> tuple[str, str | None]:
    first: str | None = None

    def fix(match: re.Match[str]) -> str:
        nonlocal first
        word = match.group()
        if not any(c in _CONFUSABLE_CHARS for c in word):
            return word
        if first is None:
            first = word
        return word.translate(_CONFUSABLES)

    return _MIXED_WORD.sub(fix, folded), first


def prepare(raw: str) -> Prepared:
    hidden = None
    text = raw
    if INVISIBLE.search(raw):
        # The first that hides anything, not merely the first: an emoji's joiner ahead would
        # otherwise pass every zero-width or bidi character after it.
        for found in INVISIBLE.finditer(raw):
            if _SPELLING_JOINER.match(raw, found.start()):
                continue
            if found.group() != "\u200d" or _ZWJ_IN_WORD.match(raw, found.start()):
                hidden = (found.start(), found.group())
                break
        text = INVISIBLE.sub("", raw)
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    pieces = _HARD_BREAK.split(text.lower())
    folded = "\n".join(" ".join(piece.split()) for piece in pieces if not piece.isspace())
    homoglyphs = None
    if not folded.isascii() and _HAS_CONFUSABLE.search(folded):
        folded, homoglyphs = _unmix(folded)
    return Prepared(folded=folded, visible=text, hidden=hidden, homoglyphs=homoglyphs)


class Layer(NamedTuple):
    encoding: str
    """base64, hex, url-encoding, html entities, unicode escapes, tag characters"""
    decoded: str
    run: str
    """The encoded text as it appears."""


_BASE64_RUN = re.compile(r"(?<![\w+/=-])[A-Za-z0-9+/_-]{16,}={0,2}(?![\w+/=-])")
_HEX_RUN = re.compile(r"(?<![\w])(?:[0-9a-fA-F]{2}){8,}(?![\w])|(?:\\x[0-9a-fA-F]{2}){4,}")
_PERCENT_TOKEN = re.compile(r"\S*%[0-9a-fA-F]{2}\S*%[0-9a-fA-F]{2}\S*")
_ENTITY_TOKEN = re.compile(r"\S*&#?\w{2,8};\S*&#?\w{2,8};\S*")
_ESCAPE_TOKEN = re.compile(r"\S*\\u[0-9a-fA-F]{4}\S*\\u[0-9a-fA-F]{4}\S*")
_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
# One cheap look first: prose has no 16-character runs and no escapes, so most texts stop here.
_ENCODED_HINT = re.compile(
    r"[A-Za-z0-9+/_-]{16}|\\x[0-9a-fA-F]{2}|%[0-9a-fA-F]{2}|&#?\w{2,8};|\\u[0-9a-fA-F]{4}"
)


def _readable(data: bytes) -> str | None:
    """The bytes as text if they are text a model would read, else None."""
    # UTF-16LE, as PowerShell's -EncodedCommand takes it: ASCII text with a zero after each byte.
    utf16 = len(data) >= 8 and len(data) % 2 == 0 and not any(data[1::2])
    try:
        text = data.decode("utf-16-le" if utf16 else "utf-8")
    except UnicodeDecodeError:
        return None
    letters = sum(c.isalpha() for c in text)
    printable = sum(c.isprintable() or c in "\n\t" for c in text)
    if letters < 4 or printable < len(text) * 0.95 or letters < len(text) * 0.5:
        return None
    return text


def _base64(run: str) -> str | None:
    body = run.rstrip("=")
    # Identifiers (camelCase, snake_case, words) are also base64 alphabets; real payloads mix
    # cases and rarely sit on a word boundary of prose, so decode and let _readable decide.
    if body.isalpha() and (body.islower() or body.isupper()):
        return None
    padded = body + "=" * (-len(body) % 4)
    try:
        data = base64.b64decode(padded, altchars=b"-_" if ("-" in body or "_" in body) else None)
    except (binascii.Error, ValueError):
        return None
    return _readable(data)


def _hex(run: str) -> str | None:
    try:
        return _readable(bytes.fromhex(run.replace("\\x", "")))
    except ValueError:
        return None


# ROT13 is announced ("decode with rot13") or betrays itself by English function words
# turned into ones no language uses: "gur" (the), "naq" (and), "lbh" (you).
_ROT13_HINT = re.compile(r"\brot[- ]?13\b|\b(?:gur|naq|lbh|lbhe|guvf|gung|jvgu|hfre|svyr|fraq|ernq)\b")


def rot13_text(prepared: Prepared) -> Layer | None:
    """The visible text decoded from ROT13, if it looks like ROT13."""
    hints = set(_ROT13_HINT.findall(prepared.folded))
    if not any(h.startswith("rot") for h in hints) and len(hints) < 2:
        return None
    return Layer("rot13", codecs.decode(prepared.visible, "rot13"), prepared.visible[:40])


# Text written backwards betrays itself the same way: "eht" (the), "dna" (and), "uoy" (you).
_REVERSED_HINT = re.compile(
    r"\b(?:eht|dna|uoy|ruoy|siht|taht|htiw|resu|elif|dnes|daer|lla|erongi|snoitcurtsni)\b"
)


def reversed_text(prepared: Prepared) -> Layer | None:
    """The visible text read backwards, if it looks written backwards."""
    if len(set(_REVERSED_HINT.findall(prepared.folded))) < 3:
        return None
    return Layer("reversed text", prepared.visible[::-1], prepared.visible[:40])


def hidden_layers(visible: str) -> Iterator[Layer]:
    """Text hidden in encodings inside ``visible``, each decoded once."""
    if not _ENCODED_HINT.search(visible):
        return
    for match in _HEX_RUN.finditer(visible):
        decoded = _hex(match.group())
        if decoded:
            yield Layer("hex", decoded, match.group())
    for match in _BASE64_RUN.finditer(visible):
        run = match.group()
        if _HEX_RUN.fullmatch(run):
            continue
        decoded = _base64(run)
        if decoded:
            yield Layer("base64", decoded, run)
    if "%" in visible:
        for match in _PERCENT_TOKEN.finditer(visible):
            yield Layer("url-encoding", unquote(match.group()), match.group())
    if "&" in visible:
        for match in _ENTITY_TOKEN.finditer(visible):
            yield Layer("html entities", html.unescape(match.group()), match.group())
    if "\\u" in visible:
        for match in _ESCAPE_TOKEN.finditer(visible):
            decoded = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), match.group())
            yield Layer("unicode escapes", decoded, match.group())


# Leetspeak: digits standing for the letters they look like, inside words ("1gn0r3", "s3nd").
# Tokens with other digits (id_ed25519, h264, base64) are left alone, and a text needs several
# such words before it is read this way, so "s3" or "l10n" in an honest text changes nothing.
_LEET_WORD = re.compile(r"\b(?=[a-z0-9]*[a-z])[a-z]*[013457][a-z013457]*\b")
_LEET = str.maketrans("013457", "oieast")


def unleet(folded: str) -> str | None:
    """``folded`` with leetspeak words spelled out, if it has at least three of them."""
    words = _LEET_WORD.findall(folded)
    if len(words) < 3:
        return None
    return _LEET_WORD.sub(lambda m: m.group().translate(_LEET), folded)


# Misspelt key words ("raed", "usr", "plese", "instrctions"): one letter dropped or two swapped.
# Variants that are words of their own ("use", "too", "end", "red", French "pas") are left out.
_TYPO_TARGETS = (
    "read send tell users ignore previous instructions mention private before using tool please secret"
    " password token upload forward include attach conversation history credentials contents inform"
    " notify silently quietly secretly without system prompt"
)
_REAL_WORDS = frozenset(
    [
        "ass",
        "ell",
        "end",
        "lease",
        "red",
        "rule",
        "rules",
        "sing",
        "suing",
        "too",
        "use",
        "uses",
        "user",
        "sed",
        "tel",
        "pas",
        "sen",
        "ser",
        "rad",
        "toke",
        "sers",
        "rues",
    ]
)


def _typos() -> dict[str, str]:
    table: dict[str, str] = {}
    for word in _TYPO_TARGETS.split():
        dropped = {word[:i] + word[i + 1 :] for i in range(len(word))}
        swapped = {word[:i] + word[i + 1] + word[i] + word[i + 2 :] for i in range(len(word) - 1)}
        for variant in dropped | swapped:
            if len(variant) >= 3 and variant != word and variant not in _REAL_WORDS:
                table.setdefault(variant, word)
    return table


_TYPOS = _typos()
_WORD = re.compile(r"[a-z]+")


def untypo(folded: str) -> str | None:
    """``folded`` with misspelt key words corrected, if it had any."""
    fixed = _WORD.sub(lambda m: _TYPOS.get(m.group(), m.group()), folded)
    return fixed if fixed != folded else None


# A setting whose key is a phrase of several words (``"notify_user": false``, ``upload_to =
# "sftp://..."``, ``- disclose_to_user: never``, ``verlauf_weiterleiten_an = "https://..."``) says what
# the phrase says: orders may be written as a JSON, YAML or TOML config the model reads as such.
_SETTING_VALUE = (
    r"""["']?[ \t]*[:=][ \t]*("[^"\n]{0,300}"|'[^'\n]{0,300}'|\[[^\]\n]{0,300}\]|[^\s,;{}\[\]"']+)"""
)
_SETTING = re.compile(r"""["']?\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+)""" + _SETTING_VALUE)
_SETTING_ANY_LETTERS = re.compile(r"""["']?\b([^\W\d_][^\W_]*(?:_[^\W_]+)+)""" + _SETTING_VALUE)
"""The same in any script ("verlauf_weiterleiten_an"), for texts that are not ASCII: slower."""
# A key that opens a block (YAML, JSON), right before a setting: its first key reads as part of its
# phrase ("conversation:\n  export_to: https://..." exports the conversation).
_PARENT = re.compile(r"(?<![\w-])([^\W\d_][^\W_]*(?:_[^\W_]+)*)[\"']?[ \t]*:[ \t\n{]*$")
_OFF = frozenset({"false", "no", "off", "never", "none", "null", "0", "disabled"})
_ON = frozenset({"true", "yes", "on", "always", "1", "enabled"})
_QUOTING = re.compile(r"""[\[\]"']""")


def settings_text(folded: str) -> str | None:
    """The settings in ``folded`` whose keys are phrases, each read as its phrase (led by the key of
    the block it opens, ``_PARENT``): switched off as "do not <phrase>", on as the phrase, with a
    value as the phrase and the value; None if none."""
    if "_" not in folded:
        return None  # most texts: no key of several words to read
    phrases = []
    for match in (_SETTING if folded.isascii() else _SETTING_ANY_LETTERS).finditer(folded):
        words = match[1].replace("_", " ")
        opened = ":" in folded[max(0, match.start() - 4) : match.start()]
        parent = _PARENT.search(folded, max(0, match.start() - 40), match.start()) if opened else None
        if parent:
            words = f"{parent[1].replace('_', ' ')} {words}"
        value = _QUOTING.sub("", match[2]).strip()
        if value in _OFF:
            phrases.append(f"do not {words}")
        elif value in _ON:
            phrases.append(words)
        else:
            phrases.append(f"{words} {value}")
    return ", ".join(phrases) + "." if phrases else None


# Letters set apart so no word is whole: "s t u u r   a l l e" or "s.e.n.d.  t.h.e."; a single
# separator joins letters, a longer one (or a space after dots) parts words.
_SPACED_RUN = re.compile(r"(?<!\w)[^\W\d_](?:[ .\-·]{1,4}[^\W\d_](?!\w)){7,}")
_WORD_GAP = re.compile(r"[ .\-·]{2,}")
_LETTER_GAP = re.compile(r"(?<=\w)[ .\-·](?=\w)")


def spaced_text(visible: str) -> Layer | None:
    """The runs of eight or more letters written apart, written together (one message: a run
    ends at any other character, "d u m p @ c a p s")."""
    runs = [match.group() for match in _SPACED_RUN.finditer(visible)]
    if not runs:
        return None
    words = [_LETTER_GAP.sub("", word) for run in runs for word in _WORD_GAP.split(run)]
    return Layer("spaced letters", " ".join(words), runs[0])


def tag_text(raw: str) -> Layer | None:
    """Text spelled in Unicode tag characters (invisible ASCII look-alikes), if any."""
    match = _TAG_RUN.search(raw)
    if match is None:
        return None
    decoded = "".join(chr(ord(c) - 0xE0000) for c in match.group())
    return Layer("tag characters", decoded, match.group())


# What a rendered description never shows its reader, though a model reads every character: an
# HTML comment (one left open hides the rest), an element styled or marked hidden, a Markdown
# link-reference comment. Attributes are bounded so a text of many tags stays linear.
_HIDDEN_MARKUP = re.compile(
    r"<!--(?P<comment>.*?)(?:-->|\Z)"
    r"|<(?P<tag>[a-z][\w-]*)\b(?=[^<>]{0,300}?(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?![.\d]*[1-9])"
    r"|opacity\s*:\s*0(?![.\d]*[1-9])|\shidden\b|aria-hidden\s*=\s*[\"']?true))[^<>]{0,300}>(?P<element>.*?)(?:</(?P=tag)\s*>|\Z)"
    r"|^[ \t]*\[[^\]\n]{0,40}\]:[ \t]*(?:#|<>)[ \t]*(?:\((?P<paren>[^\n]*)\)|\"(?P<quoted>[^\n]*)\")[ \t]*$",
    re.IGNORECASE | re.DOTALL | re.MULTILINE,
)


def hidden_markup(raw: str) -> Iterator[Layer]:
    """Text that markup hides from whoever views the description rendered, each part once."""
    if "<" not in raw and "]:" not in raw:
        return
    for match in _HIDDEN_MARKUP.finditer(raw):
        inner = next(
            part for part in match.group("comment", "element", "paren", "quoted") if part is not None
        )
        if inner.strip():
            yield Layer("hidden markup", inner, match.group())
