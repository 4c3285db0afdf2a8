"""CLI benchmark: the wall time a person waits for `mcpd status`, `mcpd tools` and `mcpd --help`.

Run ``python bench/cli.py [--runs N]``. Starts a daemon with three fixture servers, then times
each command as a fresh process (the median and the slowest of N runs), next to a bare
``python -c pass`` (the interpreter's own start) and, for the record of why the CLI draws its
own tables, the import of rich's console, table and progress modules. The budget for
`mcpd status` is 150 ms. Asserts nothing: the figures are for people.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from mcpd.testing import fixture_command
from mcpd.testing.daemon import running_daemon

BUDGET_MS = 150.0


def wall_ms(argv: list[str], env: dict[str, str], runs: int) -> tuple[float, float, float]:
    """Fastest, median and slowest wall time in ms of ``runs`` runs of ``argv`` (after a warm-up run).

    On a machine shared with other work the fastest run is the best estimate of the command's own
    cost; the median says what a person typically waits."""
    subprocess.run(argv, env=env, capture_output=True, check=False, timeout=60)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, capture_output=True, check=False, timeout=60)
        samples.append((time.perf_counter() - start) * 1000)
    return min(samples), statistics.median(samples), max(samples)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcpd-bench-cli-") as folder:
        await measure(Path(folder) / "config.toml", args.runs)


async def measure(config: Path, runs: int) -> None:
    sections = []
    for name in ("alpha", "beta", "gamma"):
        command, *rest = fixture_command(name)
        sections.append(f"[servers.{name}]\ncommand = {json.dumps(command)}\nargs = {json.dumps(rest)}\n")
    config.write_text("\n".join(sections))  # noqa: ASYNC240 - a few hundred bytes, once
    python = sys.executable
    async with running_daemon(config) as daemon:
        env = {**os.environ, "MCPD_SOCKET": str(daemon.socket)}
        rows = [
            ("python -c pass", [python, "-c", "pass"]),
            ("mcpd --help", [python, "-m", "mcpd", "--help"]),
            ("mcpd status", [python, "-m", "mcpd", "status"]),
            ("mcpd status --json", [python, "-m", "mcpd", "status", "--json"]),
            ("mcpd tools", [python, "-m", "mcpd", "tools"]),
            ("mcpd completion bash", [python, "-m", "mcpd", "completion", "bash"]),
        ]
        if importlib.util.find_spec("rich") is not None:
            imports = "import rich.console, rich.table, rich.progress"
            rows.append(("python -c 'import rich...'", [python, "-c", imports]))
        print(f"wall time of a fresh process, {runs} runs each (3 fixture servers)")
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(f"{'command':<30} {'min ms':>8} {'median ms':>10} {'max ms':>8}")
        results = {}
        for label, argv in rows:
            fastest, median, slowest = await anyio.to_thread.run_sync(wall_ms, argv, env, runs)
            results[label] = median
            print(f"{label:<30} {fastest:>8.1f} {median:>10.1f} {slowest:>8.1f}")
    status = results["mcpd status"]
    verdict = "within" if status <= BUDGET_MS else "OVER"
    print(f"\nmcpd status: {status:.1f} ms median, {verdict} the {BUDGET_MS:.0f} ms budget")


if __name__ == "__main__":
    anyio.run(main)
