"""The SQLite store: one database, written and read on a thread of its own, off the event loop.

One thread owns the connection. The call path queues a plain tuple without waiting; the
thread wakes once per ``_WINDOW``, not once per record, and writes what arrived in one
transaction, in WAL mode: a committed batch survives ``kill -9`` of the daemon. Anything
else queued (a job, a trust or capability record, the close) is written at once, with the
calls gathered so far. It also analyses the queries, keeps the rollups, and hands what each
committed batch teaches to the ranking prior on the event loop (one callback per batch, see
``follow``). Reads for the report run as jobs on the same thread, after every record queued
before them; calls older than the retention are pruned there too, once an hour.

A database that cannot be opened, is corrupt, or stops accepting writes turns usage off
with a logged reason; the daemon goes on serving without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import structlog

from mcpd.model.mcp import SavedSession
from mcpd.model.trust import AcceptedFindings, PinApproval, PinRecord, TrustRecord
from mcpd.model.usage import CapabilityRecord
from mcpd.store.pins import write_accepted, write_approvals, write_pins
from mcpd.store.sessions import write_sessions
from mcpd.store.sketch import SketchAggregate, merge_blobs
from mcpd.store.sql import transaction
from mcpd.store.usage import (
    Analyse,
    PendingCall,
    TermTotals,
    ToolTotals,
    prior_rows,
    prune,
    stored,
    write_calls,
    write_capabilities,
)

log = structlog.get_logger("mcpd.store")

T = TypeVar("T")

_WINDOW = 0.25
"""How long call records gather before they are written: the longest one waits, and what a
``kill -9`` may lose. A transaction costs ~100 us of CPU whatever it holds, plus ~5-10 us a
call (measured): at 25 ms, batches of a few calls made the store a sixth of a call's CPU."""
_CLOSE_WAIT = 5.0
_PRUNE_EVERY = 3600.0
_QUERY_CACHE = 1024
"""Analysed queries kept: an agent tends to call several tools for one query."""

Learn = Callable[[list[ToolTotals], list[TermTotals]], None]

MIGRATIONS: tuple[str, ...] = (
    # 1: calls, capability requests, and per (query term, tool) counts for the ranking prior
    """
    CREATE TABLE calls (
        id INTEGER PRIMARY KEY,
        ts REAL NOT NULL,
        client TEXT,
        session TEXT,
        server TEXT NOT NULL,
        tool TEXT NOT NULL,
        duration_ms REAL NOT NULL,
        outcome TEXT NOT NULL,
        error_class TEXT,
        query TEXT
    );
    CREATE INDEX calls_ts ON calls (ts);
    CREATE INDEX calls_tool ON calls (server, tool);
    CREATE TABLE capability_requests (
        id INTEGER PRIMARY KEY,
        ts REAL NOT NULL,
        client TEXT,
        session TEXT,
        capability TEXT NOT NULL,
        context TEXT
    );
    CREATE INDEX capability_requests_ts ON capability_requests (ts);
    CREATE TABLE term_tool (
        term TEXT NOT NULL,
        server TEXT NOT NULL,
        tool TEXT NOT NULL,
        successes INTEGER NOT NULL DEFAULT 0,
        failures INTEGER NOT NULL DEFAULT 0,
        last_ts REAL NOT NULL,
        PRIMARY KEY (term, server, tool)
    ) WITHOUT ROWID;
    """,
    # 2: pinned tool definitions (the trust gate)
    """
    CREATE TABLE pins (
        server TEXT NOT NULL,
        tool TEXT NOT NULL,
        approved_hash TEXT,
        approved_definition TEXT,
        seen_hash TEXT NOT NULL,
        seen_definition TEXT NOT NULL,
        PRIMARY KEY (server, tool)
    ) WITHOUT ROWID;
    """,
    # 3: verifier findings a person accepted, per subject (a tool, or "" for the server's own texts)
    """
    CREATE TABLE accepted_findings (
        server TEXT NOT NULL,
        subject TEXT NOT NULL,
        definition_hash TEXT NOT NULL,
        PRIMARY KEY (server, subject)
    ) WITHOUT ROWID;
    """,
    # 4: per tool and hour, UTC day and week: counts, last use and a latency sketch,
    # backfilled from the calls so far (mcpd.store.usage keeps them; the report and the prior read
    # them instead of every call). The per-tool index of calls served only those reads.
    """
    CREATE TABLE call_rollups (
        period INTEGER NOT NULL,
        start INTEGER NOT NULL,
        server TEXT NOT NULL,
        tool TEXT NOT NULL,
        calls INTEGER NOT NULL,
        ok INTEGER NOT NULL,
        failures INTEGER NOT NULL,
        last_ts REAL NOT NULL,
        last_ok REAL NOT NULL,
        sketch BLOB NOT NULL,
        PRIMARY KEY (period, start, server, tool)
    ) WITHOUT ROWID;
    INSERT INTO call_rollups
        SELECT 3600, CAST(ts / 3600 AS INTEGER) * 3600 AS hour, server, tool, COUNT(*), SUM(outcome = 'ok'),
            SUM(outcome NOT IN ('ok', 'cancelled')), MAX(ts),
            COALESCE(MAX(CASE WHEN outcome = 'ok' THEN ts END), 0), latency_sketch(duration_ms)
        FROM calls GROUP BY hour, server, tool;
    INSERT INTO call_rollups
        SELECT 86400, CAST(ts / 86400 AS INTEGER) * 86400 AS day, server, tool, COUNT(*), SUM(outcome = 'ok'),
            SUM(outcome NOT IN ('ok', 'cancelled')), MAX(ts),
            COALESCE(MAX(CASE WHEN outcome = 'ok' THEN ts END), 0), latency_sketch(duration_ms)
        FROM calls GROUP BY day, server, tool;
    INSERT INTO call_rollups
        SELECT 604800, CAST(ts / 604800 AS INTEGER) * 604800 AS week, server, tool, COUNT(*),
            SUM(outcome = 'ok'), SUM(outcome NOT IN ('ok', 'cancelled')), MAX(ts),
            COALESCE(MAX(CASE WHEN outcome = 'ok' THEN ts END), 0), latency_sketch(duration_ms)
        FROM calls GROUP BY week, server, tool;
    DROP INDEX calls_tool;
    """,
    # 5: queries as typed, per tool, so the prior's terms can be rebuilt by another analyser (terms
    # stored by an older stemmer never met new queries); term_tool becomes a cache of their
    # analysis by the analyser fingerprinted in `analysis`. Empty here, so the first load rebuilds
    # the terms from the calls kept; counts of calls already pruned were held only as old terms.
    """
    CREATE TABLE query_tool (
        query TEXT NOT NULL,
        server TEXT NOT NULL,
        tool TEXT NOT NULL,
        successes INTEGER NOT NULL DEFAULT 0,
        failures INTEGER NOT NULL DEFAULT 0,
        last_ts REAL NOT NULL,
        PRIMARY KEY (query, server, tool)
    ) WITHOUT ROWID;
    INSERT INTO query_tool
        SELECT query, server, tool, SUM(outcome = 'ok'), SUM(outcome NOT IN ('ok', 'cancelled')), MAX(ts)
        FROM calls WHERE query IS NOT NULL AND query != '' GROUP BY query, server, tool;
    CREATE TABLE analysis (fingerprint TEXT NOT NULL);
    """,
    # 6: HTTP host sessions, so that a host's session outlives a daemon restart (mcpd.store.sessions).
    """
    CREATE TABLE http_sessions (
        key TEXT PRIMARY KEY,
        state BLOB NOT NULL,
        saved_at REAL NOT NULL
    ) WITHOUT ROWID;
    """,
)


class StoreUnavailable(Exception):
    """The store is off; ``str()`` says why."""


def default_path() -> Path:
    from mcpd.config.paths import default_state_dir  # noqa: PLC0415 - keeps this module light

    return default_state_dir() / "usage.db"


def _check_version(version: int) -> None:
    if version > len(MIGRATIONS):
        raise sqlite3.DatabaseError(f"schema version {version} is newer than this mcpd knows")


def _connect(path: Path) -> sqlite3.Connection:
    # Private from the start: queries and capability requests are the user's words.
    # SQLite gives its -wal and -shm files the main file's permissions.
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    conn = sqlite3.connect(path, timeout=5.0, isolation_level=None, check_same_thread=False)
    # Rollup upserts merge sketches, and migration 4 builds them, in SQL.
    conn.create_function("sketch_merge", 2, merge_blobs, deterministic=True)
    # typeshed's aggregate protocol is int -> int; SQLite passes any value and takes any result.
    conn.create_aggregate("latency_sketch", 1, SketchAggregate)  # type: ignore[arg-type]
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        _check_version(version)
        for number in range(version, len(MIGRATIONS)):
            # One script, one transaction: executescript() would commit a transaction opened outside it.
            conn.executescript(
                f"BEGIN IMMEDIATE;\n{MIGRATIONS[number]}\nPRAGMA user_version = {number + 1};\nCOMMIT;"
            )
        # A write now, so a read-only file is found at start and not at the first call.
        with transaction(conn):
            pass
    except BaseException:
        conn.close()
        raise
    return conn


class _Job:
    __slots__ = ("deliver", "job")

    def __init__(
        self, job: Callable[[sqlite3.Connection], Any], deliver: Callable[[Callable[[], Any]], None]
    ):
        self.job, self.deliver = job, deliver


class Store:
    """Open with ``Store.open(path)``; check ``enabled`` / ``reason``; ``close()`` at the end."""

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection | None,
        reason: str | None,
        analyse: Analyse | None = None,
        retention_days: float | None = None,
    ) -> None:
        self.path = path
        self.reason = reason
        self._conn = conn
        self._analyse = functools.lru_cache(_QUERY_CACHE)(analyse) if analyse is not None else None
        self._retention_days = retention_days
        self._next_prune = 0.0
        self._follower: tuple[asyncio.AbstractEventLoop, Learn, Learn] | None = None
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._urgent = threading.Event()
        """Set when something other than a call is queued: it ends the gathering window."""
        self._thread: threading.Thread | None = None
        if conn is not None:
            self._thread = threading.Thread(target=self._run, name="mcpd-usage", daemon=True)
            self._thread.start()

    @classmethod
    def open(
        cls, path: Path | None = None, *, analyse: Analyse | None = None, retention_days: float | None = None
    ) -> Store:
        """``analyse`` turns a query into the terms counted per tool for the prior; calls older
        than ``retention_days`` are deleted (on the store's thread, at start and hourly)."""
        path = path or default_path()
        try:
            conn = _connect(path)
        except (sqlite3.Error, OSError) as exc:
            reason = f"usage store {path} unusable: {exc}"
            log.error("usage.disabled", path=str(path), error=str(exc))
            return cls(path, None, reason)
        log.info("usage.opened", path=str(path))
        return cls(path, conn, None, analyse, retention_days)

    @classmethod
    def disabled(cls, reason: str) -> Store:
        return cls(Path(), None, reason)

    @property
    def enabled(self) -> bool:
        return self._conn is not None and self.reason is None

    # -- writing ----------------------------------------------------------------------------

    def record_call(self, call: PendingCall) -> None:
        """Queue a call; it is written, analysed and learned from on the store's thread."""
        if self.enabled:
            self._queue.put(call)

    def record_capability(self, record: CapabilityRecord) -> None:
        if self.enabled:
            self._put_urgent(record)

    def save_trust(self, record: TrustRecord) -> None:
        if self.enabled:
            self._put_urgent(record)

    def save_session(self, record: SavedSession) -> None:
        """Keep (or, with no state, forget) a host session; written at once (they change seldom, and
        a daemon killed in the next 250 ms must not lose the change)."""
        if self.enabled:
            self._put_urgent(record)

    def _put_urgent(self, item: Any) -> None:
        """Queue ``item`` to be written now, with the calls gathered so far (a person's decision,
        a report waiting for its answer, the close: none should wait out the window)."""
        self._queue.put(item)
        self._urgent.set()

    async def run(self, job: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``job`` on the store's thread after everything queued before it is committed."""
        if not self.enabled:
            raise StoreUnavailable(self.reason or "usage recording is off")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def deliver(outcome: Callable[[], T]) -> None:
            try:
                value = outcome()
            except BaseException as exc:
                _post(loop, _settle_error, future, exc)
            else:
                _post(loop, _settle, future, value)

        self._put_urgent(_Job(job, deliver))
        return await future

    async def follow(self, learn: Learn, relearn: Learn) -> tuple[list[ToolTotals], list[TermTotals]]:
        """The stored totals for the prior; from then on ``learn`` gets, on this event loop, what
        each committed batch adds (totals add up, so the order of the two does not matter), and
        ``relearn`` the whole totals anew after calls past the retention were deleted (totals
        cannot be subtracted: a term's row goes once its last call is gone)."""
        loop = asyncio.get_running_loop()

        def start(conn: sqlite3.Connection) -> tuple[list[ToolTotals], list[TermTotals]]:
            self._follower = (loop, learn, relearn)
            return prior_rows(conn, self._analyse)

        return await self.run(start)

    async def flush(self) -> None:
        """Wait until every record queued so far is committed."""
        await self.run(lambda conn: None)

    def close(self) -> None:
        """Write what is queued (bounded wait) and close the connection."""
        if self._thread is None:
            return
        self._put_urgent(None)
        self._thread.join(_CLOSE_WAIT)
        self._thread = None

    # -- the thread -------------------------------------------------------------------------

    def _run(self) -> None:
        conn = self._conn
        assert conn is not None
        try:
            while True:
                batch, stop = self._collect()
                try:
                    self._prune_if_due(conn)
                    self._process(conn, batch)
                except Exception as exc:
                    # A bug here must not end the thread: every job queued behind it would wait for
                    # ever (the daemon's start among them). The store turns off and says why.
                    log.exception("usage.thread_failed", path=str(self.path))
                    failed = f"usage store {self.path} failed: {type(exc).__name__}: {exc}"
                    self.reason = self.reason or failed
                    self._refuse_jobs(batch)
                if stop:
                    return
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def _collect(self) -> tuple[list[Any], bool]:
        """The next batch: the first item, and what arrives within ``_WINDOW`` after a call.

        The thread sleeps through the window instead of waiting on the queue per item: a
        call's put then wakes no one, and one transaction takes a whole window's calls.
        Anything else ends the window (``_urgent``), or runs at once if it comes first.
        """
        first = self._queue.get()
        if type(first) is tuple:
            self._urgent.wait(_WINDOW)
        # Cleared after the wait: an urgent item queued since is taken below all the same.
        self._urgent.clear()
        batch = [first]
        with contextlib.suppress(queue.Empty):
            while True:
                batch.append(self._queue.get_nowait())
        stop = None in batch
        return [item for item in batch if item is not None], stop

    def _refuse_jobs(self, batch: list[Any]) -> None:
        why = StoreUnavailable(self.reason or "usage store failed")

        def refuse() -> Any:
            raise why

        for item in batch:
            if isinstance(item, _Job):
                item.deliver(refuse)

    def _prune_if_due(self, conn: sqlite3.Connection) -> None:
        if self._retention_days is None or self.reason is not None or time.monotonic() < self._next_prune:
            return
        self._next_prune = time.monotonic() + _PRUNE_EVERY
        try:
            removed = prune(conn, self._retention_days)
            totals = prior_rows(conn, self._analyse) if removed and self._follower is not None else None
        except sqlite3.Error as exc:
            log.error("usage.prune_failed", path=str(self.path), error=str(exc))
            return
        if removed:
            log.info("usage.pruned", calls=removed, retention_days=self._retention_days)
        if totals is not None and self._follower is not None:
            loop, _, relearn = self._follower
            _post(loop, relearn, *totals)

    def _process(self, conn: sqlite3.Connection, batch: list[Any]) -> None:
        calls = [item for item in batch if type(item) is tuple]
        records = [item for item in batch if type(item) is not tuple and not isinstance(item, _Job)]
        if (calls or records) and self.reason is None:
            try:
                # One clock read per batch turns the calls' perf_counter times into unix times.
                offset = time.time() - time.perf_counter()
                with transaction(conn):
                    write_records(conn, records)
                    learned = write_calls(conn, [stored(call, offset) for call in calls], self._analyse)
            except sqlite3.Error as exc:
                self.reason = f"usage store {self.path} failed: {exc}"
                lost = len(calls) + len(records)
                log.error("usage.disabled", path=str(self.path), error=str(exc), lost=lost)
            else:
                if self._follower is not None and calls:
                    loop, learn, _ = self._follower
                    _post(loop, learn, *learned)
        for item in batch:
            if isinstance(item, _Job):
                item.deliver(functools.partial(item.job, conn))


Record = CapabilityRecord | TrustRecord | SavedSession


def write_records(conn: sqlite3.Connection, records: list[Record]) -> None:
    """One batch, in a few ``executemany`` statements per kind of record."""
    # Sightings and approvals set different columns of a pin, so their order within a batch is moot.
    write_pins(conn, [r for r in records if isinstance(r, PinRecord)])
    write_approvals(conn, [r for r in records if isinstance(r, PinApproval)])
    write_accepted(conn, [r for r in records if isinstance(r, AcceptedFindings)])
    write_capabilities(conn, [r for r in records if isinstance(r, CapabilityRecord)])
    write_sessions(conn, [r for r in records if isinstance(r, SavedSession)])


def _post(loop: asyncio.AbstractEventLoop, callback: Callable[..., Any], *args: Any) -> None:
    # A loop that closed meanwhile (the daemon stopping) has nobody left to tell.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback, *args)


def _settle(future: asyncio.Future[T], value: T) -> None:
    if not future.done():
        future.set_result(value)


def _settle_error(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
