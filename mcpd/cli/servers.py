"""``mcpd status [SERVER]``, ``start``, ``stop``, ``restart``, ``reload``: the supervised servers.

The status table is for reading at a glance, as ``kubectl get pods`` is: the STATE column says
``blocked`` for a server the verifier keeps out (its process may run, but no agent sees it),
and PROBLEM says what is wrong now or held back (the error, the next retry, tools awaiting
approval). ``mcpd status SERVER`` is laid out like ``systemctl status``: the facts, then the
recent state changes, then the last lines of the server's stderr and those of its stdout mcpd could
not use.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcpd.cli import output
from mcpd.cli.output import EXIT_ERROR, EXIT_OK, STATE_COLOURS, Style, clip, duration, emit_json, visible
from mcpd.cli.parsing import Commands, Parser, connected, nonempty_name
from mcpd.model.servers import ServerDetail, ServerStatus
from mcpd.model.states import LIVE_STATES
from mcpd.model.usage import StoreState

if TYPE_CHECKING:
    from mcpd.client import Client


def state_label(status: ServerStatus) -> str:
    return "blocked" if status.blocked else str(status.state)


def problems(status: ServerStatus, now: float) -> list[str]:
    """What is wrong with the server now, and what is held back, most pressing first."""
    found = []
    if status.blocked:
        found.append(status.blocked)  # already says by whom and what to do
    if status.last_error:
        found.append(status.last_error)
    if status.next_retry_at is not None and status.state == "backoff":
        wait = duration(status.next_retry_at - now)
        # ``attempt`` runs failed in a row: the next start is retry ``attempt``, as the history says.
        found.append(f"retry {status.attempt} in {wait}" if status.attempt else f"retry in {wait}")
    if status.held:
        count = len(status.held)
        waits = f"{count} tools await" if count > 1 else "1 tool awaits"
        if status.held_because:
            # Not their own change: what mends it is the store, not an approval.
            found.append(f"{waits} approval: {status.held_because}")
        else:
            found.append(f"{waits} approval (mcpd diff {status.name})")
    if status.trust and not (status.blocked or status.held):
        found.append(status.trust)
    return found


def tool_count(status: ServerStatus) -> str:
    """A stopped or failed server has no tools to count."""
    return str(status.tools) if status.state in LIVE_STATES and not status.blocked else "-"


def status_table(servers: list[ServerStatus], style: Style) -> str:
    now = time.time()
    rows: list[list[output.Cell]] = []
    for s in servers:
        label = state_label(s)
        trouble = "; ".join(problems(s, now))
        rows.append(
            [
                s.name,
                (label, STATE_COLOURS.get(label)),
                str(s.pid or "-"),
                duration(s.uptime_s),
                (str(s.restarts), "yellow" if s.restarts else None),
                tool_count(s),
                (trouble, "red" if s.blocked or s.last_error else "yellow"),
            ]
        )
    headers = ["NAME", "STATE", "PID", "UPTIME", "RESTARTS", "TOOLS", "PROBLEM"]
    return output.table(headers, rows, style)


def cmd_status(args: argparse.Namespace, client: Client) -> int:
    if args.server:
        return show(args, client.show(args.server))
    result = client.overview()
    if args.json:
        emit_json(result)
    else:
        style = Style.of(sys.stdout)
        print(status_table(result.servers, style))
        if result.store is not None:
            print(store_line(result.store, style))
        for issue in result.skipped:
            # Else a configured server is simply missing from the table, said only in the log.
            print(f"{style('skipped', 'red')} at start: " + visible(issue))
    return EXIT_OK


def store_line(store: StoreState, style: Style) -> str:
    """The usage store under the table: where tool approvals and usage are kept, and whether they are."""
    if store.state == "ok":
        return f"usage store: {style('ok', 'green')}" + (f" ({store.path})" if store.path else "")
    label = {"read_only": "read-only", "retrying": "retrying", "off": "off"}[store.state]
    dropped = f"; {store.dropped} records dropped" if store.dropped else ""
    line = f"usage store: {style(label, 'red' if store.state == 'off' else 'yellow')}"
    return line + visible(f": {store.reason or 'no reason given'}{dropped}")


def show(args: argparse.Namespace, detail: ServerDetail) -> int:
    if args.json:
        emit_json(detail)
        return EXIT_OK
    style = Style.of(sys.stdout)
    s = detail.status
    label = state_label(s)
    colour = STATE_COLOURS.get(label)
    since = f" for {duration(s.uptime_s)}" if s.uptime_s is not None else ""
    print(f"{style('●', colour)} {style(s.name, 'bold')}: {style(label, colour)}{since}")
    facts = [
        ("description", clip(s.description, 100)),
        ("server", _server_info(s)),
        ("transport", s.transport),
        ("pid", str(s.pid or "-")),
        ("restarts", f"{s.restarts}" + (f" ({s.attempt} failed in a row)" if s.attempt else "")),
        ("tools", tool_count(s)),
        ("held back", ", ".join(s.held)),
        ("last exit", s.last_exit or ""),
    ]
    facts += [("problem", problem) for problem in problems(s, time.time())]
    for key, value in facts:
        if value:
            print(f"  {key:>11}: {style(visible(value), 'red' if key == 'problem' else None)}")
    if detail.history:
        print("\nrecent state changes:")
        for change in detail.history:
            moved = f"{change.old} -> {style(str(change.new), STATE_COLOURS.get(str(change.new)))}"
            print(f"  {output.clock(change.ts)}  {moved}  {clip(change.reason, 100)}")
    if detail.stderr:
        print(f"\nlast {len(detail.stderr)} stderr line(s):")
        for line in detail.stderr:
            print(f"  {visible(line)}")
    if detail.stdout:
        print(f"\nlast {len(detail.stdout)} stdout line(s) mcpd could not use (skipped):")
        for line in detail.stdout:
            print(f"  {clip(line, 300)}")
    return EXIT_OK


def _server_info(status: ServerStatus) -> str:
    info = status.server_info
    if info is None:
        return ""
    # A version is optional in practice (mcpd's own demo sends ""): no word, no space for it.
    words = [info.name, info.version, f"({info.title})" if info.title else ""]
    return " ".join(word for word in words if word)


def _action(
    act: Callable[[Client, str], ServerStatus], success: frozenset[str]
) -> Callable[[argparse.Namespace, Client], int]:
    """start/stop/restart: exit 0 only when the server ended up in a ``success`` state."""

    def run(args: argparse.Namespace, client: Client) -> int:
        status = act(client, args.name)
        if args.json:
            emit_json(status)
        else:
            pid = f" (pid {status.pid})" if status.pid else ""
            trouble = problems(status, time.time()) if status.state not in ("running", "stopped") else []
            # The problem is the server's last error, in its own words: shown, not obeyed.
            problem = f": {'; '.join(trouble)}" if trouble else ""
            print(visible(f"{status.name}: {state_label(status)}{pid}{problem}"))
        return EXIT_OK if status.state in success else EXIT_ERROR

    return run


def cmd_reload(args: argparse.Namespace, client: Client) -> int:
    result = client.reload()
    if args.json:
        emit_json(result)
        return EXIT_OK
    plan = result.plan
    print(f"reloaded {result.source}")
    for label, names in (("added", plan.added), ("removed", plan.removed), ("restarted", plan.changed)):
        if names:
            print(f"  {label}: {', '.join(names)}")
    print(f"  unchanged: {len(plan.unchanged)}")
    if result.restart_needed:
        changed = ", ".join(result.restart_needed)
        print(f"  [daemon] {changed}: read at start only; the new values apply after a restart")
    return EXIT_OK


def register(commands: Commands, common: Parser) -> None:
    status = commands.add_parser(
        "status", parents=[common], help="every server at a glance, or one server in detail"
    )
    status.add_argument(
        "server", nargs="?", type=nonempty_name, help="show this server's details, history and stderr"
    )
    status.set_defaults(run=connected(cmd_status))
    live = frozenset({"running", "degraded"})
    for name, act, success, text in (
        ("start", lambda c, n: c.start(n), live, "start a server (also a failed or disabled one)"),
        ("stop", lambda c, n: c.stop(n), frozenset({"stopped"}), "stop a server"),
        ("restart", lambda c, n: c.restart(n), live, "restart a server"),
    ):
        sub = commands.add_parser(name, parents=[common], help=text)
        sub.add_argument("name", metavar="server", type=nonempty_name, help="server name")
        sub.set_defaults(run=connected(_action(act, success)))
    commands.add_parser("reload", parents=[common], help="re-read the config and apply changes").set_defaults(
        run=connected(cmd_reload)
    )
