"""``mcpd check``: start the configured servers once and run the verifier over their tools.

For use before trusting a new server: it needs no daemon, touches no pins, and exits 1
when any high-severity finding turns up (2 for an unusable config).
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec

from mcpd.config.load import load_config
from mcpd.model.states import LIVE_STATES
from mcpd.model.trust import HIGH, Finding, describe
from mcpd.supervisor.supervisor import open_supervisor
from mcpd.trust.gate import inspect


class ServerCheck(msgspec.Struct, frozen=True, kw_only=True):
    server: str
    state: str
    tools: int
    findings: list[Finding]
    error: str | None = None


async def run_check(config_path: Path | None, as_json: bool) -> int:
    config = load_config(config_path)
    servers = [s for s in config.servers if s.enabled]
    timeout = max((s.connect_timeout for s in servers), default=0.0) + 5
    results: list[ServerCheck] = []
    async with open_supervisor(msgspec.structs.replace(config, servers=tuple(servers))) as supervisor:
        await supervisor.wait_started(timeout)
        for actor in supervisor.actors():
            # `check` always runs the verifier, whatever the server's `verify` policy in the daemon.
            scanned = msgspec.structs.replace(actor.config, verify="warn")
            inspection = inspect(scanned, actor.tools, actor.server_info)
            findings = [finding for subject in inspection.subjects for finding in subject.findings]
            live = actor.state in LIVE_STATES
            results.append(
                ServerCheck(
                    server=actor.name,
                    state=str(actor.state),
                    tools=len(actor.tools),
                    findings=findings,
                    error=None if live else actor.last_error,
                )
            )
    if as_json:
        sys.stdout.write(msgspec.json.encode({"servers": results}).decode() + "\n")
    else:
        for result in results:
            status = f"{result.tools} tools" if result.error is None else f"{result.state}: {result.error}"
            print(f"{result.server}: {status}, {len(result.findings)} finding(s)")
            for finding in result.findings:
                print(f"  {describe(finding)}")
    return 1 if any(f.severity == HIGH for r in results for f in r.findings) else 0
