"""HTTP host sessions kept across daemon restarts (and set aside): writes, the load when the front
end starts, the look-up of one set aside, pruning while the daemon runs, and the subscriptions
dropped of servers a reload removed.

A session's subscriptions are rows of ``http_session_subscriptions``, apart from its state: each
change writes the URIs that changed, where a state holding them all cost O(n) bytes a change."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence

from mcpd.model.mcp import SavedSession, SavedSubscriptions
from mcpd.store.sql import transaction


def write_sessions(conn: sqlite3.Connection, records: Sequence[SavedSession | SavedSubscriptions]) -> None:
    """Keep each session's latest state and its subscriptions' changes, in order; forget the ended
    ones (``state`` None) with their subscriptions. An ended session is never saved again, so its end
    is its last record."""
    for record in records:
        if isinstance(record, SavedSubscriptions):
            _change(conn, record.key, record.added, record.removed)
        elif record.state is None:
            _forget(conn, [record.key])
        else:
            conn.execute(
                "INSERT OR REPLACE INTO http_sessions (key, state, saved_at) VALUES (?, ?, ?)",
                (record.key, record.state, record.saved_at),
            )
            if record.subscribed is not None:
                conn.execute("DELETE FROM http_session_subscriptions WHERE key = ?", (record.key,))
                _change(conn, record.key, record.subscribed, [])


def _change(conn: sqlite3.Connection, key: str, added: Sequence[str], removed: Sequence[str]) -> None:
    # Only for a session kept: rows of one already pruned or ended would stay for ever. The state is
    # saved when a session starts, before any subscription.
    if conn.execute("SELECT 1 FROM http_sessions WHERE key = ?", (key,)).fetchone() is None:
        return
    conn.executemany(
        "DELETE FROM http_session_subscriptions WHERE key = ? AND uri = ?", [(key, uri) for uri in removed]
    )
    conn.executemany(
        "INSERT OR IGNORE INTO http_session_subscriptions (key, uri) VALUES (?, ?)",
        [(key, uri) for uri in added],
    )


def _forget(conn: sqlite3.Connection, keys: list[str]) -> int:
    """Delete the sessions ``keys`` and their subscriptions; how many sessions there were."""
    rows = [(key,) for key in keys]
    conn.executemany("DELETE FROM http_session_subscriptions WHERE key = ?", rows)
    return conn.executemany("DELETE FROM http_sessions WHERE key = ?", rows).rowcount


def _stale(conn: sqlite3.Connection, since: float) -> list[str]:
    return [key for (key,) in conn.execute("SELECT key FROM http_sessions WHERE saved_at < ?", (since,))]


def session_rows(conn: sqlite3.Connection, since: float) -> list[SavedSession]:
    """The sessions saved at or after ``since``, with their subscriptions; older ones are deleted."""
    with transaction(conn):
        _forget(conn, _stale(conn, since))
    subscribed: dict[str, list[str]] = {}
    for key, uri in conn.execute("SELECT key, uri FROM http_session_subscriptions ORDER BY seq"):
        subscribed.setdefault(key, []).append(uri)
    return [
        SavedSession(key, bytes(state), saved_at, subscribed.get(key, []))
        for key, state, saved_at in conn.execute("SELECT key, state, saved_at FROM http_sessions")
    ]


def session_row(conn: sqlite3.Connection, key: str, since: float) -> SavedSession | None:
    """The session saved under ``key`` at or after ``since``, with its subscriptions, if there is one."""
    row = conn.execute(
        "SELECT state, saved_at FROM http_sessions WHERE key = ? AND saved_at >= ?", (key, since)
    ).fetchone()
    if row is None:
        return None
    uris = conn.execute("SELECT uri FROM http_session_subscriptions WHERE key = ? ORDER BY seq", (key,))
    return SavedSession(key, bytes(row[0]), row[1], [uri for (uri,) in uris])


def drop_subscriptions(conn: sqlite3.Connection, prefixes: Sequence[str]) -> int:
    """Delete every stored session's subscriptions to URIs beginning with one of ``prefixes`` (those
    of servers a reload removed); how many went."""
    with transaction(conn):
        # A scan of the table (no index leads with the URI): bounded by the sessions kept, and rare.
        return conn.executemany(
            "DELETE FROM http_session_subscriptions WHERE substr(uri, 1, ?) = ?",
            [(len(prefix), prefix) for prefix in prefixes],
        ).rowcount


def prune_sessions(conn: sqlite3.Connection, since: float, keep: int, open_keys: Collection[str] = ()) -> int:
    """Delete the sessions saved before ``since``, and all but the ``keep`` saved last, with their
    subscriptions, never those of ``open_keys``; how many went. An open session's later states leave
    its subscriptions out, and its changes are not written without its row: deleted, they were lost."""
    with transaction(conn):
        deleted = _forget(conn, [key for key in _stale(conn, since) if key not in open_keys])
        beyond = conn.execute(
            "SELECT key FROM http_sessions ORDER BY saved_at DESC LIMIT -1 OFFSET ?", (keep,)
        )
        return deleted + _forget(conn, [key for (key,) in beyond if key not in open_keys])
