"""``mcpd completion bash|zsh|fish`` and the hidden ``mcpd __servers`` that the scripts call.

The generator (``mcpd.cli.shells``) is imported only by ``mcpd completion``, so it costs the other
commands nothing at start.
"""

from __future__ import annotations

import argparse
import sys

from mcpd.cli.parsing import Commands
from mcpd.errors import McpdError

SHELLS = ("bash", "zsh", "fish")
SERVERS_COMMAND = "__servers"
"""Hidden: prints the daemon's server names for the completion scripts. Not in the parser, so that
no list of commands (``--help``, an invalid choice's) shows it; ``app.run`` dispatches it."""


def register(commands: Commands, parser: argparse.ArgumentParser) -> None:
    def run(args: argparse.Namespace) -> int:
        from mcpd.cli.shells import script

        sys.stdout.write(script(parser, args.shell))
        return 0

    completion = commands.add_parser(
        "completion",
        help="print a shell completion script: bash, zsh or fish",
        description="Print the completion script for SHELL. bash: `source <(mcpd completion bash)` "
        "in ~/.bashrc; zsh: `mcpd completion zsh > ~/.zfunc/_mcpd` (a directory on $fpath); "
        "fish: `mcpd completion fish > ~/.config/fish/completions/mcpd.fish`.",
    )
    completion.add_argument("shell", choices=SHELLS)
    completion.set_defaults(run=run)


def print_servers() -> int:
    """The configured server names, one a line; nothing at all when no daemon answers."""
    from mcpd.client import Client

    try:
        with Client(name="mcpd-cli/complete") as client:
            names = [s.name for s in client.status()]
    except McpdError:
        return 0
    sys.stdout.write("".join(f"{name}\n" for name in names))
    return 0
