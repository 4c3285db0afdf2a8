"""``mcpd tools [QUERY]``, ``mcpd select QUERY``, ``mcpd call SERVER TOOL``: finding and calling tools."""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
from typing import TYPE_CHECKING, Any

import msgspec

from mcpd.cli import output
from mcpd.cli.output import EXIT_ERROR, EXIT_OK, UsageError, clip, emit_json
from mcpd.cli.parsing import (
    Commands,
    Parser,
    connected,
    fraction,
    json_object,
    nonempty_name,
    positive_int,
    seconds,
)
from mcpd.cli.progress import ProgressBar
from mcpd.model.tools import ToolEntry, ToolResult

if TYPE_CHECKING:
    from mcpd.client import Client


def run_tools(args: argparse.Namespace) -> int:
    # --explain shows the parts of a ranking's scores: without a query nothing is ranked, and the
    # budgeted rendering has no place for them. Said before anything is sent, as for other bad values.
    if args.explain and args.query is None:
        raise UsageError(
            "--explain needs a QUERY: it shows the parts of each ranked tool's score", "mcpd tools"
        )
    if args.explain and args.budget is not None and not args.json:
        raise UsageError("--explain and --budget do not go together (--json shows both)", "mcpd tools")
    return connected(cmd_tools)(args)


def cmd_tools(args: argparse.Namespace, client: Client) -> int:
    # A blank query lists every tool by server, then name; the daemon applies --limit either way.
    result = client.search(
        args.query or "",
        servers=args.server or None,
        limit=args.limit,
        budget_tokens=args.budget,
        explain=args.explain,
    )
    if args.json:
        emit_json(result)
    elif result.rendered is not None:
        sys.stdout.write(output.visible(result.rendered.text))
        print(f"\n(~{result.rendered.tokens} of {args.budget} tokens, estimated)", file=sys.stderr)
    elif args.query is None:
        print(
            output.table(["TOOL", "DESCRIPTION"], [[t.name, clip(t.description, 70)] for t in result.tools])
        )
    else:
        print(_ranked(result.tools, explain=args.explain))
    return EXIT_OK


def _ranked(tools: list[ToolEntry], *, explain: bool) -> str:
    rows: list[list[output.Cell]] = []
    for tool in tools:
        row: list[output.Cell] = [tool.name, f"{tool.score:.3f}" if tool.score is not None else ""]
        if explain:
            # Without recorded usage the daemon sends no parts: the score is the text score alone.
            parts = tool.score_parts or ({"text": tool.score} if tool.score is not None else {})
            row.append(" ".join(f"{k}={v:.3f}" for k, v in parts.items()) or "-")
        row.append(clip(tool.description, 60))
        rows.append(row)
    headers = ["TOOL", "SCORE", *(["PARTS"] if explain else []), "DESCRIPTION"]
    return output.table(headers, rows)


def cmd_select(args: argparse.Namespace, client: Client) -> int:
    result = client.select(args.query, args.threshold)
    if args.json:
        emit_json(result)
        return EXIT_OK
    for name in result.servers:
        score = result.scores.get(name)
        print(f"{name}\t{score:.3f}" if score is not None else name)
    if result.fallback:
        print("(no server stood out: all servers returned)", file=sys.stderr)
    return EXIT_OK


def cmd_call(args: argparse.Namespace, client: Client) -> int:
    with ProgressBar.for_stderr(args.tool) as bar:
        result = client.call_tool(
            args.tool,
            args.args,
            server=args.server,
            timeout=args.timeout,
            query=args.query,
            on_progress=bar.update if bar.enabled else None,
        )
    if args.json:
        # mcpd's own output, not MCP passed on: a boolean a script can compare. The library keeps
        # None (``isError`` left out), which hosts get left out too.
        emit_json(msgspec.structs.replace(result, is_error=bool(result.is_error)))
    elif args.raw and not (sys.stdout.isatty() and any(_binary(b) for b in result.content)):
        for block in result.content:
            sys.stdout.buffer.write(raw_bytes(block))
        sys.stdout.buffer.flush()
    else:
        print_result(result)
        if args.raw:
            # As curl does: binary data would garble the terminal; it goes to a file or a pipe.
            print("mcpd: binary content is not written to a terminal; redirect it: > FILE", file=sys.stderr)
    return EXIT_ERROR if result.is_error else EXIT_OK


def _binary(block: dict[str, Any]) -> bool:
    resource = block.get("resource") or {}
    return block.get("type") in ("image", "audio") or (block.get("type") == "resource" and "blob" in resource)


def print_result(result: ToolResult) -> None:
    """Text as text; any other block as one line saying what it is (type, MIME, size)."""
    for block in result.content:
        text = block.get("text") if block.get("type") == "text" else None
        print(output.visible(text) if isinstance(text, str) else f"[{describe_block(block)}]")
    if not result.content and result.structured_content is not None:
        print(output.visible(json.dumps(result.structured_content, indent=2, ensure_ascii=False)))


def describe_block(block: dict[str, Any]) -> str:
    """``image image/png, 12.3 KiB``, ``resource file:///x (text/plain), 40 B``, ``resource_link ...``,
    control characters visible: the type, URI and MIME type are the server's words."""
    return output.visible(_summary(block))


def _summary(block: dict[str, Any]) -> str:
    kind = str(block.get("type", "unknown"))
    if kind in ("image", "audio"):
        return f"{kind} {block.get('mimeType', '?')}, {output.size(len(_decoded(block.get('data'))))}"
    if kind == "resource":
        resource = block.get("resource") or {}
        mime = f" ({resource['mimeType']})" if resource.get("mimeType") else ""
        body = resource.get("text")
        length = len(body.encode()) if isinstance(body, str) else len(_decoded(resource.get("blob")))
        return f"resource {resource.get('uri', '?')}{mime}, {output.size(length)}"
    if kind == "resource_link":
        mime = f" ({block['mimeType']})" if block.get("mimeType") else ""
        return f"resource_link {block.get('uri', '?')}{mime}"
    return f"{kind} block: use --json to see it"


def raw_bytes(block: dict[str, Any]) -> bytes:
    """A block's content as is: text encoded as UTF-8, binary data decoded from base64."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", "")).encode()
    if kind in ("image", "audio"):
        return _decoded(block.get("data"))
    if kind == "resource":
        resource = block.get("resource") or {}
        if isinstance(resource.get("text"), str):
            return str(resource["text"]).encode()
        return _decoded(resource.get("blob"))
    return (json.dumps(block, ensure_ascii=False) + "\n").encode()


def _decoded(data: object) -> bytes:
    if not isinstance(data, str):
        return b""
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return data.encode()


def register(commands: Commands, common: Parser) -> None:
    tools = commands.add_parser(
        "tools", parents=[common], help="tools of the running servers, or those for a query"
    )
    tools.add_argument("query", nargs="?", help="rank tools by relevance to this text")
    tools.add_argument("--server", action="append", metavar="SERVER", help="only this server (repeatable)")
    tools.add_argument(
        "--limit", type=positive_int, metavar="N", help="at most N tools (the reserved tool counts)"
    )
    tools.add_argument(
        "--budget", type=positive_int, metavar="TOKENS", help="render for a model's context within TOKENS"
    )
    tools.add_argument("--explain", action="store_true", help="show the parts of each score")
    tools.set_defaults(run=run_tools)

    select = commands.add_parser(
        "select", parents=[common], help="servers relevant to a query (compatible mode)"
    )
    select.add_argument("query")
    select.add_argument("--threshold", type=fraction, help="minimum TF-cosine score, 0 to 1 (default 0.05)")
    select.set_defaults(run=connected(cmd_select))

    call = commands.add_parser("call", parents=[common], help="call a tool and print its result")
    call.add_argument("server", type=nonempty_name, help="server name")
    call.add_argument("tool", type=nonempty_name, help="tool name, as the server calls it")
    call.add_argument("--args", type=json_object, default={}, metavar="JSON", help="arguments, a JSON object")
    call.add_argument("--timeout", type=seconds, help="seconds (default: the server's call_timeout)")
    call.add_argument("--query", help="the user request behind this call (ranking learns from it)")
    call.add_argument(
        "--raw", action="store_true", help="write every block as is (binary decoded) to stdout, for a file"
    )
    call.set_defaults(run=connected(cmd_call))
