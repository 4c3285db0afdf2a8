"""The trust gate: which tools of a server may reach registries and calls.

Two checks, per server policy:

- ``verify`` (off | warn | block): the verifier's findings are logged; under ``block`` a
  server with a high-severity finding is kept out of every registry.
- ``pinning`` (pin | trust): a SHA-256 of each tool's name, description and input schema
  is pinned the first time the server is seen. Afterwards a tool whose definition changed,
  or a tool the server added, is held back until ``approve`` -- the "rug pull" defence.
  ``trust`` pins too (so ``diff`` works) but holds nothing back.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import msgspec
import structlog

from mcpd.config.model import ServerConfig
from mcpd.model.tools import ToolInfo
from mcpd.model.trust import HIGH, Finding, PinRecord, ToolChange
from mcpd.trust.verify import scan_tool

log = structlog.get_logger("mcpd.trust")


def definition(tool: ToolInfo) -> str:
    """The canonical text that is pinned: name, description and input schema, keys sorted."""
    return json.dumps(
        {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema},
        sort_keys=True,
        ensure_ascii=False,
        indent=1,
    )


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Review:
    """The verdict on one server's current tool list."""

    findings: list[Finding] = field(default_factory=list)
    blocked: str | None = None
    held: dict[str, str] = field(default_factory=dict)
    """tool -> why it is held back"""

    def summary(self) -> str | None:
        if self.blocked:
            return self.blocked
        if self.held:
            return f"{len(self.held)} tool(s) held back until approved: {', '.join(sorted(self.held))}"
        return None


class TrustGate:
    """Reviews servers' tool lists against their pins; ``persist`` writes pins through."""

    def __init__(
        self, pins: Iterable[PinRecord] = (), persist: Callable[[PinRecord], None] | None = None
    ) -> None:
        self._pins: dict[tuple[str, str], PinRecord] = {(p.server, p.tool): p for p in pins}
        self._persist = persist or (lambda pin: None)
        self._reviews: dict[str, tuple[tuple[ToolInfo, ...], Review]] = {}
        self._revisions: dict[str, int] = {}

    def review(self, config: ServerConfig, tools: tuple[ToolInfo, ...]) -> Review:
        cached = self._reviews.get(config.name)
        if cached is not None and cached[0] is tools:
            return cached[1]
        review = self._review(config, tools)
        self._reviews[config.name] = (tools, review)
        self._bump(config.name)
        return review

    def revision(self, server: str) -> int:
        """Changes with every new verdict on ``server``: caches keyed on it know to refresh."""
        return self._revisions.get(server, 0)

    def _bump(self, server: str) -> None:
        self._revisions[server] = self._revisions.get(server, 0) + 1

    def _review(self, config: ServerConfig, tools: Sequence[ToolInfo]) -> Review:
        review = Review()
        if config.verify != "off":
            for tool in tools:
                review.findings.extend(scan_tool(tool.name, tool.description, tool.input_schema))
            for finding in review.findings:
                log.warning(
                    "trust.finding",
                    server=config.name,
                    rule=finding.rule,
                    severity=finding.severity,
                    tool=finding.tool,
                    where=finding.where,
                    excerpt=finding.excerpt,
                )
            high = sorted({f.rule for f in review.findings if f.severity == HIGH})
            if config.verify == "block" and high:
                review.blocked = f"blocked by the verifier: {', '.join(high)} (see `mcpd check`)"
                log.error("trust.blocked", server=config.name, rules=high)
        known = any(server == config.name for server, _ in self._pins)
        for tool in tools:
            text = definition(tool)
            reason = self._pin(config.name, tool.name, text, first_sight=not known)
            if reason and config.pinning == "pin":
                review.held[tool.name] = reason
        if review.held:
            log.warning("trust.held_back", server=config.name, tools=sorted(review.held))
        return review

    def _pin(self, server: str, tool: str, text: str, *, first_sight: bool) -> str | None:
        """Record what was seen; return why the tool must wait for approval, if it must."""
        hashed = digest(text)
        pin = self._pins.get((server, tool))
        if pin is None:
            approved = first_sight
            pin = PinRecord(
                server=server,
                tool=tool,
                approved_hash=hashed if approved else None,
                approved_definition=text if approved else None,
                seen_hash=hashed,
                seen_definition=text,
            )
            self._pins[server, tool] = pin
            self._persist(pin)
            return None if approved else "new tool since the server was approved"
        if pin.seen_hash != hashed:
            pin = self._pins[server, tool] = msgspec.structs.replace(
                pin, seen_hash=hashed, seen_definition=text
            )
            self._persist(pin)
        if pin.approved_hash is None:
            return "new tool since the server was approved"
        if pin.approved_hash != hashed:
            return "definition changed since it was approved"
        return None

    def allowed(self, server: str, tool: str) -> str | None:
        """None if the tool may be listed and called; else why not."""
        cached = self._reviews.get(server)
        if cached is None:
            return None
        review = cached[1]
        return review.blocked or review.held.get(tool)

    def approve(self, server: str, tool: str | None = None) -> list[str]:
        """Accept the current definitions (of one tool, or all of the server's); returns what changed."""
        approved = []
        for key, pin in list(self._pins.items()):
            if pin.server != server or (tool is not None and pin.tool != tool):
                continue
            if pin.approved_hash != pin.seen_hash:
                accepted = msgspec.structs.replace(
                    pin, approved_hash=pin.seen_hash, approved_definition=pin.seen_definition
                )
                self._pins[key] = accepted
                self._persist(accepted)
                approved.append(pin.tool)
        if approved:
            self._reviews.pop(server, None)
            self._bump(server)
            log.info("trust.approved", server=server, tools=sorted(approved))
        return sorted(approved)

    def changes(self, server: str) -> list[ToolChange]:
        out = []
        for (pin_server, tool), pin in sorted(self._pins.items()):
            if pin_server != server or pin.approved_hash == pin.seen_hash:
                continue
            before = (pin.approved_definition or "").splitlines()
            after = pin.seen_definition.splitlines()
            text = "\n".join(difflib.unified_diff(before, after, "approved", "current", lineterm="", n=2))
            reason = "new tool" if pin.approved_hash is None else "definition changed"
            out.append(ToolChange(tool=tool, reason=reason, diff=text))
        return out

    def findings(self, server: str) -> list[Finding]:
        cached = self._reviews.get(server)
        return list(cached[1].findings) if cached else []
