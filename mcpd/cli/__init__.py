"""The ``mcpd`` command line: a thin front end over ``mcpd.client``.

One module per group of commands, each with its parser, its request and its output together
(as circus does): ``servers`` (status, start, stop, restart, reload), ``top`` (the live view),
``tools`` (tools, select, call), ``surface`` (resources, read, prompts, prompt), ``usage``
(report), ``trust`` (diff, approve), ``config`` (config check, import), ``local`` (serve,
check, service, token), ``bridge``, ``logs`` (a server's log) and ``completion``. ``app``
builds the parser and runs a command; ``output`` holds what they print with and the exit statuses;
``parsing`` the parser and the checks of option values.

No traceback reaches the user: errors are one line on stderr, or with ``--json`` one JSON
document on stdout; Ctrl-C and a closed pipe end quietly with the statuses a shell expects.
"""

from __future__ import annotations

import sys

from mcpd.cli import output


def main(argv: list[str] | None = None) -> None:
    words = sys.argv[1:] if argv is None else argv
    if words[:1] == ["bridge"]:
        # A bridge runs beside every host for as long as the host does: it loads its relay and
        # its own options, not the parsers and the client library of every other command.
        from mcpd.cli.bridge import main as bridge

        output.exit_with(lambda: bridge(words[1:]))
    if words[:1] == ["serve"]:
        # The daemon spawns its children once its code is imported: not the parsers of every command.
        from mcpd.cli.serve import main as serve

        output.exit_with(lambda: serve(words[1:]))
    from mcpd.cli.app import run

    output.exit_with(lambda: run(words))
