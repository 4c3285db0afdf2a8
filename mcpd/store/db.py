"""The SQLite store: one database, written and read on a thread of its own, off the event loop.

One thread owns the connection. Records are queued without waiting (the call path pays
a queue put) and written in batches, one transaction per batch, in WAL mode: a
committed batch survives ``kill -9`` of the daemon. Reads for the report run as jobs on
the same thread, after every record queued before them.

A database that cannot be opened, is corrupt, or stops accepting writes turns usage off
with a logged reason; the daemon goes on serving without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import structlog

from mcpd.model.trust import AcceptedFindings, PinRecord
from mcpd.model.usage import CallRecord, CapabilityRecord
from mcpd.store.pins import write_accepted, write_pins
from mcpd.store.usage import write_usage

log = structlog.get_logger("mcpd.store")

T = TypeVar("T")

_BATCH = 512
_WINDOW = 0.025
_CLOSE_WAIT = 5.0

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
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("COMMIT")
    except BaseException:
        conn.close()
        raise
    return conn


class Store:
    """Open with ``Store.open(path)``; check ``enabled`` / ``reason``; ``close()`` at the end."""

    def __init__(self, path: Path, conn: sqlite3.Connection | None, reason: str | None) -> None:
        self.path = path
        self.reason = reason
        self._conn = conn
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        if conn is not None:
            self._thread = threading.Thread(target=self._run, name="mcpd-usage", daemon=True)
            self._thread.start()

    @classmethod
    def open(cls, path: Path | None = None) -> Store:
        path = path or default_path()
        try:
            conn = _connect(path)
        except (sqlite3.Error, OSError) as exc:
            reason = f"usage store {path} unusable: {exc}"
            log.error("usage.disabled", path=str(path), error=str(exc))
            return cls(path, None, reason)
        log.info("usage.opened", path=str(path))
        return cls(path, conn, None)

    @classmethod
    def disabled(cls, reason: str) -> Store:
        return cls(Path(), None, reason)

    @property
    def enabled(self) -> bool:
        return self._conn is not None and self.reason is None

    # -- writing ----------------------------------------------------------------------------

    def record_call(self, record: CallRecord) -> None:
        if self.enabled:
            self._queue.put(record)

    def record_capability(self, record: CapabilityRecord) -> None:
        if self.enabled:
            self._queue.put(record)

    def save_trust(self, record: PinRecord | AcceptedFindings) -> None:
        if self.enabled:
            self._queue.put(record)

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
                loop.call_soon_threadsafe(_settle_error, future, exc)
            else:
                loop.call_soon_threadsafe(_settle, future, value)

        self._queue.put((job, deliver))
        return await future

    async def flush(self) -> None:
        """Wait until every record queued so far is committed."""
        await self.run(lambda conn: None)

    def close(self) -> None:
        """Write what is queued (bounded wait) and close the connection."""
        if self._thread is None:
            return
        self._queue.put(None)
        self._thread.join(_CLOSE_WAIT)
        self._thread = None

    # -- the thread -------------------------------------------------------------------------

    def _run(self) -> None:
        conn = self._conn
        assert conn is not None
        try:
            while True:
                batch, stop = self._collect()
                self._process(conn, batch)
                if stop:
                    return
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def _collect(self) -> tuple[list[Any], bool]:
        """The next batch: what arrives within ``_WINDOW`` of its first item (or ``_BATCH`` items).

        One transaction per window instead of one per call: under load that is most of the
        store's CPU saved, and a record is still committed within tens of milliseconds.
        """
        batch = [self._queue.get()]
        deadline = time.monotonic() + _WINDOW
        while batch[-1] is not None and len(batch) < _BATCH:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                batch.append(self._queue.get(timeout=remaining))
            except queue.Empty:
                break
        stop = batch[-1] is None
        return [item for item in batch if item is not None], stop

    def _process(self, conn: sqlite3.Connection, batch: list[Any]) -> None:
        records = [item for item in batch if not isinstance(item, tuple)]
        if records and self.reason is None:
            try:
                conn.execute("BEGIN IMMEDIATE")
                write_records(conn, records)
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                self.reason = f"usage store {self.path} failed: {exc}"
                log.error("usage.disabled", path=str(self.path), error=str(exc), lost=len(records))
        for item in batch:
            if isinstance(item, tuple):
                job, deliver = item
                deliver(lambda job=job: job(conn))


Record = CallRecord | CapabilityRecord | PinRecord | AcceptedFindings


def write_records(conn: sqlite3.Connection, records: list[Record]) -> None:
    """One batch, in a few ``executemany`` statements per kind of record."""
    write_pins(conn, [r for r in records if isinstance(r, PinRecord)])
    write_accepted(conn, [r for r in records if isinstance(r, AcceptedFindings)])
    write_usage(
        conn,
        [r for r in records if isinstance(r, CallRecord)],
        [r for r in records if isinstance(r, CapabilityRecord)],
    )


def _settle(future: asyncio.Future[T], value: T) -> None:
    if not future.done():
        future.set_result(value)


def _settle_error(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
