"""What a server's huge stdout lines leave in the daemon's memory.

Run ``python bench/stdout_memory.py``. A daemon serves one scripted server whose one tool writes
``--lines`` lines of ``--mib`` MiB on its stdout before it answers: text that is not JSON-RPC, then
as many log messages of that size (``notifications/message``). The script prints the daemon's RSS
before the calls, at their peak, and once the daemon has been idle for ``--settle`` seconds
(target: back within 20% of before). Asserts nothing: the figures are for people.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import anyio

from mcpd.client.aio import connect
from mcpd.testing import rss_mib
from mcpd.testing.daemon import running_daemon

SERVER = """
import json, sys

def send(message):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\\n")
    sys.stdout.flush()

size = int(float(sys.argv[1]) * 1024 * 1024)
tool = {"name": "big", "inputSchema": {"type": "object"}}
for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    if method == "initialize":
        info = {"name": "big", "version": "1"}
        result = {"protocolVersion": "2025-06-18", "capabilities": {"logging": {}}, "serverInfo": info}
        send({"id": message["id"], "result": result})
    elif method == "tools/list":
        send({"id": message["id"], "result": {"tools": [tool]}})
    elif method == "tools/call":
        if message["params"]["arguments"].get("log"):
            send({"method": "notifications/message", "params": {"level": "info", "data": "x" * size}})
        else:
            sys.stdout.write("x" * size + "\\n")
        send({"id": message["id"], "result": {"content": [{"type": "text", "text": "done"}]}})
"""


async def watch_rss(pid: int, peak: list[float]) -> None:
    while True:
        peak[0] = max(peak[0], rss_mib(pid))
        await anyio.sleep(0.02)


async def main(lines: int, mib: float, settle: float) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="mcpd-bench-"))
    try:
        (workdir / "server.py").write_text(SERVER)
        args = [str(workdir / "server.py"), str(mib)]
        (workdir / "config.toml").write_text(
            f"[servers.big]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps(args)}\n"
        )
        async with (
            running_daemon(workdir / "config.toml") as daemon,
            connect(daemon.socket, name="bench") as client,
        ):
            pid = daemon.process.pid
            await anyio.sleep(settle)
            before, peak = rss_mib(pid), [0.0]
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch_rss, pid, peak)
                for log in (False, True):
                    for _ in range(lines):
                        await client.call_tool("big__big", {"log": log}, timeout=120)
                await anyio.sleep(settle)
                tg.cancel_scope.cancel()
            after = rss_mib(pid)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    change = (after - before) / before * 100
    print(f"{lines} lines of text and {lines} log messages of {mib:g} MiB on a server's stdout")
    print(
        f"daemon RSS: before {before:.1f} MiB, peak {peak[0]:.1f} MiB, after {settle:g} s idle "
        f"{after:.1f} MiB ({change:+.0f}%; target within 20%)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=3)
    parser.add_argument("--mib", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=5.0)
    options = parser.parse_args()
    anyio.run(main, options.lines, options.mib, options.settle)
