"""Pinned tool definitions (the trust gate's memory): writes and the load at start."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from mcpd.model.trust import PinRecord


def write_pins(conn: sqlite3.Connection, pins: Sequence[PinRecord]) -> None:
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
