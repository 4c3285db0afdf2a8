"""``mcpd check``: start the configured servers once and run the verifier over their tools.

For use before trusting a new server: it needs no daemon, touches no pins, and exits 1
when any high-severity finding turns up or any server never completed ``initialize`` (its
tools could not even be listed, so "0 findings" would mean nothing); 2 for an unusable config
or any bad server entry (as ``mcpd config check``): a typo in the new server's entry would
otherwise leave nothing to check and pass in silence. The good entries are checked all the same.
What is found is returned as data; the command line prints it (``mcpd.cli.local``), as it prints
every other text a server wrote.
"""

from __future__ import annotations

import signal
from pathlib import Path

import anyio
import msgspec
from anyio.abc import TaskStatus

from mcpd.config.load import load_config
from mcpd.config.model import ConfigIssue
from mcpd.config.paths import default_runtime_dir
from mcpd.model.states import LIVE_STATES
from mcpd.model.trust import HIGH, Finding
from mcpd.supervisor.orphans import open_run_ledger
from mcpd.supervisor.supervisor import open_supervisor
from mcpd.trust.gate import inspect


class ServerCheck(msgspec.Struct, frozen=True, kw_only=True):
    server: str
    state: str
    initialized: bool
    """The server answered ``initialize`` and its tools were listed."""
    tools: int
    findings: list[Finding]
    error: str | None = None


class CheckReport(msgspec.Struct, frozen=True, kw_only=True):
    """What ``mcpd check --json`` prints: ``{"servers": [...], "issues": [...]}``."""

    servers: list[ServerCheck]
    issues: tuple[ConfigIssue, ...]

    def exit_status(self) -> int:
        if self.issues:
            return 2  # as `mcpd config check`: the config needs fixing before anything else
        unchecked = any(not r.initialized for r in self.servers)
        high = any(f.severity == HIGH for r in self.servers for f in r.findings)
        return 1 if unchecked or high else 0


async def run_check(config_path: Path | None) -> CheckReport:
    config = load_config(config_path)
    servers = [s for s in config.servers if s.enabled]
    timeout = max((s.connect_timeout for s in servers), default=0.0) + 5
    results: list[ServerCheck] = []
    checked = msgspec.structs.replace(config, servers=tuple(servers))
    # A kill -9 of the check leaves its servers' own children running, as a daemon's: the next
    # check ends them (a directory of its own: checks run side by side, with no socket or lock).
    ledgers = default_runtime_dir() / "checks"
    async with (
        open_run_ledger(ledgers, config.daemon.socket_check_interval) as groups,
        open_supervisor(checked, groups=groups) as supervisor,
    ):
        await supervisor.wait_started(timeout)
        for actor in supervisor.actors():
            # `check` always runs the verifier, whatever the server's `verify` policy in the daemon.
            scanned = msgspec.structs.replace(actor.config, verify="warn")
            inspection = inspect(scanned, actor.tools, actor.server_info)
            findings = [finding for subject in inspection.subjects for finding in subject.findings]
            # A server that hung in initialize is alive (degraded) but was never checked.
            initialized = actor.state in LIVE_STATES and actor.server_info is not None
            results.append(
                ServerCheck(
                    server=actor.name,
                    state=str(actor.state),
                    initialized=initialized,
                    tools=len(actor.tools),
                    findings=findings,
                    error=None if initialized else actor.last_error or "did not complete initialize",
                )
            )
    return CheckReport(servers=results, issues=config.issues)


async def run_check_unless_stopped(config_path: Path | None) -> CheckReport | signal.Signals:
    """``run_check``, given up at SIGTERM or SIGHUP (a closed terminal), whose number it returns:
    its servers are stopped as at its end, what they started included. Else Python's default
    ending of the process would leave that running until the next check reaped it. A signal
    ignored when the check starts (``nohup``) stays ignored: the caller asked the check to outlive
    its terminal."""
    stopping = [s for s in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(s) is not signal.SIG_IGN]
    stopped_by: signal.Signals | None = None
    report: CheckReport | None = None
    checking = anyio.CancelScope()
    async with anyio.create_task_group() as tg:

        async def stop_at_signal(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            nonlocal stopped_by
            with anyio.open_signal_receiver(*stopping) as signals:
                task_status.started()
                # Open until the servers are stopped: a closed terminal sends SIGHUP more than once
                # (the tty's, the shell's), and one taking Python's default action meanwhile would
                # end the check before its stops end what the servers started.
                async for signum in signals:
                    if stopped_by is None:
                        stopped_by = signal.Signals(signum)
                        checking.cancel()

        await tg.start(stop_at_signal)
        with checking:
            report = await run_check(config_path)
        tg.cancel_scope.cancel()
    if report is None:
        assert stopped_by is not None  # only a signal cancels the check
        return stopped_by
    return report
