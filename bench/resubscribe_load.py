"""Resubscribes a refusing server is asked: requests per second while every one is refused.

Run ``python bench/resubscribe_load.py [--uris 1000 10000]``. For each count, one subscriber holds
that many URIs of a ``mcpd.testing.fullserver``; the server is killed (-9) and its new run refuses
every ``resources/(un)subscribe`` (``--refuse``). After ``--warmup`` seconds (the retries' backoff
reaches its cap of 30 s after about a minute) the requests the server received over ``--window``
seconds are counted (``full://asked``) and printed per second. Asserts nothing: the figures are
for people.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import tempfile
import time
from pathlib import Path

import anyio

from mcpd.config.model import Config
from mcpd.daemon.logging import configure_logging
from mcpd.front.subscriptions import Subscriptions
from mcpd.model.states import ServerState
from mcpd.supervisor import surface_requests
from mcpd.supervisor.supervisor import Supervisor, open_supervisor
from mcpd.testing import fullserver_config


async def asked(supervisor: Supervisor) -> int:
    result = await surface_requests.read_resource(supervisor.actor("full"), "full://asked", timeout=30)
    count: int = json.loads(result.contents[0].text or "0")
    return count


async def measure(count: int, warmup: float, window: float) -> float:
    with tempfile.TemporaryDirectory(prefix="mcpd-bench-") as folder:
        return await _measure(Path(folder) / "refuse", count, warmup, window)


async def _measure(refuse: Path, count: int, warmup: float, window: float) -> float:
    config = Config(source="<bench>", servers=(fullserver_config("full", "--refuse", str(refuse)),))
    async with open_supervisor(config) as supervisor:
        actor = supervisor.actor("full")
        await actor.wait_state(ServerState.RUNNING, timeout=60)
        hub = Subscriptions(supervisor)
        supervisor.add_listener(hub.on_event)
        async with anyio.create_task_group() as tg:
            await tg.start(hub.run)
            hub.register("host", lambda server, uri, meta: None)
            async with anyio.create_task_group() as subscribing:
                for i in range(count):
                    subscribing.start_soon(hub.subscribe, "host", "full", f"full://r/{i}", 600.0)
            refuse.touch()  # noqa: ASYNC240 - one file, created once
            pid = actor.status().pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            with anyio.fail_after(60):
                while actor.status().pid in (None, pid) or actor.state is not ServerState.RUNNING:
                    await anyio.sleep(0.05)
            await anyio.sleep(warmup)
            before, started = await asked(supervisor), time.monotonic()
            await anyio.sleep(window)
            rate = (await asked(supervisor) - before) / (time.monotonic() - started)
            tg.cancel_scope.cancel()
    return rate


async def main(counts: list[int], warmup: float, window: float) -> None:
    for count in counts:
        rate = await measure(count, warmup, window)
        print(f"{count:>6} held URIs, server refusing: {rate:8.2f} requests/s to it", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--uris", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--warmup", type=float, default=70.0)
    parser.add_argument("--window", type=float, default=60.0)
    args = parser.parse_args()
    configure_logging("error")
    anyio.run(main, args.uris, args.warmup, args.window)
