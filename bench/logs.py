"""Log flood benchmark: what a server flooding its stderr costs the daemon and its other clients.

Run ``python bench/logs.py``. A daemon serves one fixture server; a client calls ``status``
back to back, first with the server quiet, then while the server writes stderr lines without
end (short lines, then long ones cut by the ring) with `mcpd logs -f` following its log, then
while ``yes`` writes to a server's stderr at C speed (faster than the daemon can read).
For each phase it prints that client's ``status`` p50/p99 (target: p99 <= 50 ms), the lines
the daemon took in per second, what the ring held (entries, characters) and the daemon's RSS.
Asserts nothing: the figures are for people. On a busy machine every figure rises.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from anyio.abc import Process
from ipc import percentile, statuses

from mcpd.client.aio import AsyncClient, connect
from mcpd.testing import fixture_command, fixture_toml
from mcpd.testing.daemon import running_daemon

PHASE_SECONDS = 5.0


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def count_lines(process: Process, received: list[int]) -> None:
    assert process.stdout is not None
    async for chunk in process.stdout:
        received[0] += chunk.count(b"\n")


async def phase(name: str, client: AsyncClient, pid: int, server: str = "flooder") -> None:
    first = await client.logs(server, 1)
    start = time.perf_counter()
    samples = await statuses(client, PHASE_SECONDS)
    elapsed = time.perf_counter() - start
    kept = await client.logs(server)
    lines = (kept[-1].seq - first[0].seq) / elapsed if kept and first else 0.0
    chars = sum(len(e.text) for e in kept)
    print(
        f"{name:<24} {percentile(samples, 0.5):7.2f} {percentile(samples, 0.99):8.2f} {len(samples):7d}"
        f" {lines:10.0f} {len(kept):8d} {chars:9d} {rss_mib(pid):8.1f}"
    )


async def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="mcpd-bench-logs-", dir="/tmp"))
    try:
        config = workdir / "config.toml"
        # yes: `yes` writing to stderr at C speed beside a fixture server, started for its phase.
        server = " ".join(shlex.quote(arg) for arg in fixture_command("yes"))
        yes = f"yes 'a line of a stderr flood' >&2 & exec {server}"
        config.write_text(
            fixture_toml("flooder", "--stderr-lines", "1")
            + f'[servers.yes]\ncommand = "sh"\nargs = ["-c", {json.dumps(yes)}]\nenabled = false\n'
        )
        async with running_daemon(config) as daemon:
            await daemon.wait_for("server.state", server="flooder", new="running")
            pid = daemon.process.pid
            print(f"load average {os.getloadavg()[0]:.2f}; {PHASE_SECONDS:g} s per phase")
            print(
                f"{'phase':<24} {'p50 ms':>7} {'p99 ms':>8} {'n':>7} {'lines/s':>10} {'entries':>8}"
                f" {'chars':>9} {'RSS MiB':>8}"
            )
            # The follower is `mcpd logs -f` in its own process, so that its work is not done on
            # the measuring client's event loop.
            follow = [sys.executable, "-m", "mcpd", "logs", "flooder", "-f", "-n", "0"]
            async with (
                connect(daemon.socket) as client,
                await anyio.open_process(
                    [*follow, "--json", "--socket", str(daemon.socket)], stderr=subprocess.DEVNULL
                ) as follower,
            ):
                await phase("quiet", client, pid)
                received = [0]
                async with anyio.create_task_group() as tg:
                    tg.start_soon(count_lines, follower, received)
                    await client.call_tool("flooder__flood", {"size": 80})
                    await phase("flood, 100-char lines", client, pid)
                    await client.restart("flooder")
                    await client.call_tool("flooder__flood", {"size": 20_000})
                    await phase("flood, 20,000-char lines", client, pid)
                    await client.stop("flooder")
                    follower.terminate()
                await client.start("yes")
                await phase("`yes >&2` at C speed", client, pid, "yes")
                await client.stop("yes")
                await phase("stopped", client, pid)
                print(f"`mcpd logs -f` printed {received[0]} entries")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    anyio.run(main)
