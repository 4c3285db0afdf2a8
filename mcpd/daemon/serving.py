"""The daemon once its children are spawned (``app``): the usage store, the trust gate, the
catalogue, the socket's methods and hosts' sessions, HTTP, readiness, and the signals until a stop.

Imported after the first spawn: none of it is needed to start the children, and its import and
set-up run while they boot.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import signal
import socket
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import structlog

from mcpd.config.model import Config
from mcpd.daemon.methods import Daemon, methods, summary
from mcpd.daemon.notify import Notifier
from mcpd.daemon.socket_guard import guard_socket
from mcpd.discovery.prior import UsagePrior
from mcpd.discovery.semantic_setup import semantic_indexes
from mcpd.discovery.text import learned_terms
from mcpd.errors import ConfigError
from mcpd.front import socket as mcp_socket
from mcpd.front.hosts import Hosts
from mcpd.front.server_requests import ServerRequests
from mcpd.ipc import endpoint
from mcpd.ipc.server import Limits, RpcServer
from mcpd.model.servers import Event, ResourceUpdated, ServerEvent
from mcpd.model.states import LIVE_STATES
from mcpd.model.trust import AcceptedFindings, PinRecord
from mcpd.registry.catalog import Catalog
from mcpd.store.db import Learn, Store, StoreUnavailable
from mcpd.store.pins import accepted_rows, pin_rows
from mcpd.supervisor.orphans import GroupLedger
from mcpd.supervisor.supervisor import Supervisor
from mcpd.trust.gate import TrustGate

if TYPE_CHECKING:
    from mcpd.front.http.listener import HttpFront

log = structlog.get_logger("mcpd.daemon")

START_WAIT = 60.0
"""Upper bound on waiting for first start attempts before announcing readiness."""


async def _reload(daemon: Daemon) -> None:
    try:
        await daemon.reload()
    except ConfigError:
        pass  # Daemon.reload logged why (config.reload_rejected); the running set stays as it was.
    except Exception:
        # A reload must never take the daemon down; the running set stays as it was.
        log.exception("config.reload_failed")


class _Early:
    """The signals that came while serving was being set up."""

    def __init__(self) -> None:
        self.stop: signal.Signals | None = None
        self.reload = False


@contextlib.asynccontextmanager
async def _heeding(signals: AsyncIterator[signal.Signals]) -> AsyncIterator[_Early]:
    """The body, cancelled by SIGTERM or SIGINT: a user's Ctrl-C while the usage store is opened
    (seconds, if another process holds it locked) stops the daemon and its children at once, not
    once serving is set up. A SIGHUP meanwhile is noted, for a reload once serving."""
    early = _Early()
    async with anyio.create_task_group() as tg:

        async def heed() -> None:
            async for signum in signals:
                if signum != signal.SIGHUP:
                    early.stop = signum
                    tg.cancel_scope.cancel()
                    return
                early.reload = True

        tg.start_soon(heed)
        yield early
        tg.cancel_scope.cancel()


async def _announce_ready(supervisor: Supervisor, notifier: Notifier) -> None:
    await supervisor.wait_started(START_WAIT)
    running = sum(1 for s in supervisor.status() if s.state in LIVE_STATES)
    log.info("daemon.ready", running=running, servers=len(supervisor.names()))
    notifier.ready(summary(supervisor))


async def _watchdog(notifier: Notifier) -> None:
    interval = notifier.watchdog_interval()
    if interval is None:
        return
    while True:
        notifier.send("WATCHDOG=1")
        await anyio.sleep(interval)


def _limits(config: Config) -> Limits:
    settings = config.daemon
    return Limits(
        max_frame=settings.max_frame_bytes,
        write_timeout=settings.client_write_timeout,
        max_in_flight=settings.max_in_flight,
    )


def _may_exist(path: Path) -> bool:
    """Whether ``path`` is there, or may be (a directory we cannot search hides it: say yes)."""
    try:
        return path.exists()
    except OSError:
        return True


async def _open_usage(config: Config) -> tuple[Store, UsagePrior, TrustGate]:
    """The store, the prior learned from it and the trust gate with its memory; usage off or
    retrying (not the daemon down) on failure."""
    settings = config.daemon
    prior = UsagePrior()
    if not settings.usage:
        log.warning("usage.off", consequence="tool pins and accepted findings are kept in memory only")
        return Store.disabled("usage recording is off in the config"), prior, TrustGate()
    path = Path(settings.usage_db).expanduser() if settings.usage_db else None  # noqa: ASYNC240 - no I/O
    opener = functools.partial(
        Store.open, path, analyse=learned_terms, retention_days=settings.usage_retention_days
    )
    store = await _open_store(opener)
    if not store.readable:
        if store.condition == "retrying" or await anyio.to_thread.run_sync(_may_exist, store.path):
            # Approvals may be in there: without them, a changed tool must not pass for a new server's.
            # A store that comes back hands them over then (``keep_store``).
            return store, prior, TrustGate(persist=store.save_trust, unreadable=store.reason or "unavailable")
        log.warning("usage.off", consequence="tool pins and accepted findings are kept in memory only")
        return store, prior, TrustGate()
    stored = await _read_pins(store)
    if isinstance(stored, str):
        gate = TrustGate(persist=store.save_trust, unreadable=stored)
    else:
        gate = TrustGate(*stored, persist=store.save_trust)
    await _follow(store, prior, prior.load)
    return store, prior, gate


async def _open_store(open_store: Callable[[], Store]) -> Store:
    """``open_store()`` off the loop, in a daemon thread of its own: its first attempt can wait out
    SQLite's busy timeout (seconds), which a stop signal at start-up must not wait for, nor the
    process's exit (anyio's worker threads are joined at exit). A store it opens after it was
    cancelled is never used, and goes with the process."""
    opened: concurrent.futures.Future[Store] = concurrent.futures.Future()

    def run() -> None:
        # Running, the future can no longer be cancelled: the stop's cancellation leaves it a result
        # nobody reads. Setting that of a cancelled one raised here, a traceback in the daemon's log.
        if not opened.set_running_or_notify_cancel():
            return
        try:
            opened.set_result(open_store())
        except Exception as exc:
            opened.set_exception(exc)

    threading.Thread(target=run, name="mcpd-usage-open", daemon=True).start()
    return await asyncio.wrap_future(opened)


async def _read_pins(store: Store) -> tuple[list[PinRecord], list[AcceptedFindings]] | str:
    """The stored pins and accepted findings, or why they could not be read."""
    try:
        return await store.run(pin_rows), await store.run(accepted_rows)
    except (sqlite3.Error, StoreUnavailable) as exc:
        log.error("usage.pins_unreadable", error=str(exc), consequence="pinned tools wait for approval")
        return str(exc)


async def _follow(store: Store, prior: UsagePrior, take: Learn) -> bool:
    """Have the prior learn from the store from now on, starting with what it holds (``take``)."""
    try:
        tools, term_rows = await store.follow(prior.load, prior.reload)
    except (sqlite3.Error, StoreUnavailable) as exc:
        log.error("usage.load_failed", error=str(exc))
        return False
    take(tools, term_rows)
    log.info("usage.loaded", tools=len(tools), terms=len(term_rows))
    return True


async def keep_store(
    store: Store, gate: TrustGate, prior: UsagePrior, resavers: list[Callable[[], int]]
) -> None:
    """Until cancelled: when the store comes back, hand the trust gate the pins it could not read
    (releasing what was held back for want of them) and the prior what it missed; when its file
    was deleted or replaced, or takes writes again, save what the gate holds in memory (approvals,
    pins) and what the ``resavers`` hold (the HTTP sessions kept)."""
    followed = store.following
    reopened, events = anyio.create_memory_object_stream[bool](16)

    def tell(recreated: bool) -> None:
        # A full queue already holds a look to take: the next one reads what is there by then.
        with contextlib.suppress(anyio.WouldBlock):
            reopened.send_nowait(recreated)

    store.watch(tell)
    if gate.unreadable is not None and store.readable:
        tell(False)  # it came back before the watch began
    async with reopened, events:
        async for recreated in events:
            # First: a store whose pins cannot be read yet keeps the rest until it can.
            resaved = sum(resave() for resave in resavers) if recreated else 0
            if gate.unreadable is not None:
                stored = await _read_pins(store)
                if isinstance(stored, str):
                    continue
                gate.restore(*stored)
            elif recreated:
                resaved += gate.resave()
            if recreated:
                await _say_resaved(store, resaved)
            if not followed:
                followed = await _follow(store, prior, prior.reload)


async def _say_resaved(store: Store, records: int) -> None:
    """Say whether the ``records`` just queued are written, once the store's thread has handled them:
    a daemon killed after ``usage.resaved`` must not lose them, and a store that held them for a
    retry or refused them (read-only) has not written them, whatever it was handed."""
    try:
        written = await store.flush()
    except (sqlite3.Error, StoreUnavailable):
        written = False
    if written:
        log.warning("usage.resaved", path=str(store.path), records=records)
    else:
        log.warning(
            "usage.not_resaved",
            path=str(store.path),
            records=records,
            store=store.condition,
            # Only a retrying store holds them; read-only or off, nothing will write them.
            consequence="kept in memory; saved when the store takes writes again"
            if store.condition == "retrying"
            else "not saved: the store takes no writes",
        )


def _everyone(broadcast: Callable[[Event], None]) -> Callable[[ServerEvent], None]:
    """Events for every subscribed client: a resource's updates go to its own subscribers only."""

    def listener(event: ServerEvent) -> None:
        if not isinstance(event, ResourceUpdated):
            broadcast(event)

    return listener


def _listen(daemon: Daemon, rpc: RpcServer[Daemon], hosts: Hosts) -> None:
    """Everyone who hears of the servers' events, from now on."""
    supervisor, catalog, notifier = daemon.supervisor, daemon.catalog, daemon.notifier
    supervisor.add_listener(catalog.on_event)
    catalog.catch_up()  # servers may have gone live since their spawn (the store opened, a model loaded)
    supervisor.add_listener(_everyone(rpc.broadcast))
    supervisor.add_listener(hosts.on_event)
    supervisor.add_log_listener(hosts.on_log)
    supervisor.add_listener(daemon.subscriptions.on_event)
    supervisor.add_listener(daemon.log_levels.on_event)
    if notifier.enabled:
        supervisor.add_listener(lambda event: notifier.status(summary(supervisor)))


async def serve_spawned(
    config: Config,
    config_path: Path | None,
    claim: endpoint.Claim,
    listener: socket.socket,
    signals: AsyncIterator[signal.Signals],
    *,
    supervisor: Supervisor,
    requests: ServerRequests,
    groups: GroupLedger | None,
    http: HttpFront | None,
    http_flag: str | None,
    after_servers: contextlib.AsyncExitStack,
) -> bool:
    """Serve ``supervisor``'s servers until a signal stops the daemon (False) or another daemon took
    its socket path (True). The usage store is closed by ``after_servers``, which its caller exits
    once the supervisor has stopped every server."""
    async with _heeding(signals) as early:
        usage, prior, gate = await _open_usage(config)
        after_servers.push_async_callback(anyio.to_thread.run_sync, usage.close)
        semantic = await semantic_indexes(config.daemon)
    if early.stop is not None:
        log.info("daemon.stopping", signal=early.stop.name, serving=False)
        return False
    notifier = Notifier()
    displaced = False
    catalog = Catalog(supervisor, gate=gate, semantic=semantic)
    daemon = Daemon(
        supervisor=supervisor,
        catalog=catalog,
        config=config,
        config_path=config_path,
        http_flag=http_flag,
        usage=usage,
        prior=prior,
        notifier=notifier,
        requests=requests,
    )
    limits = _limits(config)
    # Hosts' MCP sessions (``mcpd bridge``) live here, on connections upgraded by their hello.
    hosts = Hosts(daemon, max_in_flight=limits.max_in_flight)
    upgrades = {mcp_socket.MODE: functools.partial(mcp_socket.serve_socket, hosts)}
    rpc = RpcServer(methods, daemon, limits, upgrades)
    _listen(daemon, rpc, hosts)
    async with anyio.create_task_group() as tg:

        def stop_displaced() -> None:
            nonlocal displaced
            displaced = True
            if groups is not None:
                groups.give_up()
            notifier.stopping()
            tg.cancel_scope.cancel()

        # Taking work before any client can subscribe: its subscriptions are brought in line there.
        await tg.start(daemon.subscriptions.run)
        tg.start_soon(rpc.serve, listener)
        looks = config.daemon.socket_check_interval
        tg.start_soon(guard_socket, claim, rpc.listen, stop_displaced, looks)
        tg.start_soon(catalog.run)
        tg.start_soon(keep_store, usage, gate, prior, daemon.resavers)
        tg.start_soon(daemon.log_levels.run)
        tg.start_soon(daemon.activity.publish, rpc.broadcast)
        tg.start_soon(_announce_ready, supervisor, notifier)
        tg.start_soon(_watchdog, notifier)
        if http is not None:
            # The same host sessions as the bridge's, over MCP Streamable HTTP. Imported here: a
            # daemon without HTTP never loads starlette or uvicorn.
            from mcpd.front.http.server import serve as serve_http  # noqa: PLC0415

            await tg.start(serve_http, http, hosts)
        if early.reload:
            log.info("daemon.reload", signal="SIGHUP")
            await _reload(daemon)
        async for signum in signals:
            if signum == signal.SIGHUP:
                log.info("daemon.reload", signal="SIGHUP")
                await _reload(daemon)
                continue
            log.info("daemon.stopping", signal=signal.Signals(signum).name)
            notifier.stopping()
            tg.cancel_scope.cancel()
            break
    return displaced
