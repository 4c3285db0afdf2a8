"""The SQLite store: one database, written and read on a thread of its own, off the event loop.

One thread owns the connection. The call path queues a plain tuple without waiting; the
thread wakes once per ``_WINDOW``, not once per record, and writes what arrived in one
transaction, in WAL mode: a committed batch survives ``kill -9`` of the daemon. Anything
else queued (a job, a trust or capability record, the close) is written at once, with the
calls gathered so far. It also analyses the queries, keeps the rollups, and hands what each
committed batch teaches to the ranking prior on the event loop (one callback per batch, see
``follow``). Reads for the report run as jobs on the same thread, after every record queued
before them; calls older than the retention are pruned there too, once an hour.

What goes wrong is sorted by whether waiting can mend it (see ``StoreCondition``): a lock
another process holds, a full disk or a failing write make the store ``retrying`` (opening or
writing is tried again with backoff; a person's decisions and up to ``_HOLD_CALLS`` calls wait in
memory, further calls are dropped and counted); a file that may be read but not written is opened
read-only (pins and the report work, nothing is recorded); only corruption, a newer schema or a
location that cannot hold a database turn it ``off``. Every ``_LOOK_EVERY``, and before each
write, the thread checks that the path still names the file it has open: a file deleted or
replaced under it is opened (or created) again, and the daemon is told, so it can save again what
it holds in memory. The daemon goes on serving in every case.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import math
import os
import queue
import sqlite3
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import structlog

from mcpd.model.mcp import SavedSession, SavedSubscriptions
from mcpd.model.trust import AcceptedFindings, PinApproval, PinRecord, PinUpgrade, TrustRecord
from mcpd.model.usage import CapabilityRecord, StoreCondition, StoreState
from mcpd.store.pins import write_accepted, write_approvals, write_pins, write_upgrades
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
_BUSY_WAIT = 5.0
"""How long SQLite waits out another process's lock before a statement fails (``retrying``)."""
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
    # 7: an HTTP session's subscriptions, a row each (in the order taken), written as they change: in
    # its state, all of them were written again at each change. States saved by an earlier mcpd still
    # hold theirs; the session resumed, they are moved here (mcpd.front.http.sessions).
    """
    CREATE TABLE http_session_subscriptions (
        seq INTEGER PRIMARY KEY,
        key TEXT NOT NULL,
        uri TEXT NOT NULL,
        UNIQUE (key, uri)
    );
    """,
)


class StoreUnavailable(Exception):
    """The store cannot run this now (off, or retrying without a connection); ``str()`` says why."""


def default_path() -> Path:
    from mcpd.config.paths import default_state_dir  # noqa: PLC0415 - keeps this module light

    return default_state_dir() / "usage.db"


def _check_version(version: int, *, read_only: bool = False) -> None:
    if version > len(MIGRATIONS):
        raise sqlite3.DatabaseError(f"schema version {version} is newer than this mcpd knows")
    if read_only and version < len(MIGRATIONS):
        # The upgrade is a write; the tables read later may not be there before it.
        raise sqlite3.DatabaseError(f"schema version {version} needs an upgrade, which needs writing")


def _prepare(conn: sqlite3.Connection) -> None:
    # Rollup upserts merge sketches, and migration 4 builds them, in SQL.
    conn.create_function("sketch_merge", 2, merge_blobs, deterministic=True)
    # typeshed's aggregate protocol is int -> int; SQLite passes any value and takes any result.
    conn.create_aggregate("latency_sketch", 1, SketchAggregate)  # type: ignore[arg-type]


def _connect(path: Path) -> sqlite3.Connection:
    """Open for reading and writing, migrated; ``_probe`` then tells whether it takes writes."""
    # Private from the start: queries and capability requests are the user's words.
    # SQLite gives its -wal and -shm files the main file's permissions.
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _check_regular(path)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    _align_side_files(path)
    conn = sqlite3.connect(path, timeout=_BUSY_WAIT, isolation_level=None, check_same_thread=False)
    _prepare(conn)
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
    except BaseException:
        conn.close()
        raise
    return conn


def _check_regular(path: Path) -> None:
    """A FIFO, socket or device at the path (or at its -wal or -shm file) is no database, whatever
    waiting: SQLite would read it as a disk I/O error, which passes for a passing one (a store
    retrying for ever)."""
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(FileNotFoundError):
            mode = file.stat().st_mode
            if not stat.S_ISREG(mode):
                what = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
                raise sqlite3.DatabaseError(f"{file} is {what}")


def _probe(conn: sqlite3.Connection) -> None:
    """A write now, so a read-only or locked file is found at open and not at the first call."""
    with transaction(conn):
        pass


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """Open a file this process may read but not write (SQLite's ``mode=ro``): the pins and the
    report are there to read, so they need not be lost with the writes."""
    try:
        return _connect_uri(path, "mode=ro")
    except sqlite3.Error as exc:
        wal = path.with_name(path.name + "-wal")
        if _code(exc) != _SQLITE_READ_ONLY_CODE or (wal.exists() and wal.stat().st_size):
            raise
    # A directory that refuses the -shm file: with no -wal either, every commit is in the main
    # file, which SQLite then reads as it is (``immutable``: no locks, no side files).
    return _connect_uri(path, "mode=ro&immutable=1")


def _connect_uri(path: Path, query: str) -> sqlite3.Connection:
    uri = f"{path.absolute().as_uri()}?{query}"
    conn = sqlite3.connect(uri, uri=True, timeout=_BUSY_WAIT, isolation_level=None, check_same_thread=False)
    _prepare(conn)
    try:
        _check_version(conn.execute("PRAGMA user_version").fetchone()[0], read_only=True)
    except BaseException:
        conn.close()
        raise
    return conn


def _align_side_files(path: Path) -> None:
    """Give the -wal and -shm files the main file's mode, as SQLite does when it creates them. A
    read-only open creates them read-only beside a read-only file; once the file is made writable
    again, they would keep every write refused ("attempt to write a readonly database")."""
    with contextlib.suppress(OSError):
        mode = path.stat().st_mode & 0o777
        for side in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            found = side.stat()
            if found.st_uid == os.geteuid() and found.st_mode & 0o777 != mode and mode & 0o200:
                side.chmod(mode)


# SQLite's primary result codes, and the errnos, that say what waiting may mend.
_SQLITE_TRANSIENT = {5, 6, 10, 13, 14, 15}
"""BUSY, LOCKED (another process holds the lock past the busy timeout), IOERR, FULL (a full disk,
a file-size limit), CANTOPEN (out of descriptors, a directory briefly gone), PROTOCOL."""
_SQLITE_CANTOPEN = 14
_SQLITE_READ_ONLY_CODE = 8
_SQLITE_CORRUPT = {11, 26}
"""CORRUPT, NOTADB."""
_SQLITE_READ_ONLY = {8, 23}
"""READONLY, AUTH: the file refuses writes."""
_ERRNO_TRANSIENT = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EAGAIN, errno.EINTR}
_ERRNO_TRANSIENT |= {errno.EMFILE, errno.ENFILE, errno.ENOMEM}
_ERRNO_READ_ONLY = {errno.EACCES, errno.EPERM, errno.EROFS}

_TRANSIENT, _READ_ONLY, _BROKEN = "transient", "read_only", "broken"


def _code(exc: BaseException) -> int | None:
    """SQLite's primary result code of ``exc``, if it carries one."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _kind(exc: BaseException) -> str:
    """Whether ``exc`` may pass (a lock, a full disk), means read-only, or will stay (corruption,
    a newer schema, a path that cannot hold a database)."""
    if isinstance(exc, sqlite3.Error):
        code = _code(exc)
        if code is None:  # raised by mcpd itself: the schema
            return _BROKEN
        if code in _SQLITE_TRANSIENT:
            return _TRANSIENT
        return _READ_ONLY if code in _SQLITE_READ_ONLY else _BROKEN
    if isinstance(exc, OSError):
        if exc.errno in _ERRNO_TRANSIENT:
            return _TRANSIENT
        return _READ_ONLY if exc.errno in _ERRNO_READ_ONLY else _BROKEN
    return _BROKEN


_UNKNOWN = (-1, -1)


def _identity(path: Path) -> tuple[int, int] | None:
    """Which file ``path`` names now (None: none; ``_UNKNOWN`` when ``stat`` cannot tell, e.g. a
    directory this process may not search: taken as no change)."""
    try:
        found = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return _UNKNOWN
    return found.st_dev, found.st_ino


_RETRY_FIRST = 1.0
_RETRY_MAX = 60.0
"""Backoff between attempts to open or write a store that is ``retrying``; each attempt that meets
a lock waits out SQLite's busy timeout (5 s) on the store's thread, so they are spaced."""
_READ_ONLY_RETRY = 30.0
"""Seconds between two attempts to write a store opened read-only: a file made writable again (its
mode, a remount) is written again without a restart of the daemon."""
_LOOK_EVERY = 2.0
"""Seconds between two looks (one ``stat``) at whether the path still names the open file."""
_HOLD_CALLS = 10_000
"""Calls kept in memory while the store is retrying; later ones are dropped and counted."""
_HOLD_RECORDS = 100_000
"""Trust decisions, sightings and sessions kept while retrying: a person's decision must not be
dropped, and they are few; the bound only guards against a store that never comes back."""


class _Job:
    __slots__ = ("deliver", "job")

    def __init__(
        self, job: Callable[[sqlite3.Connection], Any], deliver: Callable[[Callable[[], Any]], None]
    ):
        self.job, self.deliver = job, deliver


Reopened = Callable[[bool], None]
"""Told on the event loop that the store can be read again after it could not (False), or that what
is held in memory must be saved again (True): the file was deleted or replaced under it and opened
again, or it takes writes again after it was read-only."""


class Store:
    """Open with ``Store.open(path)``; check ``state`` (or ``readable``, ``writable``); ``close()`` it."""

    def __init__(
        self,
        path: Path,
        analyse: Analyse | None = None,
        retention_days: float | None = None,
        *,
        reason: str | None = None,
    ) -> None:
        self.path = path
        self.condition: StoreCondition = "off"
        self.reason = reason
        self._conn: sqlite3.Connection | None = None
        self._file: tuple[int, int] | None = None
        """The file opened (device, inode): the path naming another means it was deleted or replaced."""
        self._unsaved_untold = False
        """What the daemon holds in memory is not in the file now open (the file was deleted or
        replaced, or took no writes), and the daemon has not been told: the first open to succeed
        says so, even when a passing error (a full disk) made it a retry's."""
        self._analyse = functools.lru_cache(_QUERY_CACHE)(analyse) if analyse is not None else None
        self._retention_days = retention_days
        self._next_prune = 0.0
        self._next_look = 0.0
        self._retry_in = _RETRY_FIRST
        self._retry_at = math.inf
        self._dropped = 0
        self._held_calls: list[PendingCall] = []
        self._held: list[Record] = []
        self._follower: tuple[asyncio.AbstractEventLoop, Learn, Learn] | None = None
        self._watcher: tuple[asyncio.AbstractEventLoop, Reopened] | None = None
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._urgent = threading.Event()
        """Set when something other than a call is queued: it ends the gathering window."""
        self._thread: threading.Thread | None = None

    @classmethod
    def open(
        cls, path: Path | None = None, *, analyse: Analyse | None = None, retention_days: float | None = None
    ) -> Store:
        """``analyse`` turns a query into the terms counted per tool for the prior; calls older
        than ``retention_days`` are deleted (on the store's thread, at start and hourly).

        Blocks for the first attempt (up to SQLite's 5 s busy timeout): run it off the event loop."""
        store = cls(path or default_path(), analyse, retention_days)
        store._open()
        store._thread = threading.Thread(target=store._run, name="mcpd-usage", daemon=True)
        store._thread.start()
        return store

    @classmethod
    def disabled(cls, reason: str) -> Store:
        return cls(Path(), reason=reason)

    @property
    def readable(self) -> bool:
        """Jobs (the report, the pins) can run: a connection is open."""
        return self._conn is not None

    @property
    def writable(self) -> bool:
        return self.condition == "ok"

    @property
    def state(self) -> StoreState:
        return StoreState(
            state=self.condition,
            reason=self.reason,
            path=str(self.path) if self.path != Path() else None,
            dropped=self._dropped,
        )

    @property
    def following(self) -> bool:
        """``follow`` has begun: committed batches are handed to the prior."""
        return self._follower is not None

    def watch(self, reopened: Reopened) -> None:
        """Have ``reopened`` called on this event loop whenever the store comes back (see ``Reopened``)."""
        self._watcher = (asyncio.get_running_loop(), reopened)

    # -- writing ----------------------------------------------------------------------------

    def record_call(self, call: PendingCall) -> None:
        """Queue a call; it is written, analysed and learned from on the store's thread."""
        if self._thread is not None:
            self._queue.put(call)

    def record_capability(self, record: CapabilityRecord) -> None:
        if self._thread is not None:
            self._put_urgent(record)

    def save_trust(self, record: TrustRecord) -> None:
        if self._thread is not None:
            self._put_urgent(record)

    def save_session(self, record: SavedSession) -> None:
        """Keep (or, with no state, forget) a host session; written at once (they change seldom, and
        a daemon killed in the next 250 ms must not lose the change)."""
        if self._thread is not None:
            self._put_urgent(record)

    def save_subscriptions(self, record: SavedSubscriptions) -> None:
        """Keep a change of a host session's subscriptions; written at once, as a session is."""
        if self._thread is not None:
            self._put_urgent(record)

    def _put_urgent(self, item: Any) -> None:
        """Queue ``item`` to be written now, with the calls gathered so far (a person's decision,
        a report waiting for its answer, the close: none should wait out the window)."""
        self._queue.put(item)
        self._urgent.set()

    async def run(self, job: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``job`` on the store's thread after everything queued before it is committed.

        Raises ``StoreUnavailable`` when the store cannot run it, and what the job raised, a
        ``sqlite3.Error`` too (a file found corrupt by this very read): callers catch both."""
        if self._thread is None or not self.readable:
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

    async def flush(self) -> bool:
        """Wait until every record queued so far is handled: True when they are committed, False when
        the store could not take them (``retrying`` holds them for the retry; ``read_only`` drops them)."""
        return await self.run(lambda conn: self.writable)

    def close(self) -> None:
        """Write what is queued (bounded wait) and close the connection."""
        if self._thread is None:
            return
        self._put_urgent(None)
        self._thread.join(_CLOSE_WAIT)
        self._thread = None

    # -- opening, on the caller's thread at first, then on the store's -----------------------

    def _open(self) -> None:
        """Open (or create) the file at ``path`` and set the condition by how that went."""
        self._close_connection()
        try:
            conn = _connect(self.path)
        except (sqlite3.Error, OSError) as exc:
            self._file = _identity(self.path)
            kind = _kind(exc)
            # CANTOPEN on a file that is there: most often its directory refuses the -wal and -shm
            # files, which a read-only open does without.
            maybe_read_only = kind == _READ_ONLY or (_code(exc) == _SQLITE_CANTOPEN and kind == _TRANSIENT)
            if maybe_read_only and self._file is not None and self._open_read_only(exc):
                return
            if kind == _TRANSIENT:
                self._retrying(exc)
            else:
                self._turn_off(f"usage store {self.path} unusable: {exc}", exc)
            return
        self._conn, self._file = conn, _identity(self.path)
        try:
            _probe(conn)
        except sqlite3.Error as exc:
            if _kind(exc) == _TRANSIENT:
                # Readable all the same (a lock held by another writer does not stop reads in WAL mode).
                self._retrying(exc)
            elif not (_kind(exc) == _READ_ONLY and self._open_read_only(exc)):
                self._turn_off(f"usage store {self.path} unusable: {exc}", exc)
            return
        self._recovered()
        log.info("usage.opened", path=str(self.path))

    def _open_read_only(self, refusal: BaseException) -> bool:
        """Open the file read-only after ``refusal`` of writing; False (nothing changed) if that fails too."""
        self._close_connection()
        try:
            conn = _connect_read_only(self.path)
        except (sqlite3.Error, OSError) as exc:
            log.debug("usage.read_only_failed", path=str(self.path), error=str(exc))
            return False
        if self.condition != "read_only":  # said once, not at every attempt to write
            log.warning(
                "usage.read_only",
                path=str(self.path),
                error=str(refusal),
                consequence="pins and the report are read; calls are not recorded, approvals not saved",
            )
        self._conn, self.condition = conn, "read_only"
        self._retry_at = time.monotonic() + _READ_ONLY_RETRY
        self.reason = (
            f"usage store {self.path} is read-only ({refusal}): calls are not recorded, approvals not saved"
        )
        return True

    def _retrying(self, exc: BaseException) -> None:
        """A passing problem: try again after the backoff; said once per outage, not per attempt."""
        if self.condition != "retrying":
            self._retry_in = _RETRY_FIRST
            log.warning(
                "usage.retrying",
                path=str(self.path),
                error=str(exc),
                consequence="calls past the first few thousand are dropped until it can be written again",
            )
        else:
            self._retry_in = min(2 * self._retry_in, _RETRY_MAX)
        self.condition = "retrying"
        self.reason = f"usage store {self.path}: {exc} (trying again)"
        self._retry_at = time.monotonic() + self._retry_in

    def _recovered(self) -> None:
        if self.condition == "retrying":
            log.info("usage.recovered", path=str(self.path), dropped=self._dropped)
        self.condition, self.reason = "ok", None
        self._retry_in, self._retry_at = _RETRY_FIRST, math.inf

    def _turn_off(self, reason: str, exc: BaseException) -> None:
        self._close_connection()
        self.condition, self.reason = "off", reason
        self._retry_at = math.inf
        self._dropped += len(self._held_calls)
        self._held_calls, self._held = [], []
        log.error("usage.disabled", path=str(self.path), error=str(exc))

    def _close_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None

    # -- the thread -------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while True:
                batch, stop = self._collect()
                try:
                    # Before each write too (one stat, at most four a second): what is written to
                    # a deleted file is lost.
                    self._look_if_due(now=any(not isinstance(item, _Job) for item in batch))
                    self._retry_if_due()
                    self._prune_if_due()
                    self._process(batch, last=stop)
                except Exception as exc:
                    # A bug here must not end the thread: every job queued behind it would wait for
                    # ever (the daemon's start among them). The store turns off and says why.
                    log.exception("usage.thread_failed", path=str(self.path))
                    self._turn_off(f"usage store {self.path} failed: {type(exc).__name__}: {exc}", exc)
                    self._refuse_jobs(batch)
                if stop:
                    return
        finally:
            self._close_connection()

    def _wake_in(self) -> float:
        """How long the thread may sleep with nothing queued: until the next look or retry."""
        due = min(self._next_look, self._retry_at)
        return max(0.05, due - time.monotonic())

    def _collect(self) -> tuple[list[Any], bool]:
        """The next batch: the first item, and what arrives within ``_WINDOW`` after a call
        (empty when the thread woke to look at the file or to retry).

        The thread sleeps through the window instead of waiting on the queue per item: a
        call's put then wakes no one, and one transaction takes a whole window's calls.
        Anything else ends the window (``_urgent``), or runs at once if it comes first.
        """
        try:
            first = self._queue.get(timeout=self._wake_in())
        except queue.Empty:
            return [], False
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

    def _look_if_due(self, *, now: bool = False) -> None:
        """A file deleted or replaced under the open connection takes every later write with it
        (to a file no one will open again): open what the path names now, or create it."""
        clock = time.monotonic()
        if clock < self._next_look and not now:
            return
        self._next_look = clock + _LOOK_EVERY
        if self.condition == "retrying" and self._conn is None:
            return  # the retry opens whatever is there
        found = _identity(self.path)
        if found in (self._file, _UNKNOWN):
            return
        if self._file is not None:
            log.warning(
                "usage.store_gone",
                path=str(self.path),
                why="deleted" if found is None else "replaced",
                consequence="opened again; what the daemon holds (approvals, pins) is saved again",
            )
        self._unsaved_untold = True
        self._open()
        self._tell_if_readable()

    def _retry_if_due(self) -> None:
        if time.monotonic() < self._retry_at:
            return
        if self.condition == "read_only":
            self._try_writing()
        elif self.condition == "retrying" and self._conn is None:
            self._open()
            self._tell_if_readable()

    def _try_writing(self) -> None:
        """Open a read-only store for writing beside the read-only connection, which is kept unless
        that works: a refusal or a passing problem (a lock, a full disk) leaves the store readable
        and read-only, to be tried again; only a file found unusable turns it off."""
        self._retry_at = time.monotonic() + _READ_ONLY_RETRY
        conn = None
        try:
            conn = _connect(self.path)
            _probe(conn)
        except (sqlite3.Error, OSError) as exc:
            if conn is not None:
                conn.close()
            if _kind(exc) == _BROKEN:
                self._turn_off(f"usage store {self.path} unusable: {exc}", exc)
            return
        self._close_connection()
        self._conn, self._file = conn, _identity(self.path)
        self._recovered()
        log.info("usage.writable", path=str(self.path))
        # Approvals given meanwhile were kept in memory only: the daemon saves them now.
        self._unsaved_untold = True
        self._tell_if_readable()

    def _tell_if_readable(self) -> None:
        """Tell the daemon the store can be read again, and whether its file is a new one (what the
        daemon holds must then be saved again: the old file took it along)."""
        if self.readable:
            recreated, self._unsaved_untold = self._unsaved_untold, False
            self._tell(recreated=recreated)

    def _tell(self, *, recreated: bool) -> None:
        if self._watcher is not None:
            loop, reopened = self._watcher
            _post(loop, reopened, recreated)

    def _prune_if_due(self) -> None:
        conn = self._conn
        if self._retention_days is None or conn is None or not self.writable:
            return
        if time.monotonic() < self._next_prune:
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

    def _process(self, batch: list[Any], *, last: bool = False) -> None:
        calls = [item for item in batch if type(item) is tuple]
        records = [item for item in batch if type(item) is not tuple and not isinstance(item, _Job)]
        due = self.condition == "retrying" and time.monotonic() >= self._retry_at
        retry_due = due or (self.condition == "retrying" and last)
        if self._conn is not None and (self.writable or retry_due):
            if calls or records or self._held_calls or self._held:
                self._write(self._conn, calls, records)
            elif due:
                # Nothing to write, yet the retry is due (a lock met at open, say): an empty write
                # tries the lock, so the store recovers or backs off by itself, rather than waking
                # every 50 ms and saying "retrying" until some record comes. Not at close: it would
                # wait out the busy timeout for nothing.
                self._write(self._conn, [], [])
        elif self.condition == "retrying":
            self._hold(calls, records)
        else:
            # Off or read-only: the gate keeps the person's decisions in memory and approve says so.
            self._dropped += len(calls) + sum(isinstance(r, CapabilityRecord) for r in records)
        for item in batch:
            if isinstance(item, _Job):
                if self._conn is None:
                    self._refuse_jobs([item])
                else:
                    item.deliver(functools.partial(self._guarded, item.job, self._conn))

    def _guarded(self, job: Callable[[sqlite3.Connection], T], conn: sqlite3.Connection) -> T:
        """Run a job; a read that finds the file corrupt (a page of the pins, say) turns the store
        off, with that reason, rather than writing on into a damaged file."""
        try:
            return job(conn)
        except sqlite3.DatabaseError as exc:
            if _code(exc) in _SQLITE_CORRUPT:
                self._turn_off(f"usage store {self.path} is corrupt: {exc}", exc)
            raise

    def _hold(self, calls: list[PendingCall], records: list[Record]) -> None:
        """Keep what a retrying store cannot take yet, within bounds; count what is dropped."""
        self._held_calls.extend(calls)
        self._held.extend(records)
        if len(self._held_calls) > _HOLD_CALLS:
            self._dropped += len(self._held_calls) - _HOLD_CALLS
            del self._held_calls[:-_HOLD_CALLS]
        if len(self._held) > _HOLD_RECORDS:
            self._dropped += len(self._held) - _HOLD_RECORDS
            del self._held[:-_HOLD_RECORDS]

    def _write(self, conn: sqlite3.Connection, calls: list[PendingCall], records: list[Record]) -> None:
        calls, records = self._held_calls + calls, self._held + records
        self._held_calls, self._held = [], []
        try:
            # One clock read per batch turns the calls' perf_counter times into unix times.
            offset = time.time() - time.perf_counter()
            with transaction(conn):
                write_records(conn, records)
                learned = write_calls(conn, [stored(call, offset) for call in calls], self._analyse)
        except sqlite3.Error as exc:
            kind = _kind(exc)
            if kind == _TRANSIENT:
                self._retrying(exc)
                self._hold(calls, records)
            elif kind == _READ_ONLY and self._open_read_only(exc):
                self._dropped += len(calls)
            else:
                self._dropped += len(calls)
                self._turn_off(f"usage store {self.path} failed: {exc}", exc)
            return
        self._recovered()
        if self._follower is not None and calls:
            loop, learn, _ = self._follower
            _post(loop, learn, *learned)


Record = CapabilityRecord | TrustRecord | SavedSession | SavedSubscriptions


def write_records(conn: sqlite3.Connection, records: list[Record]) -> None:
    """One batch, in a few ``executemany`` statements per kind of record."""
    # Sightings and approvals set different columns of a pin, so their order within a batch is moot;
    # an upgrade sets the approval only where it is the old one, which a later approval is not.
    write_pins(conn, [r for r in records if isinstance(r, PinRecord)])
    write_approvals(conn, [r for r in records if isinstance(r, PinApproval)])
    write_upgrades(conn, [r for r in records if isinstance(r, PinUpgrade)])
    write_accepted(conn, [r for r in records if isinstance(r, AcceptedFindings)])
    write_capabilities(conn, [r for r in records if isinstance(r, CapabilityRecord)])
    write_sessions(conn, [r for r in records if isinstance(r, SavedSession | SavedSubscriptions)])


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
