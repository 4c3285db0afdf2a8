"""``mcpd resources``, ``mcpd read URI``, ``mcpd prompts``, ``mcpd prompt NAME``: what servers offer
besides tools, under the names the daemon gives them (``mcpd://server/<uri>``, ``server__prompt``)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from mcpd.cli import output
from mcpd.cli.output import EXIT_OK, clip, emit_json
from mcpd.cli.parsing import Commands, Parser, connected, json_object, seconds
from mcpd.cli.tools import describe_block, raw_bytes
from mcpd.model.resources import ReadResult, ResourceContents
from mcpd.model.servers import ResourceUpdated

if TYPE_CHECKING:
    from mcpd.client import Client


def cmd_resources(args: argparse.Namespace, client: Client) -> int:
    servers = args.server or None
    resources = client.resources(servers)
    templates = client.resource_templates(servers)
    if args.json:
        emit_json({"resources": resources, "templates": templates})
        return EXIT_OK
    rows: list[list[output.Cell]] = [
        [r.uri, r.resource.mime_type or "", clip(r.resource.description or r.resource.name, 50)]
        for r in resources
    ]
    rows += [
        [t.uri_template, t.template.mime_type or "", clip(t.template.description or t.template.name, 50)]
        for t in templates
    ]
    print(output.table(["URI", "MIME", "DESCRIPTION"], rows))
    return EXIT_OK


def _block(contents: ResourceContents) -> dict[str, Any]:
    """One part of a read as an MCP embedded-resource block, to print like a tool's."""
    resource = {
        "uri": contents.uri,
        "mimeType": contents.mime_type,
        "text": contents.text,
        "blob": contents.blob,
    }
    return {"type": "resource", "resource": {k: v for k, v in resource.items() if v is not None}}


def cmd_read(args: argparse.Namespace, client: Client) -> int:
    _write(args, client.read_resource(args.uri, server=args.server, timeout=args.timeout))
    if not args.follow:
        return EXIT_OK
    # Each update: read again and write the new contents (one JSON document per read with --json).
    client.subscribe_resource(args.uri, server=args.server)
    for event in client.events(everything=False):
        if isinstance(event, ResourceUpdated):
            _write(args, client.read_resource(args.uri, server=args.server, timeout=args.timeout))
    return EXIT_OK


def _write(args: argparse.Namespace, result: ReadResult) -> None:
    if args.json:
        emit_json(result)
        sys.stdout.flush()
        return
    blocks = [_block(c) for c in result.contents]
    binary = any(c.blob is not None for c in result.contents)
    if binary and sys.stdout.isatty():
        for block in blocks:
            print(f"[{describe_block(block)}]")
        # As curl does: binary data would garble the terminal; it goes to a file or a pipe.
        print("mcpd: binary content is not written to a terminal; redirect it: > FILE", file=sys.stderr)
        return
    if sys.stdout.isatty():
        # The server's text is shown, not obeyed, on a terminal; piped it stays as the server sent it.
        sys.stdout.write("".join(output.visible(c.text or "") for c in result.contents))
        sys.stdout.flush()
        return
    for block in blocks:
        sys.stdout.buffer.write(raw_bytes(block))
    sys.stdout.buffer.flush()


def cmd_prompts(args: argparse.Namespace, client: Client) -> int:
    prompts = client.prompts()
    if args.json:
        emit_json(prompts)
        return EXIT_OK
    rows: list[list[output.Cell]] = []
    for entry in prompts:
        arguments = " ".join(a.name + ("" if a.required else "?") for a in entry.prompt.arguments or ())
        rows.append([entry.name, arguments, clip(entry.prompt.description or "", 50)])
    print(output.table(["PROMPT", "ARGUMENTS", "DESCRIPTION"], rows))
    return EXIT_OK


def cmd_prompt(args: argparse.Namespace, client: Client) -> int:
    result = client.get_prompt(args.name, args.args, server=args.server, timeout=args.timeout)
    if args.json:
        emit_json(result)
        return EXIT_OK
    for message in result.messages:
        text = message.content.get("text") if message.content.get("type") == "text" else None
        shown = text if isinstance(text, str) else f"[{describe_block(message.content)}]"
        print(f"{message.role}: {output.visible(shown)}")
    return EXIT_OK


def string_map(text: str) -> dict[str, str]:
    """A JSON object of strings: prompt arguments are strings in MCP."""
    value = json_object(text)
    if not all(isinstance(v, str) for v in value.values()):
        raise argparse.ArgumentTypeError('prompt arguments are strings, e.g. \'{"city": "Paris"}\'')
    return value


def register(commands: Commands, common: Parser) -> None:
    resources = commands.add_parser(
        "resources", parents=[common], help="resources and resource templates of the running servers"
    )
    resources.add_argument(
        "--server", action="append", metavar="SERVER", help="only this server (repeatable)"
    )
    resources.set_defaults(run=connected(cmd_resources))

    read = commands.add_parser("read", parents=[common], help="read a resource and write its contents")
    read.add_argument("uri", help="mcpd://SERVER/URI as `mcpd resources` lists it (or URI with --server)")
    read.add_argument("--server", help="the server whose own URI this is")
    read.add_argument("--timeout", type=seconds, help="seconds (default: the server's call_timeout)")
    read.add_argument(
        "-f", "--follow", action="store_true", help="subscribe, and read again at each update (Ctrl-C ends)"
    )
    read.set_defaults(run=connected(cmd_read))

    prompts = commands.add_parser("prompts", parents=[common], help="prompts of the running servers")
    prompts.set_defaults(run=connected(cmd_prompts))

    prompt = commands.add_parser("prompt", parents=[common], help="get a prompt's messages")
    prompt.add_argument("name", help="SERVER__PROMPT as `mcpd prompts` lists it (or PROMPT with --server)")
    prompt.add_argument("--server", help="the server whose own prompt name this is")
    prompt.add_argument(
        "--args", type=string_map, default={}, metavar="JSON", help="arguments, a JSON object"
    )
    prompt.add_argument("--timeout", type=seconds, help="seconds (default: the server's call_timeout)")
    prompt.set_defaults(run=connected(cmd_prompt))
