"""``mcpd logs SERVER [-f] [-n N]``: a server's stderr lines and MCP log messages.

As ``docker logs`` and ``kubectl logs`` do, it prints everything the daemon keeps (its ring
holds at most 1,000 lines and 256 KiB per server, across restarts) unless ``-n`` says how
many of the latest; ``-f`` then waits for new lines until Ctrl-C (exit 130). Each line shows
when the daemon received it, then ``stderr``, ``stdout`` (a line mcpd could not use) or the
message's MCP level (and ``[logger]``).
A jump in the entries' numbers (lines the ring dropped before a slow reader saw them) is shown
as one ``-- N lines skipped --`` line. ``--json`` prints ``{"server", "entries"}``, or with
``-f`` one JSON object per entry (JSON lines, as ``mcpd top --json`` does).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from mcpd.cli.output import EXIT_OK, Style, emit_json, visible
from mcpd.cli.parsing import Commands, Parser, connected, count, nonempty_name
from mcpd.model.logs import LogEntry

if TYPE_CHECKING:
    from mcpd.client import Client

_LEVEL_COLOURS = {
    "debug": "dim",
    "notice": "blue",
    "warning": "yellow",
    "error": "red",
    "critical": "red",
    "alert": "red",
    "emergency": "red",
}


def stamp(ts: float) -> str:
    """Local time to the millisecond: ``2026-11-22 11:20:01.123``."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) + f".{int(ts % 1 * 1000):03d}"


def line(entry: LogEntry, style: Style) -> str:
    """One entry as ``mcpd logs`` prints it."""
    kind = entry.level or entry.source
    colour = "dim" if entry.level is None else _LEVEL_COLOURS.get(kind)
    logger = f"[{visible(entry.logger)}] " if entry.logger else ""
    return f"{style(stamp(entry.ts), 'dim')} {style(f'{kind:<7}', colour)} {logger}{visible(entry.text)}"


class Printer:
    """Prints entries in order, with a marker where numbers jump."""

    def __init__(self, style: Style) -> None:
        self.style = style
        self.next_seq: int | None = None

    def __call__(self, entry: LogEntry) -> None:
        if self.next_seq is not None and entry.seq > self.next_seq:
            print(self.style(f"-- {entry.seq - self.next_seq} lines skipped --", "dim"))
        self.next_seq = entry.seq + 1
        print(line(entry, self.style))


def cmd_logs(args: argparse.Namespace, client: Client) -> int:
    if not args.follow:
        entries = client.logs(args.server, args.lines)
        if args.json:
            emit_json({"server": args.server, "entries": entries})
            return EXIT_OK
        show = Printer(Style.of(sys.stdout))
        for entry in entries:
            show(entry)
        return EXIT_OK
    show = Printer(Style.of(sys.stdout))
    for entry in client.follow_logs(args.server, args.lines):
        if args.json:
            emit_json(entry)
        else:
            show(entry)
        sys.stdout.flush()
    if not args.json:  # with --json, stderr stays empty: the stream's end (exit 0) says it
        print(f"mcpd: {args.server} was removed from the config; no more lines will come", file=sys.stderr)
    return EXIT_OK


def register(commands: Commands, common: Parser) -> None:
    logs = commands.add_parser(
        "logs",
        parents=[common],
        help="a server's stderr lines and MCP log messages (-f follows)",
        description="Print the server's latest stderr lines and MCP log messages, oldest first: all "
        "the daemon keeps (at most 1,000 lines and 256 KiB, across restarts) unless -n says how many.",
    )
    logs.add_argument("server", type=nonempty_name, help="server name")
    logs.add_argument("-f", "--follow", action="store_true", help="then print new lines as they come")
    logs.add_argument(
        "-n", "--lines", type=count, metavar="N", help="only the latest N lines (default: all kept)"
    )
    logs.set_defaults(run=connected(cmd_logs))
