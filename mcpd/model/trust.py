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
    accepted: bool = False
    """A person accepted this finding for the current text (``mcpd approve``): it blocks nothing."""


class ToolChange(msgspec.Struct, frozen=True, kw_only=True):
    tool: str
    reason: str
    diff: str
    """A unified diff of the approved and the current definition (pretty JSON)."""
    fields: list[str] = msgspec.field(default_factory=list)
    """The definition's fields whose values differ (``annotations``, ``title``, ...): the diff's
    context may not name one whose change lies deep inside it. Empty for a new tool."""


class PinRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A tool's pinned definition: what was approved, and what the server shows now.

    Written to the store it is a sighting: it sets what was seen, and what was approved only for a
    tool the store holds nothing of yet (first sight). Daemons sharing a store each hold their own
    copy, possibly older than the store's, so their sightings never write an approval back."""

    server: str
    tool: str
    approved_hash: str | None
    approved_definition: str | None
    seen_hash: str
    seen_definition: str


class PinApproval(msgspec.Struct, frozen=True, kw_only=True):
    """A person approved this definition of a tool: written over the approved one, whatever else
    the store holds for the tool (a ``PinRecord`` written later only says what was seen)."""

    server: str
    tool: str
    approved_hash: str
    approved_definition: str


class PinUpgrade(msgspec.Struct, frozen=True, kw_only=True):
    """An approval an older build stored, of less than a tool's definition now holds
    (``trust.gate.legacy_definition``), carried over to the whole of it: written only where the store
    still holds that old approval, so that it never replaces a person's later decision."""

    server: str
    tool: str
    legacy_hash: str
    approved_hash: str
    approved_definition: str


class AcceptedFindings(msgspec.Struct, frozen=True, kw_only=True):
    """A person accepted the findings in one subject's texts, as long as they hash to this."""

    server: str
    subject: str
    """A tool's name, or "" for the server's own instructions and title."""
    definition_hash: str


TrustRecord = PinRecord | PinApproval | PinUpgrade | AcceptedFindings
"""What the trust gate writes through to the store."""


def describe(finding: Finding) -> str:
    """One line for people: rule, severity, tool, where, excerpt."""
    accepted = " (accepted)" if finding.accepted else ""
    subject = finding.tool or "(server)"
    return f"{finding.rule} {finding.severity:<6} {subject} [{finding.where}] {finding.excerpt}{accepted}"
