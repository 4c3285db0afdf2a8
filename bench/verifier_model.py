"""Train the verifier's learned model (``mcpd/trust/learned.py``) and print how it generalises.

Run ``python bench/verifier_model.py`` to print the figures, with ``--write`` to replace
``mcpd/trust/learned.bin``, ``--without probe16`` to keep a set out of the training entirely (a
held-out measure of the whole verifier, not only of the model), ``--held-out`` to train on the
held-out sets too, ``--no-probes`` to skip the slow leave-one-set-out figures, ``--compare`` to print
beside them what a model trained the other way (with the held-out sets, or without them) caught.
Deterministic: the same data gives the same file.

Data, all in the repository: the poisoning corpus and its probes (``tests/data/poisoning_*.jsonl``),
the held-out sets and LLM tooling set (``tests/data/trust_*.jsonl``, named as ``bench/verifier.py``
names them; poisoned and benign look-alikes, a whole tool read as its strings) and honest texts of
published MCP servers (``tests/data/honest_mcp_texts.jsonl``: tool descriptions, schema strings,
server instructions). The held-out sets are scored, left out in turn, but not trained on unless
asked: after the eighth, a model trained on them too (3,124 labelled items in 27 sets, not 1,638 in
18) caught fewer over the sets left out in turn (897 of their 1,088 poisoned texts, not 902; the
rules alone 859; 26 of 1,704 honest texts high, not 25): one more on heldout6 and probe 13, fewer on
heldout8, heldout and probes 12 and 14. Its honest texts' scores spread (one at 0.999994, above the
0.99999 cap ``high`` had then; the 99.5th percentile 0.809, not 0.930), so it was not shipped.
The toolret tools (``../shared/toolret``) are not trained on: they stay an untouched check of
false alarms (``bench/verifier.py``).

The shipped ``learned.bin`` was written at c9d0a7c. The features it reads come from
``mcpd.trust.normalize.prepare``, which has changed since, so ``--write`` today gives other bytes:
rebuilt after the ninth set (the same 1,638 items, 2,196 honest texts), it caught one fewer of probe
13 (43 of 70 high, not 44) and of heldout9 (70 of 80, not 71), every other set the same, so the
shipped one was kept. Rebuild it (and compare ``bench/verifier.py`` before and after) when a change to
``prepare`` moves the figures.

The model is a logistic regression over hashed features, fitted by AdaGrad (12 passes, fixed
shuffle). Its thresholds come from 5-fold cross-validation over the honest texts: ``high`` is
just above the highest score of an honest text the model was not trained on, ``sign`` the
99.5th percentile of those scores. Then, to show what it catches of attacks in a voice it has
not seen, each set is left out in turn: the model trained without it scores it.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from array import array
from collections.abc import Sequence
from pathlib import Path

from mcpd.model.trust import HIGH
from mcpd.trust import learned
from mcpd.trust.corpus import Item, load
from mcpd.trust.normalize import prepare

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
OUT = ROOT / "mcpd" / "trust" / "learned.bin"
HONEST_WEIGHT = 0.5
"""Honest texts outnumber the labelled items; each counts half."""
EPOCHS, RATE, DECAY = 12, 0.2, 1e-5
FOLDS = 5
SIGN_QUANTILE = 0.995

Example = tuple[list[int], int, float]
POISONING = "poisoning_"
"""The corpus and its probes: the sets the model is trained on (and the held-out sets with ``--held-out``)."""


def labelled_sets() -> dict[str, list[Item]]:
    """Every labelled set by the name ``bench/verifier.py`` gives it: a held-out set's honest and
    poisoned files read as one."""
    sets: dict[str, list[Item]] = {}
    for path in sorted(DATA.glob("poisoning_*.jsonl")) + sorted(DATA.glob("trust_*.jsonl")):
        stem = path.stem.removeprefix(POISONING).removeprefix("trust_")
        name = "llmtool" if stem == "llm_tooling" else stem.removesuffix("_honest").removesuffix("_poisoned")
        sets.setdefault(name, []).extend(load(path))
    return sets


def readable(item: Item) -> str:
    """What the model reads of an item: a whole tool as its name, description and schema strings."""
    if item.form != "tool":
        return item.text
    strings: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            strings.append(value)
        elif isinstance(value, dict):
            for inner in value.values():
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(json.loads(item.text))
    return "\n".join(strings)


def vector(text: str) -> list[int]:
    return sorted(learned.features(prepare(text).folded))


def fit(examples: Sequence[Example]) -> list[float]:
    weights = [0.0] * (1 << learned.BITS)
    squares = [0.0] * (1 << learned.BITS)
    order = list(examples)
    shuffle = random.Random(0)
    for _ in range(EPOCHS):
        shuffle.shuffle(order)
        for buckets, label, weight in order:
            z = sum(weights[i] for i in buckets)
            predicted = learned.logistic(z)
            gradient = (predicted - label) * weight
            for i in buckets:
                squares[i] += gradient * gradient
                weights[i] -= RATE * gradient / math.sqrt(squares[i] + 1e-8) + RATE * DECAY * weights[i]
    return weights


def probability(weights: list[float], buckets: list[int]) -> float:
    z = sum(weights[i] for i in buckets)
    return learned.logistic(z)


def honest_texts(path: Path) -> list[str]:
    texts: list[str] = []
    for line in path.read_text().splitlines():
        if line.strip():
            text = json.loads(line)["text"]
            if len(text) >= 16:
                texts.append(text)
    return texts


def thresholds(labelled: list[Example], honest: list[Example]) -> tuple[float, float]:
    """(high, sign) from the honest texts scored by models trained without them (``FOLDS``-fold)."""
    held_out: list[float] = []
    for fold in range(FOLDS):
        weights = fit(labelled + [h for n, h in enumerate(honest) if n % FOLDS != fold])
        held_out += [probability(weights, h[0]) for n, h in enumerate(honest) if n % FOLDS == fold]
    held_out.sort()
    # Above every honest score, whatever it is: a cap (0.99999 until the held-out sets were trained
    # on) put it below one honest text that scored 0.999994. Only kept below 1 as ``learned.bin``
    # stores it (float32).
    high = min(1 - 2**-23, held_out[-1] + (1 - held_out[-1]) / 2)
    sign = held_out[int(SIGN_QUANTILE * (len(held_out) - 1))]
    print(
        f"honest texts scored by models that had not seen them: max {held_out[-1]:.7f}, "
        f"99.5th percentile {sign:.5f}; thresholds high {high:.7f}, sign {sign:.5f}"
    )
    return high, sign


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        metavar="SET",
        help="a set not to train on at all (e.g. probe16), kept for a held-out measure; repeatable",
    )
    parser.add_argument("--held-out", action="store_true", help="train on the held-out sets too")
    parser.add_argument("--no-probes", action="store_true", help="skip the leave-one-set-out figures")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="beside each set left out, a model trained the other way (--held-out or not; twice the time)",
    )
    options = parser.parse_args()

    every_set = labelled_sets()
    if options.without:
        print(f"not trained on: {', '.join(options.without)}")
    vectors = {
        name: [(vector(readable(i)), int(i.label == "poisoned"), 1.0) for i in items]
        for name, items in every_set.items()
        if name not in options.without
    }
    labelled = {n: v for n, v in vectors.items() if options.held_out or _poisoning(n)}
    other_way = {n: v for n, v in vectors.items() if not options.held_out or _poisoning(n)}
    honest = [(vector(text), 0, HONEST_WEIGHT) for text in honest_texts(DATA / "honest_mcp_texts.jsonl")]
    every_label = [example for examples in labelled.values() for example in examples]
    print(f"labelled items {len(every_label)} in {len(labelled)} sets, honest texts {len(honest)}")

    high, sign = thresholds(every_label, honest)
    weights = fit(every_label + honest)
    model = learned.Model(array("d", weights), high, sign)
    if options.write:
        OUT.write_bytes(model.encode())
        print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size:,} bytes)")
    else:
        print("(--write to replace the shipped model)")
    sys.stdout.flush()
    if options.no_probes:
        return

    print("\neach set left out: the verifier with no model, and with a model trained without the set")
    other = "-held" if options.held_out else "+held"
    columns = ("rules", "+model", other) if options.compare else ("rules", "+model")
    header = "".join(f"{c:>7}" for c in columns)
    print(f"  {'set':<10}{'poisoned':>9}{header}   {'benign':>6}{header}")
    without = learned.Model(array("d", bytes(8 << learned.BITS)), 2.0, 2.0)  # no text reaches 2
    if options.compare:
        print(
            f"  ({other}: trained {'without' if options.held_out else 'with'} the held-out sets,"
            " with thresholds of its own)"
        )
        other_high, other_sign = thresholds([e for examples in other_way.values() for e in examples], honest)
    for name in (n for n in every_set if n != "corpus"):
        others = [e for n, examples in labelled.items() if n != name for e in examples]
        models = [without, learned.Model(array("d", fit(others + honest)), high, sign)]
        if options.compare:
            rest = [e for n, examples in other_way.items() if n != name for e in examples]
            models.append(learned.Model(array("d", fit(rest + honest)), other_high, other_sign))
        row = f"  {name:<10}"
        for poisoned in (True, False):
            items = [i for i in every_set[name] if (i.label == "poisoned") == poisoned]
            counts = [len(items)]
            for model in models:
                learned.model = lambda model=model: model  # type: ignore[assignment]  # what verify asks for
                counts.append(sum(_high(item) for item in items))
            row += f"{counts[0]:>{9 if poisoned else 6}}" + "".join(f"{n:>7}" for n in counts[1:]) + "   "
        print(row.rstrip())
        sys.stdout.flush()


def _poisoning(name: str) -> bool:
    """Whether ``name`` is the corpus or one of its probes, not a held-out set."""
    return (DATA / f"{POISONING}{name}.jsonl").exists()


def _high(item: Item) -> bool:
    return any(f.severity == HIGH for f in item.findings())


if __name__ == "__main__":
    main()
