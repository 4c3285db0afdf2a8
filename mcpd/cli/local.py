"""Commands that run here rather than ask a daemon: ``check``, ``service``, ``token`` (and ``serve``
and ``bridge``, whose options live in ``mcpd.cli.serve`` and ``mcpd.cli.bridge``).

Each imports what it runs only when it runs, so ``mcpd status`` never pays for the mcp SDK.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

from mcpd.cli import bridge, serve
from mcpd.cli.output import emit_json, visible
from mcpd.cli.parsing import Commands, socket_path
from mcpd.errors import ConfigError
from mcpd.model.trust import describe


def cmd_check(args: argparse.Namespace) -> int:
    import anyio

    from mcpd.daemon.check import run_check_unless_stopped
    from mcpd.daemon.logging import configure_logging

    configure_logging("error", "json")
    report = anyio.run(run_check_unless_stopped, args.config)
    if isinstance(report, signal.Signals):
        return 128 + report
    if args.json:
        emit_json(report)
        return report.exit_status()
    for issue in report.issues:
        print(visible(f"error: {issue}"), file=sys.stderr)
    # The servers' own words (how they failed, the excerpts the verifier quotes): shown, not obeyed.
    for result in report.servers:
        if result.initialized:
            print(visible(f"{result.server}: {result.tools} tools, {len(result.findings)} finding(s)"))
        else:
            state = f"({result.state}): {result.error}"
            print(visible(f"{result.server}: NOT CHECKED, never initialised {state}"))
        for finding in result.findings:
            print(f"  {visible(describe(finding))}")
    return report.exit_status()


@contextlib.contextmanager
def _files_named() -> Iterator[None]:
    """A file the command cannot write (a read-only directory, a full disk) is the user's to fix:
    said as such, naming it, not as an internal error."""
    try:
        yield
    except OSError as exc:
        raise ConfigError(f"{exc.filename or 'a file'}: {exc.strerror or exc}") from None


def cmd_service(args: argparse.Namespace) -> int:
    from mcpd import service

    with _files_named():
        if args.action == "install":
            paths = service.current_paths(args.config, args.socket)
            return service.install(paths, dry_run=args.dry_run, socket_activation=args.socket_activation)
        if args.action == "uninstall":
            return service.uninstall()
        return service.status()


def cmd_token(args: argparse.Namespace) -> int:
    from mcpd.front.http.token import configured_token

    with _files_named():
        path, token = configured_token(args.config)
    if args.path:
        print(path)
    else:
        print(token)
    return 0


def register(commands: Commands) -> None:
    serve.register(commands)
    bridge.register(commands)

    check = commands.add_parser("check", help="start the configured servers once and run the verifier")
    check.add_argument("--config", type=Path, help="config file (default: the user config, else the demo)")
    check.add_argument("--json", action="store_true", help="print one JSON document")
    check.set_defaults(run=cmd_check)

    token = commands.add_parser("token", help="print the HTTP front end's bearer token (made if missing)")
    token.add_argument("--config", type=Path, help="the daemon's config (for [daemon] http_token_file)")
    token.add_argument("--path", action="store_true", help="print the token file's path instead")
    token.set_defaults(run=cmd_token)

    service = commands.add_parser("service", help="run mcpd as a systemd user service or launchd agent")
    service.add_argument("action", choices=["install", "uninstall", "status"])
    service.add_argument("--dry-run", action="store_true", help="print the files instead of installing")
    service.add_argument("--config", type=Path, help="config for the service (default: the user config)")
    service.add_argument(
        "--socket", type=socket_path, help="socket path (default: $MCPD_SOCKET or the runtime dir)"
    )
    service.add_argument(
        "--socket-activation", action="store_true", help="also install mcpd.socket (systemd)"
    )
    service.set_defaults(run=cmd_service)
