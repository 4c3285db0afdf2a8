"""``mcpd bridge``: its options, and a way in that loads nothing else of the command line."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from mcpd.cli import output

if TYPE_CHECKING:
    from mcpd.cli.parsing import Commands

HELP = "serve MCP on stdio for a host, through the daemon"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--socket", help="daemon socket (default: $MCPD_SOCKET or the runtime dir)")
    parser.add_argument("--config", help="config for a daemon this bridge has to start")
    parser.add_argument(
        "--connect", action="append", default=[], metavar="SERVER", help="pre-connect a server"
    )
    parser.add_argument(
        "--all", action="store_true", help="expose every tool (for hosts ignoring list_changed)"
    )
    parser.add_argument("--no-autostart", action="store_true", help="fail instead of starting a daemon")
    parser.set_defaults(run=run)


def register(commands: Commands) -> None:
    add_arguments(commands.add_parser("bridge", help=HELP))


def run(args: argparse.Namespace) -> int:
    # Python leaves sys.stdin None when descriptor 0 was closed at its start; later the daemon's
    # socket would be given that descriptor and read as the host. (A closed stdout is /dev/null
    # by now, ``streams``: the answers go nowhere, as asked.)
    if sys.stdin is None:
        raise output.UsageError(
            "its stdin is closed: a host runs `mcpd bridge` with pipes as stdin and stdout, the MCP channel",
            "mcpd bridge",
        )
    # A plain relay: no event loop, no logging set-up, nothing on stdout but the MCP channel.
    from mcpd.bridge import run_bridge

    return run_bridge(
        args.socket,
        config=args.config,
        preconnect=args.connect,
        expose_all=args.all,
        autostart=not args.no_autostart,
    )


def _formatter(prog: str) -> argparse.HelpFormatter:
    # argparse's own sizes itself with shutil, which brings bz2 and lzma (0.7 MB), and it makes
    # a formatter for every option added: the bridge would carry them for the host's lifetime.
    try:
        columns = os.get_terminal_size(1).columns
    except OSError:
        columns = 80
    return argparse.HelpFormatter(prog, width=columns - 2)  # argparse's own margin


def main(argv: list[str]) -> int:
    """``mcpd bridge ARGV``: usage errors exit 2 (argparse), the others as every command's do."""
    parser = argparse.ArgumentParser(prog="mcpd bridge", description=HELP, formatter_class=_formatter)
    add_arguments(parser)
    args = parser.parse_args(argv)
    return output.reported(lambda: run(args), as_json=False)
