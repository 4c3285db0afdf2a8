"""HTTP host sessions kept across daemon restarts (and set aside): writes, the load when the front
end starts, the look-up of one set aside, and pruning while the daemon runs."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from mcpd.model.mcp import SavedSession


def write_sessions(conn: sqlite3.Connection, records: Sequence[SavedSession]) -> None:
    """Keep each session's latest state; forget the ended ones (``state`` None)."""
    kept = [(r.key, r.state, r.saved_at) for r in records if r.state is not None]
    ended = [(r.key,) for r in records if r.state is None]
    # Deletes after inserts: an ended session is never saved again, so its end is its last record.
    if kept:
        conn.executemany("INSERT OR REPLACE INTO http_sessions (key, state, saved_at) VALUES (?, ?, ?)", kept)
    if ended:
        conn.executemany("DELETE FROM http_sessions WHERE key = ?", ended)


def session_rows(conn: sqlite3.Connection, since: float) -> list[SavedSession]:
    """The sessions saved at or after ``since``; older ones are deleted."""
    conn.execute("DELETE FROM http_sessions WHERE saved_at < ?", (since,))
    return [
        SavedSession(key, bytes(state), saved_at)
        for key, state, saved_at in conn.execute("SELECT key, state, saved_at FROM http_sessions")
    ]


def session_row(conn: sqlite3.Connection, key: str, since: float) -> SavedSession | None:
    """The session saved under ``key`` at or after ``since``, if there is one."""
    row = conn.execute(
        "SELECT state, saved_at FROM http_sessions WHERE key = ? AND saved_at >= ?", (key, since)
    ).fetchone()
    return None if row is None else SavedSession(key, bytes(row[0]), row[1])


def prune_sessions(conn: sqlite3.Connection, since: float, keep: int) -> int:
    """Delete the sessions saved before ``since``, and all but the ``keep`` saved last; how many went."""
    deleted = conn.execute("DELETE FROM http_sessions WHERE saved_at < ?", (since,)).rowcount
    deleted += conn.execute(
        "DELETE FROM http_sessions WHERE key IN"
        " (SELECT key FROM http_sessions ORDER BY saved_at DESC LIMIT -1 OFFSET ?)",
        (keep,),
    ).rowcount
    return deleted
