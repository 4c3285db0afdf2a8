"""Large resources: reading a 10 MB blob through mcpd, and what it costs the daemon's other clients.

Run ``python bench/resources.py``. A daemon serves one fixture server whose resource template
``fixture://bytes/{size}`` returns a blob of that many bytes. One client reads it (``--mb``, 10 by
default) several times through the socket; meanwhile another client calls ``status`` back to back.
Prints the read time (p50, and the same blob read straight from the SDK for scale), and that other
client's ``status`` p50/p99 while the reads run, next to its figures on a quiet daemon (target: p99
<= 50 ms). Asserts nothing: the figures are for people. On a busy machine every figure rises.
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from ipc import percentile, statuses
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpd.client.aio import connect
from mcpd.daemon.logging import configure_logging
from mcpd.testing import fixture_command
from mcpd.testing.daemon import running_daemon


async def main(megabytes: float, reads: int) -> None:
    size = int(megabytes * 1_000_000)
    command, *args = fixture_command("fx", "--tools", "0")
    workdir = Path(tempfile.mkdtemp(prefix="mcpd-bench-", dir="/tmp"))
    config = workdir / "config.toml"
    config.write_text(f"[servers.fx]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n")
    uri = f"fixture://bytes/{size}"
    try:
        async with (
            running_daemon(config) as daemon,
            connect(daemon.socket, name="reader", timeout=120) as reader,
            connect(daemon.socket, name="watcher") as watcher,
            stdio_client(StdioServerParameters(command=command, args=args)) as (read, write),
            ClientSession(read, write) as direct,
        ):
            await direct.initialize()
            quiet = await statuses(watcher, 3.0)

            direct_times = []
            for _ in range(reads):
                start = time.perf_counter()
                await direct.read_resource(uri)
                direct_times.append(time.perf_counter() - start)

            read_times: list[float] = []
            done = anyio.Event()
            loaded: list[float] = []

            async def read_all() -> None:
                for _ in range(reads):
                    start = time.perf_counter()
                    result = await reader.read_resource(f"mcpd://fx/{uri}", timeout=120)
                    read_times.append(time.perf_counter() - start)
                    blob = result.contents[0].blob or ""
                    if len(base64.b64decode(blob)) != size:
                        raise SystemExit(f"the read returned {len(blob)} base64 characters, not {size} bytes")
                done.set()

            async def watch() -> None:
                loaded.extend(await statuses(watcher, done=done))

            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                tg.start_soon(read_all)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"\nreading a {megabytes:g} MB blob resource, {reads} times")
    print(f"  through mcpd (socket client)   p50 {statistics.median(read_times) * 1000:8.1f} ms")
    print(f"  direct SDK session             p50 {statistics.median(direct_times) * 1000:8.1f} ms")
    print("\nanother client's status meanwhile")
    for label, samples in (("quiet daemon", quiet), ("during the reads", loaded)):
        p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
        print(f"  {label:<30} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms   ({len(samples)} calls)")
    print(f"  target: p99 during the reads <= 50 ms: {percentile(loaded, 0.99):.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=10.0, help="blob size in MB")
    parser.add_argument("--reads", type=int, default=5, help="reads of the blob")
    options = parser.parse_args()
    configure_logging("warning", "console")
    anyio.run(main, options.mb, options.reads)
