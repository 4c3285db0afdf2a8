"""``mcpd serve``: the config, the socket (and HTTP), the children spawned; then ``serving``.

This module imports only what the first spawn needs: the daemon's methods, the usage store, the
trust gate, discovery and the catalogue (``serving``) are imported once the children are booting.
"""

from __future__ import annotations

import contextlib
import resource
import signal
import socket
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import msgspec
import structlog

from mcpd.config.load import load_config
from mcpd.config.model import Config, ConfigIssue
from mcpd.config.paths import default_socket_path
from mcpd.errors import ConfigError, McpdError
from mcpd.front.server_requests import ServerRequests
from mcpd.ipc import endpoint
from mcpd.supervisor.orphans import FLUSH_WAIT, open_ledger
from mcpd.supervisor.supervisor import open_supervisor

if TYPE_CHECKING:
    from mcpd.front.http.listener import HttpFront

log = structlog.get_logger("mcpd.daemon")

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


def _with_http(config: Config, address: str | None) -> Config:
    """``config`` with ``mcpd serve --http`` in force (``ValueError`` for a bad or remote address)."""
    if address is None:
        return config
    return msgspec.structs.replace(config, daemon=msgspec.structs.replace(config.daemon, http=address))


def _open_http(config: Config) -> HttpFront | None:
    """The HTTP front end bound and its token read, if configured; None when HTTP is off."""
    if config.daemon.http is None:
        return None
    # Imported here: a daemon without HTTP never loads it (nor, in ``serving``, starlette or uvicorn).
    from mcpd.front.http.listener import HttpFront  # noqa: PLC0415

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
    requests = ServerRequests()
    async with (
        # Under the socket's lock (one daemon per path), before any child is spawned; looked at as
        # often as the socket's claim, and written a last time once every server has stopped.
        open_ledger(claim.path, config.daemon.socket_check_interval) as groups,
        # Exited after the supervisor has stopped every server: the usage store closes last.
        contextlib.AsyncExitStack() as after_servers,
        open_supervisor(config, router=requests.route, groups=groups) as supervisor,
    ):
        # One turn of the loop, in which each actor's first step spawns its child. The rest of
        # the daemon (its methods, the usage store, the trust gate, the catalogue) is imported
        # and opened while the children boot, not before: the boot of every child waited on it.
        await anyio.lowlevel.checkpoint()
        if groups is not None:
            # The import below holds the loop for tens of milliseconds: the children spawned are
            # written to the ledger first, or a kill -9 meanwhile would leave what they start unknown.
            with anyio.move_on_after(FLUSH_WAIT):
                await groups.settled()
        from mcpd.daemon import serving  # noqa: PLC0415

        return await serving.serve_spawned(
            config,
            config_path,
            claim,
            listener,
            signals,
            supervisor=supervisor,
            requests=requests,
            groups=groups,
            http=http,
            http_flag=http_flag,
            after_servers=after_servers,
        )
