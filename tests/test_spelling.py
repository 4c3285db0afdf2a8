"""Misspelt query words: read as the catalogue's terms one edit away, English words left alone."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcpd.discovery import spelling
from mcpd.discovery.index import Params, ToolIndex, ToolText


@pytest.fixture(scope="module")
def english() -> spelling.Lexicon:
    lexicon = spelling.load()
    assert lexicon is not None, "pyspellchecker's English list is a dependency of mcpd"
    return lexicon


def catalogue(spell: bool = True) -> ToolIndex:
    # Without spelling, without synonyms too: "develop" would find the branch tool through "create".
    index = ToolIndex(Params() if spell else Params(spelling=False, synonyms=0.0))
    index.replace_servers(
        {
            "weather": [ToolText("weather", "get_forecast", "Weather forecast for a city")],
            "calc": [ToolText("calc", "calculate", "Calculate an arithmetic expression")],
            "editor": [ToolText("editor", "edit_file", "Edit a text file in place")],
            "git": [ToolText("git", "create_branch", "Create a new branch in a git repository")],
        }
    )
    return index


def best(index: ToolIndex, query: str) -> str | None:
    hits = index.search(query, limit=1)
    return hits[0].tool if hits else None


def test_the_lexicon_holds_english_words_only(english: spelling.Lexicon) -> None:
    assert len(english) > 100_000
    assert all(word in english for word in ("meditation", "kindly", "weather", "calculate"))
    assert not any(word in english for word in ("calcualte", "brnach", "forcast", "podcst"))
    assert 42 not in english


@pytest.mark.parametrize(
    ("query", "tool"),
    [
        ("wheather forcast for Londn", "get_forecast"),  # letters left out and added
        ("calcualte 15% of 2380", "calculate"),  # two swapped, in the stem's suffix
        ("brnach off develop", "create_branch"),
    ],
)
def test_a_misspelt_query_finds_the_tool_meant(english: spelling.Lexicon, query: str, tool: str) -> None:
    assert best(catalogue(spell=False), query) != tool  # what the ranking did without it
    assert best(catalogue(), query) == tool


def test_english_words_and_pieces_of_tokens_are_not_corrected(english: spelling.Lexicon) -> None:
    """ "meditation" is one edit from "editation", whose stem is the editor's "edit": an English word
    the catalogue lacks is the request's own, and a base64 blob's pieces are no typos."""
    index = catalogue()
    assert index.search("benefits of meditation") == []
    assert index.search("what is iVBORw0KGgoAAAANSUhEUgAAAgAAAAIACAYAAAD0eNT6 ?") == []
    query = "meditation kindly iVBORw0KGgoAAAA d0eNT6 histroy's"
    assert spelling.misspelt(spelling.unknown(spelling.typed(query), set()), english) == ["histroy"]


def test_a_query_corrects_a_bounded_number_of_words(english: spelling.Lexicon) -> None:
    """A query is client input: made-up words past ``MAX_WORDS`` are not looked at."""
    made_up = " ".join(f"qz{a}{b}xv" for a in "abcdefgh" for b in "abcdefgh")
    words = spelling.unknown(spelling.typed(made_up), set())
    assert len(spelling.misspelt(words, english)) == spelling.MAX_WORDS


def test_a_compound_written_as_one_word_finds_the_tool_of_its_two_words(english: spelling.Lexicon) -> None:
    """ "flowchart" is no term of the catalogue's, whose chart tool says "flow diagram chart": read as
    flow and chart it finds that tool, not the process tools that "process" alone led to (found by
    the second unseen set's question "How do I make a flowchart of our onboarding process?")."""
    index = ToolIndex()
    index.replace_servers(
        {
            "chart": [
                ToolText("chart", "generate_flow_diagram", "Generate a flow diagram chart of a process"),
                ToolText("chart", "generate_pie_chart", "Generate a pie chart of proportions"),
            ],
            "shell": [
                ToolText("shell", name, f"{verb} a terminal process")
                for name, verb in (
                    ("start_process", "Start"),
                    ("kill_process", "Kill"),
                    ("list_processes", "List"),
                )
            ],
        }
    )
    assert best(index, "How do I make a flowchart of our onboarding process?") == "generate_flow_diagram"


def test_words_that_only_look_compound_are_not_split(english: spelling.Lexicon) -> None:
    """A part is an English word of four letters at least and no stop word: "promotional" is not
    pro + motion, "clickable" not click + able, "proper" not pro + per; nor is a word the catalogue
    has ("database") split, nor one more than ``MAX_LENGTH`` letters long."""
    known = {
        "pro",
        "motion",
        "click",
        "abl",
        "per",
        "data",
        "base",
        "flow",
        "chart",
        "hous",
        "plant",
        "databas",
    }
    query = "promotional clickable proper flowchart houseplants " + "flowchart" * 3
    assert spelling.compounds(spelling.unknown(spelling.typed(query), known), known, english) == {
        "flowchart": ("flow", "chart"),
        "houseplants": ("hous", "plant"),
    }
    assert spelling.compounds(spelling.unknown(spelling.typed("database"), known), known, english) == {}


def test_a_list_laid_out_otherwise_is_read_alike() -> None:
    """The words are the JSON object's keys however it is laid out (one line, or a word a line)."""
    lexicon = spelling.read_lexicon(gzip.compress(b'{"apple": 2, "mango":1,"zebra" :3}'))
    assert len(lexicon) == 3 and all(word in lexicon for word in ("apple", "mango", "zebra"))


def test_a_list_out_of_order_is_sorted() -> None:
    """pyspellchecker ships its list sorted; one that is not is still searched right."""
    lexicon = spelling.read_lexicon(gzip.compress(b'{\n"zebra": 3,\n"apple": 2,\n"mango": 1\n}'))
    assert len(lexicon) == 3
    assert all(word in lexicon for word in ("zebra", "apple", "mango"))
    assert "kiwi" not in lexicon


def _list(words: int) -> bytearray:
    return bytearray(gzip.compress(b"{\n" + b"".join(b'"word%d": 3,\n' % i for i in range(words)) + b"}"))


@pytest.mark.parametrize(
    ("data", "flipped"),
    [(_list(spelling.MIN_WORDS), 40), (_list(spelling.MIN_WORDS), -6), (_list(100), None)],
    ids=["deflate stream", "checksum", "too few words"],
)
def test_a_damaged_word_list_leaves_words_uncorrected(
    tmp_path: Path, data: bytearray, flipped: int | None
) -> None:
    """pyspellchecker's list damaged on disk (a byte flipped in its gzip), or not an English list:
    ``load`` says so and returns None, so that queries go on uncorrected. Before, a damaged deflate
    stream raised ``zlib.error`` out of ``load``, failing the first ranked query and, nothing
    remembered, every one after it, each reading the list again."""
    resources = tmp_path / "spellchecker" / "resources"
    resources.mkdir(parents=True)
    (resources.parent / "__init__.py").write_text("")
    if flipped is not None:
        data = bytearray(data)
        data[flipped] ^= 0xFF
    (resources / "en.json.gz").write_bytes(bytes(data))
    script = "from mcpd.discovery import spelling; print(spelling.load(), spelling.tried())"
    path = os.pathsep.join([str(tmp_path), str(Path(spelling.__file__).parents[2])])
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "spelling.unavailable" in done.stdout
    assert done.stdout.splitlines()[-1] == "None True"
