"""Retrieval quality of mcpd's tool ranking against the TF-cosine and standard BM25 baselines.

Reads the tool-retrieval data in ../shared/toolret (``--data DIR`` for another copy of the
same format: one folder per set with tools.jsonl and queries.jsonl) and prints, per set,
R@1, R@5, R@10, nDCG@10, Hit@1 and SR@5 (percent, averaged over queries) for each method;
then a 95 % confidence interval for mcpd against BM25, a cross-validated check of the
ranking parameters, and the usage replay.

The baselines follow the data's README exactly:

- document text = "server tool description" (the server left out where it equals the
  tool); the tokenizer lowercases and splits on every character that is not a letter or
  digit (``plain_terms``), no stemming, no stop words;
- BM25 is the standard Okapi BM25: each distinct query term counted once, k1 = 1.2,
  b = 0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5));
- TF-cosine = cosine of raw term-frequency vectors (the reference server-selection scorer).

mcpd's index is built in one pass over all servers (``ToolIndex.replace_servers`` with every
server at once), as the daemon's catalogue does.

The confidence interval is a paired bootstrap over queries (2,000 resamples, fixed seed):
each resample draws queries with replacement and compares mcpd's and BM25's mean R@5 on the
same draw; the 2.5th and 97.5th percentiles of the ratio and of the difference are printed.

The parameter check is k-fold cross-validation over queries (5 folds, fixed shuffle): for
each fold the grid point with the best mean R@5 on the other four folds is chosen and
scored on the held-out fold; the mean held-out R@5 is printed beside the defaults' R@5.
The grid holds parameter sets and the ranking variants of ``bench/lexical_variants.py``
(tried and not kept); a table gives each one's R@5 and its own cross-validated R@5 when the
choice is between it and the defaults alone: a variant wins only if that beats the defaults.
The defaults themselves must be chosen without looking at LiveMCPBench's development
queries alone (they were chosen on MetaTool and by this cross-validation); LiveMCPBench's
row is an untouched check.

The usage replay learns from every other query (its relevant tools recorded as successful
calls through a ``Recorder``, by default ``UsagePrior.observe`` with the query analysed by
``mcpd.discovery.text.learned_terms``, as the daemon records a call) and scores the rest.

``--unseen`` and ``--realcat`` score only a set of queries written for the benchmarks' tools
(``unseen*/``) or for real servers' tools in one catalogue (``realcat/``), per style of request:
mcpd, BM25 and TF-cosine.

``--json`` prints one object ``{set: {method: {metric: value}}}``; the bootstrap, the
cross-validation and the usage replay each sit in a key of their own with the same shape
(``{"bootstrap": {set: {"mcpd/bm25": {...}}}, "cv": {...}, "usage_replay": {...}}``).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lexical_variants import variants

from mcpd.discovery import spelling, synonyms
from mcpd.discovery.index import Params, ToolIndex, ToolText, schema_params
from mcpd.discovery.prior import UsagePrior
from mcpd.discovery.text import learned_terms, plain_terms

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "toolret"
UNSEEN = Path(__file__).resolve().parent / "unseen"
"""Queries written for each set's tools, none from the benchmarks (see ``unseen/README.md``)."""
REALCAT = Path(__file__).resolve().parent / "realcat"
"""Real servers' tools in one catalogue, with queries written for them (``realcat/README.md``)."""
UNSEEN_SETS = {str(n): UNSEEN.with_name(f"unseen{n}" if n > 1 else "unseen") for n in range(1, 5)}
"""The unseen query sets by number, in the order they were written (``unseen2/README.md``,
``unseen3/README.md``, ``unseen4/README.md``)."""
METRICS = ("R@1", "R@5", "R@10", "nDCG@10", "Hit@1", "SR@5")
TARGET_LIFT = 1.5
TARGET_CAP = 90.0

Ranker = Callable[[str], list[str]]
"""query -> tool ids (server/tool), best first"""

Recorder = Callable[[str, str, str], None]
"""(query, server, tool): one successful call that the query led to"""

Table = dict[str, dict[str, dict[str, float]]]
"""{set: {method: {metric: value}}}"""


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
    style: str = ""
    """How an unseen query is put: para, kw, chat, typo, svc, act (``bench/unseen``); ask, multi, esl
    (``bench/unseen2``); short, long, jargon, abbr, dtype, neg, plan (``bench/unseen3``); step, output,
    contrast, brand, mixed, units, two, error (``bench/unseen4``)."""
    half: str = ""
    """A (worked on) or B (held out) of an unseen set."""


def load(directory: Path, queries_file: Path | None = None) -> tuple[list[Tool], list[Query]]:
    """The set's tools, and its queries.jsonl's queries (or ``queries_file``'s, same format)."""
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
    with (queries_file or directory / "queries.jsonl").open() as lines:
        for line in lines:
            row = json.loads(line)
            meta = row.get("meta") or {}
            queries.append(
                Query(
                    row["query"],
                    frozenset(row["relevant"]),
                    frozenset(row["relevant_servers"]),
                    meta.get("style", ""),
                    meta.get("half", ""),
                )
            )
    return tools, queries


# -- the methods ---------------------------------------------------------------------------------


def _ranked(scored: Iterable[tuple[float, str]]) -> list[str]:
    return [tool_id for _, tool_id in sorted(scored, key=lambda item: (-item[0], item[1]))]


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
        return _ranked(scored)

    return rank


def bm25(tools: Sequence[Tool], k1: float = 1.2, b: float = 0.75) -> Ranker:
    """Standard Okapi BM25 over the baseline text; each distinct query term counts once."""
    docs = [Counter(plain_terms(t.baseline_text())) for t in tools]
    lengths = [sum(d.values()) for d in docs]
    average = sum(lengths) / len(lengths)
    df: Counter[str] = Counter()
    for doc in docs:
        df.update(doc.keys())
    n = len(docs)
    idf = {term: math.log(1 + (n - count + 0.5) / (count + 0.5)) for term, count in df.items()}

    def rank(query: str) -> list[str]:
        q_terms = set(plain_terms(query))
        scored = []
        for tool, doc, length in zip(tools, docs, lengths, strict=True):
            score = 0.0
            for term in q_terms:
                tf = doc.get(term, 0)
                if tf:
                    score += idf[term] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))
            if score:
                scored.append((score, tool.id))
        return _ranked(scored)

    return rank


def tool_texts(tools: Sequence[Tool]) -> dict[str, list[ToolText]]:
    by_server: dict[str, list[ToolText]] = {}
    for tool in tools:
        by_server.setdefault(tool.server, []).append(
            ToolText(
                tool.server, tool.tool, tool.description, tool.server_description, schema_params(tool.schema)
            )
        )
    return by_server


def mcpd_ranking(
    tools: Sequence[Tool], prior: UsagePrior | None = None, params: Params | None = None
) -> Ranker:
    # As the daemon's catalogue does at the first ranked query.
    spelling.load()
    synonyms.load()
    index = ToolIndex(params or Params())
    index.replace_servers(tool_texts(tools))  # one pass over every server, as the catalogue does

    def rank(query: str) -> list[str]:
        return [f"{hit.server}/{hit.tool}" for hit in index.search(query, limit=50, prior=prior)]

    return rank


METHODS: dict[str, Callable[[Sequence[Tool]], Ranker]] = {
    "tf-cosine": tf_cosine,
    "bm25": bm25,
    "mcpd": mcpd_ranking,
}


# -- metrics -------------------------------------------------------------------------------------


def per_query(rank: Ranker, queries: Sequence[Query]) -> dict[str, list[float]]:
    """Each metric's value (0..1) for each query, in query order."""
    values: dict[str, list[float]] = {metric: [] for metric in METRICS}
    for query in queries:
        ranked = rank(query.text)
        relevant = query.relevant
        for k in (1, 5, 10):
            values[f"R@{k}"].append(len(relevant.intersection(ranked[:k])) / len(relevant))
        dcg = sum(1 / math.log2(i + 2) for i, tool_id in enumerate(ranked[:10]) if tool_id in relevant)
        ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
        values["nDCG@10"].append(dcg / ideal)
        values["Hit@1"].append(1.0 if ranked[:1] and ranked[0] in relevant else 0.0)
        servers: list[str] = []
        for tool_id in ranked:
            server = tool_id.split("/", 1)[0]
            if server not in servers:
                servers.append(server)
            if len(servers) == 5:
                break
        values["SR@5"].append(len(query.relevant_servers.intersection(servers)) / len(query.relevant_servers))
    return values


def summary(values: dict[str, list[float]]) -> dict[str, float]:
    return {metric: round(100 * sum(v) / len(v), 1) for metric, v in values.items()}


def evaluate(rank: Ranker, queries: Sequence[Query]) -> dict[str, float]:
    return summary(per_query(rank, queries))


def paired_bootstrap(
    ours: Sequence[float], theirs: Sequence[float], resamples: int = 2000, seed: int = 15
) -> dict[str, float]:
    """95 % intervals of mean(ours) / mean(theirs) and mean(ours) - mean(theirs), queries resampled."""
    rng = random.Random(seed)
    n = len(ours)
    ratios, differences = [], []
    for _ in range(resamples):
        draw = rng.choices(range(n), k=n)
        a = sum(ours[i] for i in draw)
        b = sum(theirs[i] for i in draw)
        ratios.append(a / b if b else math.inf)
        differences.append(100 * (a - b) / n)
    ratios.sort()
    differences.sort()
    lo, hi = int(0.025 * resamples), int(0.975 * resamples) - 1
    return {
        "ratio": round(sum(ours) / sum(theirs), 3) if sum(theirs) else math.inf,
        "ratio_lo": round(ratios[lo], 3),
        "ratio_hi": round(ratios[hi], 3),
        "diff": round(100 * (sum(ours) - sum(theirs)) / n, 1),
        "diff_lo": round(differences[lo], 1),
        "diff_hi": round(differences[hi], 1),
    }


# -- cross-validation of the ranking parameters -----------------------------------------------------

Variant = Params | Callable[[dict[str, list[ToolText]]], Ranker]
"""A parameter set of the index, or a ranking built from the tool texts."""

GRID: dict[str, Variant] = {
    "defaults": Params(),
    "name x3 (old)": Params(weights=(0.6, 3.0, 1.0, 0.8), b=(0.5, 0.3, 0.75, 0.75)),
    "name x2": Params(weights=(0.5, 2.0, 1.0, 0.5)),
    "params x0.5": Params(weights=(1.0, 1.0, 1.0, 0.5)),
    "textbook k1 1.2, b 0.75 (before)": Params(k1=1.2, b=(0.75,) * 4),
    "b 0.5": Params(b=(0.5,) * 4),
    "k1 1.2": Params(k1=1.2),
    "RM3 feedback": Params(feedback_docs=3),
    "request words dropped (before)": Params(request_weight=0.0),
    "request words weigh 1 (earlier)": Params(request_weight=1.0),
    "request words x0.5": Params(request_weight=0.5),
    "synonyms off (before)": Params(synonyms=0.0),
    "synonyms x0.25": Params(synonyms=0.25),
    "synonyms x0.75": Params(synonyms=0.75),
    "synonyms, no hypernyms": Params(hypernyms=False),
    "rare-word synonyms off (before)": Params(rare_synonyms=0.0),
    "rare-word synonyms x0.1": Params(rare_synonyms=0.1),
    "rare-word synonyms x0.5": Params(rare_synonyms=0.5),
    "initialisms off (before)": Params(initialisms=False),
    **variants(),
}
"""Named settings that the cross-validation chooses among (the defaults included)."""


def _variant_ranking(tools: Sequence[Tool], variant: Variant) -> Ranker:
    if isinstance(variant, Params):
        return mcpd_ranking(tools, params=variant)
    return variant(tool_texts(tools))


def cross_validate(
    tools: Sequence[Tool], queries: Sequence[Query], grid: dict[str, Variant], folds: int = 5, seed: int = 15
) -> dict[str, float]:
    """Mean held-out R@5 when each fold's setting is chosen on the other folds; each setting's R@5,
    and its held-out R@5 when the choice is between it and the defaults alone."""
    recall = {name: per_query(_variant_ranking(tools, v), queries)["R@5"] for name, v in grid.items()}
    held_out, chosen = choose_by_folds(recall, "defaults", folds, seed)
    out = {"cv R@5": held_out}
    out.update({f"R@5 {name}": round(100 * sum(r) / len(r), 1) for name, r in recall.items()})
    out.update({f"chosen {name}": float(count) for name, count in chosen.items()})
    for name, r in recall.items():
        pair = {"defaults": recall["defaults"], name: r}
        out[f"cv {name}"] = choose_by_folds(pair, "defaults", folds, seed)[0]
    return out


def choose_by_folds(
    recall: dict[str, list[float]], default: str, folds: int = 5, seed: int = 15
) -> tuple[float, Counter[str]]:
    """k-fold cross-validation over queries of a choice among settings, given each setting's
    per-query R@5: each fold scores the setting best on the other folds (``default`` on a tie).
    Returns the mean held-out R@5 (percent) and how often each setting was chosen."""
    count = len(recall[default])
    order = list(range(count))
    random.Random(seed).shuffle(order)
    held_out_total = 0.0
    chosen: Counter[str] = Counter()
    for fold in range(folds):
        test = order[fold::folds]
        test_set = set(test)
        train = [i for i in order if i not in test_set]
        best = max(recall, key=lambda name: (sum(recall[name][i] for i in train), name == default))
        chosen[best] += 1
        held_out_total += sum(recall[best][i] for i in test)
    return round(100 * held_out_total / count, 1), chosen


# -- usage replay ------------------------------------------------------------------------------------


def prior_recorder(prior: UsagePrior, now: float) -> Recorder:
    """Record a call as the daemon does: ``UsagePrior.observe`` with the query's analysed terms."""

    def record(query: str, server: str, tool: str) -> None:
        prior.observe(server, tool, True, learned_terms(query), now)

    return record


def replay(queries: Iterable[Query], record: Recorder) -> None:
    """Each query's relevant tools, recorded as successful calls that the query led to."""
    for query in queries:
        for tool_id in sorted(query.relevant):
            server, tool = tool_id.split("/", 1)
            record(query.text, server, tool)


def usage_replay(tools: Sequence[Tool], queries: Sequence[Query]) -> dict[str, dict[str, float]]:
    """Learn from every other query; evaluate on the rest, without and with what was learnt."""
    learned, held_out = queries[0::2], queries[1::2]
    prior = UsagePrior()
    replay(learned, prior_recorder(prior, time.time()))
    return {
        "mcpd, held-out half": evaluate(mcpd_ranking(tools), held_out),
        "mcpd + usage prior": evaluate(mcpd_ranking(tools, prior), held_out),
    }


# -- unseen queries ------------------------------------------------------------------------------------


def unseen_figures(tools: Sequence[Tool], queries: Sequence[Query], half: str) -> Table:
    """{style: {method: metrics}} for mcpd, BM25 and TF-cosine on one half ("A", "B") or all of an unseen set;
    style "all" is every query of the half; "n" is the number of queries."""
    chosen = [q for q in queries if half in ("all", q.half)]
    values = {method: per_query(METHODS[method](tools), chosen) for method in ("mcpd", "bm25", "tf-cosine")}
    styles = ["all", *dict.fromkeys(q.style for q in chosen)]
    table: Table = {}
    for style in styles:
        rows = [i for i, q in enumerate(chosen) if style in ("all", q.style)]
        table[style] = {
            method: {**summary({metric: [v[metric][i] for i in rows] for metric in METRICS}), "n": len(rows)}
            for method, v in values.items()
        }
    return table


def report_unseen(sets: Sequence[Path], half: str, as_json: bool, unseen: Path = UNSEEN) -> None:
    """Print ``unseen_figures`` of each set with queries in ``unseen``, as tables or as one JSON object."""
    figures = {
        d.name: unseen_figures(*load(d, unseen / f"{d.name}.jsonl"), half)
        for d in sets
        if (unseen / f"{d.name}.jsonl").exists()
    }
    print_figures(figures, f"unseen queries, half {half}", as_json)


def print_figures(figures: dict[str, Table], title: str, as_json: bool) -> None:
    """Print ``unseen_figures`` of each named set, as tables or as one JSON object."""
    if as_json:
        print(json.dumps(figures))
        return
    methods = ("mcpd", "bm25", "tf-cosine")
    for name, table in figures.items():
        print(f"\n{name}, {title}: R@5 / nDCG@10")
        print(f"  {'style':<8}{'n':>4}" + "".join(f"{method:>14}" for method in methods))
        for style, row in table.items():
            print(
                f"  {style:<8}{row['mcpd']['n']:>4.0f}"
                + "".join(f"{row[m]['R@5']:>7.1f}{row[m]['nDCG@10']:>7.1f}" for m in methods)
            )


# -- report --------------------------------------------------------------------------------------------


def print_table(methods: dict[str, dict[str, float]], width: int = 12) -> None:
    print(f"  {'method':<{width}}" + "".join(f"{metric:>9}" for metric in METRICS))
    for method, values in methods.items():
        print(f"  {method:<{width}}" + "".join(f"{values.get(metric, math.nan):>9.1f}" for metric in METRICS))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="directory with one folder per data set"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--no-usage", dest="usage", action="store_false", help="skip the usage replay")
    parser.add_argument("--no-cv", dest="cv", action="store_false", help="skip the cross-validation")
    parser.add_argument(
        "--unseen",
        choices=("A", "B", "all"),
        help="only score an unseen set's queries (one half, or all) per style: mcpd, BM25, TF-cosine",
    )
    parser.add_argument(
        "--unseen-set",
        choices=sorted(UNSEEN_SETS),
        default="1",
        help="which unseen set --unseen scores: 1 = bench/unseen, 2 = bench/unseen2, ... 4 = bench/unseen4",
    )
    parser.add_argument(
        "--realcat",
        choices=("A", "B", "all"),
        help="only score bench/realcat's queries (one half, or all) per style: mcpd, BM25, TF-cosine",
    )
    args = parser.parse_args()
    if args.realcat:
        print_figures(
            {"realcat": unseen_figures(*load(REALCAT), args.realcat)},
            f"real servers' tools, half {args.realcat}",
            args.json,
        )
        return
    sets = sorted(p for p in args.data.iterdir() if (p / "tools.jsonl").exists())
    if not sets:
        sys.exit(f"no data sets (folders with tools.jsonl and queries.jsonl) in {args.data}")
    if args.unseen:
        report_unseen(sets, args.unseen, args.json, UNSEEN_SETS[args.unseen_set])
        return
    figures: Table = {}
    extra: dict[str, Table] = {"bootstrap": {}, "cv": {}, "usage_replay": {}}
    for directory in sets:
        name = directory.name
        tools, queries = load(directory)
        values = {method: per_query(build(tools), queries) for method, build in METHODS.items()}
        figures[name] = {method: summary(v) for method, v in values.items()}
        extra["bootstrap"][name] = {
            "mcpd/bm25": paired_bootstrap(values["mcpd"]["R@5"], values["bm25"]["R@5"])
        }
        if args.cv and len(GRID) > 1:
            extra["cv"][name] = {"mcpd": cross_validate(tools, queries, GRID)}
        if args.usage:
            extra["usage_replay"][name] = usage_replay(tools, queries)
    if args.json:
        print(json.dumps({**figures, **{key: table for key, table in extra.items() if table}}))
        return
    for name, methods in figures.items():
        print(f"\n{name}")
        print_table(methods)
        ci = extra["bootstrap"][name]["mcpd/bm25"]
        target = min(TARGET_LIFT * methods["bm25"]["R@5"], TARGET_CAP)
        print(
            f"  mcpd R@5 / bm25 R@5 = {ci['ratio']:.2f}x, "
            f"95% CI {ci['ratio_lo']:.2f}x..{ci['ratio_hi']:.2f}x; "
            f"difference {ci['diff']:+.1f} ({ci['diff_lo']:+.1f}..{ci['diff_hi']:+.1f}) points"
        )
        reached = "reached" if methods["mcpd"]["R@5"] >= target else "MISSED"
        print(f"  target R@5 >= min({TARGET_LIFT} x bm25, {TARGET_CAP:.0f}) = {target:.1f}: {reached}")
        if name in extra["cv"]:
            cv = extra["cv"][name]["mcpd"]
            chosen = ", ".join(
                f"{key[7:]} {value:g}" for key, value in cv.items() if key.startswith("chosen ")
            )
            print(
                "  5-fold cross-validation over queries (setting chosen on 4 folds, scored on the 5th): "
                f"cv R@5 {cv['cv R@5']:g} (chosen: {chosen})"
            )
            print(f"    {'setting':<34}{'R@5':>7}{'cv R@5 vs defaults':>20}")
            for setting in GRID:
                print(f"    {setting:<34}{cv[f'R@5 {setting}']:>7.1f}{cv[f'cv {setting}']:>20.1f}")
        if name in extra["usage_replay"]:
            print("  usage replay: every other query recorded as successful calls, scored on the others")
            print_table(extra["usage_replay"][name], width=22)


if __name__ == "__main__":
    main()
