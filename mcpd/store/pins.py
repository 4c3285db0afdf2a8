"""The trust gate's memory: pinned tool definitions and accepted findings; writes and the load at start."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from mcpd.model.trust import AcceptedFindings, PinRecord


def write_pins(conn: sqlite3.Connection, pins: Sequence[PinRecord]) -> None:
    """Insert or replace a batch of pins."""
    if pins:
        conn.executemany(
            "INSERT OR REPLACE INTO pins (server, tool, approved_hash, approved_definition, seen_hash,"
            " seen_definition) VALUES (?, ?, ?, ?, ?, ?)",
            [
                (p.server, p.tool, p.approved_hash, p.approved_definition, p.seen_hash, p.seen_definition)
                for p in pins
            ],
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
