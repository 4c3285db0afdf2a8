"""HTTP flood benchmark: what a local process churning tokenless connections costs the HTTP hosts.

Run ``python bench/http_flood.py [--seconds 12] [--flooders 2]``. A daemon serves the fixture
server over HTTP; for a quiet phase and then a flood phase (``--flooders`` processes, each
opening connections as fast as it can, sending a request without the token on each and closing
it, as /tmp/redteam3-scratch/http_flood2.py does) the script prints: a host's ``tools/call`` on
its kept-alive connection (p50, p99, failures), new connections each opening a session and
calling once (how many succeed within 20 s, their p50 and max), the daemon's CPU, the flood's rate,
and how many connections the kernel dropped with the accept queue full (``_overflows``).

The flooders run in their own processes, so the measuring client's loop is not the one under
load, at ``--nice`` (19 by default, as in ``bench/hostile.py``: what is measured is how the daemon
shares its time, not how the machine shares its cores; ``--nice 0`` lets them take the cores, as
the red team's script did). Asserts nothing: the figures are for people, and rise on a busy machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2
from ipc import cpu_seconds

from mcpd.testing import fixture_toml
from mcpd.testing.daemon import running_daemon

_JSON = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "b", "version": "1"},
    },
}
_CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "tools__echo", "arguments": {"text": "x"}},
}


async def _session(http: httpx2.AsyncClient, url: str) -> str:
    opened = await http.post(url, json=_INIT)
    session: str = opened.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await http.post(url, json=initialized, headers={"Mcp-Session-Id": session})
    return session


async def _call(http: httpx2.AsyncClient, url: str, session: str) -> None:
    answer = await http.post(url, json=_CALL, headers={"Mcp-Session-Id": session})
    assert answer.status_code == 200, answer.text


def _overflows() -> int:
    """The machine's ``ListenOverflows`` so far (Linux): connections the kernel dropped because an
    accept queue was full, whose client then retransmits its SYN after 1 s, 3 s, 7 s. Every
    listener's, not only the daemon's: on a machine doing nothing else, the flood's."""
    lines = Path("/proc/net/netstat").read_text().splitlines()
    names, values = lines[0].split(), lines[1].split()
    return int(values[names.index("ListenOverflows")])


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


async def _phase(
    name: str, url: str, token: str, pid: int, *, args: argparse.Namespace, flooders: int
) -> None:
    headers = {**_JSON, "Authorization": f"Bearer {token}"}
    host, port = url.split("//")[1].split("/", maxsplit=1)[0].rsplit(":", 1)
    seconds = args.seconds
    command = [
        "nice",
        "-n",
        str(args.nice),
        sys.executable,
        "-m",
        "mcpd.testing.flood",
        host,
        port,
        str(seconds + 2),
    ]
    floods = [await anyio.open_process(command, stderr=subprocess.DEVNULL) for _ in range(flooders)]
    cpu_before, started = cpu_seconds(pid), time.monotonic()
    overflows_before = _overflows()
    kept: list[float] = []
    kept_failed = new_ok = new_failed = 0
    new: list[float] = []
    async with httpx2.AsyncClient(headers=headers, timeout=20) as http:
        session = await _session(http, url)
        await anyio.sleep(1.0 if flooders else 0)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            began = time.monotonic()
            try:
                await _call(http, url, session)
                kept.append(time.monotonic() - began)
            except (httpx2.HTTPError, AssertionError):
                kept_failed += 1
            if len(kept) % 10 == 0:
                began = time.monotonic()
                try:
                    async with httpx2.AsyncClient(headers=headers, timeout=20) as newcomer:
                        await _call(newcomer, url, await _session(newcomer, url))
                    new_ok += 1
                    new.append(time.monotonic() - began)
                except (httpx2.HTTPError, AssertionError, KeyError):
                    new_failed += 1
    cpu = (cpu_seconds(pid) - cpu_before) / (time.monotonic() - started)
    overflowed = _overflows() - overflows_before
    opened = 0
    for flood in floods:
        assert flood.stdout is not None
        async with flood:
            printed = b"".join([chunk async for chunk in flood.stdout])
            opened += int(printed.split()[-1])  # the count, after "flooding"
    rate = opened / (seconds + 2)
    print(
        f"{name:6} kept-alive call p50 {_quantile(kept, 0.5) * 1000:7.1f} ms"
        f"  p99 {_quantile(kept, 0.99) * 1000:7.1f} ms"
        f"  ({len(kept)} calls, {kept_failed} failed)   new connections {new_ok}/{new_ok + new_failed}"
        f" p50 {_quantile(new, 0.5) * 1000:6.1f} ms max {max(new, default=0) * 1000:6.0f} ms"
        f"   daemon CPU {cpu:4.0%}   flood {rate:,.0f} conn/s   accept queue overflows {overflowed:,}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--flooders", type=int, default=2)
    parser.add_argument("--nice", type=int, default=19, help="the flooders' niceness")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcpd-bench-") as directory:
        token_file = Path(directory) / "http.token"
        config = Path(directory) / "config.toml"
        config.write_text(
            f'[daemon]\nhttp = "127.0.0.1:0"\nhttp_token_file = "{token_file}"\n' + fixture_toml("tools")
        )
        async with running_daemon(config) as daemon:
            url = (await daemon.wait_for("http.listening"))["url"]
            await daemon.wait_for("server.state", server="tools", new="running", timeout=60)
            token = token_file.read_text().strip()
            pid = daemon.process.pid
            print(f"load average {os.getloadavg()[0]:.2f}")
            await _phase("quiet", url, token, pid, args=args, flooders=0)
            await _phase("flood", url, token, pid, args=args, flooders=args.flooders)


if __name__ == "__main__":
    anyio.run(main)
