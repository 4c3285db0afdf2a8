"""kill -9 under load: do the calls that the dead server never received wait and run?

Run ``python bench/kill9.py`` (``--kills N``, ``--callers N``, ``--sdk`` for the fixture served
through the mcp SDK, as ``bench/peers.py`` runs it). One fixture server, ``fx``, in a real daemon;
each caller has its own socket connection and calls ``fx__echo`` in a loop, with no pause. The
server's process is killed with SIGKILL ``--kills`` times, each time once it is back and has
answered a round of calls. A call that failed, was issued after the process was seen dead
(``process_gone``: a zombie with no thread left, so that none can take bytes off its stdin) and
ended before the next kill cannot have reached that process: "never received", which issue 17
wants at 0 (such a call waits for the restart and runs). A failed call issued before the death
may have been in flight in it: "in flight or unread".
Prints the counts and what the failed calls got. Asserts nothing.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import contextlib
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import anyio

from mcpd.client.aio import AsyncClient, connect
from mcpd.daemon.logging import configure_logging
from mcpd.errors import McpdError
from mcpd.testing import fixture_toml, process_gone
from mcpd.testing.daemon import running_daemon

SERVER = "fx"
CALL_TIMEOUT = 60.0
"""Room for a restart on a loaded machine: a call that waits for it and runs is the point."""
POLL = 0.005
ROUND = 5
RESTART_LIMIT = 120.0
"""Calls each caller completes on a fresh process before it is killed."""


@dataclass(frozen=True)
class Failure:
    issued: float
    finished: float
    error: str


@dataclass
class Kill:
    at: float
    """When SIGKILL was sent."""
    gone: float
    """When the process was first seen dead."""


class Run:
    def __init__(self) -> None:
        self.ok = 0
        self.failures: list[Failure] = []
        self.kills: list[Kill] = []
        self.done = False


async def running_pid(client: AsyncClient, other_than: int | None) -> int:
    """The server's pid once it runs a process other than ``other_than``."""
    status = None
    with anyio.move_on_after(RESTART_LIMIT):
        while True:
            (status,) = [s for s in await client.status() if s.name == SERVER]
            if str(status.state) == "running" and status.pid is not None and status.pid != other_than:
                return status.pid
            await anyio.sleep(POLL)
    raise RuntimeError(f"{SERVER} not running again after {RESTART_LIMIT:g}s: {status}")


async def caller(client: AsyncClient, run: Run) -> None:
    while not run.done:
        issued = time.perf_counter()
        try:
            await client.call_tool("echo", {"text": "x"}, server=SERVER, timeout=CALL_TIMEOUT)
        except McpdError as exc:
            # The message up to the server's own words: "fx closed the connection during echo".
            gist = str(exc).split(":")[0]
            run.failures.append(Failure(issued, time.perf_counter(), f"{type(exc).__name__}: {gist}"))
        else:
            run.ok += 1


async def killer(client: AsyncClient, run: Run, kills: int, callers: int) -> None:
    pid: int | None = None
    for _ in range(kills):
        pid = await running_pid(client, pid)
        target = run.ok + ROUND * callers
        with anyio.fail_after(60):
            while run.ok < target:
                await anyio.sleep(POLL)
        at = time.perf_counter()
        os.kill(pid, signal.SIGKILL)
        while not process_gone(pid):
            await anyio.sleep(0.0005)
        run.kills.append(Kill(at, time.perf_counter()))
    await running_pid(client, pid)
    run.done = True


def never_received(failure: Failure, kills: list[Kill]) -> bool:
    """Issued after a process was seen dead, and ended before the next kill (so it was not sent to
    the next process only to be lost with it)."""
    index = bisect.bisect_right([k.gone for k in kills], failure.issued) - 1
    if index < 0:
        return False
    following = kills[index + 1].at if index + 1 < len(kills) else float("inf")
    return failure.finished < following


async def main(kills: int, callers: int, flags: tuple[str, ...]) -> None:
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="mcpd-kill9-") as workdir:
        config = Path(workdir) / "config.toml"
        config.write_text(fixture_toml(SERVER, *flags, restart={"initial_delay": 0.05, "max_delay": 0.2}))
        async with running_daemon(config) as daemon, connect(daemon.socket, name="killer") as control:
            run = Run()
            started = time.perf_counter()
            async with contextlib.AsyncExitStack() as stack, anyio.create_task_group() as tg:
                for index in range(callers):
                    client = await stack.enter_async_context(connect(daemon.socket, name=f"caller{index}"))
                    tg.start_soon(caller, client, run)
                tg.start_soon(killer, control, run, kills, callers)
            elapsed = time.perf_counter() - started
    unseen = [f for f in run.failures if never_received(f, run.kills)]
    before = [f for f in run.failures if not never_received(f, run.kills)]
    took = f"{elapsed:.1f}s"
    print(f"{len(run.kills)} kill -9 of {SERVER} under {callers} callers in {took}: {run.ok} calls ok")
    for label, failures in (("never received", unseen), ("in flight or unread at the death", before)):
        print(f"failed, {label}: {len(failures)}")
        for error, count in collections.Counter(f.error for f in failures).most_common():
            print(f"  {count:4d}  {error}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kills", type=int, default=40)
    parser.add_argument("--callers", type=int, default=8)
    parser.add_argument("--sdk", action="store_true", help="the fixture served through the mcp SDK")
    options = parser.parse_args()
    configure_logging("warning")
    anyio.run(main, options.kills, options.callers, ("--sdk",) if options.sdk else ())
