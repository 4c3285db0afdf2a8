"""What reloads and restarts leave in the daemon's memory, over many of them.

Run ``python bench/reload_memory.py``. A daemon serves three plain-Python servers (fullserver).
The script prints the daemon's RSS every ``--every`` operations, for three kinds, one after the other:

- ``restart``: ``mcpd restart`` of one server (the same actor runs it again): the baseline;
- ``change``: a reload that changes one server's config (a new actor replaces the old one);
- ``add/remove``: reloads that add a fourth server and remove it again.

A daemon that keeps nothing of what it replaced stays flat in all three (a few hundred KiB of
settling). Before the actors of a server shared one lineage, ``change`` grew by ~10 KiB per reload
(37 -> 50 MiB over 1,200). Asserts nothing: the figures are for people.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import anyio

from mcpd.client.aio import AsyncClient, connect
from mcpd.testing import fullserver_toml, rss_mib
from mcpd.testing.daemon import running_daemon

SERVERS = "".join(fullserver_toml(f"s{i}") for i in range(3))


def config_text(kind: str, step: int) -> str:
    if kind == "change":
        return SERVERS.replace("[servers.s0]", f'[servers.s0]\nenv = {{ STEP = "{step}" }}', 1)
    return SERVERS + (fullserver_toml("extra") if step % 2 else "")


async def run(
    kind: str, client: AsyncClient, config: anyio.Path, pid: int, *, count: int, every: int
) -> None:
    start = rss_mib(pid)
    figures = []
    for step in range(1, count + 1):
        if kind == "restart":
            await client.restart("s0")
        else:
            await config.write_text(config_text(kind, step))
            await client.reload()
        if step % every == 0:
            figures.append(f"{rss_mib(pid):.1f}")
    grown = (rss_mib(pid) - start) * 1024 / count
    print(f"  {kind:<11} start {start:.1f} MiB, every {every}: {' '.join(figures)} ({grown:+.1f} KiB each)")


async def main(count: int, every: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="mcpd-bench-"))
    config = workdir / "config.toml"
    config.write_text(SERVERS)
    try:
        async with running_daemon(config) as daemon, connect(daemon.socket, name="bench") as client:
            print(f"daemon RSS over {count} operations of each kind (MiB)")
            for kind in ("restart", "change", "add/remove"):
                await run(kind, client, anyio.Path(config), daemon.process.pid, count=count, every=every)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=600, help="operations of each kind")
    parser.add_argument("--every", type=int, default=100, help="operations between two figures")
    options = parser.parse_args()
    anyio.run(main, options.count, options.every)
