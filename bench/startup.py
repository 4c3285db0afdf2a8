"""Start-up benchmark: what the start gate buys at 10, 50 and 200 servers, and 2 hung of 10.

Run ``python bench/startup.py`` (``--sizes 10,50`` for a shorter run). For each size it
starts that many fixture servers at once, with the start gate mcpd ships and with the
gate wide open (every handshake in flight at once), and prints the time until every
server's first start attempt ended, how many first attempts failed (a handshake that
timed out because the machine could not keep up), and the daemon's RSS. Then 8 healthy
servers next to 2 that hang in initialize: the time until the last healthy one is usable,
next to the floor (the 8 healthy ones started at once with nothing else). Asserts nothing
about time. The daemon's RSS is this process's own (children excluded): the supervisor
runs in-process, exactly as inside ``mcpd serve``.
"""

from __future__ import annotations

import argparse
import gc
import time

import anyio

from mcpd.config.model import Config, ServerConfig
from mcpd.daemon.logging import configure_logging
from mcpd.model.servers import ServerEvent, StateChanged
from mcpd.model.states import ServerState
from mcpd.supervisor.gate import StartGate
from mcpd.supervisor.supervisor import open_supervisor
from mcpd.testing import fixture_server

HANG_TIMEOUT = 5.0
WIDE_OPEN = 100_000


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Run:
    """One start of a set of servers: when each first became running, and which first attempts failed."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.running_at: dict[str, float] = {}
        self.failed_first: set[str] = set()

    def on_event(self, event: ServerEvent) -> None:
        if not isinstance(event, StateChanged) or event.old is not ServerState.STARTING:
            return
        if event.new is ServerState.RUNNING:
            self.running_at.setdefault(event.server, time.perf_counter() - self.started)
        elif event.server not in self.running_at:
            self.failed_first.add(event.server)


async def start_all(servers: list[ServerConfig], slots: int | None, wait_for: set[str]) -> tuple[Run, float]:
    """Start ``servers`` at once; return when every server in ``wait_for`` is running (and RSS)."""
    config = Config(source="<bench>", servers=tuple(sorted(servers, key=lambda s: s.name)))
    run = Run()
    async with open_supervisor(config, listeners=[run.on_event], start_gate=StartGate(slots)) as supervisor:
        with anyio.fail_after(1200):
            for name in sorted(wait_for):
                await supervisor.actor(name).wait_state(ServerState.RUNNING, timeout=1200)
        gc.collect()
        rss = rss_mib()
    return run, rss


def gate_label(slots: int | None) -> str:
    return "wide open" if slots == WIDE_OPEN else f"gate {StartGate(slots).slots}"


async def main(sizes: list[int], gates: list[int | None], with_hung: bool) -> None:
    base_rss = rss_mib()
    print(f"daemon RSS before any server: {base_rss:.1f} MiB; shipped gate: {StartGate().slots} slots\n")
    print(f"{'case':<34}{'all running':>12}{'first tries failed':>20}{'daemon RSS':>13}")
    for n in sizes:
        servers = [fixture_server(f"s{i}", "--sdk") for i in range(n)]
        for slots in gates:
            run, rss = await start_all(servers, slots, {s.name for s in servers})
            label = f"{n} servers, {gate_label(slots)}"
            print(
                f"{label:<34}{max(run.running_at.values()):>11.2f}s{len(run.failed_first):>20}{rss:>9.1f} MiB"
            )

    if not with_hung:
        return
    healthy = [fixture_server(f"ok{i}", "--sdk") for i in range(8)]
    hung = [
        fixture_server(f"h{i}", "--sdk", "--hang-initialize", connect_timeout=HANG_TIMEOUT) for i in range(2)
    ]
    names = {s.name for s in healthy}
    print(
        f"\n8 healthy + 2 hanging in initialize ({HANG_TIMEOUT:g}s connect timeout): last healthy usable at"
    )
    floor, _ = await start_all(healthy, WIDE_OPEN, names)
    floor_s = max(floor.running_at.values())
    print(f"  {'floor: the 8 alone, all at once':<40}{floor_s:>8.2f}s")
    for slots in gates:
        run, _ = await start_all([*healthy, *hung], slots, names)
        last = max(run.running_at[name] for name in names)
        print(
            f"  {'with the 2 hung, ' + gate_label(slots):<40}{last:>8.2f}s  ({last / floor_s:.2f}x the floor)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10,50,200", help="comma-separated server counts")
    parser.add_argument("--slots", default="shipped,open", help="gates to compare: shipped, open, or N")
    parser.add_argument("--no-hung", action="store_true", help="skip the 2-hung-of-10 case")
    options = parser.parse_args()
    gates = [
        None if g == "shipped" else WIDE_OPEN if g == "open" else int(g) for g in options.slots.split(",")
    ]
    configure_logging("warning")
    anyio.run(main, [int(n) for n in options.sizes.split(",")], gates, not options.no_hung)
