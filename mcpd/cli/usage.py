"""``mcpd report``: calls, failures and latency per tool, and the most requested missing capabilities."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from mcpd.cli import output
from mcpd.cli.output import EXIT_OK, emit_json
from mcpd.cli.parsing import Commands, Parser, age, bounded_int, connected

if TYPE_CHECKING:
    from mcpd.client import Client


def cmd_report(args: argparse.Namespace, client: Client) -> int:
    report = client.report(args.since, args.top)
    if args.json:
        emit_json(report)
        return EXIT_OK
    rows: list[list[output.Cell]] = [
        [
            t.name,
            str(t.calls),
            (f"{100 * t.failure_rate:.1f}%", "red" if t.failures else None),
            f"{t.p50_ms:.1f}",
            f"{t.p95_ms:.1f}",
            output.clock(t.last_used, date=True),
        ]
        for t in report.tools
    ]
    style = output.Style.of(sys.stdout)
    print(output.table(["TOOL", "CALLS", "FAILED", "P50 MS", "P95 MS", "LAST USED"], rows, style))
    print("\nmissing capabilities (most requested first)")
    if not report.capabilities:
        print("  none recorded")
    for group in report.capabilities:
        others = [e for e in group.examples if e != group.capability]
        also = f"  (also: {'; '.join(others)})" if others else ""
        print(output.visible(f"  {group.count:>4} x {group.capability}{also}"))
    return EXIT_OK


def register(commands: Commands, common: Parser) -> None:
    report = commands.add_parser("report", parents=[common], help="tool usage and missing capabilities")
    report.add_argument(
        "--since", type=age, metavar="AGE", help="only this recent: 90s, 15m, 12h, 7d (default: all retained)"
    )
    report.add_argument(
        "--top",
        type=bounded_int(1000),
        default=20,
        metavar="N",
        help="how many capability groups (default 20)",
    )
    report.set_defaults(run=connected(cmd_report))
