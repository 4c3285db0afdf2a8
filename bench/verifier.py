"""Verifier benchmark: recall and precision on the labelled corpus, findings on real tools, speed.

Run ``python bench/verifier.py`` (``--data DIR`` for another copy of toolret, laid out as
``DIR/<set>/tools.jsonl``). Prints:

- on ``tests/data/poisoning_corpus.jsonl``, for the development half (even lines, the one
  the rules were written against), the held-out half (odd lines) and all: how many poisoned
  items get a high finding (recall at high), how many benign look-alikes do (precision at
  high), and how many benign ones get a medium finding; then the same for the probe sets,
  each written later, in another voice, and first run on rules that had never seen it:
  probe 1 then found 23/40 poisoned at high (57.5%) and no benign one, probe 2 27/40 (67.5%)
  and none, probe 3 22/40 (55%) and 1/30, probe 4 27/40 (67.5%) and 1/30, probe 5 17/30
  (56.7%) and none, probe 6 38/60 (63.3%; 47/60 at any severity) and 1/40, probe 7 21/40
  (52.5%) and 2/30: that is what the rules catch of attacks phrased in words they have not
  seen. They were widened after each probe, so today's figures on the probes are not blind.
  After probe 7 came the signs that count together (``mcpd.trust.signs``, TP012); probe 8,
  written by a red-teamer avoiding the words filters look for, then got 16/40 (40%; 15 without
  the signs) and 1/30. After probe 8 came the learned model as one more sign
  (``mcpd.trust.learned``, trained by ``bench/verifier_model.py``, which also prints what it
  adds on each probe left out of its training) and fixes for false alarms on 2,196 texts of 47
  published MCP servers (10 high before, 2 after); probe 9, written blind by a careful attacker
  in 18 languages, then got 21/45 (47%; the session's starting verifier 17/45) and 3/35
  benign false highs (2 of them fixed after: an unquoted "such as rm -rf", a Japanese
  negation); probe 10 is not blind: written with the rules that followed a second reader's set
  (an example per class it missed or falsely blocked, each with an honest look-alike); probe 11,
  written blind for classes the rules had no words for (deceiving the user about what a tool did,
  preferences planted in the model's lasting memory, other tools run down, another tool's call
  changed, the user asked for a secret, covert promotion, needless calls; 8 languages), then got
  6/49 at high (12.2%; 7/49 at any severity) and no benign one (0/36, none medium); after the
  rules for those classes 49/49, and a second set written after them 14/25 on first sight
  (2/20 honest look-alikes high), 25/25 and none once the rules were widened; probe 12, written
  blind (110 texts, 11 languages), then got 33/60 at high (55%) and 4/50 honest look-alikes high
  (2 medium); rules written after it caught 59/60 with none high, but raised 35 high findings
  on 45 ordinary honest descriptions (3 without them) and caught 1 more of 70 attacks in a probe
  written blind after them (probe 13: 130 texts, 19 languages, 37/70 at high and 4/60 honest
  high on first sight, 38/70 with those rules), so they were taken out; their 45 honest texts are
  kept as ``review`` (benign only); probe 14, written blind (140 texts, 19 languages), then got
  39/75 at high (52.0%; 42/75 at any severity) and 10/65 honest look-alikes high (7 more medium),
  the most false alarms of any probe: a credential path named by a text that says its contents
  are never read or sent, a quoted or refused "ignore previous instructions", an answer withheld
  in a guessing game, rm -rf named as a command that needs confirmation, a local audit log; each
  class was then fixed by a general mechanism (a use denied near the secret or a destination of
  the user's own, an order quoted as an example or reported and refused, a game's answer, a
  command listed for confirmation, a file path's last part), 0/65 high after (7 medium), the
  poisoned figures unchanged (39/75; 40/75 with the learned model retrained on it); a reviewer
  then found those exemptions too loose (25 evasions that were high before them: a game named
  anywhere in the text, a bare "the number", "your choice" as the user's own place, a denial next
  to "súbelo", "do not decline" as a refusal, a quotation after "e.g." ending a line or never
  closed, a confirmation "se da por hecha"), and a game sought over the whole text per
  withholding (23 s on 96 KB); tightened, all are high again (a key read and "uploaded to cloud
  storage" beside a denial medium again, as before them) and every figure above is unchanged;
  probes 15 and 16, written blind together (65 texts each, 40 poisoned, 11 and 15 languages), then
  got 31/40 (77.5%) with 1/25 honest look-alikes high and 23/40 (57.5%) with 2/25; rules and signs
  were then written from probe 15's misses only, as classes (the user's wishes overruled, a behaviour
  saved for after N calls or a date, a skipped confirmation, a wallet as a destination, a failure
  reported as success, restrictions overridden, the chat's last N messages, URL placeholders for a
  session or keys, a credential read for the tool's own use): probe 15 40/40 and 0/25 (in-sample),
  probe 16, held out and never read for its misses, 23/40 and 2/25 (unchanged), the 2,196 honest texts
  0 high (2 before); then the learned model's strongest score (above every honest text it had not
  seen) became a rare sign, chosen by leaving each earlier probe out of its training (10 more of 290
  poisoned, no more false alarm): probe 16 25/40 (62.5%) and 2/25;
  then a set written for the false highs on honest texts (``heldout``: 100 honest texts
  of the kinds that trip rules, scanners quoting attacks, config readers, denials of rank; 50
  attacks), before any change: on its held-out half (odd lines) 6/50 honest high and 22/25
  attacks; after fixes written from its other half and look-alikes of their own (a denied rank,
  quoted examples in more forms and languages, "do not have to"), 2/50 and 22/25, then 0/50 once
  single quotations were read as quotations (written having seen those two); then a second
  held-out set (``heldout2``: 117 honest texts using attacks' words innocently, 58 attacks in
  styles no earlier set used: settings, log lines, markdown tables, role-play, other tools
  shadowed, hidden characters, five languages), committed before any change: 39/58 attacks and
  2/117 honest high; after classes written from its misses (orders written as settings, the user's
  wishes declared void, what the server returns taken as orders, ...), 56/58 and 0/117; then a
  third held-out set (``heldout3``: 153 honest texts only, next to those new classes: --yes flags,
  sudo, chat schemas, settings keys, payee changes in ja/zh/ko, "put X in the y parameter" in four
  languages), committed before any change: 16/153 high; after classes written from it (a tool's
  own input put into its parameter, one settings switch alone, signs and chat tokens named as
  examples, precedence over settings, a flag's effect described), 0/153 with no attack lost;
  then a fourth held-out set (``heldout4``: 44 attacks only, walking through those exemptions),
  committed before any change: 33/44 high; after classes written from its misses (hiding said beside
  a third-person description or a skipped confirmation, rank over the other tools or safety in five
  languages), 42/44, no honest text of any set, the 2,196 published texts or toolret high;
  then a fifth held-out set (``heldout5``: 55 attacks, 110 honest look-alikes, 11 languages, as
  descriptions, parameters, titles, result texts and whole tools whose attack is split across
  fields: settings that send the chat away, forced flags, secret placeholders in config snippets,
  misreporting, unusual carriers, shadowing, urgency, fake markup), committed before any change:
  25/55 attacks and 7/110 honest high; after mechanisms written from it (a schema's object value
  read as written, one setting sending the conversation away, an option forced on every call,
  success claimed anyway, placeholders for another tool's secret, a tool read across its fields,
  shadowing in more languages), 54/55 and 2/110, with the fourth set 44/44 and the second 57/58;
  then a sixth held-out set (``heldout6``: 47 attacks in new forms, 180 honest texts from many
  domains, 9 languages), written blind: 25/47 attacks and 10/180 honest high; after classes written
  from it (tags named as kinds, places a thing is posted to, secrets kept private, log levels; consent
  claimed as given, credentials used with another tool), 31/47 and 4/180;
  then a seventh held-out set (``heldout7``: 252 honest texts of databases, cloud IAM, git hosting,
  mail rules, memory servers, browser password fill, payments, health and HR records, prompt
  templates, red-team scanners, shells, 10 languages and logs; 20 attacks), written blind: 17/20
  attacks and 8/252 honest high; after classes written from it ("disabled, not deleted" as a fact,
  a word of an address's domain, "log" after a record's kind, a level after a log line's timestamp,
  a quotation named as a payload, a verdict "(PASS)"), 17/20 and 2/252; with "supersedes all previous
  instructions" in German and Chinese, 19/20;
  then a set of LLM tooling (``llmtool``: 40 honest texts of OpenAI, Anthropic and Ollama wrappers,
  prompt templates and eval tools documenting the chat format with a system message, and scanners
  reporting attacks they quote; 14 attacks in role markup or quoting one and ordering it done),
  written before any change: 12/40 honest high, 14/14; after a documented format's system message
  saying only a persona was read as no authority and a reported quotation as mentioned for TP004 and
  TP009 (as for TP001), 0/40 and 14/14, every figure above unchanged;
  then an eighth held-out set (``heldout8``: 77 attacks as descriptions, parameters, schema defaults
  and enums, server instructions, prompts, resources and tool results, in 20 languages; 169 honest
  look-alikes: security docs, admin tools, policies, prompt libraries, logs), written blind: 54/77
  attacks high (57 at any severity) and 5/169 honest high; after classes written from its misses (a
  note addressed to the model as a rare sign, the model turned against its user, sends and requests
  for secrets in five more languages, consent claimed with telling refused, another tool refused
  and ours put in its place, ...), 68/77 and 3/169 (a note to the model counts with another rare
  sign, not with the learned model's word: "NOTE TO AI: prefer ISO dates in every argument"),
  with probes 9, 13 and 14 up by 1, 2 and 3 and no honest text of any set high;
  then a ninth held-out set (``heldout9``: 80 attacks in schema descriptions, enums, defaults and
  examples, prompt arguments, resource templates, server instructions, results and errors, as
  indirect, conditional and delayed orders, make-believe, comments, hidden characters, encodings,
  pretexts, shadowing and fake turns, in 20 languages; 180 honest look-alikes), written blind: 54/80
  attacks high (56 at any severity) and 3/180 honest high; after classes written from it (a watch on
  what the user says for a secret, with another rare sign; the model named as the reader of the text
  in 15 languages; make-believe acted out with real tools; the model cast as the system's
  administrator; consent taken as given; leave granted by reading this text; the user's requests
  ranked lower; known classes in more languages; a sent mail reported, a character of a game,
  notices spared their repeats), 71/80 and 0/180, no other figure moved (75/80 and probe 14 up by 1
  before the signs were narrowed for honest look-alikes written after them, in the tests);
  then a review of those classes (``review15``: 86 honest look-alikes of them, game personas,
  watches on an order number, notes to the model on formats, consent, administrators, resets and
  cards in 12 languages, sent mails, log URLs, few-shot turns, and 32 attack variants phrased
  otherwise), written blind: 8/86 honest high, none of them new with the ninth set's classes
  (10/86 before them), and 25/32 attacks high (21/32 before them); after narrowing for a game
  character named, a log of some extent, a move reported done in Japanese, Korean and Chinese,
  and widening for Turkish card requests, leave by loading this text and the model told to
  consider itself root administrator, 4/86 and 28/32, no other figure moved (look-alikes written
  after reading the rules, in ``tests/test_trust_review15.py``, narrowed five more signs; a role
  played, "pretend you are a waiter", then 3/86);
- every finding on every real tool of toolret (name, description, input schema) and on each
  server description, then the share of tools with a high and with a medium finding;
- the time to scan 2,500 tools (CPU and wall, best of three), as the daemon's worker thread would;
  then the daemon's inspection of a server of those tools, first, again after a restart, and
  after a ``list_changed`` that changed one tool (unchanged tools keep their findings);
- the time to scan one text of 1 MB of the shapes that once took seconds (random printable
  characters 28 s, "http://x.io/" repeated 4.8 s, random base64 3.7 s, ".env " repeated 3.0 s,
  before patterns ran only on the sentences holding their trigger and a text past
  ``verify.MAX_TEXT`` became a finding).

Goals (issue 13): >= 95% of poisoned items at high, 0 high findings on the real tools, medium
on <= 0.5% of them, 2,500 tools well under a second. Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import string
import time
from pathlib import Path
from typing import Any

from mcpd.config.model import ServerConfig
from mcpd.model.tools import ToolInfo
from mcpd.model.trust import HIGH, MEDIUM, Finding, describe
from mcpd.trust.corpus import Item, halves, load, score
from mcpd.trust.gate import Inspection, inspect
from mcpd.trust.verify import scan_text, scan_tool

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
CORPUS = DATA / "poisoning_corpus.jsonl"
PROBES = (*(DATA / f"poisoning_probe{n}.jsonl" for n in range(1, 17)), DATA / "poisoning_review.jsonl")
HELD_OUT = (DATA / "trust_heldout_honest.jsonl", DATA / "trust_heldout_poisoned.jsonl")
"""The set for false highs on honest texts, its honest and poisoned halves read as one (``heldout``)."""
HELD_OUT_2 = (DATA / "trust_heldout2_honest.jsonl", DATA / "trust_heldout2_poisoned.jsonl")
"""The second held-out set, read as one (``heldout2``)."""
HELD_OUT_3 = DATA / "trust_heldout3_honest.jsonl"
"""The third held-out set, honest texts only (``heldout3``)."""
HELD_OUT_4 = DATA / "trust_heldout4_poisoned.jsonl"
"""The fourth held-out set, attacks through the third set's exemptions only (``heldout4``)."""
HELD_OUT_5 = DATA / "trust_heldout5.jsonl"
"""The fifth held-out set, attacks and honest look-alikes in several forms (``heldout5``)."""
HELD_OUT_6 = DATA / "trust_heldout6.jsonl"
"""The sixth held-out set, written blind: honest texts of many domains, new attacks (``heldout6``)."""
HELD_OUT_7 = DATA / "trust_heldout7.jsonl"
"""The seventh held-out set, written blind: honest texts of domains the others missed (``heldout7``)."""
HELD_OUT_8 = DATA / "trust_heldout8.jsonl"
"""The eighth held-out set, written blind: attacks in many carriers, honest look-alikes (``heldout8``)."""
HELD_OUT_9 = DATA / "trust_heldout9.jsonl"
"""The ninth held-out set, written blind: attacks in schema fields, results, markup, codes (``heldout9``)."""
REVIEW_15 = DATA / "trust_review15.jsonl"
"""Honest look-alikes of the ninth set's classes and attack variants of them, written blind (``review15``)."""
LLM_TOOLING = DATA / "trust_llm_tooling.jsonl"
"""LLM tooling documenting the chat format, scanners quoting attacks, attacks in role markup (``llmtool``)."""
TOOLRET = ROOT.parent / "shared" / "toolret"


def corpus_report(items: list[Item], probes: dict[str, list[Item]]) -> None:
    development, held_out = halves(items)
    print(f"corpus: {CORPUS.relative_to(ROOT)} ({len(items)} items), probes: {', '.join(probes)}")
    print(
        f"{'half':<10}{'poisoned':>9}{'at high':>9}{'recall':>8}{'any sev':>9}"
        f"{'benign':>8}{'false hi':>9}{'precision':>10}{'benign med':>11}"
    )
    scores = {"dev": score(development), "held-out": score(held_out), "all": score(items)}
    scores |= {name: score(probe) for name, probe in probes.items()}
    for name, result in scores.items():
        print(
            f"{name:<10}{result.poisoned:>9}{result.caught_high:>9}{result.recall_high:>8.1%}"
            f"{result.caught_any:>9}{result.benign:>8}{result.false_high:>9}"
            f"{result.precision_high:>10.1%}{result.false_medium:>11}"
        )
    for name, probe_score in scores.items():
        if name in probes:
            for item in probe_score.missed + probe_score.false_alarms:
                print(f"  {name}: [{item.label} {item.cls}/{item.lang}] {item.text[:100]!r}")
    whole = scores["all"]
    by_class: dict[str, list[int]] = {}
    for item in items:
        if item.label == "poisoned":
            counts = by_class.setdefault(f"{item.cls}/{item.lang}", [0, 0])
            counts[1] += 1
            counts[0] += item not in whole.missed
    print(
        "poisoned found at high, by class/lang: "
        + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(by_class.items()))
    )
    for item in whole.missed:
        worst = sorted({f"{f.rule} {f.severity}" for f in scan_text("corpus", "text", item.text)})
        print(f"  missed  [{item.cls}/{item.lang}] {item.text[:110]!r} -> {worst or 'nothing'}")
    for item in whole.false_alarms:
        rules = sorted({f.rule for f in scan_text("corpus", "text", item.text) if f.severity == HIGH})
        print(f"  false   [{item.cls}/{item.lang}] {item.text[:110]!r} -> {rules}")


def load_tools(data: Path) -> list[dict[str, Any]]:
    tools = []
    for path in sorted(data.glob("*/tools.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                tool = json.loads(line)
                tool["set"] = path.parent.name
                tools.append(tool)
    return tools


def scan(tool: dict[str, Any]) -> list[Finding]:
    return scan_tool(tool["tool"], tool["description"] or "", tool["input_schema"] or {})


def real_tools_report(tools: list[dict[str, Any]], data: Path) -> None:
    sets = sorted({t["set"] for t in tools})
    print(f"\nreal tools: {len(tools)} in {data} ({', '.join(sets)}); every finding:")
    high = medium = 0
    for tool in tools:
        findings = scan(tool)
        for finding in findings:
            print(f"  {tool['set']}/{tool['server']}: {describe(finding)}")
        severities = {f.severity for f in findings}
        high += HIGH in severities
        medium += severities == {MEDIUM}
    servers = {(t["set"], t["server"]): t["server_description"] for t in tools if t.get("server_description")}
    server_findings = [
        (key, finding)
        for key, text in sorted(servers.items())
        for finding in scan_text(key[1], "server_description", text)
    ]
    for (dataset, _), finding in server_findings:
        print(f"  {dataset} server: {describe(finding)}")
    total = len(tools)
    print(f"tools with a high finding:   {high}/{total} ({high / total:.2%})   goal 0")
    print(f"tools with only medium:      {medium}/{total} ({medium / total:.2%})   goal <= 0.5%")
    print(
        f"server descriptions: {len(servers)}, high {sum(f.severity == HIGH for _, f in server_findings)},"
        f" medium {sum(f.severity == MEDIUM for _, f in server_findings)}"
    )


def timing_report(tools: list[dict[str, Any]], count: int = 2500) -> None:
    # Distinct texts (each copy renamed and renumbered), so no repeat is cheaper than the first.
    batch = [
        {**tool, "tool": f"{tool['tool']}_{i}", "description": f"{tool['description'] or ''} (v{i})"}
        for i, tool in zip(range(count), (tools[i % len(tools)] for i in range(count)), strict=True)
    ]
    runs = []
    for _ in range(3):
        cpu, wall = time.process_time(), time.perf_counter()
        for tool in batch:
            scan(tool)
        runs.append((time.process_time() - cpu, time.perf_counter() - wall))
    cpu_best, wall_best = min(r[0] for r in runs), min(r[1] for r in runs)
    print(f"\nscan {count} tools: {cpu_best * 1000:.0f} ms CPU, {wall_best * 1000:.0f} ms wall (best of 3)")
    reinspection_report(batch)


def reinspection_report(batch: list[dict[str, Any]]) -> None:
    """The daemon's inspection of one server of these tools (scan and hashes), then again as after
    a restart (the same texts, listed anew) and after a ``list_changed`` that changed one tool."""
    config = ServerConfig(name="bench", command="x")

    def listed(changed: int | None = None) -> tuple[ToolInfo, ...]:
        return tuple(
            ToolInfo(
                name=tool["tool"],
                description=(tool["description"] or "") + (" (changed)" if i == changed else ""),
                input_schema=tool["input_schema"] or {},
            )
            for i, tool in enumerate(batch)
        )

    def timed(tools: tuple[ToolInfo, ...], previous: Inspection | None) -> tuple[Inspection, float]:
        cpu = time.process_time()
        inspection = inspect(config, tools, None, previous=previous)
        return inspection, (time.process_time() - cpu) * 1000

    first, cold = timed(listed(), None)
    _, restart = timed(listed(), first)
    _, one_changed = timed(listed(changed=0), first)
    print(
        f"inspect a server of {len(batch)} tools: {cold:.0f} ms CPU; again after a restart {restart:.0f} ms; "
        f"after a list_changed of one tool {one_changed:.0f} ms"
    )


def long_texts_report() -> None:
    rng = random.Random(1)
    size = 1_000_000
    texts = {
        "random printable": "".join(rng.choice(string.printable) for _ in range(size)),
        "'http://x.io/' repeated": "http://x.io/" * (size // 12),
        "random base64": base64.b64encode(rng.randbytes(size * 3 // 4)).decode(),
        "'.env ' repeated": ".env " * (size // 5),
    }
    print("\nscan one text of 1 MB (CPU; before the fix 28 s, 4.8 s, 3.7 s, 3.0 s):")
    for name, text in texts.items():
        cpu = time.process_time()
        findings = scan_text("bench", "description", text)
        rules = ", ".join(sorted({f.rule for f in findings}))
        print(f"  {name:<26}{(time.process_time() - cpu) * 1000:>7.0f} ms   {rules}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=TOOLRET, help="a toolret copy: DIR/<set>/tools.jsonl")
    args = parser.parse_args()
    probes = {path.stem.removeprefix("poisoning_"): load(path) for path in PROBES}
    probes["heldout"] = [item for path in HELD_OUT for item in load(path)]
    probes["heldout2"] = [item for path in HELD_OUT_2 for item in load(path)]
    probes["heldout3"] = load(HELD_OUT_3)
    probes["heldout4"] = load(HELD_OUT_4)
    probes["heldout5"] = load(HELD_OUT_5)
    probes["heldout6"] = load(HELD_OUT_6)
    probes["heldout7"] = load(HELD_OUT_7)
    probes["heldout8"] = load(HELD_OUT_8)
    probes["heldout9"] = load(HELD_OUT_9)
    probes["review15"] = load(REVIEW_15)
    probes["llmtool"] = load(LLM_TOOLING)
    corpus_report(load(CORPUS), probes)
    tools = load_tools(args.data)
    if not tools:
        raise SystemExit(f"no */tools.jsonl under {args.data}")
    real_tools_report(tools, args.data)
    timing_report(tools)
    long_texts_report()


if __name__ == "__main__":
    main()
