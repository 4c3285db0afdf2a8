"""A labelled corpus of poisoned and benign texts, and how the verifier scores on it.

The corpus is JSON lines of ``{text, label: poisoned|benign, class, lang}``, and optionally ``form``:
where the text would reach a model (``description``, ``param``, ``title``, ``result``; read alike),
or ``tool``, a whole tool as JSON (``{name, description, input_schema}``) read as ``scan_tool`` reads
one, so an attack split across its fields is read as served. Items alternate
between two halves by line (even lines: the half the rules were written against; odd lines:
the held-out half), so each class and language falls into both.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec

from mcpd.model.trust import HIGH, Finding
from mcpd.trust.verify import scan_text, scan_tool


class Item(msgspec.Struct, frozen=True):
    text: str
    label: Literal["poisoned", "benign"]
    cls: str = msgspec.field(name="class")
    lang: str
    form: str = "text"

    def findings(self) -> list[Finding]:
        if self.form != "tool":
            return scan_text("corpus", self.form, self.text)
        tool: dict[str, Any] = msgspec.json.decode(self.text)
        return scan_tool(tool["name"], tool["description"], tool["input_schema"])


class Score(msgspec.Struct, frozen=True, kw_only=True):
    poisoned: int
    benign: int
    caught_high: int
    """poisoned items with at least one high finding"""
    caught_any: int
    false_high: int
    """benign items with a high finding"""
    false_medium: int
    """benign items whose worst finding is medium"""
    missed: tuple[Item, ...]
    false_alarms: tuple[Item, ...]

    @property
    def recall_high(self) -> float:
        return self.caught_high / self.poisoned if self.poisoned else 1.0

    @property
    def precision_high(self) -> float:
        flagged = self.caught_high + self.false_high
        return self.caught_high / flagged if flagged else 1.0


def load(path: Path) -> list[Item]:
    decoder = msgspec.json.Decoder(Item)
    return [decoder.decode(line) for line in path.read_bytes().splitlines() if line.strip()]


def halves(items: Sequence[Item]) -> tuple[list[Item], list[Item]]:
    """(development half, held-out half)"""
    return list(items[0::2]), list(items[1::2])


def score(items: Sequence[Item]) -> Score:
    caught_high = caught_any = false_high = false_medium = 0
    missed: list[Item] = []
    alarms: list[Item] = []
    for item in items:
        severities = {f.severity for f in item.findings()}
        if item.label == "poisoned":
            caught_high += HIGH in severities
            caught_any += bool(severities)
            if HIGH not in severities:
                missed.append(item)
        elif HIGH in severities:
            false_high += 1
            alarms.append(item)
        elif severities:
            false_medium += 1
    return Score(
        poisoned=sum(i.label == "poisoned" for i in items),
        benign=sum(i.label == "benign" for i in items),
        caught_high=caught_high,
        caught_any=caught_any,
        false_high=false_high,
        false_medium=false_medium,
        missed=tuple(missed),
        false_alarms=tuple(alarms),
    )
