"""``mcpd diff SERVER``, ``mcpd approve SERVER [TOOL]``: review and accept tools the trust gate holds back."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from mcpd.cli.output import EXIT_ERROR, EXIT_OK, emit_json, visible
from mcpd.cli.parsing import Commands, Parser, connected, nonempty_name
from mcpd.model.trust import describe

if TYPE_CHECKING:
    from mcpd.client import Client


def cmd_approve(args: argparse.Namespace, client: Client) -> int:
    """Exit 0 when what was accepted is saved (or will be, once a retrying store can be written);
    1 when it holds for the daemon's run only (the usage store is off or read-only)."""
    result = client.approve(args.server, args.tool)
    status = EXIT_ERROR if result.not_saved and not result.pending else EXIT_OK
    if args.json:
        emit_json(result)
        return status
    if result.approved:
        print(visible(f"approved: {', '.join(result.approved)}"))  # tool names as the server gave them
    if result.findings:
        print(visible(f"findings accepted: {', '.join(result.findings)}"))
    if not (result.approved or result.findings):
        if args.tool is not None and result.already_approved:
            print(visible(f"already approved: {', '.join(result.already_approved)}"))
        else:
            print("nothing was waiting for approval")
    if result.not_saved:
        if result.pending:
            said = f"not saved yet ({result.not_saved}): it is written once the usage store can be"
        else:
            said = f"not saved ({result.not_saved}): it holds until the daemon stops"
        print(visible(f"mcpd approve: {said}"), file=sys.stderr)
    return status


def cmd_diff(args: argparse.Namespace, client: Client) -> int:
    result = client.trust(args.server)
    if args.json:
        emit_json(result)
        return EXIT_OK
    print(visible(f"{result.server}: {result.summary or 'nothing held back'}"))
    for change in result.changes:
        changed = f": {', '.join(change.fields)}" if change.fields else ""
        print(visible(f"\n{change.tool} ({change.reason}{changed})"))
        print(visible(change.diff))
    for finding in result.findings:
        print(f"  {visible(describe(finding))}")
    return EXIT_OK


def register(commands: Commands, common: Parser) -> None:
    approve = commands.add_parser("approve", parents=[common], help="accept changed or new tools of a server")
    approve.add_argument("server", type=nonempty_name)
    approve.add_argument("tool", nargs="?", type=nonempty_name, help="only this tool")
    approve.set_defaults(run=connected(cmd_approve))
    diff = commands.add_parser(
        "diff", parents=[common], help="what changed in a server's tools since approval"
    )
    diff.add_argument("server", type=nonempty_name)
    diff.set_defaults(run=connected(cmd_diff))
