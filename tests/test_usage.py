"""Usage: durable records (also across kill -9), the ranking prior, capability requests, the report."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
import structlog

from mcpd.client.aio import connect
from mcpd.daemon.serving import keep_store
from mcpd.discovery.groups import group_similar
from mcpd.discovery.index import ToolIndex, ToolText
from mcpd.discovery.prior import UsagePrior
from mcpd.discovery.text import terms
from mcpd.errors import InvalidParams, McpdError, NotApproved
from mcpd.model.trust import PinApproval
from mcpd.model.usage import ReportResult, StoreState
from mcpd.store import db as store_db
from mcpd.store.db import Store, StoreUnavailable
from mcpd.store.pins import pin_rows
from mcpd.store.usage import PendingCall, prior_rows
from mcpd.testing import fixture_toml, fullserver_toml
from mcpd.testing.daemon import DaemonProcess, running_daemon
from mcpd.trust.gate import TrustGate

pytestmark = pytest.mark.anyio


def config_text(db: Path | str, *names: str, server: Callable[[str], str] = fixture_toml) -> str:
    """The store at ``db`` and a server for each of ``names``: fixture servers, or what ``server``
    writes (the tests of the store alone call a tool but need none of the fixture's, so they run the
    cheaper ``fullserver_toml``)."""
    text = f"[daemon]\nusage_db = {json.dumps(str(db))}\n"
    return text + "".join(server(name) for name in names)


@pytest.fixture(scope="module")
async def daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DaemonProcess]:
    """One daemon for the tests that only call and read the report: alpha is the outcome test's
    alone, beta the other tests' (only the test of many clients calls beta's echo)."""
    tmp = tmp_path_factory.mktemp("usage")
    path = tmp / "config.toml"
    path.write_text(config_text(tmp / "usage.db", "alpha", "beta"))
    async with running_daemon(path) as running:
        yield running


# -- the store and the daemon ------------------------------------------------------------------------


async def test_records_survive_kill_9(tmp_path: Path) -> None:
    """Committed call records are still there after the daemon is killed with SIGKILL and restarted."""
    path = tmp_path / "config.toml"
    path.write_text(config_text(tmp_path / "usage.db", "alpha"))
    async with running_daemon(path) as first:
        async with connect(first.socket) as client:
            for i in range(25):
                await client.call_tool("alpha__echo", {"text": str(i)}, query="say something back")
            report = await client.report()  # runs after every queued record is committed
        assert report.tools[0].calls == 25
        first.process.kill()
        await first.wait_exit()
    async with running_daemon(path) as second, connect(second.socket) as client:
        again = await client.report()
        ranked = await client.search("say something back", explain=True, limit=3)
    assert [(t.server, t.tool, t.calls) for t in again.tools] == [("alpha", "echo", 25)]
    assert ranked.tools[0].name == "alpha__echo"
    assert (ranked.tools[0].score_parts or {}).get("association", 0) > 0


async def test_concurrent_calls_from_many_clients_are_all_recorded(daemon: DaemonProcess) -> None:
    """Twenty clients calling at once: every call is one record, with its client's name."""
    async with connect(daemon.socket) as client:
        before = _calls(await client.report(), "beta", "echo")
    last = _query(daemon, "SELECT coalesce(max(id), 0) FROM calls")[0][0]

    async def one(index: int) -> None:
        async with connect(daemon.socket, name=f"agent-{index}") as client:
            for _ in range(10):
                await client.call_tool("beta__echo", {"text": "x"})

    async with anyio.create_task_group() as tg:
        for index in range(20):
            tg.start_soon(one, index)
    async with connect(daemon.socket) as client:
        after = _calls(await client.report(), "beta", "echo")
    assert (after[0] - before[0], after[1] - before[1]) == (200, 0)
    clients = {row[0] for row in _query(daemon, "SELECT DISTINCT client FROM calls WHERE id > ?", last)}
    assert clients == {f"agent-{i}" for i in range(20)}


def _calls(report: ReportResult, server: str, tool: str) -> tuple[int, int]:
    """Calls and failures of ``server``'s ``tool`` in ``report``; none yet: (0, 0)."""
    found = [(t.calls, t.failures) for t in report.tools if (t.server, t.tool) == (server, tool)]
    return found[0] if found else (0, 0)


def _query(daemon: DaemonProcess, sql: str, *params: object) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` on the daemon's usage store, read by a connection of the test's own."""
    opened = next(e for e in daemon.events if e.get("event") == "usage.opened")
    db = sqlite3.connect(str(opened["path"]))
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


async def test_outcomes_and_the_report(daemon: DaemonProcess) -> None:
    """ok, tool error and timeout are told apart; the report has rates, percentiles and last use."""
    async with connect(daemon.socket) as client:
        await client.call_tool("alpha__echo", {"text": "x"})
        await client.call_tool("alpha__fail", {})
        with pytest.raises(McpdError):
            await client.call_tool("alpha__sleep", {"seconds": 2}, timeout=0.2)
        report = await client.report()
        recent = await client.report(since_s=3600)
        # A window longer than the epoch is everything, not an integer SQLite cannot hold.
        forever = await client.report(since_s=1e300)
    by_tool = {t.tool: t for t in report.tools if t.server == "alpha"}
    assert forever.tools == report.tools and forever.since is None
    assert by_tool["echo"].failures == 0 and by_tool["fail"].failure_rate == 1.0
    assert by_tool["sleep"].failures == 1
    assert by_tool["echo"].p95_ms >= by_tool["echo"].p50_ms > 0
    assert abs(by_tool["echo"].last_used - time.time()) < 60
    assert {t.tool for t in recent.tools if t.server == "alpha"} == {"echo", "fail", "sleep"}
    outcomes = dict(_query(daemon, "SELECT tool, outcome FROM calls WHERE server = 'alpha'"))
    assert outcomes == {"echo": "ok", "fail": "tool_error", "sleep": "timeout"}


async def test_reserved_tool_is_answered_by_the_daemon(daemon: DaemonProcess) -> None:
    """mcpd_request_capability is in every registry, acknowledged by mcpd, never sent to a server."""
    async with connect(daemon.socket) as client:
        listed = [t.name for t in await client.tools()]
        ranked = await client.search("weather forecast", budget_tokens=2000)
        before = (await client.call_tool("beta__pid")).content
        ack = await client.call_tool("mcpd_request_capability", {"capability": "convert PDF to Markdown"})
        await client.request_capability("PDF to markdown conversion", context="user sent a paper")
        await client.request_capability("send an SMS message")
        with pytest.raises(InvalidParams, match="non-empty"):
            await client.request_capability(" \t ")  # blank once stripped: nothing to record
        after = (await client.call_tool("beta__pid")).content
        report = await client.report()
        status = {s.name: s for s in await client.status()}
    assert "mcpd_request_capability" in listed
    assert ranked.rendered is not None and "mcpd_request_capability" in ranked.rendered.text
    assert "Recorded the missing capability" in ack.content[0]["text"] and not ack.is_error
    assert before == after and status["beta"].restarts == 0
    first = report.capabilities[0]
    assert (first.count, first.capability) == (2, "convert PDF to Markdown")
    assert report.capabilities[1].capability == "send an SMS message"
    assert all(t.tool != "mcpd_request_capability" for t in report.tools)


async def test_corrupt_database_turns_usage_off_not_the_daemon(tmp_path: Path) -> None:
    """A database file that is not SQLite: usage is off with a clear reason; calls still work (a
    server that pins its tools waits for approval: its approvals were in that file)."""
    db = tmp_path / "usage.db"
    db.write_bytes(b"this is not a database" * 100)
    path = tmp_path / "config.toml"
    path.write_text(
        config_text(db, "alpha", server=fullserver_toml) + fullserver_toml("beta", pinning="trust")
    )
    async with running_daemon(path) as daemon:
        disabled = await daemon.wait_for("usage.disabled")
        assert str(db) in disabled["path"]
        async with connect(daemon.socket) as client:
            assert (await client.call_tool("beta__plain")).content[0]["text"] == "plain done"
            with pytest.raises(NotApproved, match="could not be read"):
                await client.call_tool("alpha__plain")
            with pytest.raises(McpdError, match="no usage report"):
                await client.report()


async def test_a_store_corrupted_under_the_daemon_fails_the_report_not_the_daemon(tmp_path: Path) -> None:
    """The store's files overwritten while the daemon runs, the report the first to read them:
    ``no usage report`` with SQLite's reason, as for a store found corrupt at start, not an
    internal error with a traceback in the log; calls go on."""
    db = tmp_path / "usage.db"
    path = tmp_path / "config.toml"
    path.write_text(config_text(db, "alpha", server=fullserver_toml))
    async with running_daemon(path) as daemon, connect(daemon.socket) as client:
        await client.call_tool("alpha__plain")
        await client.report()
        for part in tmp_path.glob("usage.db*"):
            part.write_bytes(b"this is not a database" * 400)
        with pytest.raises(McpdError, match=r"no usage report: .*not a database") as failed:
            await client.report()
        assert failed.value.data == {"usage": "error"}  # the store is on: its file failed the read
        assert (await client.call_tool("alpha__plain")).content[0]["text"] == "plain done"
        assert not [e for e in daemon.events if e.get("event") == "ipc.internal_error"]


async def test_unwritable_location_turns_usage_off(tmp_path: Path) -> None:
    """A store that cannot be created (under /proc here, unwritable even for root) is reported, not fatal."""
    path = tmp_path / "config.toml"
    path.write_text(config_text("/proc/mcpd-test/usage.db", "alpha", server=fullserver_toml))
    async with running_daemon(path) as daemon:
        await daemon.wait_for("usage.disabled")
        async with connect(daemon.socket) as client:
            assert (await client.call_tool("alpha__plain")).content[0]["text"] == "plain done"


def test_a_fifo_or_a_device_at_the_path_turns_usage_off(tmp_path: Path) -> None:
    """A FIFO or a device where the database should be is none: the store is off at once and says
    why, instead of retrying what SQLite reads as a disk I/O error for ever."""
    fifo = tmp_path / "usage.db"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/null")):
        store = Store.open(path)
        try:
            assert store.state.state == "off" and "is not a regular file" in (store.reason or "")
        finally:
            store.close()


@contextlib.contextmanager
def unwritable(path: Path) -> Iterator[str]:
    """``path`` made read-only: by its mode, or for root (whom modes do not stop, and CI runs as
    root) by the immutable attribute; a skip saying why where neither can be had. Yields what the
    store's reason then says (SQLite's "readonly", or the kernel's refusal to open it for writing)."""
    if os.getuid() != 0:
        path.chmod(0o400)
        yield "readonly"
        return
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"root writes through file modes, and chattr +i failed: {made.stderr.strip()}")
    try:
        yield "operationnotpermitted"
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


async def test_read_only_database_file(tmp_path: Path) -> None:
    """A read-only database file is found at start, not at the first call, and opened read-only:
    its pins and report are read, nothing is written, and the reason says so."""
    db = tmp_path / "usage.db"
    first = Store.open(db)
    first.save_trust(APPROVAL)
    await first.flush()
    first.close()
    with unwritable(db) as refusal:
        store = Store.open(db)
        try:
            assert store.state.state == "read_only" and not store.writable
            assert refusal in (store.reason or "").replace(" ", "").lower()
            assert [p.approved_hash for p in await store.run(pin_rows)] == ["h1"]
            store.record_call(call())
            store.save_trust(msgspec.structs.replace(APPROVAL, approved_hash="h2"))
            await store.flush()
            assert [p.approved_hash for p in await store.run(pin_rows)] == ["h1"]
            assert await store.run(calls_stored) == 0 and store.state.dropped == 1
        finally:
            store.close()


async def test_a_read_only_store_takes_writes_again_once_it_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store opened read-only tries writing again (every 30 s; 0.1 s here) beside its read-only
    connection: refused, or meeting another writer's lock, it stays read-only and readable and says
    nothing more; once the file takes writes, calls are recorded again and the daemon is told to save
    what it holds (the approvals given meanwhile), without a restart."""
    monkeypatch.setattr(store_db, "_READ_ONLY_RETRY", 0.1)
    monkeypatch.setattr(store_db, "_BUSY_WAIT", 0.1)
    db = tmp_path / "usage.db"
    Store.open(db).close()
    told: list[bool] = []
    other = exclusive(db)  # before it is writable again: no attempt may find it free in between
    with structlog.testing.capture_logs() as logs:
        with unwritable(db):
            store = Store.open(db)
            store.watch(told.append)
            await anyio.sleep(0.5)  # a few attempts, all refused
            assert store.state.state == "read_only" and told == []
        try:
            db.chmod(0o600)
            await anyio.sleep(0.5)  # writable, but locked through a few attempts
            assert store.state.state == "read_only" and store.readable and told == []
            other.close()
            await until(lambda: store.writable and told == [True])
            store.record_call(call())
            await store.flush()
            assert await store.run(calls_stored) == 1
        finally:
            store.close()
    said = [entry["event"] for entry in logs if entry["event"].startswith("usage.")]
    assert said.count("usage.read_only") == 1 and said.count("usage.writable") == 1, said
    assert "usage.retrying" not in said and "usage.disabled" not in said, said


@pytest.fixture(scope="module")
async def pinned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A usage store a daemon running alpha wrote, with alpha's pins and one call, as it left it on
    stopping (no WAL beside it): the tests of a store that is there before the daemon copy it."""
    db = tmp_path_factory.mktemp("pinned") / "usage.db"
    path = db.parent / "config.toml"
    path.write_text(config_text(db, "alpha", server=fullserver_toml))
    async with running_daemon(path) as first, connect(first.socket) as client:
        await client.call_tool("alpha__plain")
    assert not db.with_name("usage.db-wal").exists()
    return db


async def test_a_read_only_store_keeps_approvals_in_force(tmp_path: Path, pinned: Path) -> None:
    """A daemon on a read-only store reads its pins: approved tools stay callable (they were all
    held back), status says read-only, and an approval is said not to be saved."""
    db = tmp_path / "usage.db"
    shutil.copyfile(pinned, db)
    path = tmp_path / "config.toml"
    path.write_text(config_text(db, "alpha", server=fullserver_toml))
    with unwritable(db):
        async with running_daemon(path) as daemon, connect(daemon.socket) as client:
            await daemon.wait_for("server.state", server="alpha", new="running")
            assert (await client.call_tool("alpha__plain")).content[0]["text"] == "plain done"
            store = (await client.overview()).store
            assert store is not None and store.state == "read_only" and "read-only" in (store.reason or "")
            assert (await client.report()).tools  # what was recorded before is still read
            already = await client.approve("alpha", "plain")
            assert already.approved == [] and already.already_approved == ["plain"]


def call(query: str | None = None) -> PendingCall:
    return (time.perf_counter(), 0.001, None, None, "s", "t", "ok", None, query)


APPROVAL = PinApproval(server="s", tool="t", approved_hash="h1", approved_definition="d1")


def calls_stored(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM calls").fetchone()[0])


async def until(check: Callable[[], bool], timeout: float = 20.0) -> None:
    with anyio.fail_after(timeout):
        while not check():
            await anyio.sleep(0.05)


def exclusive(db: Path, *, readers_too: bool = False) -> sqlite3.Connection:
    """Another writer holding ``db``'s lock (SQLite locks per connection, so one of ours will do);
    ``readers_too``: in exclusive locking mode, which keeps readers out as well (in WAL mode a
    writer's lock alone does not)."""
    conn = sqlite3.connect(db, isolation_level=None)
    if readers_too:
        conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    conn.execute("BEGIN EXCLUSIVE")
    return conn


async def test_a_lock_held_by_another_process_is_waited_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer holding the lock past the busy timeout: the store retries with backoff instead of
    turning off; reads go on meanwhile; the calls and the decision queued are written once it is free."""
    monkeypatch.setattr(store_db, "_BUSY_WAIT", 0.2)
    db = tmp_path / "usage.db"
    store = Store.open(db)
    try:
        locker = exclusive(db)
        store.record_call(call())
        store.save_trust(APPROVAL)
        await until(lambda: store.state.state == "retrying")
        assert "locked" in (store.reason or "")
        assert await store.run(calls_stored) == 0  # the report reads on (WAL)
        locker.execute("ROLLBACK")
        locker.close()
        await until(lambda: store.state.state == "ok")
        await store.flush()
        assert await store.run(calls_stored) == 1
        assert [p.approved_hash for p in await store.run(pin_rows)] == ["h1"]
    finally:
        store.close()


async def test_a_lock_met_at_open_is_retried_with_nothing_to_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's lock met at open: the store retries it with backoff by itself, not only
    when a record comes, and comes back once the lock is gone; the thread never spins meanwhile."""
    monkeypatch.setattr(store_db, "_BUSY_WAIT", 0.1)
    monkeypatch.setattr(store_db, "_RETRY_FIRST", 0.2)
    db = tmp_path / "usage.db"
    Store.open(db).close()  # created and migrated
    locker = exclusive(db)
    store = Store.open(db)
    try:
        assert store.state.state == "retrying" and store.readable
        wakes = 0
        process = store._process

        def counted(batch: list[object], *, last: bool = False) -> None:
            nonlocal wakes
            wakes += 1
            process(batch, last=last)

        monkeypatch.setattr(store, "_process", counted)
        await anyio.sleep(1.5)
        assert store.state.state == "retrying"
        assert wakes < 10  # retries at 0.2, 0.4 and 0.8 s, looks every 2 s; it spun at 20 a second
        locker.execute("ROLLBACK")
        await until(lambda: store.state.state == "ok", timeout=10)
    finally:
        locker.close()
        store.close()


FULL_DISK = """
import asyncio, json, resource, sys, time
from pathlib import Path
from mcpd.store.db import Store

async def main() -> None:
    store = Store.open(Path(sys.argv[1]))
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, hard))
    for i in range(200):
        store.record_call((time.perf_counter(), 0.001, None, None, "s", "t", "ok", None, "x" * 4000 + str(i)))
    for _ in range(200):
        if store.state.state != "ok":
            break
        await asyncio.sleep(0.05)
    seen = store.state.state
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    for _ in range(400):
        if store.state.state == "ok":
            break
        await asyncio.sleep(0.05)
    count = await store.run(lambda db: db.execute("SELECT count(*) FROM calls").fetchone()[0])
    print(json.dumps({"seen": seen, "after": store.state.state, "count": count}))
    store.close()

asyncio.run(main())
"""


async def test_a_full_disk_is_waited_out(tmp_path: Path) -> None:
    """Writes refused for a while (a file-size limit stands for a full disk, in a process of its
    own): the store retries rather than turning off, and the calls held meanwhile are written."""
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(tmp_path / "usage.db")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout.splitlines()[-1])
    assert outcome == {"seen": "retrying", "after": "ok", "count": 200}


async def test_a_store_locked_at_start_hands_over_its_pins_when_free(tmp_path: Path, pinned: Path) -> None:
    """Locked by another process when the daemon starts, for readers too: pinned tools wait (the
    reason names the store, status says retrying), and once the lock is gone the pins load and the tools are
    released, the report works, without a restart."""
    db = tmp_path / "usage.db"
    shutil.copyfile(pinned, db)
    path = tmp_path / "config.toml"
    path.write_text(config_text(db, "alpha", server=fullserver_toml))
    locker = exclusive(db, readers_too=True)
    try:
        async with running_daemon(path) as daemon, connect(daemon.socket) as client:
            await daemon.wait_for("usage.retrying")
            await daemon.wait_for("server.state", server="alpha", new="running")
            with pytest.raises(NotApproved, match="usage store"):
                await client.call_tool("alpha__plain")
            overview = await client.overview()
            assert overview.store is not None and overview.store.state == "retrying"
            status = next(s for s in overview.servers if s.name == "alpha")
            assert "usage store" in (status.held_because or "")
            locker.close()  # the lock of exclusive mode lasts as long as the connection
            await daemon.wait_for("trust.pins_loaded", timeout=30)
            assert (await client.call_tool("alpha__plain")).content[0]["text"] == "plain done"
            assert (await client.report()).tools[0].calls >= 1
            assert (await client.overview()).store == StoreState(state="ok", path=str(db))
    finally:
        locker.close()


async def test_a_store_deleted_under_the_daemon_is_made_again(tmp_path: Path) -> None:
    """The store's directory removed while the daemon runs: noticed and logged, the store is
    created again at its path with the pins the daemon holds, and later calls land there."""
    db = tmp_path / "state" / "usage.db"
    path = tmp_path / "config.toml"
    path.write_text(config_text(db, "alpha", server=fullserver_toml))
    async with running_daemon(path) as daemon, connect(daemon.socket) as client:
        await client.call_tool("alpha__plain")
        await client.report()
        shutil.rmtree(db.parent)
        await daemon.wait_for("usage.store_gone", why="deleted")
        await daemon.wait_for("usage.resaved")
        await client.call_tool("alpha__plain")
        assert [t.calls for t in (await client.report()).tools] == [1]
    conn = sqlite3.connect(db)
    try:
        pins = conn.execute(
            "SELECT tool, approved_hash IS NOT NULL FROM pins WHERE server = 'alpha'"
        ).fetchall()
        assert ("plain", 1) in pins
        assert conn.execute("SELECT count(*) FROM calls").fetchone()[0] == 1
    finally:
        conn.close()


async def test_a_store_deleted_while_the_disk_is_full_is_told_as_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file deleted, and its first re-creation refused by a passing error (a full disk): the
    retry that makes it still tells the daemon the file is new, so what it holds is saved again."""
    monkeypatch.setattr(store_db, "_RETRY_FIRST", 0.2)
    monkeypatch.setattr(store_db, "_LOOK_EVERY", 0.1)
    db = tmp_path / "usage.db"
    store = Store.open(db)
    try:
        told: list[bool] = []
        store.watch(told.append)
        connect_for_real, refusals = store_db._connect, [1]

        def full_once(path: Path) -> sqlite3.Connection:
            if refusals:
                refusals.pop()
                full = sqlite3.OperationalError("database or disk is full")
                full.sqlite_errorcode = 13  # SQLITE_FULL
                raise full
            return connect_for_real(path)

        monkeypatch.setattr(store_db, "_connect", full_once)
        db.unlink()
        await until(lambda: not refusals and store.state.state == "ok" and bool(told))
        assert told == [True]
    finally:
        store.close()


async def test_records_saved_again_into_a_store_that_cannot_take_them_are_said_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file deleted, and the one made again refusing writes for now (a full disk): what the daemon
    saves again is held for the retry, and the log says it is not written (``usage.not_resaved``, the
    store's state), where it said ``usage.resaved`` whatever the store did with the records."""
    monkeypatch.setattr(store_db, "_LOOK_EVERY", 0.1)
    monkeypatch.setattr(store_db, "_RETRY_FIRST", 3600.0)  # no retry within the test: held, not written
    db = tmp_path / "usage.db"
    store = Store.open(db)
    probe_for_real = store_db._probe

    def full(conn: sqlite3.Connection) -> None:
        error = sqlite3.OperationalError("database or disk is full")
        error.sqlite_errorcode = 13  # SQLITE_FULL
        raise error

    def resave() -> int:
        store.save_trust(APPROVAL)
        return 1

    try:
        with structlog.testing.capture_logs() as logs:
            async with anyio.create_task_group() as tg:
                tg.start_soon(keep_store, store, TrustGate(), UsagePrior(), [resave])
                monkeypatch.setattr(store_db, "_probe", full)
                db.unlink()
                await until(
                    lambda: any(
                        log["event"].startswith("usage.") and "resave" in log["event"] for log in logs
                    )
                )
                tg.cancel_scope.cancel()
        said = [log for log in logs if log["event"] in ("usage.resaved", "usage.not_resaved")]
        assert [(log["event"], log["records"], log.get("store")) for log in said] == [
            ("usage.not_resaved", 1, "retrying")
        ]
        monkeypatch.setattr(store_db, "_probe", probe_for_real)
        assert await store.run(lambda conn: conn.execute("SELECT count(*) FROM pins").fetchone()[0]) == 0
    finally:
        store.close()


async def test_store_schema_version_and_reopen(tmp_path: Path) -> None:
    """The schema is versioned; reopening keeps the data; a newer schema is refused clearly."""
    db = tmp_path / "usage.db"
    store = Store.open(db)
    store.record_call((time.perf_counter(), 0.001, None, None, "s", "t", "ok", None, None))
    await store.flush()
    store.close()
    reopened = Store.open(db)
    tools, _ = await reopened.run(prior_rows)
    reopened.close()
    assert tools[0][:4] == ("s", "t", 1, 0)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    newer = Store.open(db)
    newer.close()
    assert newer.state.state == "off" and "newer" in (newer.reason or "")


# -- the prior and grouping, as logic ------------------------------------------------------------------


def test_ranking_moves_after_successes_and_failures() -> None:
    """Two equal tools: successes lift one, failures sink the other; a strong text match stays first."""
    index = ToolIndex()
    index.replace_server("left", [ToolText("left", "convert", "Convert a document to another format")])
    index.replace_server("right", [ToolText("right", "convert", "Convert a document to another format")])
    index.replace_server("pdfs", [ToolText("pdfs", "pdf_to_markdown", "Turn a PDF into Markdown text")])
    query = "convert a document"
    plain = index.search(query)
    prior = UsagePrior()
    now = time.time()
    for _ in range(5):
        prior.observe("right", "convert", True, terms("make this doc markdown"), now)
        prior.observe("left", "convert", False, (), now)
    moved = [h.server for h in index.search(query, prior=prior)]
    assert [h.server for h in plain[:2]] == ["left", "right"]  # a tie, broken by name
    assert abs(plain[0].score - plain[1].score) < 1e-9
    assert moved[:2] == ["right", "left"]
    # Usage ties "markdown" to right/convert, but the tool whose own text says so stays ahead.
    assert next(h.server for h in index.search("pdf markdown", prior=prior)) == "pdfs"


def test_stale_successes_fade() -> None:
    """A tool whose successes are old gets less of a lift than one used recently."""
    prior = UsagePrior(half_life_days=30)
    prior.observe("s", "old", True, (), time.time() - 365 * 86400)
    prior.observe("s", "new", True, (), time.time())
    assert prior.tool_factor(("s", "new")) > prior.tool_factor(("s", "old")) >= 0


def test_similar_capability_requests_group_together() -> None:
    """Near-duplicate wordings form one group, the most frequent wording names it."""
    groups = group_similar(
        [
            ("convert PDF to markdown", 2),
            ("PDF to Markdown conversion", 1),
            ("send an SMS", 1),
            ("sending SMS messages", 1),
            ("book a flight", 1),
        ]
    )
    assert [(g.representative, g.count) for g in groups] == [
        ("convert PDF to markdown", 3),
        ("send an SMS", 2),
        ("book a flight", 1),
    ]


async def test_a_failure_on_the_store_thread_turns_usage_off_and_hangs_nobody(tmp_path: Path) -> None:
    """Something the store's thread did not foresee (here a retention past what dates can hold,
    which the config refuses, given straight to the store): usage turns off with the reason, and
    what waits on the thread gets an error instead of waiting for ever."""
    store = Store.open(tmp_path / "usage.db", retention_days=1e308)
    try:
        with anyio.fail_after(10), pytest.raises(StoreUnavailable, match="OverflowError"):
            await store.flush()
        assert store.state.state == "off" and "OverflowError" in (store.reason or "")
        with anyio.fail_after(10), pytest.raises(StoreUnavailable):
            await store.flush()
    finally:
        store.close()
