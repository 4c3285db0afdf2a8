"""``mcpd serve``: load the config, supervise every server, reload on SIGHUP, stop on SIGTERM/SIGINT."""

from __future__ import annotations

import signal
from pathlib import Path

import anyio
import structlog

from mcpd.config import Config, load_config
from mcpd.errors import ConfigError
from mcpd.supervisor.supervisor import Supervisor, open_supervisor

log = structlog.get_logger("mcpd.daemon")

START_WAIT = 60.0
"""Upper bound on waiting for first start attempts before announcing readiness."""


def _report_issues(config: Config) -> None:
    for issue in config.issues:
        log.error(
            "config.invalid_server",
            file=issue.file,
            server=issue.server,
            field=issue.field,
            error=issue.message,
        )


async def reload(supervisor: Supervisor, config_path: Path | None) -> None:
    """Re-read the config and apply the diff; an unreadable file changes nothing."""
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        log.error("config.reload_rejected", error=str(exc))
        return
    _report_issues(config)
    await supervisor.apply(config)


async def serve(config_path: Path | None) -> int:
    """Run the daemon in the foreground until SIGTERM or SIGINT; returns the exit status."""
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        log.error("config.invalid", error=str(exc))
        return 2
    _report_issues(config)
    # Signals are caught before any child exists, so a SIGTERM during start-up still stops them all.
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        log.info("daemon.starting", config=config.source, servers=len(config.servers))
        async with open_supervisor(config) as supervisor, anyio.create_task_group() as tg:

            async def announce_ready() -> None:
                await supervisor.wait_started(START_WAIT)
                running = sum(1 for s in supervisor.status() if s.state in ("running", "degraded"))
                log.info("daemon.ready", running=running, servers=len(supervisor.names()))

            tg.start_soon(announce_ready)
            async for signum in signals:
                if signum == signal.SIGHUP:
                    log.info("daemon.reload", signal="SIGHUP")
                    await reload(supervisor, config_path)
                    continue
                log.info("daemon.stopping", signal=signal.Signals(signum).name)
                tg.cancel_scope.cancel()
                break
    log.info("daemon.stopped")
    return 0
