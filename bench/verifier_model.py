"""Train the verifier's learned model (``mcpd/trust/learned.py``) and print how it generalises.

Run ``python bench/verifier_model.py`` to print the figures, with ``--write`` to replace
``mcpd/trust/learned.bin``, ``--without probe16`` to keep a probe out of the training entirely (a
held-out measure of the whole verifier, not only of the model), ``--no-probes`` to skip the slow
leave-one-probe-out figures. Deterministic: the same data gives the same file.

Data, all in the repository: the poisoning corpus and its probes (``tests/data/poisoning_*.jsonl``,
poisoned and benign look-alikes) and honest texts of published MCP servers
(``tests/data/honest_mcp_texts.jsonl``: tool descriptions, schema strings, server instructions).
The toolret tools (``../shared/toolret``) are not trained on: they stay an untouched check of
false alarms (``bench/verifier.py``).

The model is a logistic regression over hashed features, fitted by AdaGrad (12 passes, fixed
shuffle). Its thresholds come from 5-fold cross-validation over the honest texts: ``high`` is
just above the highest score of an honest text the model was not trained on, ``sign`` the
99.5th percentile of those scores. Then, to show what it catches of attacks in a voice it has
not seen, each probe is left out in turn: the model trained without it scores it.
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
from mcpd.trust.corpus import load
from mcpd.trust.normalize import prepare
from mcpd.trust.verify import scan_text

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
OUT = ROOT / "mcpd" / "trust" / "learned.bin"
HONEST_WEIGHT = 0.5
"""Honest texts outnumber the labelled items; each counts half."""
EPOCHS, RATE, DECAY = 12, 0.2, 1e-5
FOLDS = 5
SIGN_QUANTILE = 0.995

Example = tuple[list[int], int, float]


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
    parser.add_argument("--no-probes", action="store_true", help="skip the leave-one-probe-out figures")
    options = parser.parse_args()

    sets = {
        path.stem.removeprefix("poisoning_"): load(path)
        for path in sorted(DATA.glob("poisoning_*.jsonl"))
        if path.stem.removeprefix("poisoning_") not in options.without
    }
    if options.without:
        print(f"not trained on: {', '.join(options.without)}")
    labelled = {
        name: [(vector(i.text), int(i.label == "poisoned"), 1.0) for i in items]
        for name, items in sets.items()
    }
    honest = [(vector(text), 0, HONEST_WEIGHT) for text in honest_texts(DATA / "honest_mcp_texts.jsonl")]
    every_label = [example for examples in labelled.values() for example in examples]
    print(f"labelled items {len(every_label)} in {len(sets)} sets, honest texts {len(honest)}")

    held_out: list[float] = []
    for fold in range(FOLDS):
        weights = fit(every_label + [h for n, h in enumerate(honest) if n % FOLDS != fold])
        held_out += [probability(weights, h[0]) for n, h in enumerate(honest) if n % FOLDS == fold]
    held_out.sort()
    high = min(0.99999, held_out[-1] + (1 - held_out[-1]) / 2)
    sign = held_out[int(SIGN_QUANTILE * (len(held_out) - 1))]
    print(
        f"honest texts scored by models that had not seen them: max {held_out[-1]:.5f}, "
        f"99.5th percentile {sign:.5f}; thresholds high {high:.5f}, sign {sign:.5f}"
    )

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

    print("\neach probe left out: the verifier with no model, and with a model trained without the probe")
    print(f"  {'set':<10}{'poisoned':>9}{'rules':>7}{'+model':>7}   {'benign':>6}{'rules':>7}{'+model':>7}")
    without = learned.Model(array("d", bytes(8 << learned.BITS)), 2.0, 2.0)  # no text reaches 2
    for name in (n for n in sets if n.startswith("probe")):
        left_out = learned.Model(
            array("d", fit([e for n, examples in labelled.items() if n != name for e in examples] + honest)),
            high,
            sign,
        )
        counts = []
        for label in ("poisoned", "benign"):
            texts = [i.text for i in sets[name] if (i.label == "poisoned") == (label == "poisoned")]
            counts.append(len(texts))
            for model in (without, left_out):
                learned.model = lambda model=model: model  # type: ignore[assignment]  # what verify asks for
                counts.append(sum(_high(text) for text in texts))
        poisoned, benign = "".join(f"{n:>7}" for n in counts[1:3]), "".join(f"{n:>7}" for n in counts[4:])
        print(f"  {name:<10}{counts[0]:>9}{poisoned}   {counts[3]:>6}{benign}")


def _high(text: str) -> bool:
    return any(f.severity == HIGH for f in scan_text("t", "description", text))


if __name__ == "__main__":
    main()
