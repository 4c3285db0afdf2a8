"""The trust gate's memory: pinned tool definitions and accepted findings; writes and the load at start."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from mcpd.model.trust import AcceptedFindings, PinApproval, PinRecord, PinUpgrade

# Each write sets only the columns it knows about: two daemons on one store (any two `mcpd serve
# --socket ...` of a user) keep their own copies of the pins, and a whole row written from one
# copy would put back an approval the other daemon's person had since replaced.
_SIGHTING = (
    "INSERT INTO pins (server, tool, approved_hash, approved_definition, seen_hash, seen_definition)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (server, tool) DO UPDATE SET"
    " seen_hash = excluded.seen_hash, seen_definition = excluded.seen_definition"
)
_APPROVAL = (
    "INSERT INTO pins (server, tool, approved_hash, approved_definition, seen_hash, seen_definition)"
    " VALUES (?1, ?2, ?3, ?4, ?3, ?4) ON CONFLICT (server, tool) DO UPDATE SET"
    " approved_hash = excluded.approved_hash, approved_definition = excluded.approved_definition"
)


def write_pins(conn: sqlite3.Connection, pins: Sequence[PinRecord]) -> None:
    """Record what was seen of each tool; what was approved only for a tool new to the store."""
    if pins:
        conn.executemany(
            _SIGHTING,
            [
                (p.server, p.tool, p.approved_hash, p.approved_definition, p.seen_hash, p.seen_definition)
                for p in pins
            ],
        )


def write_approvals(conn: sqlite3.Connection, approvals: Sequence[PinApproval]) -> None:
    """Record what a person approved; what was seen stays as the latest sighting left it."""
    if approvals:
        conn.executemany(
            _APPROVAL,
            [(a.server, a.tool, a.approved_hash, a.approved_definition) for a in approvals],
        )


def write_upgrades(conn: sqlite3.Connection, upgrades: Sequence[PinUpgrade]) -> None:
    """Carry approvals an older build stored over to the definitions that replace them, where the
    store still holds them (a row whose approval changed since is left as it is)."""
    if upgrades:
        conn.executemany(
            "UPDATE pins SET approved_hash = ?, approved_definition = ?"
            " WHERE server = ? AND tool = ? AND approved_hash = ?",
            [(u.approved_hash, u.approved_definition, u.server, u.tool, u.legacy_hash) for u in upgrades],
        )


def pin_rows(conn: sqlite3.Connection) -> list[PinRecord]:
    return [
        PinRecord(
            server=server,
            tool=tool,
            approved_hash=approved_hash,
            approved_definition=approved_definition,
            seen_hash=seen_hash,
            seen_definition=seen_definition,
        )
        for server, tool, approved_hash, approved_definition, seen_hash, seen_definition in conn.execute(
            "SELECT server, tool, approved_hash, approved_definition, seen_hash, seen_definition FROM pins"
        )
    ]


def write_accepted(conn: sqlite3.Connection, accepted: Sequence[AcceptedFindings]) -> None:
    """Insert or replace a batch of accepted findings."""
    if accepted:
        conn.executemany(
            "INSERT OR REPLACE INTO accepted_findings (server, subject, definition_hash) VALUES (?, ?, ?)",
            [(a.server, a.subject, a.definition_hash) for a in accepted],
        )


def accepted_rows(conn: sqlite3.Connection) -> list[AcceptedFindings]:
    return [
        AcceptedFindings(server=server, subject=subject, definition_hash=definition_hash)
        for server, subject, definition_hash in conn.execute(
            "SELECT server, subject, definition_hash FROM accepted_findings"
        )
    ]
