"""Dump the tools of the real MCP servers installed for the compat sweep into tools.jsonl.

Run once, by hand (the packages are installed locally; nothing is fetched):
``python bench/realcat/dump.py > bench/realcat/tools.jsonl``. Each server is started over stdio,
initialised, asked for ``tools/list`` (every page), and stopped.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
from typing import Any

NPM = "/tmp/compat-peers/npm/node_modules"
VENV = "/tmp/compat-peers/venv/bin"
GITHUB = "/root/.npm/_npx/3dfbf5a9eea4a1b3/node_modules/@modelcontextprotocol/server-github/dist/index.js"
ROOT = tempfile.mkdtemp(prefix="realcat-")

SERVERS: dict[str, list[str]] = {
    "memory": ["node", f"{NPM}/@modelcontextprotocol/server-memory/dist/index.js"],
    "sequential-thinking": ["node", f"{NPM}/@modelcontextprotocol/server-sequential-thinking/dist/index.js"],
    "github": ["node", GITHUB],
    "filesystem": ["node", f"{NPM}/@modelcontextprotocol/server-filesystem/dist/index.js", ROOT],
    "everything": ["node", f"{NPM}/@modelcontextprotocol/server-everything/dist/index.js"],
    "puppeteer": ["node", f"{NPM}/@modelcontextprotocol/server-puppeteer/dist/index.js"],
    "playwright": ["node", f"{NPM}/@playwright/mcp/cli.js"],
    "git": [f"{VENV}/mcp-server-git"],
    "fetch": [f"{VENV}/mcp-server-fetch"],
    "time": ["/work/main/.venv/bin/mcp-server-time"],
}
TIMEOUT = 30.0


def _reply(proc: subprocess.Popen[bytes], request_id: int) -> dict[str, Any]:
    assert proc.stdout is not None
    while True:
        ready, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
        if not ready:
            raise TimeoutError(f"no reply to request {request_id}")
        line = proc.stdout.readline()
        if not line:
            raise EOFError("server closed its output")
        try:
            message = json.loads(line)
        except ValueError:
            continue  # a log line on stdout
        if message.get("id") == request_id:
            return dict(message)


def _send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
    proc.stdin.flush()


def tools_of(command: list[str]) -> list[dict[str, Any]]:
    env = {**os.environ, "GITHUB_PERSONAL_ACCESS_TOKEN": "unused"}
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    try:
        client = {"name": "realcat-dump", "version": "1"}
        _send(
            proc,
            {
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client},
            },
        )
        _reply(proc, 1)
        _send(proc, {"method": "notifications/initialized"})
        tools: list[dict[str, Any]] = []
        cursor = None
        request_id = 2
        while True:
            _send(
                proc,
                {"id": request_id, "method": "tools/list", "params": {"cursor": cursor} if cursor else {}},
            )
            result = _reply(proc, request_id)["result"]
            tools.extend(result["tools"])
            cursor = result.get("nextCursor")
            request_id += 1
            if not cursor:
                return tools
    finally:
        proc.kill()
        proc.wait(TIMEOUT)


def main() -> None:
    for server, command in SERVERS.items():
        for tool in tools_of(command):
            row = {
                "server": server,
                "tool": tool["name"],
                "description": tool.get("description") or "",
                "input_schema": tool.get("inputSchema"),
            }
            print(json.dumps(row, ensure_ascii=False))
        print(server, file=sys.stderr)


if __name__ == "__main__":
    main()
