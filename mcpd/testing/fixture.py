"""A configurable MCP server for tests, benchmarks and users' own experiments.

Run ``python -m mcpd.testing.fixture --help``. Its flags make it misbehave on purpose: hang in
``initialize``, die, freeze, answer slowly, print garbage on stdout, expose no tools. With ``--sdk``
(and always over HTTP) it is written with the mcp SDK (``mcpd.testing.fixture_sdk``), so it behaves as
a server built on it does; without, the same tools answer the same way from plain Python
(``mcpd.testing.fixture_plain``), which starts in a tenth of the CPU time: for a test of what mcpd does
with a server, not of how it gets on with the SDK's.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from typing import Any


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m mcpd.testing.fixture", description=__doc__)
    parser.add_argument("--name", default="fixture", help="server name reported in serverInfo")
    parser.add_argument("--tools", type=int, default=3, help="number of generic tools tool_0..tool_N-1")
    parser.add_argument("--no-control", action="store_true", help="omit echo/fail/sleep/crash/add_tool")
    parser.add_argument("--instructions", default=None, help="instructions sent in initialize")
    parser.add_argument("--sdk", action="store_true", help="serve through the mcp SDK (~1 s of CPU to start)")
    parser.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="http: served by the SDK, as with --sdk",
    )
    parser.add_argument("--port", type=int, default=0, help="loopback port for --transport http")
    parser.add_argument("--hang-initialize", action="store_true", help="never answer initialize")
    parser.add_argument("--exit-after", type=int, default=0, metavar="K", help="exit(3) on the K-th call")
    parser.add_argument(
        "--freeze-after", type=int, default=0, metavar="K", help="stop answering anything after K calls"
    )
    parser.add_argument(
        "--close-stdout-after",
        type=int,
        default=0,
        metavar="K",
        help="on the K-th call, close stdout (answers go nowhere) and keep running",
    )
    parser.add_argument(
        "--die-after", type=float, default=None, metavar="S", help="exit(1) S seconds after start"
    )
    parser.add_argument(
        "--slow", type=float, default=0.0, metavar="S", help="every tool call sleeps S seconds"
    )
    parser.add_argument("--garbage-stdout", action="store_true", help="print non-JSON lines on stdout first")
    parser.add_argument(
        "--stderr-lines", type=int, default=0, metavar="N", help="write N lines to stderr at start"
    )
    parser.add_argument("--stderr-text", default=None, help="write TEXT as one line to stderr at start")
    parser.add_argument("--ignore-sigterm", action="store_true", help="survive SIGTERM (needs SIGKILL)")
    parser.add_argument(
        "--poisoned", action="store_true", help="add tools whose texts carry injection attempts"
    )
    parser.add_argument(
        "--echo-description", default=None, help="replace the echo tool's description (rug pull)"
    )
    parser.add_argument(
        "--hostile-text",
        default=None,
        metavar="TEXT",
        help="send TEXT where else a server's words reach people: the text resource fixture://hostile, "
        "progress messages, and the URI and MIME type of the hostile_link tool's resource_link",
    )
    return parser.parse_args(argv)


def _misbehave_at_start(args: argparse.Namespace) -> None:
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for line in range(args.stderr_lines):
        print(f"fixture {args.name} stderr line {line}", file=sys.stderr, flush=True)
    if args.stderr_text is not None:
        print(args.stderr_text, file=sys.stderr, flush=True)
    if args.garbage_stdout:
        print("this is not JSON-RPC", flush=True)
        print("{not json either", flush=True)
    if args.die_after is not None:
        # A timer thread, because the server's own loop may be blocked by another misbehaviour.
        timer = threading.Timer(args.die_after, os._exit, args=(1,))
        timer.daemon = True
        timer.start()
    if args.hang_initialize:
        # Alive, reading nothing: the client's initialize must time out.
        time.sleep(3600)


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    _misbehave_at_start(args)
    if not (args.sdk or args.transport == "http"):
        from mcpd.testing.fixture_plain import serve  # noqa: PLC0415

        serve(args)
        return
    # The SDK only now: importing it costs ~1 s of CPU, which a server that hangs in initialize (or
    # dies first) never uses, and tests start many of those.
    from mcpd.testing.fixture_sdk import build_server  # noqa: PLC0415

    server = build_server(args)
    if args.transport == "stdio":
        server.run("stdio")
        return
    kwargs: dict[str, Any] = {"host": "127.0.0.1", "port": args.port}
    server.run("streamable-http", **kwargs)


if __name__ == "__main__":
    main()
