"""``mcpd config check`` and ``mcpd import``: config files, read here, without a daemon.

``config check`` exits 2 when the file cannot be used or any server entry is bad, naming each
problem (as ``nginx -t`` and ``systemd-analyze verify`` do); keys it ignores are listed as notes.
``import`` appends a host's servers to mcpd's TOML and refuses, as ``git`` does, to overwrite
what is already there unless told to skip it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mcpd.cli.output import EXIT_ERROR, EXIT_OK, EXIT_USAGE, emit_json
from mcpd.cli.parsing import Commands


def _quiet_logs() -> None:
    """Ignored keys are shown as notes here; the loader's debug lines would say them twice."""
    from mcpd.daemon.logging import configure_logging

    configure_logging("warning", "console")


def cmd_config_check(args: argparse.Namespace) -> int:
    from mcpd.config.load import load_config

    _quiet_logs()
    config = load_config(args.config)
    status = EXIT_USAGE if config.issues else EXIT_OK
    if args.json:
        emit_json(
            {
                "source": config.source,
                "servers": [s.name for s in config.servers],
                "issues": config.issues,
                "notes": config.notes,
                "ok": not config.issues,
            }
        )
        return status
    for issue in config.issues:
        print(f"error: {issue}", file=sys.stderr)
    for note in config.notes:
        print(f"note: {note}", file=sys.stderr)
    names = ", ".join(s.name for s in config.servers) or "none"
    verdict = "bad" if config.issues else "ok"
    count = f"{len(config.servers)} server(s) ({names}), {len(config.issues)} problem(s)"
    print(f"{config.source}: {verdict}: {count}")
    return status


def cmd_import(args: argparse.Namespace) -> int:
    from mcpd.config.importer import plan_import, write_import
    from mcpd.config.paths import default_config_path

    _quiet_logs()
    target: Path = args.config or default_config_path()
    plan = plan_import(args.file, target)
    refused = bool(plan.existing) and not args.skip_existing
    writes = bool(plan.added) and not refused and not args.dry_run
    for issue in plan.source.issues:
        _say(args, f"not imported: {issue}")
    for note in plan.source.notes:
        _say(args, f"note: {note}")
    if refused:
        names = ", ".join(plan.existing)
        _say(args, f"{target} already configures {names}; nothing written (--skip-existing imports the rest)")
    else:
        for name in plan.existing:
            _say(args, f"skipped {name}: already in {target}")
        if not plan.added:
            _say(args, "no server to import")
    if args.dry_run and not refused and not args.json:
        sys.stdout.write(plan.text)
    created = writes and not target.exists()
    if writes:
        # Before any output: `--json` promises one document, and a failed write is that document.
        write_import(plan)
    if args.json:
        emit_json(
            {
                "target": str(target),
                "added": [s.name for s in plan.added] if not refused else [],
                "existing": plan.existing,
                "issues": plan.source.issues,
                "notes": plan.source.notes,
                "written": writes,
            }
        )
    elif writes:
        names = ", ".join(s.name for s in plan.added)
        print(f"{'created' if created else 'appended to'} {target}: {names}")
        print("run `mcpd reload` (or restart the daemon) to start them")
    # The same status with and without --dry-run: a dry run is how a script asks what would happen.
    return EXIT_ERROR if refused or plan.source.issues else EXIT_OK


def _say(args: argparse.Namespace, line: str) -> None:
    if not args.json:
        print(line, file=sys.stderr)


def register(commands: Commands) -> None:
    config = commands.add_parser("config", help="check a config file (no daemon needed)")
    actions = config.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = actions.add_parser("check", help="validate a config file; exit 2 naming each problem")
    check.add_argument("--config", type=Path, help="the file (default: the user config)")
    check.add_argument("--json", action="store_true", help="print one JSON document")
    check.set_defaults(run=cmd_config_check)

    imported = commands.add_parser(
        "import", help="add the servers of a host's mcpServers JSON file to mcpd's config"
    )
    imported.add_argument("file", type=Path, help="e.g. ~/.cursor/mcp.json, claude_desktop_config.json")
    imported.add_argument("--config", type=Path, help="mcpd's TOML config (default: the user config)")
    imported.add_argument(
        "--skip-existing", action="store_true", help="leave servers already configured alone"
    )
    imported.add_argument("--dry-run", action="store_true", help="print what would be appended")
    imported.add_argument("--json", action="store_true", help="print one JSON document")
    imported.set_defaults(run=cmd_import)
