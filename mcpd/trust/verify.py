"""The verifier: signs of tool poisoning in what a server says about its tools.

A tool's name, description and input schema go straight into a model's context, so a
malicious server can address the model there. Every string of a tool is scanned (name,
description, and in the schema: descriptions, titles, defaults, enum values, examples)
for:

    TP001 high    instructions aimed at the model (ignore/override previous instructions)
    TP002 high    concealment (do not tell the user, secretly, without mentioning)
    TP003 high    hidden instruction blocks (<IMPORTANT>, <SYSTEM>, [INST] ...)
    TP004 medium  references to secrets and credential files (~/.ssh, id_rsa, .env, tokens)
    TP005 medium  attempts to steer other tools (instead of / before using another tool)
    TP006 high    invisible or direction-changing Unicode (tag characters, zero-width, bidi)
    TP007 medium  base64-looking blobs

High findings are what a ``block`` policy blocks on; medium ones are reported.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from mcpd.model.trust import HIGH, MEDIUM, Finding

_RULES: tuple[tuple[str, str, str, re.Pattern[str]], ...] = (
    (
        "TP001",
        HIGH,
        "instructions aimed at the model",
        re.compile(
            r"\b(ignore|disregard|forget|override)\b[^.\n]{0,40}"
            r"\b(previous|prior|above|earlier|all|other|system)\b[^.\n]{0,20}"
            r"\b(instructions?|prompts?|rules|directions)\b|\byou are now\b|\bnew instructions\b",
            re.IGNORECASE,
        ),
    ),
    (
        "TP002",
        HIGH,
        "concealment from the user",
        re.compile(
            r"\b(do not|don't|never)\s+(tell|inform|mention|reveal|show|notify)\b[^.\n]{0,30}\buser\b"
            r"|\bwithout (telling|informing|notifying|alerting)\b|\b(secretly|covertly)\b"
            r"|\bkeep (this|it) (a )?secret\b",
            re.IGNORECASE,
        ),
    ),
    (
        "TP003",
        HIGH,
        "hidden instruction block",
        re.compile(r"<\s*/?\s*(important|system|instructions?|secret|hidden)\s*>|\[/?INST\]", re.IGNORECASE),
    ),
    (
        "TP004",
        MEDIUM,
        "reference to secrets or credential files",
        re.compile(
            r"~/\.ssh|\bid_(rsa|ed25519|ecdsa)\b|(^|[\s/'\"])\.env\b|\.aws/credentials|\.netrc|\.npmrc|\.pgpass"
            r"|\bprivate[ _-]?key\b|\b(api[ _-]?key|access[ _-]?token|secret[ _-]?key|password)s?\b",
            re.IGNORECASE,
        ),
    ),
    (
        "TP005",
        MEDIUM,
        "attempt to steer other tools",
        re.compile(
            r"\b(instead of|rather than) (using |calling )?(the |any )?[\w.-]+ tool\b"
            r"|\b(before|after|when) (using|calling) (any( other)?|another|other|the [\w.-]+) tools?\b"
            r"|\bmust (also|always|first) (call|use|send)\b",
            re.IGNORECASE,
        ),
    ),
)

_INVISIBLE = re.compile(
    "[\U000e0000-\U000e007f\u200b-\u200f\u2060-\u2064\ufeff\u202a-\u202e\u2066-\u2069\u00ad]"
)
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{40,}={0,2}(?![A-Za-z0-9+/=])")


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def _excerpt(text: str, start: int, end: int, context: int = 40) -> str:
    snippet = text[max(0, start - context) : end + context]
    visible = _INVISIBLE.sub(lambda m: f"<U+{ord(m.group()):04X}>", snippet)
    return " ".join(visible.split())[:200]


def _looks_encoded(run: str) -> bool:
    # Real base64 mixes cases and digits; a URL path or a long identifier does not.
    return any(c.isdigit() for c in run) and any(c.isupper() for c in run) and any(c.islower() for c in run)


def scan_text(tool: str, where: str, text: str) -> list[Finding]:
    findings = []
    for rule, severity, message, pattern in _RULES:
        match = pattern.search(text)
        if match:
            findings.append(
                Finding(
                    rule=rule,
                    severity=severity,
                    message=message,
                    tool=tool,
                    where=where,
                    excerpt=_excerpt(text, match.start(), match.end()),
                )
            )
    hidden = _INVISIBLE.search(text)
    if hidden:
        findings.append(
            Finding(
                rule="TP006",
                severity=HIGH,
                message=f"invisible or direction-changing character U+{ord(hidden.group()):04X}",
                tool=tool,
                where=where,
                excerpt=_excerpt(text, hidden.start(), hidden.end()),
            )
        )
    blob = next((m for m in _BASE64.finditer(text) if _looks_encoded(m.group())), None)
    if blob:
        findings.append(
            Finding(
                rule="TP007",
                severity=MEDIUM,
                message="base64-looking blob",
                tool=tool,
                where=where,
                excerpt=_excerpt(text, blob.start(), blob.end(), context=10),
            )
        )
    return findings


def scan_tool(name: str, description: str, input_schema: dict[str, Any]) -> list[Finding]:
    """Every finding in one tool's name, description and input schema."""
    findings = scan_text(name, "name", name) + scan_text(name, "description", description)
    for path, text in _strings(input_schema, "input_schema"):
        findings.extend(scan_text(name, path, text))
    return findings
