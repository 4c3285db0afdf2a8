"""The ``mcpd`` command line: a thin front end over ``mcpd.client``.

Exit status: 0 success; 1 the daemon reported an error (or the tool call failed);
2 bad usage or config; 3 no daemon is listening.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from mcpd.client.sync import Client
from mcpd.errors import DaemonNotRunning, McpdError
from mcpd.model.servers import ServerStatus
from mcpd.model.trust import describe

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NO_DAEMON = 3


def _emit_json(value: object) -> None:
    sys.stdout.write(msgspec.json.encode(value).decode() + "\n")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes}m"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines)


def _one_line(text: str | None, width: int = 80) -> str:
    if not text:
        return ""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


# -- commands: each takes the parsed args and a connected client, prints, returns an exit status


def cmd_status(args: argparse.Namespace, client: Client) -> int:
    servers = client.status()
    if args.json:
        _emit_json({"servers": servers})
        return EXIT_OK
    rows = [
        [
            s.name,
            str(s.state),
            str(s.pid or "-"),
            _duration(s.uptime_s),
            str(s.restarts),
            str(s.tools),
            _one_line(s.last_error, 60),
        ]
        for s in servers
    ]
    print(_table(["NAME", "STATE", "PID", "UPTIME", "RESTARTS", "TOOLS", "LAST ERROR"], rows))
    return EXIT_OK


def cmd_tools(args: argparse.Namespace, client: Client) -> int:
    if args.query is None and args.budget is None:
        tools = client.tools(args.server or None)[: args.limit]
        if args.json:
            _emit_json({"tools": tools})
            return EXIT_OK
        print(_table(["TOOL", "DESCRIPTION"], [[t.name, _one_line(t.description, 70)] for t in tools]))
        return EXIT_OK
    result = client.search(
        args.query or "", servers=args.server or None, limit=args.limit, budget_tokens=args.budget
    )
    if args.json:
        _emit_json(result)
    elif result.rendered is not None:
        sys.stdout.write(result.rendered.text)
        print(f"\n(~{result.rendered.tokens} of {args.budget} tokens, estimated)", file=sys.stderr)
    else:
        rows = [
            [t.name, f"{t.score:.3f}" if t.score is not None else "", _one_line(t.description, 60)]
            for t in result.tools
        ]
        if args.explain:
            for row, tool in zip(rows, result.tools, strict=True):
                parts = tool.score_parts or {}
                row.insert(2, " ".join(f"{k}={v:.3f}" for k, v in parts.items()) or "text only")
        print(_table(["TOOL", "SCORE", *(["PARTS"] if args.explain else []), "DESCRIPTION"], rows))
    return EXIT_OK


def cmd_select(args: argparse.Namespace, client: Client) -> int:
    result = client.select(args.query, args.threshold)
    if args.json:
        _emit_json(result)
        return EXIT_OK
    for name in result.servers:
        score = result.scores.get(name)
        print(f"{name}\t{score:.3f}" if score is not None else name)
    if result.fallback:
        print("(no server stood out: all servers returned)", file=sys.stderr)
    return EXIT_OK


def cmd_call(args: argparse.Namespace, client: Client) -> int:
    try:
        arguments = json.loads(args.args)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--args is not valid JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise UsageError('--args must be a JSON object, e.g. \'{"text": "hi"}\'')
    result = client.call_tool(
        args.tool, arguments, server=args.server, timeout=args.timeout, query=args.query
    )
    if args.json:
        _emit_json(result)
    else:
        for block in result.content:
            text = block.get("text")
            print(text if isinstance(text, str) else json.dumps(block))
    return EXIT_ERROR if result.is_error else EXIT_OK


def _server_command(
    action: Callable[[Client, str], ServerStatus], success: frozenset[str]
) -> Callable[[argparse.Namespace, Client], int]:
    """A start/stop/restart command: exit 0 only when the server ended up in a ``success`` state."""

    def run(args: argparse.Namespace, client: Client) -> int:
        status = action(client, args.name)
        if args.json:
            _emit_json(status)
        else:
            pid = f" (pid {status.pid})" if status.pid else ""
            error = f": {status.last_error}" if status.last_error and status.state != "running" else ""
            print(f"{status.name}: {status.state}{pid}{error}")
        return EXIT_OK if status.state in success else EXIT_ERROR

    return run


def _since(text: str | None) -> float | None:
    """'90s', '15m', '12h', '7d' -> seconds."""
    if text is None:
        return None
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        value = float(text[:-1]) * units[text[-1]] if text[-1] in units else float(text)
    except (ValueError, IndexError):
        raise UsageError(f"--since takes a duration like 90s, 15m, 12h or 7d, not {text!r}") from None
    if value <= 0:
        raise UsageError("--since must be positive")
    return value


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def cmd_report(args: argparse.Namespace, client: Client) -> int:
    report = client.report(_since(args.since), args.top)
    if args.json:
        _emit_json(report)
        return EXIT_OK
    rows = [
        [
            f"{t.server}/{t.tool}",
            str(t.calls),
            f"{100 * t.failure_rate:.1f}%",
            f"{t.p50_ms:.1f}",
            f"{t.p95_ms:.1f}",
            _when(t.last_used),
        ]
        for t in report.tools
    ]
    print(_table(["TOOL", "CALLS", "FAILED", "P50 MS", "P95 MS", "LAST USED"], rows))
    print("\nmissing capabilities (most requested first)")
    if not report.capabilities:
        print("  none recorded")
    for group in report.capabilities:
        others = [e for e in group.examples if e != group.capability]
        also = f"  (also: {'; '.join(others)})" if others else ""
        print(f"  {group.count:>4} x {group.capability}{also}")
    return EXIT_OK


def cmd_approve(args: argparse.Namespace, client: Client) -> int:
    result = client.approve(args.server, args.tool)
    if args.json:
        _emit_json(result)
    elif result.approved:
        print(f"approved: {', '.join(result.approved)}")
    else:
        print("nothing was waiting for approval")
    return EXIT_OK


def cmd_diff(args: argparse.Namespace, client: Client) -> int:
    result = client.trust(args.server)
    if args.json:
        _emit_json(result)
        return EXIT_OK
    print(f"{result.server}: {result.summary or 'nothing held back'}")
    for change in result.changes:
        print(f"\n{change.tool} ({change.reason})")
        print(change.diff)
    for finding in result.findings:
        print(f"  {describe(finding)}")
    return EXIT_OK


def cmd_reload(args: argparse.Namespace, client: Client) -> int:
    result = client.reload()
    if args.json:
        _emit_json(result)
        return EXIT_OK
    plan = result.plan
    print(f"reloaded {result.source}")
    for label, names in (("added", plan.added), ("removed", plan.removed), ("restarted", plan.changed)):
        if names:
            print(f"  {label}: {', '.join(names)}")
    print(f"  unchanged: {len(plan.unchanged)}")
    return EXIT_OK


class UsageError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--socket", type=Path, help="daemon socket (default: $MCPD_SOCKET or the runtime dir)"
    )
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument(
        "--autostart", action="store_true", help="start a daemon in the background if none runs"
    )
    parser = argparse.ArgumentParser(
        prog="mcpd", description="Supervise MCP servers and share them with every agent."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the daemon in the foreground")
    serve.add_argument(
        "--config", type=Path, help="config file (TOML, or mcpServers JSON); default: user config dir"
    )
    serve.add_argument(
        "--socket", type=Path, help="socket to listen on (default: $MCPD_SOCKET or the runtime dir)"
    )
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument("--log-format", default="auto", choices=["auto", "json", "console"])

    bridge = commands.add_parser("bridge", help="serve MCP on stdio for a host, through the daemon")
    bridge.add_argument(
        "--socket", type=Path, help="daemon socket (default: $MCPD_SOCKET or the runtime dir)"
    )
    bridge.add_argument("--config", type=Path, help="config for a daemon this bridge has to start")
    bridge.add_argument(
        "--connect", action="append", default=[], metavar="SERVER", help="pre-connect a server"
    )
    bridge.add_argument(
        "--all", action="store_true", help="expose every tool (for hosts ignoring list_changed)"
    )
    bridge.add_argument("--no-autostart", action="store_true", help="fail instead of starting a daemon")

    commands.add_parser("status", parents=[common], help="state of every server").set_defaults(run=cmd_status)
    tools = commands.add_parser(
        "tools", parents=[common], help="tools of the running servers, or those for a query"
    )
    tools.add_argument("query", nargs="?", help="rank tools by relevance to this text")
    tools.add_argument("--server", action="append", help="only this server (repeatable)")
    tools.add_argument("--limit", type=int, help="at most this many tools")
    tools.add_argument("--budget", type=int, help="render for a model's context within this many tokens")
    tools.add_argument("--explain", action="store_true", help="show the parts of each score")
    tools.set_defaults(run=cmd_tools)
    select = commands.add_parser(
        "select", parents=[common], help="servers relevant to a query (compatible mode)"
    )
    select.add_argument("query")
    select.add_argument("--threshold", type=float, help="minimum TF-cosine score (default 0.05)")
    select.set_defaults(run=cmd_select)
    call = commands.add_parser("call", parents=[common], help="call a tool")
    call.add_argument("server", help="server name")
    call.add_argument("tool", help="tool name, as the server calls it")
    call.add_argument("--args", default="{}", help="arguments as a JSON object")
    call.add_argument("--timeout", type=float, help="seconds (default: the server's call_timeout)")
    call.add_argument("--query", help="the user request behind this call (ranking learns from it)")
    call.set_defaults(run=cmd_call)
    live = frozenset({"running", "degraded"})
    for name, action, success, text in (
        ("start", lambda c, n: c.start(n), live, "start a server (also a failed or disabled one)"),
        ("stop", lambda c, n: c.stop(n), frozenset({"stopped"}), "stop a server"),
        ("restart", lambda c, n: c.restart(n), live, "restart a server"),
    ):
        sub = commands.add_parser(name, parents=[common], help=text)
        sub.add_argument("name", help="server name")
        sub.set_defaults(run=_server_command(action, success))
    approve = commands.add_parser("approve", parents=[common], help="accept changed or new tools of a server")
    approve.add_argument("server")
    approve.add_argument("tool", nargs="?", help="only this tool")
    approve.set_defaults(run=cmd_approve)
    diff = commands.add_parser(
        "diff", parents=[common], help="what changed in a server's tools since approval"
    )
    diff.add_argument("server")
    diff.set_defaults(run=cmd_diff)
    check = commands.add_parser("check", help="run the tool-poisoning verifier over the configured servers")
    check.add_argument("--config", type=Path, help="config file (default: the user config, else the demo)")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    service = commands.add_parser("service", help="run mcpd as a systemd user service or launchd agent")
    service.add_argument("action", choices=["install", "uninstall", "status"])
    service.add_argument("--dry-run", action="store_true", help="print the files instead of installing")
    service.add_argument("--config", type=Path, help="config for the service (default: the user config)")
    service.add_argument("--socket", type=Path, help="socket path (default: the runtime dir)")
    service.add_argument(
        "--socket-activation", action="store_true", help="also install mcpd.socket (systemd)"
    )
    report = commands.add_parser("report", parents=[common], help="tool usage and missing capabilities")
    report.add_argument("--since", help="only this recent: 90s, 15m, 12h, 7d (default: all retained)")
    report.add_argument("--top", type=int, default=20, help="how many capability groups (default 20)")
    report.set_defaults(run=cmd_report)
    commands.add_parser("reload", parents=[common], help="re-read the config and apply changes").set_defaults(
        run=cmd_reload
    )
    return parser


def _fail(args: argparse.Namespace, error: McpdError | UsageError, code: int) -> int:
    if getattr(args, "json", False) and isinstance(error, McpdError):
        _emit_json({"error": {"code": error.code, "type": type(error).__name__, "message": error.message}})
    print(f"mcpd: {error}", file=sys.stderr)
    return code


def run_client_command(args: argparse.Namespace) -> int:
    command: Callable[[argparse.Namespace, Client], int] = args.run
    try:
        if args.autostart:
            from mcpd.client.autostart import ensure_daemon

            ensure_daemon(args.socket)
        with Client(args.socket, name=f"mcpd-cli/{args.command}") as client:
            return command(args, client)
    except DaemonNotRunning as exc:
        return _fail(args, exc, EXIT_NO_DAEMON)
    except UsageError as exc:
        return _fail(args, exc, EXIT_USAGE)
    except McpdError as exc:
        return _fail(args, exc, EXIT_ERROR)


def _bridge(args: argparse.Namespace) -> int:
    from mcpd.bridge import run_bridge

    try:
        return run_bridge(
            args.socket,
            config=args.config,
            preconnect=args.connect,
            expose_all=args.all,
            autostart=not args.no_autostart,
        )
    except McpdError as exc:
        print(f"mcpd bridge: {exc}", file=sys.stderr)
        return EXIT_NO_DAEMON if isinstance(exc, DaemonNotRunning) else EXIT_ERROR


def _check(args: argparse.Namespace) -> int:
    import anyio

    from mcpd.daemon.check import run_check
    from mcpd.daemon.logging import configure_logging

    configure_logging("error", "json")
    try:
        status: int = anyio.run(run_check, args.config, args.json)
    except McpdError as exc:
        print(f"mcpd check: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return status


def _service(args: argparse.Namespace) -> int:
    from mcpd import service

    if args.action == "install":
        paths = service.current_paths(args.config.resolve() if args.config else None, args.socket)
        return service.install(paths, dry_run=args.dry_run, socket_activation=args.socket_activation)
    if args.action == "uninstall":
        return service.uninstall()
    return service.status()


def _serve(args: argparse.Namespace) -> int:
    import anyio

    from mcpd.daemon.app import serve
    from mcpd.daemon.logging import configure_logging

    configure_logging(args.log_level, args.log_format)
    status: int = anyio.run(serve, args.config, args.socket)
    return status


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        sys.exit(_serve(args))
    if args.command == "bridge":
        sys.exit(_bridge(args))
    if args.command == "check":
        sys.exit(_check(args))
    if args.command == "service":
        sys.exit(_service(args))
    sys.exit(run_client_command(args))
