"""Grouping capability requests for the report: seconds at 1,000, 3,000 and 10,000 wordings.

Run ``python bench/groups.py`` (``--baseline DIR`` adds the ``group_similar`` of another checkout,
for a before and after; ``--skip-baseline-above N`` leaves out its larger sizes, which took 46 s
at 10,000 before prefix filtering, and ``--repeat 1`` shortens them). Two shapes: ``one shared
word`` (distinct wordings sharing only "convert", the shape that made grouping quadratic) and
``realistic`` (``mcpd.testing.wordings``).
Each figure is the best of ``--repeat`` runs, analysis of the wordings included. Asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcpd.discovery.groups import group_similar
from mcpd.testing.wordings import one_shared_word, realistic

SIZES = (1000, 3000, 10_000)
SHAPES = {"one shared word": one_shared_word, "realistic": realistic}
Grouper = Callable[[list[tuple[str, int]]], list[Any]]


def load_grouper(checkout: Path) -> Grouper:
    """``group_similar`` from another checkout's file, beside this one's (it imports only ``terms``)."""
    spec = importlib.util.spec_from_file_location("baseline_groups", checkout / "mcpd/discovery/groups.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    grouper: Grouper = module.group_similar
    return grouper


def best_of(grouper: Grouper, wordings: list[tuple[str, int]], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        grouper(wordings)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="another mcpd checkout to measure beside this one")
    parser.add_argument("--skip-baseline-above", type=int, default=10_000, metavar="N")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    columns: list[tuple[str, Grouper, int]] = [("this checkout", group_similar, max(SIZES))]
    if args.baseline is not None:
        columns.append((f"at {args.baseline}", load_grouper(args.baseline), args.skip_baseline_above))
    print(f"{'shape':<18}{'grouping':<28}" + "".join(f"{n:>12,}" for n in SIZES))
    for shape, make in SHAPES.items():
        inputs = {n: make(n) for n in SIZES}
        for name, grouper, largest in columns:
            cells = [
                f"{best_of(grouper, inputs[n], args.repeat):>11.3f}s" if n <= largest else f"{'-':>12}"
                for n in SIZES
            ]
            print(f"{shape:<18}{name:<28}" + "".join(cells))


if __name__ == "__main__":
    main()
