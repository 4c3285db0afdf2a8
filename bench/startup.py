"""Start-up benchmark: time to all-running, next to the serial sum of single starts; daemon RSS.

Run ``python bench/startup.py`` (``--quick`` skips the 50-server rows). Prints figures,
asserts nothing about time. The daemon's RSS is this process's own (children excluded):
the supervisor runs in-process, exactly as inside ``mcpd serve``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import anyio

from mcpd.config.model import Config, ServerConfig
from mcpd.daemon.logging import configure_logging
from mcpd.supervisor.supervisor import open_supervisor
from mcpd.testing import fixture_server

HANG_TIMEOUT = 5.0


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def time_to_settled(servers: list[ServerConfig]) -> tuple[float, float]:
    """Seconds until every server's first start attempt ended, and RSS (MiB) at that moment."""
    config = Config(source="<bench>", servers=tuple(sorted(servers, key=lambda s: s.name)))
    started = time.perf_counter()
    async with open_supervisor(config) as supervisor:
        await supervisor.wait_started(timeout=600)
        elapsed = time.perf_counter() - started
        gc.collect()
        rss = rss_mib()
        running = sum(1 for s in supervisor.status() if s.state == "running")
        expected = sum(1 for s in servers if "--hang-initialize" not in s.args)
        if running != expected:
            raise SystemExit(f"only {running}/{expected} servers reached running")
    return elapsed, rss


async def single_start_times(count: int) -> list[float]:
    return [(await time_to_settled([fixture_server(f"single{i}")]))[0] for i in range(count)]


def row(label: str, elapsed: float, serial: float, rss: float, note: str = "") -> None:
    print(f"{label:<28}{elapsed:>13.2f}s{serial:>13.2f}s{serial / elapsed:>9.1f}x{rss:>9.1f} MiB{note}")


async def main(quick: bool) -> None:
    base_rss = rss_mib()
    singles = await single_start_times(10)
    single = statistics.median(singles)
    print(f"single fixture start: median {single * 1000:.0f} ms over {len(singles)} serial starts")
    print(f"daemon RSS before any server: {base_rss:.1f} MiB\n")
    print(f"{'case':<28}{'all settled':>14}{'serial sum':>14}{'speed-up':>10}{'daemon RSS':>13}")
    sizes = [1, 10] if quick else [1, 10, 50]
    for n in sizes:
        elapsed, rss = await time_to_settled([fixture_server(f"s{i}") for i in range(n)])
        serial = sum(singles[:n]) if n <= len(singles) else n * single
        note = "" if n <= len(singles) else " (est.)"
        row(f"{n} servers", elapsed, serial, rss, note)
    hung = [fixture_server(f"h{i}", "--hang-initialize", connect_timeout=HANG_TIMEOUT) for i in range(2)]
    elapsed, rss = await time_to_settled([*(fixture_server(f"ok{i}") for i in range(8)), *hung])
    serial = sum(singles[:8]) + 2 * HANG_TIMEOUT
    row(f"10 servers, 2 hang ({HANG_TIMEOUT:g}s)", elapsed, serial, rss)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="skip the 50-server case")
    configure_logging("warning")
    anyio.run(main, parser.parse_args().quick)
