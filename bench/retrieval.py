"""Retrieval quality of mcpd's tool ranking against the TF-cosine and plain BM25 baselines.

Reads the tool-retrieval data in ../shared/toolret (``--data DIR`` for another copy of the
same format) and prints, per data set, R@1, R@5, R@10, nDCG@10, Hit@1 and SR@5 (percent,
averaged over queries) for each method; ``--json`` prints ``{set: {method: {metric: value}}}``.

The baselines follow the data's README: text = "server tool description" (the server left
out where it equals the tool), lowercase, split on non-alphanumerics; BM25 with k1 = 1.2,
b = 0.75; TF-cosine = cosine of raw term-frequency vectors.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpd.discovery.index import ToolIndex, ToolText, schema_params
from mcpd.discovery.prior import UsagePrior
from mcpd.discovery.text import plain_terms, terms

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "toolret"
METRICS = ("R@1", "R@5", "R@10", "nDCG@10", "Hit@1", "SR@5")

Ranker = Callable[[str], list[str]]
"""query -> tool ids (server/tool), best first"""


@dataclass(frozen=True)
class Tool:
    server: str
    tool: str
    description: str
    server_description: str
    schema: dict[str, Any] | None

    @property
    def id(self) -> str:
        return f"{self.server}/{self.tool}"

    def baseline_text(self) -> str:
        parts = (
            [self.tool, self.description]
            if self.server == self.tool
            else [self.server, self.tool, self.description]
        )
        return " ".join(parts)


@dataclass(frozen=True)
class Query:
    text: str
    relevant: frozenset[str]
    relevant_servers: frozenset[str]


def load(directory: Path) -> tuple[list[Tool], list[Query]]:
    tools = []
    with (directory / "tools.jsonl").open() as lines:
        for line in lines:
            row = json.loads(line)
            tools.append(
                Tool(
                    server=row["server"],
                    tool=row["tool"],
                    description=row.get("description") or "",
                    server_description=row.get("server_description") or "",
                    schema=row.get("input_schema"),
                )
            )
    queries = []
    with (directory / "queries.jsonl").open() as lines:
        for line in lines:
            row = json.loads(line)
            queries.append(
                Query(row["query"], frozenset(row["relevant"]), frozenset(row["relevant_servers"]))
            )
    return tools, queries


# -- the methods ---------------------------------------------------------------------------------


def tf_cosine(tools: Sequence[Tool]) -> Ranker:
    vectors = [Counter(plain_terms(t.baseline_text())) for t in tools]
    norms = [math.sqrt(sum(v * v for v in vector.values())) or 1.0 for vector in vectors]

    def rank(query: str) -> list[str]:
        q = Counter(plain_terms(query))
        q_norm = math.sqrt(sum(v * v for v in q.values())) or 1.0
        scored = []
        for tool, vector, norm in zip(tools, vectors, norms, strict=True):
            dot = sum(count * vector.get(term, 0) for term, count in q.items())
            if dot:
                scored.append((dot / (norm * q_norm), tool.id))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [tool_id for _, tool_id in scored]

    return rank


def bm25(tools: Sequence[Tool], k1: float = 1.2, b: float = 0.75) -> Ranker:
    docs = [Counter(plain_terms(t.baseline_text())) for t in tools]
    lengths = [sum(d.values()) for d in docs]
    average = sum(lengths) / len(lengths)
    df: Counter[str] = Counter()
    for doc in docs:
        df.update(doc.keys())
    n = len(docs)

    def rank(query: str) -> list[str]:
        scored = []
        q_terms = plain_terms(query)
        for tool, doc, length in zip(tools, docs, lengths, strict=True):
            score = 0.0
            for term in q_terms:
                tf = doc.get(term, 0)
                if tf:
                    idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                    score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))
            if score:
                scored.append((score, tool.id))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [tool_id for _, tool_id in scored]

    return rank


def mcpd_ranking(tools: Sequence[Tool], prior: UsagePrior | None = None) -> Ranker:
    index = ToolIndex()
    by_server: dict[str, list[ToolText]] = {}
    for tool in tools:
        by_server.setdefault(tool.server, []).append(
            ToolText(
                tool.server, tool.tool, tool.description, tool.server_description, schema_params(tool.schema)
            )
        )
    for server, texts in by_server.items():
        index.replace_server(server, texts)

    def rank(query: str) -> list[str]:
        return [f"{hit.server}/{hit.tool}" for hit in index.search(query, limit=50, prior=prior)]

    return rank


def usage_simulation(tools: Sequence[Tool], queries: Sequence[Query]) -> dict[str, dict[str, float]]:
    """Replay every other query as successful calls of its relevant tools; evaluate on the rest."""
    learned, held_out = queries[0::2], queries[1::2]
    prior = UsagePrior()
    now = time.time()
    for query in learned:
        query_terms = terms(query.text)
        for tool_id in query.relevant:
            server, tool = tool_id.split("/", 1)
            prior.observe(server, tool, True, query_terms, now)
    return {
        "mcpd, held-out half": evaluate(mcpd_ranking(tools), held_out),
        "mcpd + usage prior": evaluate(mcpd_ranking(tools, prior), held_out),
    }


METHODS: dict[str, Callable[[Sequence[Tool]], Ranker]] = {
    "tf-cosine": tf_cosine,
    "bm25": bm25,
    "mcpd": mcpd_ranking,
}


# -- metrics -------------------------------------------------------------------------------------


def evaluate(rank: Ranker, queries: Sequence[Query]) -> dict[str, float]:
    totals = dict.fromkeys(METRICS, 0.0)
    for query in queries:
        ranked = rank(query.text)
        relevant = query.relevant
        for k in (1, 5, 10):
            totals[f"R@{k}"] += len(relevant.intersection(ranked[:k])) / len(relevant)
        dcg = sum(1 / math.log2(i + 2) for i, tool_id in enumerate(ranked[:10]) if tool_id in relevant)
        ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
        totals["nDCG@10"] += dcg / ideal
        totals["Hit@1"] += 1.0 if ranked[:1] and ranked[0] in relevant else 0.0
        servers: list[str] = []
        for tool_id in ranked:
            server = tool_id.split("/", 1)[0]
            if server not in servers:
                servers.append(server)
            if len(servers) == 5:
                break
        totals["SR@5"] += len(query.relevant_servers.intersection(servers)) / len(query.relevant_servers)
    return {metric: round(100 * value / len(queries), 1) for metric, value in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="directory with one folder per data set"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument(
        "--no-usage", dest="usage", action="store_false", help="skip the usage-prior simulation"
    )
    args = parser.parse_args()
    sets = sorted(p for p in args.data.iterdir() if (p / "tools.jsonl").exists())
    if not sets:
        sys.exit(f"no data sets (folders with tools.jsonl and queries.jsonl) in {args.data}")
    figures: dict[str, dict[str, dict[str, float]]] = {}
    simulated: dict[str, dict[str, dict[str, float]]] = {}
    for directory in sets:
        tools, queries = load(directory)
        figures[directory.name] = {name: evaluate(build(tools), queries) for name, build in METHODS.items()}
        if args.usage:
            simulated[directory.name] = usage_simulation(tools, queries)
    if args.json:
        print(json.dumps(figures if not args.usage else {"figures": figures, "usage": simulated}))
        return
    for name, methods in figures.items():
        print(f"\n{name}")
        print(f"  {'method':<12}" + "".join(f"{metric:>9}" for metric in METRICS))
        for method, values in methods.items():
            print(f"  {method:<12}" + "".join(f"{values[metric]:>9.1f}" for metric in METRICS))
        lift = methods["mcpd"]["R@5"] / methods["bm25"]["R@5"] if methods["bm25"]["R@5"] else float("nan")
        print(f"  mcpd R@5 / bm25 R@5 = {lift:.2f}x (target >= 1.4x)")
        if name in simulated:
            print("  usage simulation: every other query replayed as successful calls, scored on the others")
            for method, values in simulated[name].items():
                print(f"  {method:<22}" + "".join(f"{values[metric]:>9.1f}" for metric in METRICS[:4]))


if __name__ == "__main__":
    main()
