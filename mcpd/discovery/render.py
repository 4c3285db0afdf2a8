"""A tool registry for a model's context, within a token budget.

Ranked tools are given in three tiers, in rank order: full schemas for the best, then
name and one-line description, then names only; whatever still does not fit is counted.
Tiers never interleave, so a better-ranked tool never gets less room than a worse one.

The daemon's own tools (server ``OWN_SERVER``: the reserved ``mcpd_request_capability``)
come first, in a section of their own, each in the richest of three forms (full schema;
name, arguments and the first sentence of its description; name and arguments) that
together take at most ``OWN_SHARE`` of the budget, so the servers' tools keep the room.

Tokens are estimated, not counted: a real tokenizer is model-specific and heavy. The text
is cut into pieces the way the GPT tokenizers' pre-tokenizer cuts it (words with their
leading space, runs of 1-3 digits, runs of punctuation, whitespace), and each piece is
priced by what it usually costs: a common word is one token, a long word about one more
per three letters past six, an upper-case or camelCase word about one per two letters,
punctuation one per two or three characters, other scripts about one per character; the
sum is raised by 10 %. ``bench/discovery.py`` checks it against cl100k_base and o200k_base
on every tool of ../shared/toolret and on rendered registries: staying under the estimate
keeps the real count under the budget.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from stop_words import get_stop_words

from mcpd.model.tools import OWN_SERVER, BriefTool, Rendered, ToolEntry

OWN_SHARE = 0.15
"""The most of a budget that the daemon's own tools take, unless even their names would not fit."""

_HEADER_OWN = "## When no tool fits\n"
_HEADER_FULL = "## Tools\n"
_HEADER_BRIEF = "## More tools\n"
_HEADER_NAMES = "## Other tools\n"

# tiktoken's cl100k/o200k pre-tokenizer, with \p{L} as [^\W\d_] (letters) for the re module.
_PIECE = re.compile(
    r"'(?i:[sdmt]|ll|ve|re)|(?:_|[^\r\n\w])?[^\W\d_]+|\d{1,3}"
    r"| ?(?:_|[^\s\w])+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_NOT_LETTER = re.compile(r"[^A-Za-z]")
_WORD_PAIRS = frozenset(
    pair
    for pair, count in Counter(
        word[i : i + 2] for word in get_stop_words("en") for i in range(len(word) - 1)
    ).items()
    if count >= 2 and pair.isalpha()
)
"""Letter pairs of English words: those found at least twice in a list of common words (~300)."""
_RARE_SYMBOL = re.compile(r"[^\s\w\"'{}\[\]():,.;!?/*#=+<>|`~-]")
_MARGIN = 1.1


def _piece_tokens(piece: str) -> float:
    core = piece.lstrip()
    if not core:
        return 1.0
    if not core.isascii():
        ascii_chars = sum(1 for ch in core if ch < "\x80")
        # Outside the Basic Multilingual Plane (emoji, mathematical letters, rare CJK) a
        # character is 4 bytes, which byte-level vocabularies seldom merge: 2-4 tokens each,
        # up to one token per byte, the most a byte-level vocabulary can take.
        astral = sum(1 for ch in core if ch > "\uffff")
        return 1.1 * (len(core) - ascii_chars - astral) + 4.0 * astral + ascii_chars / 3 + 0.5
    if core.isdigit():
        return 1.0
    letters = _NOT_LETTER.sub("", core)
    if not letters:
        # Punctuation that schemas and prose use merges into few tokens ('":{"', '."); any other
        # (control characters, rarer symbols) costs about one token each.
        rare = len(_RARE_SYMBOL.findall(core))
        return 1 + (len(core) - rare - 1) / 2.5 + rare
    lead = 0.3 if len(core) > len(letters) else 0.0  # a quote or dash glued to the word
    inner_capitals = sum(1 for ch in letters[1:] if ch.isupper())
    if inner_capitals >= 2:  # ENUM_VALUES, HTTPResponse: the vocabulary has few such merges
        return max(1, math.ceil(len(letters) / 2)) + lead
    capitalised = 0.25 if letters[0].isupper() else 0.0
    # Letter pairs English words seldom have mark an identifier or a code ("xkqzpvmt"), which
    # the vocabulary splits into pieces of two or three letters.
    lower = letters.lower()
    unusual = sum(1 for i in range(len(lower) - 1) if lower[i : i + 2] not in _WORD_PAIRS)
    return 1 + max(0, len(letters) - 6) / 3 + 0.5 * inner_capitals + capitalised + lead + 0.7 * unusual


def estimate_tokens(text: str) -> int:
    return math.ceil(_MARGIN * sum(_piece_tokens(piece) for piece in _PIECE.findall(text)))


def one_line(text: str, limit: int = 120) -> str:
    first = " ".join(text.split()).split(". ", 1)[0]
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _full_block(tool: ToolEntry) -> str:
    schema = json.dumps(tool.input_schema, separators=(",", ":"), ensure_ascii=False)
    return f"### {tool.name}\n{tool.description.strip()}\nInput schema: {schema}\n"


def render(tools: Sequence[ToolEntry], budget: int) -> Rendered:
    """Fit ranked ``tools`` into ``budget`` estimated tokens; the daemon's own tools first."""
    ranked = [tool for tool in tools if tool.server != OWN_SERVER]
    head = _own_section([tool for tool in tools if tool.server == OWN_SERVER], budget)
    full, brief, names = list(head.full), list(head.brief), list(head.names)
    parts = [head.text]
    used = head.tokens
    tier = 0  # 0 = full, 1 = brief, 2 = names
    headers = (_HEADER_FULL, _HEADER_BRIEF, _HEADER_NAMES)
    started = [False, False, False]
    for index, tool in enumerate(ranked):
        # Keep room for the line that counts what is left out, should anything be.
        reserve = estimate_tokens(f"(+{len(ranked) - index} more tools not shown)\n")
        while tier < 3:
            piece = (
                _full_block(tool)
                if tier == 0
                else f"- {tool.name}: {one_line(tool.description)}\n"
                if tier == 1
                else f"{tool.name}\n"
            )
            if not started[tier]:
                piece = headers[tier] + piece
            remaining_after = len(ranked) - index - 1
            cost = estimate_tokens(piece)
            if used + cost + (reserve if remaining_after else 0) <= budget:
                break
            tier += 1
        if tier == 3:
            break
        started[tier] = True
        parts.append(piece)
        used += cost
        if tier == 0:
            full.append(tool)
        elif tier == 1:
            brief.append(BriefTool(tool.name, one_line(tool.description)))
        else:
            names.append(tool.name)
    omitted = len(tools) - len(full) - len(brief) - len(names)
    if omitted:
        line = f"(+{omitted} more tools not shown)\n"
        if used + estimate_tokens(line) <= budget:
            parts.append(line)
            used += estimate_tokens(line)
    return Rendered(full=full, brief=brief, names=names, omitted=omitted, tokens=used, text="".join(parts))


def arguments(schema: dict[str, Any]) -> str:
    """A schema's top-level properties in one line: ``{capability, context?}`` (optional ones marked)."""
    properties = schema.get("properties")
    required = schema.get("required") or []
    if not isinstance(properties, dict):
        return "{}"
    return "{" + ", ".join(f"{name}{'' if name in required else '?'}" for name in properties) + "}"


def _own_section(own: list[ToolEntry], budget: int) -> Rendered:
    """The daemon's tools in the richest form within their share; else by name, if that fits at all."""
    if not own:
        return Rendered(full=[], brief=[], names=[], omitted=0, tokens=0, text="")
    forms = (
        "".join(_full_block(tool) for tool in own),
        "".join(f"- {t.name} {arguments(t.input_schema)}: {one_line(t.description)}\n" for t in own),
        "".join(f"- {t.name} {arguments(t.input_schema)}\n" for t in own),
    )
    costs = [estimate_tokens(_HEADER_OWN + form) for form in forms]
    chosen = next((i for i, cost in enumerate(costs) if cost <= OWN_SHARE * budget), 2)
    if costs[chosen] > budget:
        return Rendered(full=[], brief=[], names=[], omitted=len(own), tokens=0, text="")
    return Rendered(
        full=own if chosen == 0 else [],
        brief=[BriefTool(t.name, one_line(t.description)) for t in own] if chosen == 1 else [],
        names=[t.name for t in own] if chosen == 2 else [],
        omitted=0,
        tokens=costs[chosen],
        text=_HEADER_OWN + forms[chosen],
    )
