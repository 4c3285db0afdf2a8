"""``mcpd serve``: the socket (and HTTP), the supervised servers, SIGHUP reload, SIGTERM/SIGINT shutdown."""

from __future__ import annotations

import contextlib
import functools
import resource
import signal
import socket
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import msgspec
import structlog

from mcpd.config.load import load_config
from mcpd.config.model import Config, ConfigIssue
from mcpd.config.paths import default_socket_path
from mcpd.daemon.methods import Daemon, methods, summary
from mcpd.daemon.notify import Notifier
from mcpd.daemon.socket_guard import guard_socket
from mcpd.discovery.prior import UsagePrior
from mcpd.discovery.semantic_setup import semantic_indexes
from mcpd.discovery.text import learned_terms
from mcpd.errors import ConfigError, McpdError
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
from mcpd.supervisor.orphans import GroupLedger, open_ledger
from mcpd.supervisor.supervisor import Supervisor, open_supervisor
from mcpd.trust.gate import TrustGate

if TYPE_CHECKING:
    from mcpd.front.http.server import HttpFront

log = structlog.get_logger("mcpd.daemon")

START_WAIT = 60.0
"""Upper bound on waiting for first start attempts before announcing readiness."""

EXIT_CONFIG = 2
EXIT_SOCKET = 3
"""The socket or HTTP address cannot be had: a busy port or a runtime directory not there yet (a
restart may heal them), or an unsafe or too long socket path (named in the log)."""
EXIT_TAKEN = 4
"""Another daemon serves this socket: it did at start, or it took the path while this one ran. A
restart cannot help while that daemon lives (so the service files do not restart on it)."""


def _warn_if_exposed(config: Config, config_path: Path | None) -> None:
    """A config holding env or header values that other users can read deserves a warning."""
    if config_path is None:
        return
    try:
        mode = config_path.stat().st_mode
    except OSError:
        return
    holders = [s.name for s in config.servers if s.env or s.headers]
    if holders and mode & 0o044:
        log.warning(
            "config.readable_by_others",
            file=str(config_path),
            servers=holders,
            advice=f"chmod 600 {config_path}: it holds env or header values",
        )


def _report_issues(issues: Iterable[ConfigIssue]) -> None:
    for issue in issues:
        log.error(
            "config.invalid_server",
            file=issue.file,
            server=issue.server,
            field=issue.field,
            error=issue.message,
        )


async def _reload(daemon: Daemon) -> None:
    try:
        await daemon.reload()
    except ConfigError:
        pass  # Daemon.reload logged why (config.reload_rejected); the running set stays as it was.
    except Exception:
        # A reload must never take the daemon down; the running set stays as it was.
        log.exception("config.reload_failed")


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


def _with_http(config: Config, address: str | None) -> Config:
    """``config`` with ``mcpd serve --http`` in force (``ValueError`` for a bad or remote address)."""
    if address is None:
        return config
    return msgspec.structs.replace(config, daemon=msgspec.structs.replace(config.daemon, http=address))


def _open_http(config: Config) -> HttpFront | None:
    """The HTTP front end bound and its token read, if configured; None when HTTP is off."""
    if config.daemon.http is None:
        return None
    # Imported here: a daemon without HTTP never loads starlette or uvicorn.
    from mcpd.front.http.server import HttpFront  # noqa: PLC0415

    return HttpFront.open(config.daemon)


def _raise_open_files() -> None:
    """Open files up to the hard limit, as servers do: the soft one is often 1,024, which a thousand
    HTTP connections, the socket's clients and every server's pipes would share."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def serve(config_path: Path | None, socket_path: Path | None = None, http: str | None = None) -> int:
    """Run the daemon in the foreground until SIGTERM or SIGINT; returns the exit status."""
    # Caught before the config is read: a SIGHUP from then on reloads what was read, and one before
    # needs nothing (``cmd_serve`` ignores those). Before any child exists too, so a SIGTERM during
    # start-up still stops them all.
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        return await _serve(config_path, socket_path, http, signals)


async def _serve(
    config_path: Path | None,
    socket_path: Path | None,
    http: str | None,
    signals: AsyncIterator[signal.Signals],
) -> int:
    try:
        config = _with_http(load_config(config_path), http)
    except ConfigError as exc:
        log.error("config.invalid", error=exc.message)
        return EXIT_CONFIG
    except ValueError as exc:
        log.error("config.invalid", error=f"--http: {exc}")
        return EXIT_CONFIG
    _report_issues(config.issues)
    _warn_if_exposed(config, config_path)
    _raise_open_files()
    path = socket_path or default_socket_path()
    with contextlib.ExitStack() as stack:
        try:
            inherited = endpoint.inherited_listener()
            claim = endpoint.Claim(path, inherited)
            # Last out: the socket file (if still ours) goes while the lock is held.
            stack.callback(claim.release)
            listener = inherited or claim.bind()
        except (McpdError, OSError) as exc:
            log.error("daemon.socket_unavailable", socket=str(path), error=getattr(exc, "message", str(exc)))
            return EXIT_TAKEN if isinstance(exc, endpoint.AddressInUse) else EXIT_SOCKET
        if inherited is not None:
            log.info("daemon.socket_activated", socket=str(path))
        try:
            front = _open_http(config)
        except (McpdError, OSError) as exc:
            error = getattr(exc, "message", None) or str(exc)
            log.error("http.unavailable", address=config.daemon.http, error=error)
            return EXIT_SOCKET
        if front is not None:
            stack.callback(front.listener.close)
        displaced = await _run(config, config_path, claim, listener, signals, http=front, http_flag=http)
    log.info("daemon.stopped")
    return EXIT_TAKEN if displaced else 0


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
        Store.open, analyse=learned_terms, retention_days=settings.usage_retention_days
    )
    store = await anyio.to_thread.run_sync(opener, path)
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


async def _run(
    config: Config,
    config_path: Path | None,
    claim: endpoint.Claim,
    listener: socket.socket,
    signals: AsyncIterator[signal.Signals],
    *,
    http: HttpFront | None,
    http_flag: str | None,
) -> bool:
    """Serve until a signal stops the daemon (False) or another daemon took its socket path (True)."""
    log.info("daemon.starting", config=config.source, servers=len(config.servers), socket=str(claim.path))
    # Under the socket's lock (one daemon per path), before any child is spawned; looked at as
    # often as the socket's claim.
    async with open_ledger(claim.path, config.daemon.socket_check_interval) as groups:
        usage, prior, gate = await _open_usage(config)
        try:
            return await _serve_with(
                config,
                config_path,
                claim,
                listener,
                signals,
                usage=usage,
                prior=prior,
                gate=gate,
                groups=groups,
                http=http,
                http_flag=http_flag,
            )
        finally:
            await anyio.to_thread.run_sync(usage.close)


def _everyone(broadcast: Callable[[Event], None]) -> Callable[[ServerEvent], None]:
    """Events for every subscribed client: a resource's updates go to its own subscribers only."""

    def listener(event: ServerEvent) -> None:
        if not isinstance(event, ResourceUpdated):
            broadcast(event)

    return listener


async def _serve_with(
    config: Config,
    config_path: Path | None,
    claim: endpoint.Claim,
    listener: socket.socket,
    signals: AsyncIterator[signal.Signals],
    *,
    usage: Store,
    prior: UsagePrior,
    gate: TrustGate,
    groups: GroupLedger | None,
    http: HttpFront | None,
    http_flag: str | None,
) -> bool:
    notifier = Notifier()
    displaced = False
    requests = ServerRequests()
    async with open_supervisor(config, router=requests.route, groups=groups) as supervisor:
        catalog = Catalog(supervisor, gate=gate, semantic=await semantic_indexes(config.daemon))
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
        supervisor.add_listener(catalog.on_event)
        catalog.catch_up()  # servers may have gone live while the semantic model loaded
        supervisor.add_listener(_everyone(rpc.broadcast))
        supervisor.add_listener(hosts.on_event)
        supervisor.add_log_listener(hosts.on_log)
        supervisor.add_listener(daemon.subscriptions.on_event)
        supervisor.add_listener(daemon.log_levels.on_event)
        if notifier.enabled:
            supervisor.add_listener(lambda event: notifier.status(summary(supervisor)))
        async with anyio.create_task_group() as tg:

            def stop_displaced() -> None:
                nonlocal displaced
                displaced = True
                if groups is not None:
                    groups.give_up()
                notifier.stopping()
                tg.cancel_scope.cancel()

            def resave() -> None:
                # What took the lock or the socket (a logout, a temp cleaner) may have taken the
                # children's ledger too, and a kill -9 then would leave what they started running.
                if groups is not None:
                    groups.save()

            tg.start_soon(rpc.serve, listener)
            looks = config.daemon.socket_check_interval
            tg.start_soon(guard_socket, claim, rpc.listen, resave, stop_displaced, looks)
            tg.start_soon(catalog.run)
            tg.start_soon(keep_store, usage, gate, prior, daemon.resavers)
            tg.start_soon(daemon.subscriptions.run)
            tg.start_soon(daemon.log_levels.run)
            tg.start_soon(daemon.activity.publish, rpc.broadcast)
            tg.start_soon(_announce_ready, supervisor, notifier)
            tg.start_soon(_watchdog, notifier)
            if http is not None:
                # The same host sessions as the bridge's, over MCP Streamable HTTP.
                await tg.start(http.serve, hosts)
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
