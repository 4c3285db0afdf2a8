"""``mcpd check``: start the configured servers once and run the verifier over their tools.

For use before trusting a new server: it needs no daemon, touches no pins, and exits 1
when any high-severity finding turns up or any server never completed ``initialize`` (its
tools could not even be listed, so "0 findings" would mean nothing); 2 for an unusable config
or any bad server entry (as ``mcpd config check``): a typo in the new server's entry would
otherwise leave nothing to check and pass in silence. The good entries are checked all the same.
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
    initialized: bool
    """The server answered ``initialize`` and its tools were listed."""
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
    if as_json:
        document = {"servers": results, "issues": config.issues}
        sys.stdout.write(msgspec.json.encode(document).decode() + "\n")
    else:
        for issue in config.issues:
            print(f"error: {issue}", file=sys.stderr)
        for result in results:
            if result.initialized:
                print(f"{result.server}: {result.tools} tools, {len(result.findings)} finding(s)")
            else:
                print(f"{result.server}: NOT CHECKED, never initialised ({result.state}): {result.error}")
            for finding in result.findings:
                print(f"  {describe(finding)}")
    if config.issues:
        return 2  # as `mcpd config check`: the config needs fixing before anything else
    unchecked = any(not r.initialized for r in results)
    return 1 if unchecked or any(f.severity == HIGH for r in results for f in r.findings) else 0
