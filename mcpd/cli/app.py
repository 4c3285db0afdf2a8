"""The whole command line: every command's parser, and the one place errors become exit statuses."""

from __future__ import annotations

import argparse

from mcpd.cli import completion, config, local, logs, output, servers, surface, tools, top, trust, usage
from mcpd.cli.output import UsageError
from mcpd.cli.parsing import Parser, client_options


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
    for command in commands.choices.values():
        # An argument no command takes is said with the help of the command it was given to.
        command.set_defaults(usage_prog=command.prog)
    return parser


def run(argv: list[str]) -> int:
    if argv[:1] == [completion.SERVERS_COMMAND]:
        return output.reported(completion.print_servers, as_json=False)

    def parse_and_run() -> int:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
        if extra:
            # Its --help lists what the command takes: the top one's lists only the commands.
            raise UsageError(f"unrecognized arguments: {' '.join(extra)}", args.usage_prog)
        status: int = args.run(args)
        return status

    return output.reported(parse_and_run, as_json=output.wants_json(argv))
