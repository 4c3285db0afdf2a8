"""The trust gate: which servers and tools may reach a model's context, registries and calls.

Two checks, per server policy:

- ``verify`` (off | warn | block): everything a server says to models is scanned (its
  ``instructions`` and title, each tool's name, title, description, annotations, input and
  output schemas, and the strings of what else of a tool reaches hosts: ``icons``, ``_meta``,
  ``execution`` and any field mcpd does not model; prompts', resources' and templates' names,
  titles, descriptions and the strings of their extra fields). Findings are logged; under ``block`` a
  server with an unaccepted high finding is kept out of every registry, the
  ``<available_mcps>`` block and selection. ``approve``
  accepts exactly the findings of the current texts: a later change is reviewed again.
- ``pinning`` (pin | trust): a SHA-256 of each tool's definition, everything of it that reaches
  hosts (``definition``: name, title, description, input and output schemas, annotations, icons,
  ``_meta``, fields mcpd does not model), is pinned the first time the server is seen. Afterwards
  a tool whose definition changed, or a tool the server added, is held back until ``approve`` --
  the "rug pull" defence. ``trust`` pins too (so ``diff`` works) but holds nothing back. An
  approval an older build stored covers only name, description and input schema
  (``legacy_definition``): while that part is unchanged it is carried over to the whole.

Scanning and hashing thousands of tools takes a noticeable fraction of a second, so it is
split off as ``inspect()``, a pure function the catalogue runs in a worker thread; what is
left for the event loop (``review``, ``approve``) is dictionary work.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec
import structlog

from mcpd.config.model import ServerConfig
from mcpd.model.resources import PromptInfo, ResourceInfo, ResourceTemplateInfo, Surface
from mcpd.model.servers import ServerInfo
from mcpd.model.tools import ToolInfo
from mcpd.model.trust import (
    HIGH,
    AcceptedFindings,
    Finding,
    PinApproval,
    PinRecord,
    PinUpgrade,
    ToolChange,
    TrustRecord,
)

log = structlog.get_logger("mcpd.trust")

SERVER_SUBJECT = ""
"""The subject name of a server's own texts (instructions, title), beside its tools' names."""
SURFACE_PREFIXES = ("prompt:", "resource:")
"""Subject names of prompts and resources start with these (tool names never contain a colon here)."""


def definition(tool: ToolInfo) -> str:
    """The canonical text that is pinned: everything of the tool that reaches hosts, keys sorted.

    Hosts act on more than the texts a model reads: annotations (``destructiveHint``,
    ``readOnlyHint``) decide whether a host asks the user before a call, the output schema what it
    takes from a result, ``_meta`` what it renders (``ui/resourceUri``), ``execution`` how it calls,
    and a field of a later revision may mean anything to a host that knows it. So all of it is
    pinned, icons too (a host shows them as the tool's face). Every key is there, null where the
    server sent nothing: no text of this form is one ``legacy_definition`` wrote.

    Written by msgspec, ten times as fast as ``json`` with an indent (which is pure Python): a
    server's inspection makes one of each of its tools.
    """
    pinned = {
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "output_schema": tool.output_schema,
        "annotations": tool.annotations,
        "icons": tool.icons,
        "_meta": tool.meta,
        "extra": tool.extra,
    }
    return msgspec.json.format(msgspec.json.encode(pinned, order="sorted"), indent=1).decode()


def legacy_definition(tool: ToolInfo) -> str:
    """What builds before ``definition`` pinned: name, description and input schema.

    A store they wrote holds approvals of this text; one that still matches the tool stands for its
    whole current definition (``TrustGate`` pins that in its place), so an upgrade holds back only
    what changed in the part that was pinned. It is also the start of what the verifier's accepted
    findings hash (``_tool_subject``), which therefore stay accepted across the upgrade.
    """
    return json.dumps(
        {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema},
        sort_keys=True,
        ensure_ascii=False,
        indent=1,
    )


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Subject:
    """One thing a server says to models: a tool, or (``SERVER_SUBJECT``) the server itself."""

    name: str
    definition: str
    hash: str
    """Of everything scanned, so accepted findings stay accepted only while the text stays."""
    findings: tuple[Finding, ...]
    legacy_hash: str | None = None
    """A tool's: the hash of its ``legacy_definition``, which an approval an older build stored has."""


@dataclass(frozen=True)
class Inspection:
    """What ``inspect`` found in one server's texts; the inputs are kept to tell it is current."""

    tools: tuple[ToolInfo, ...]
    info: ServerInfo | None
    surface: Surface
    subjects: tuple[Subject, ...]
    scanned: bool = True
    """The verifier read the texts (``verify`` was not off): the findings say what it found."""

    def current(self, tools: tuple[ToolInfo, ...], info: ServerInfo | None, surface: Surface) -> bool:
        return (
            self.tools is tools and self.info is info and (self.surface is surface or self.surface == surface)
        )


class Scanner(Protocol):
    """The verifier, ``mcpd.trust.verify``: imported by the first inspection (see ``inspect``)."""

    def scan_text(self, subject: str, where: str, text: str) -> list[Finding]: ...

    def scan_tool(
        self,
        name: str,
        description: str,
        input_schema: dict[str, Any],
        output_schema: dict[str, Any] | None = None,
    ) -> list[Finding]: ...


Scan = Callable[[Scanner], Iterable[Finding]]
"""Reads one subject's texts with the verifier."""


SERVER_BUDGET = 16_000_000
"""Characters of one server's texts the verifier reads per inspection: six times 2,500 tools of
2 KB (~2 s). Reading costs time in proportion to the text, in a worker thread the server's start and
approval wait for, and a server may list any number of tools; what a server says past the budget
is not read but held back (TP013), so no text gets through unread."""


LOGGED_FINDINGS = 100
"""Findings of one review logged one by one, at most; the rest are counted in one line. A review runs
on the event loop, and a line takes ~40 us: the review of a server with a finding in each of 2,500
tools held the loop (and every other server's requests) for 100 ms, 13 ms with the rest counted."""


def _unread(subject: str) -> Finding:
    return Finding(
        rule="TP013",
        severity=HIGH,
        message=f"not read: the server's texts passed the verifier's budget of {SERVER_BUDGET:,} characters",
        tool=subject,
        where="everything",
        excerpt="",
    )


class _Subjects:
    """Makes subjects; the findings of a subject whose texts hash as in the previous inspection are
    taken from it rather than scanned again (a restart or a ``list_changed`` repeats most texts)."""

    def __init__(self, scanner: Scanner | None, previous: Inspection | None) -> None:
        self._scanner = scanner
        self._budget = SERVER_BUDGET
        self._found: dict[tuple[str, str], tuple[Finding, ...]] = {}
        if previous is not None and previous.scanned == (scanner is not None):
            self._found = {(s.name, s.hash): s.findings for s in previous.subjects}

    def make(self, name: str, text: str, scanned: str, scan: Scan, legacy_hash: str | None = None) -> Subject:
        """``scanned``: everything ``scan`` reads (so its hash decides whether to scan again)."""
        hashed = digest(scanned)
        findings = self._found.get((name, hashed))
        if findings is None and self._scanner is not None:
            self._budget -= len(scanned)
            findings = tuple(scan(self._scanner)) if self._budget >= 0 else (_unread(name),)
        return Subject(name, text, hashed, findings or (), legacy_hash)


def _server_subject(info: ServerInfo | None, subjects: _Subjects) -> Subject | None:
    if info is None or not (info.instructions or info.title):
        return None
    texts = {"instructions": info.instructions or "", "title": info.title or ""}
    text = json.dumps(texts, sort_keys=True, ensure_ascii=False)
    return subjects.make(SERVER_SUBJECT, text, text, _each_text(SERVER_SUBJECT, texts))


def _each_text(subject: str, texts: dict[str, str]) -> Scan:
    """Scans each of ``texts`` (where -> text) on its own."""
    return lambda scanner: [
        finding for where, value in texts.items() for finding in scanner.scan_text(subject, where, value)
    ]


def _passed(tool: ToolInfo) -> dict[str, Any]:
    """What else of the tool reaches hosts as the server sent it, only where it sent something (so a
    tool without any hashes for its findings as it always did): read, so it carries no text unchecked."""
    passed: dict[str, Any] = {"icons": tool.icons, "_meta": tool.meta, **(tool.extra or {})}
    return {key: value for key, value in passed.items() if value is not None}


def _tool_subject(tool: ToolInfo, subjects: _Subjects) -> Subject:
    legacy = legacy_definition(tool)
    extra = {"title": tool.title, "annotations": tool.annotations, "output_schema": tool.output_schema}
    passed = _passed(tool)
    if passed:
        extra["passed"] = passed
    everything = legacy + json.dumps(extra, sort_keys=True, ensure_ascii=False, default=str)

    def scan(scanner: Scanner) -> list[Finding]:
        findings = scanner.scan_tool(tool.name, tool.description, tool.input_schema, tool.output_schema)
        if tool.title:
            findings.extend(scanner.scan_text(tool.name, "title", tool.title))
        findings.extend(_scan_annotations(tool, scanner))
        for where, text in _strings(passed, ""):
            findings.extend(scanner.scan_text(tool.name, where, text))
        return findings

    return subjects.make(tool.name, definition(tool), everything, scan, digest(legacy))


def _strings(value: Any, where: str) -> Iterable[tuple[str, str]]:
    """Every string in a JSON value, keys too, with its path (``_meta.ui.note``, ``icons[0].src``)."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if isinstance(key, str):
                yield path, key
            yield from _strings(item, path)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{where}[{index}]")


def _scan_annotations(tool: ToolInfo, scanner: Scanner) -> list[Finding]:
    findings: list[Finding] = []
    for key, value in (tool.annotations or {}).items():
        if isinstance(value, str):
            findings.extend(scanner.scan_text(tool.name, f"annotations.{key}", value))
    return findings


def _surface_subjects(surface: Surface, subjects: _Subjects) -> list[Subject]:
    """Prompts, resources and templates: their names, titles and descriptions reach models too, and
    so do the strings of their extra fields (``_meta``, fields mcpd does not model), keys included.

    Named ``prompt:NAME`` / ``resource:URI`` so they never meet a tool's name; findings only, no pins.
    """

    def said(item: PromptInfo | ResourceInfo | ResourceTemplateInfo) -> dict[str, str]:
        return {"name": item.name, "title": item.title or "", "description": item.description or ""}

    # Extras as (path, fields) pairs, not merged into one dict: a prompt's extra key spelled like an
    # argument's path must not overwrite (and so hide) what either holds.
    texts: list[tuple[str, dict[str, str], list[tuple[str, dict[str, Any]]]]] = []
    for prompt in surface.prompts:
        described = said(prompt)
        passed = [("", prompt.extra)] if prompt.extra else []
        for argument in prompt.arguments or ():
            described[f"arguments.{argument.name}"] = argument.description or ""
            if argument.title:
                described[f"arguments.{argument.name}.title"] = argument.title
            if argument.extra:
                passed.append((f"arguments.{argument.name}", argument.extra))
        texts.append((f"{SURFACE_PREFIXES[0]}{prompt.name}", described, passed))
    for resource in surface.resources:
        passed = [("", resource.extra)] if resource.extra else []
        texts.append((f"{SURFACE_PREFIXES[1]}{resource.uri}", said(resource), passed))
    for template in surface.templates:
        passed = [("", template.extra)] if template.extra else []
        texts.append((f"{SURFACE_PREFIXES[1]}{template.uri_template}", said(template), passed))
    made = []
    for name, described, passed in texts:
        text = json.dumps(described, sort_keys=True, ensure_ascii=False)
        # Hashed only where there are extras, so an item without any hashes (and stays accepted) as before.
        scanned = text
        if passed:
            scanned += json.dumps({"passed": passed}, sort_keys=True, ensure_ascii=False, default=str)
        made.append(subjects.make(name, text, scanned, _each_text_and_passed(name, described, passed)))
    return made


def _each_text_and_passed(
    subject: str, texts: dict[str, str], passed: list[tuple[str, dict[str, Any]]]
) -> Scan:
    """Scans each of ``texts`` on its own, then every string of ``passed`` (where: its path)."""
    each = _each_text(subject, texts)
    return lambda scanner: [
        *each(scanner),
        *(
            finding
            for path, fields in passed
            for where, value in _strings(fields, path)
            for finding in scanner.scan_text(subject, where, value)
        ),
    ]


def verifier() -> Scanner:
    """The verifier, imported at first use rather than by the daemon before its servers start: its
    rules compile their regular expressions on import (70-175 ms of CPU). The catalogue has it
    imported in a worker thread as soon as it runs, while the children boot, so that it is not the
    first server's inspection (which a host's first call to that server waits for) that pays."""
    from mcpd.trust import verify  # noqa: PLC0415

    return verify


def inspect(
    config: ServerConfig,
    tools: tuple[ToolInfo, ...],
    info: ServerInfo | None,
    surface: Surface | None = None,
    previous: Inspection | None = None,
) -> Inspection:
    """Scan and hash everything the server says to models. Pure; run it off the event loop.

    ``previous``: the server's last inspection, whose findings on texts that did not change are kept.
    """
    scanner: Scanner | None = verifier() if config.verify != "off" else None
    subjects = _Subjects(scanner, previous)
    surface = surface or Surface()
    server = _server_subject(info, subjects)
    made = [_tool_subject(tool, subjects) for tool in tools]
    extra = _surface_subjects(surface, subjects)
    return Inspection(
        tools, info, surface, (*([server] if server else []), *made, *extra), scanner is not None
    )


@dataclass
class Review:
    """The verdict on one server's current texts."""

    findings: list[Finding] = field(default_factory=list)
    blocked: str | None = None
    """Why the whole server is kept out, in plain words (verifier findings not yet accepted)."""
    held: dict[str, str] = field(default_factory=dict)
    """tool -> why it is held back (changed or new since approval)"""
    tainted_instructions: bool = False
    """The server's own texts carry an unaccepted high finding: never pass them on to a model."""
    unreadable: str | None = None
    """Why the held tools' approvals are not known: the usage store could not be read."""

    def summary(self) -> str | None:
        if self.blocked:
            return self.blocked
        if self.held:
            held = f"{len(self.held)} tool(s) held back until approved: {', '.join(sorted(self.held))}"
            return f"{held} ({self.held_because()})" if self.unreadable else held
        return None

    def held_because(self) -> str | None:
        """Why tools wait when it is not their own change (None when it is)."""
        if self.held and self.unreadable:
            return f"the usage store holding their approvals could not be read: {self.unreadable}"
        return None


class TrustGate:
    """Reviews inspections against pins and accepted findings; ``persist`` writes records through."""

    def __init__(
        self,
        pins: Iterable[PinRecord] = (),
        accepted: Iterable[AcceptedFindings] = (),
        persist: Callable[[TrustRecord], None] | None = None,
        unreadable: str | None = None,
    ) -> None:
        """``unreadable``: why the stored pins could not be read. Then no server is seen for the
        first time (each could have changed since it was approved): under ``pinning = "pin"``
        every tool waits for ``approve`` (or ``restore``, once the store can be read), and only a
        person's decisions are written through (sightings could record a server the store knows
        nothing of as pinned but unapproved, holding it back after ``restore``)."""
        self._unreadable = unreadable
        self._pins: dict[tuple[str, str], PinRecord] = {(p.server, p.tool): p for p in pins}
        self._pinned_servers = {server for server, _ in self._pins}
        self._accepted: dict[tuple[str, str], str] = {
            (a.server, a.subject): a.definition_hash for a in accepted
        }
        self._persist = persist or (lambda record: None)
        self._reviews: dict[str, tuple[Inspection, Review]] = {}
        self._configs: dict[str, ServerConfig] = {}
        """Each reviewed server's config, to review it again when the stored pins arrive late."""
        self._revisions: dict[str, int] = {}
        self._decided: dict[tuple[str, str], PinApproval] = {}
        self._decided_findings: dict[tuple[str, str], str] = {}
        """What a person approved this run: it stands over what a store read later holds."""

    @property
    def unreadable(self) -> str | None:
        """Why the stored pins could not be read (None once they were)."""
        return self._unreadable

    def restore(self, pins: Iterable[PinRecord], accepted: Iterable[AcceptedFindings]) -> None:
        """The stored pins, read at last (the store was locked or retrying at start): take its
        approvals, with what a person approved meanwhile on top (written again: the store may not
        have taken it), and review every server again. Tools held back only for want of the store
        are released; a server the store never saw is pinned as seen for the first time."""
        if self._unreadable is None:
            return
        self._unreadable = None
        self._pins = {(p.server, p.tool): p for p in pins}
        for key, decision in self._decided.items():
            pin = self._pins.get(key)
            self._pins[key] = PinRecord(
                server=decision.server,
                tool=decision.tool,
                approved_hash=decision.approved_hash,
                approved_definition=decision.approved_definition,
                seen_hash=pin.seen_hash if pin else decision.approved_hash,
                seen_definition=pin.seen_definition if pin else decision.approved_definition,
            )
            self._persist(decision)
        self._pinned_servers = {server for server, _ in self._pins}
        self._accepted = {(a.server, a.subject): a.definition_hash for a in accepted}
        for (server, subject), hashed in self._decided_findings.items():
            self._accepted[server, subject] = hashed
            self._persist(AcceptedFindings(server=server, subject=subject, definition_hash=hashed))
        for server, (inspection, _) in list(self._reviews.items()):
            config = self._configs.get(server)
            if config is not None:
                self._reviews[server] = (inspection, self._review(config, inspection, log_findings=False))
                self._bump(server)
        log.info("trust.pins_loaded", pins=len(self._pins), servers=len(self._pinned_servers))

    def records(self) -> list[TrustRecord]:
        """Everything the gate holds, as records: to save again into a store re-created under the
        daemon (its file was deleted), where it would otherwise be lost at the next start."""
        out: list[TrustRecord] = []
        for pin in self._pins.values():
            out.append(pin)
            if pin.approved_hash is not None and pin.approved_definition is not None:
                out.append(
                    PinApproval(
                        server=pin.server,
                        tool=pin.tool,
                        approved_hash=pin.approved_hash,
                        approved_definition=pin.approved_definition,
                    )
                )
        out.extend(
            AcceptedFindings(server=server, subject=subject, definition_hash=hashed)
            for (server, subject), hashed in self._accepted.items()
        )
        return out

    def resave(self) -> int:
        """Write ``records()`` through; how many."""
        records = self.records() if self._unreadable is None else []
        for record in records:
            self._persist(record)
        return len(records)

    def review(self, config: ServerConfig, inspection: Inspection) -> Review:
        """The verdict on ``inspection`` (cached while it stays the server's latest)."""
        cached = self._reviews.get(config.name)
        if cached is not None and cached[0] is inspection:
            return cached[1]
        review = self._review(config, inspection, log_findings=cached is None or cached[0] is not inspection)
        self._reviews[config.name] = (inspection, review)
        self._configs[config.name] = config
        self._bump(config.name)
        return review

    def cached(self, server: str) -> Review | None:
        """The latest verdict on ``server``, if it has had one."""
        found = self._reviews.get(server)
        return found[1] if found else None

    def prune(self, servers: set[str]) -> None:
        """Forget the verdicts on servers other than ``servers`` (a reload removed them). Their pins
        stay: a server that comes back under its name is checked against what was approved."""
        for kept in (self._reviews, self._revisions, self._configs):
            for name in kept.keys() - servers:
                del kept[name]

    def revision(self, server: str) -> int:
        """Changes with every new verdict on ``server``: caches keyed on it know to refresh."""
        return self._revisions.get(server, 0)

    def _bump(self, server: str) -> None:
        self._revisions[server] = self._revisions.get(server, 0) + 1

    def _review(self, config: ServerConfig, inspection: Inspection, *, log_findings: bool) -> Review:
        review = Review()
        blocking: list[str] = []
        for subject in inspection.subjects:
            accepted = self._accepted.get((config.name, subject.name)) == subject.hash
            for found in subject.findings:
                finding = msgspec.structs.replace(found, accepted=accepted)
                review.findings.append(finding)
                if log_findings and len(review.findings) <= LOGGED_FINDINGS:
                    _log_finding(config.name, finding)
                if finding.severity != HIGH or accepted:
                    continue
                if subject.name == SERVER_SUBJECT:
                    review.tainted_instructions = True
                blocking.append(f"{finding.rule} in {_where(finding)}")
        if log_findings and len(review.findings) > LOGGED_FINDINGS:
            log.warning(
                "trust.findings_not_logged",
                server=config.name,
                findings=len(review.findings),
                logged=LOGGED_FINDINGS,
                advice=f"`mcpd diff {config.name}` shows them all",
            )
        if config.verify == "block" and blocking:
            unique = sorted(set(blocking))
            review.blocked = (
                f"blocked by the verifier: {', '.join(unique[:4])}{' ...' if len(unique) > 4 else ''}; "
                f"review with `mcpd diff {config.name}`, accept with `mcpd approve {config.name}`"
            )
            log.error("trust.blocked", server=config.name, findings=unique)
        first_sight = config.name not in self._pinned_servers and self._unreadable is None
        tools = [
            subject
            for subject in inspection.subjects
            if subject.name != SERVER_SUBJECT and not subject.name.startswith(SURFACE_PREFIXES)
        ]
        if tools:
            self._pinned_servers.add(config.name)
        self._upgrade(config.name, tools)
        for subject in tools:
            reason = self._pin(config.name, subject, first_sight=first_sight)
            if reason and config.pinning == "pin":
                review.held[subject.name] = reason
        if review.held and self._unreadable is not None:
            review.unreadable = self._unreadable
        if review.held and log_findings:
            log.warning("trust.held_back", server=config.name, tools=sorted(review.held))
        return review

    def _upgrade(self, server: str, tools: list[Subject]) -> None:
        """Tools whose approval is one an older build stored, of their ``legacy_definition`` as it
        still is: their whole current definition is approved in its place (what that build approved
        was all it pinned). Written to the store only over that same old approval: another daemon's
        person may have approved something else since."""
        upgraded = 0
        for subject in tools:
            pin = self._pins.get((server, subject.name))
            if pin is None or pin.approved_hash is None or pin.approved_hash != subject.legacy_hash:
                continue
            hashed = digest(subject.definition)
            self._pins[server, subject.name] = msgspec.structs.replace(
                pin, approved_hash=hashed, approved_definition=subject.definition
            )
            self._persist(
                PinUpgrade(
                    server=server,
                    tool=subject.name,
                    legacy_hash=pin.approved_hash,
                    approved_hash=hashed,
                    approved_definition=subject.definition,
                )
            )
            upgraded += 1
        if upgraded:
            log.info("trust.pins_upgraded", server=server, tools=upgraded)

    def _pin(self, server: str, subject: Subject, *, first_sight: bool) -> str | None:
        """Record what was seen; return why the tool must wait for approval, if it must."""
        hashed = digest(subject.definition)
        pin = self._pins.get((server, subject.name))
        if pin is None:
            approved = first_sight
            pin = PinRecord(
                server=server,
                tool=subject.name,
                approved_hash=hashed if approved else None,
                approved_definition=subject.definition if approved else None,
                seen_hash=hashed,
                seen_definition=subject.definition,
            )
            self._pins[server, subject.name] = pin
            self._sighted(pin)
            return None if approved else self._unapproved()
        if pin.seen_hash != hashed:
            pin = self._pins[server, subject.name] = msgspec.structs.replace(
                pin, seen_hash=hashed, seen_definition=subject.definition
            )
            self._sighted(pin)
        if pin.approved_hash is None:
            return self._unapproved()
        if pin.approved_hash != hashed:
            return "definition changed since it was approved"
        return None

    def _sighted(self, pin: PinRecord) -> None:
        if self._unreadable is None:
            self._persist(pin)

    def _unapproved(self) -> str:
        if self._unreadable is not None:
            return f"the approved definitions could not be read from the usage store ({self._unreadable})"
        return "new tool since the server was approved"

    def denied(self, server: str, tool: str) -> str | None:
        """None if the tool may be listed and called; else why not (the kind of hold, and the way out)."""
        cached = self._reviews.get(server)
        if cached is None:
            return None
        review = cached[1]
        if review.blocked:
            return review.blocked
        held = review.held.get(tool)
        if held:
            return f"{held}; see `mcpd diff {server}`, then `mcpd approve {server} {tool}`"
        return None

    def approve(self, config: ServerConfig, tool: str | None = None) -> tuple[list[str], list[str]]:
        """Accept the current definitions and the current findings (of one tool, or all of the server's).

        Returns (tools whose definitions were accepted, subjects whose findings were accepted).
        """
        server = config.name
        definitions = []
        for key, pin in list(self._pins.items()):
            if pin.server != server or (tool is not None and pin.tool != tool):
                continue
            if pin.approved_hash != pin.seen_hash:
                accepted = msgspec.structs.replace(
                    pin, approved_hash=pin.seen_hash, approved_definition=pin.seen_definition
                )
                self._pins[key] = accepted
                decision = PinApproval(
                    server=server,
                    tool=pin.tool,
                    approved_hash=pin.seen_hash,
                    approved_definition=pin.seen_definition,
                )
                self._decided[key] = decision
                self._persist(decision)
                definitions.append(pin.tool)
        findings = []
        cached = self._reviews.pop(server, None)
        for subject in cached[0].subjects if cached else ():
            if not subject.findings or (tool is not None and subject.name != tool):
                continue
            if self._accepted.get((server, subject.name)) != subject.hash:
                self._accepted[server, subject.name] = subject.hash
                self._decided_findings[server, subject.name] = subject.hash
                self._persist(
                    AcceptedFindings(server=server, subject=subject.name, definition_hash=subject.hash)
                )
                findings.append(subject.name or "(server instructions)")
        if cached is not None:
            self._reviews[server] = (cached[0], self._review(config, cached[0], log_findings=False))
        self._bump(server)
        if definitions or findings:
            log.info("trust.approved", server=server, tools=sorted(definitions), findings=sorted(findings))
        return sorted(definitions), sorted(findings)

    def already_approved(self, server: str, tool: str | None, offered: set[str]) -> list[str]:
        """Of ``tool`` (or of the ``offered`` tools), those whose current definition is approved
        already: what ``approve`` would leave as it is."""
        names = {tool} if tool is not None else offered
        return sorted(
            name
            for name in names
            if (pin := self._pins.get((server, name))) is not None
            and pin.approved_hash is not None
            and pin.approved_hash == pin.seen_hash
        )

    def pinned(self, server: str) -> set[str]:
        """The tools of ``server`` ever seen (pinned), offered now or not."""
        return {tool for pin_server, tool in self._pins if pin_server == server}

    def changes(self, server: str, offered: set[str] | None = None) -> list[ToolChange]:
        """What waits for approval; with ``offered`` (the tools the server lists now) only those:
        a tool the server dropped has nothing left to approve."""
        out = []
        for (pin_server, tool), pin in sorted(self._pins.items()):
            if pin_server != server or pin.approved_hash == pin.seen_hash:
                continue
            if offered is not None and tool not in offered:
                continue
            before = (pin.approved_definition or "").splitlines()
            after = pin.seen_definition.splitlines()
            text = "\n".join(difflib.unified_diff(before, after, "approved", "current", lineterm="", n=2))
            reason = "new tool" if pin.approved_hash is None else "definition changed"
            if pin.approved_hash is None and self._unreadable is not None:
                reason = f"approval unknown: the usage store could not be read ({self._unreadable})"
            fields = changed_fields(pin.approved_definition, pin.seen_definition)
            out.append(ToolChange(tool=tool, reason=reason, diff=text, fields=fields))
        return out

    def findings(self, server: str) -> list[Finding]:
        cached = self._reviews.get(server)
        return list(cached[1].findings) if cached else []


def changed_fields(approved: str | None, seen: str) -> list[str]:
    """The fields, by their wire names, whose values differ between two pinned definitions (none
    without an approved one). Fields mcpd does not model are named one by one, not as ``extra``.
    One an older build did not pin counts as null then (``legacy_definition``): a tool's annotations
    it never approved are listed, a title it never had is not."""
    if approved is None:
        return []
    try:
        before, after = json.loads(approved), json.loads(seen)
    except json.JSONDecodeError:  # not the gate's own text: a store written by something else
        return []
    if not isinstance(before, dict) or not isinstance(after, dict):
        return []
    changed = _differing(before, after)
    if "extra" in changed:
        old, new = before.get("extra") or {}, after.get("extra") or {}
        inner = _differing(old, new) if isinstance(old, dict) and isinstance(new, dict) else []
        if inner:  # else only null became {}: still a change (its hash differs), named as a whole
            changed.remove("extra")
            changed.extend(inner)
    return sorted(_WIRE_NAMES.get(key, key) for key in changed)


_WIRE_NAMES = {"input_schema": "inputSchema", "output_schema": "outputSchema", "extra": "unmodelled fields"}
"""Pinned keys named otherwise on the wire (the pinned text keeps its keys: they are hashed)."""


def _differing(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Keys whose values differ as JSON: ``true`` is not ``1`` here, though Python has them equal."""
    return [
        key
        for key in before.keys() | after.keys()
        if msgspec.json.encode(before.get(key), order="sorted")
        != msgspec.json.encode(after.get(key), order="sorted")
    ]


def _where(finding: Finding) -> str:
    if finding.tool == SERVER_SUBJECT:
        return f"server {finding.where}"
    if finding.tool.startswith(SURFACE_PREFIXES):
        return finding.tool
    return f"tool {finding.tool}"


def _log_finding(server: str, finding: Finding) -> None:
    log.warning(
        "trust.finding",
        server=server,
        rule=finding.rule,
        severity=finding.severity,
        tool=finding.tool or None,
        where=finding.where,
        excerpt=finding.excerpt,
        accepted=finding.accepted,
    )
