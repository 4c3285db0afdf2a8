"""``mcpd serve``: the daemon in the foreground.

Its options live here so that ``mcpd serve`` parses them on their own (``main``), as ``mcpd bridge``
does, rather than build the parser of every command first: the daemon spawns its first child only
once its code is imported, and the whole command line was a tenth of that code.
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from mcpd.cli import output
from mcpd.cli.parsing import Parser, socket_path

if TYPE_CHECKING:
    from mcpd.cli.parsing import Commands

HELP = "run the daemon in the foreground"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=Path, help="config file (TOML, or mcpServers JSON); default: user config dir"
    )
    parser.add_argument(
        "--socket", type=socket_path, help="socket to listen on (default: $MCPD_SOCKET or the runtime dir)"
    )
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="also serve hosts over MCP Streamable HTTP at http://HOST:PORT/mcp ([daemon] http)",
    )
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-format", default="auto", choices=["auto", "json", "console"])
    parser.set_defaults(run=run)


def register(commands: Commands) -> None:
    add_arguments(commands.add_parser("serve", help=HELP))


def run(args: argparse.Namespace) -> int:
    # A SIGHUP (a reload) while the daemon loads its code, before it reads its config and catches
    # signals (``serve``), would kill it by default: ignored, as the config is read after it anyway.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    import anyio

    from mcpd.daemon.app import serve
    from mcpd.daemon.logging import configure_logging

    configure_logging(args.log_level, args.log_format)
    status: int = anyio.run(serve, args.config, args.socket, args.http)
    return status


def main(argv: list[str]) -> int:
    """``mcpd serve ARGV``: usage errors exit 2 with one line (a JSON document with ``--json``, which
    serve takes no more than before it parsed its own options), the others as every command's do."""
    parser = Parser(prog="mcpd serve", description=HELP)
    add_arguments(parser)
    return output.reported(lambda: run(parser.parse_args(argv)), as_json=output.wants_json(argv))
