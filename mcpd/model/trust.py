"""Trust: verifier findings, held-back changes, and pinned tool definitions."""

from __future__ import annotations

import msgspec

HIGH = "high"
MEDIUM = "medium"


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    rule: str
    severity: str
    message: str
    tool: str
    where: str
    """Which string: ``name``, ``description``, or a path into the input schema."""
    excerpt: str


class ToolChange(msgspec.Struct, frozen=True, kw_only=True):
    tool: str
    reason: str
    diff: str
    """A unified diff of the approved and the current definition (pretty JSON)."""


class PinRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A tool's pinned definition: what was approved, and what the server shows now."""

    server: str
    tool: str
    approved_hash: str | None
    approved_definition: str | None
    seen_hash: str
    seen_definition: str


def describe(finding: Finding) -> str:
    """One line for people: rule, severity, tool, where, excerpt."""
    return f"{finding.rule} {finding.severity:<6} {finding.tool} [{finding.where}] {finding.excerpt}"
