"""A tool registry for a model's context, within a token budget.

Ranked tools are given in three tiers, in rank order: full schemas for the best, then
name and one-line description, then names only; whatever still does not fit is counted.
Tiers never interleave, so a better-ranked tool never gets less room than a worse one.

Tokens are estimated, not counted: a real tokenizer is model-specific and heavy. The
estimate is ``ceil(ascii_chars / 3.2 + other_chars * 1.1)``, built to overestimate: against
cl100k_base it comes out above the real count for the schemas in ../shared/toolret (see
``bench/discovery.py``, which prints the comparison), so staying under the estimate keeps
the real count under the budget too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from mcpd.model.tools import BriefTool, Rendered, ToolEntry

_ASCII_CHARS_PER_TOKEN = 3.2
_TOKENS_PER_OTHER_CHAR = 1.1
_HEADER_FULL = "## Tools\n"
_HEADER_BRIEF = "## More tools\n"
_HEADER_NAMES = "## Other tools\n"


def estimate_tokens(text: str) -> int:
    ascii_chars = sum(1 for ch in text if ch < "\x80")
    others = len(text) - ascii_chars
    return math.ceil(ascii_chars / _ASCII_CHARS_PER_TOKEN + others * _TOKENS_PER_OTHER_CHAR)


def one_line(text: str, limit: int = 120) -> str:
    first = " ".join(text.split()).split(". ", 1)[0]
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _full_block(tool: ToolEntry) -> str:
    schema = json.dumps(tool.input_schema, separators=(",", ":"), ensure_ascii=False)
    return f"### {tool.name}\n{tool.description.strip()}\nInput schema: {schema}\n"


def render(tools: Sequence[ToolEntry], budget: int) -> Rendered:
    """Fit ranked ``tools`` into ``budget`` estimated tokens."""
    full: list[ToolEntry] = []
    brief: list[BriefTool] = []
    names: list[str] = []
    parts: list[str] = []
    used = 0
    tier = 0  # 0 = full, 1 = brief, 2 = names
    headers = (_HEADER_FULL, _HEADER_BRIEF, _HEADER_NAMES)
    for index, tool in enumerate(tools):
        # Keep room for the line that counts what is left out, should anything be.
        reserve = estimate_tokens(f"(+{len(tools) - index} more tools not shown)\n")
        while tier < 3:
            piece = (
                _full_block(tool)
                if tier == 0
                else f"- {tool.name}: {one_line(tool.description)}\n"
                if tier == 1
                else f"{tool.name}\n"
            )
            if not _tier_started(tier, full, brief, names):
                piece = headers[tier] + piece
            remaining_after = len(tools) - index - 1
            cost = estimate_tokens(piece)
            if used + cost + (reserve if remaining_after else 0) <= budget:
                break
            tier += 1
        if tier == 3:
            break
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


def _tier_started(tier: int, full: list[ToolEntry], brief: list[BriefTool], names: list[str]) -> bool:
    return bool((full, brief, names)[tier])
