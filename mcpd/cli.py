"""The ``mcpd`` command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcpd", description="Supervise MCP servers and share them with every agent."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser("serve", help="run the daemon in the foreground")
    serve.add_argument(
        "--config", type=Path, help="config file (TOML, or mcpServers JSON); default: user config dir"
    )
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument("--log-format", default="auto", choices=["auto", "json", "console"])
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        import anyio

        from mcpd.daemon.app import serve
        from mcpd.daemon.logging import configure_logging

        configure_logging(args.log_level, args.log_format)
        sys.exit(anyio.run(serve, args.config))


if __name__ == "__main__":
    main()
