"""The whole command line: every command's parser, and the one place errors become exit statuses."""

from __future__ import annotations

import argparse
import os
import sys

from mcpd.cli import completion, config, local, logs, output, servers, surface, tools, top, trust, usage
from mcpd.cli.output import EXIT_BROKEN_PIPE, EXIT_OK, Interrupted
from mcpd.cli.parsing import Parser, client_options
from mcpd.errors import McpdError


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="mcpd", description="Supervise MCP servers and share them with every agent.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = client_options()
    servers.register(commands, common)
    top.register(commands, common)
    tools.register(commands, common)
    surface.register(commands, common)
    usage.register(commands, common)
    trust.register(commands, common)
    logs.register(commands, common)
    config.register(commands)
    local.register(commands)
    completion.register(commands, parser)
    return parser


def _wants_json(argv: list[str]) -> bool:
    """``--json`` anywhere before a ``--``: known before parsing, so usage errors are JSON too."""
    words = argv[: argv.index("--")] if "--" in argv else argv
    return "--json" in words


def run(argv: list[str]) -> int:
    as_json = _wants_json(argv)
    try:
        args = build_parser().parse_args(argv)
        status: int = args.run(args)
    except (McpdError, output.UsageError) as exc:
        return output.report(exc, as_json=as_json)
    except KeyboardInterrupt:
        return output.report(Interrupted("interrupted"), as_json=as_json)
    except (BrokenPipeError, SystemExit):
        raise
    except Exception as exc:
        return output.report(output.InternalError.of(exc), as_json=as_json)
    return status


def main(argv: list[str] | None = None) -> None:
    try:
        status = run(sys.argv[1:] if argv is None else argv)
        sys.stdout.flush()  # inside the try: a reader that went away is noticed here, not at exit
    except BrokenPipeError:
        # `mcpd ... | head`: the reader has all it wanted. Point stdout at /dev/null so that
        # Python's final flush stays quiet too, and end as a process killed by SIGPIPE would.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        status = output.EXIT_INTERRUPTED
    sys.exit(status if status is not None else EXIT_OK)
