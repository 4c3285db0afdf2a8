"""``mcpd diff SERVER``, ``mcpd approve SERVER [TOOL]``: review and accept tools the trust gate holds back."""

from __future__ import annotations

import argparse

from mcpd.cli.output import EXIT_OK, emit_json, visible
from mcpd.cli.parsing import Commands, Parser, connected, nonempty_name
from mcpd.client import Client
from mcpd.model.trust import describe


def cmd_approve(args: argparse.Namespace, client: Client) -> int:
    result = client.approve(args.server, args.tool)
    if args.json:
        emit_json(result)
    elif result.approved or result.findings:
        if result.approved:
            print(visible(f"approved: {', '.join(result.approved)}"))  # tool names as the server gave them
        if result.findings:
            print(visible(f"findings accepted: {', '.join(result.findings)}"))
    else:
        print("nothing was waiting for approval")
    return EXIT_OK


def cmd_diff(args: argparse.Namespace, client: Client) -> int:
    result = client.trust(args.server)
    if args.json:
        emit_json(result)
        return EXIT_OK
    print(visible(f"{result.server}: {result.summary or 'nothing held back'}"))
    for change in result.changes:
        print(visible(f"\n{change.tool} ({change.reason})"))
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
