"""English query words no tool uses: read as their WordNet synonyms and hypernyms in the catalogue."""

from __future__ import annotations

import gzip

import pytest

from mcpd.discovery import spelling, synonyms
from mcpd.discovery.index import RARE_WORD_TOOLS, Params, ToolIndex, ToolText
from mcpd.discovery.once import ReadOnce
from mcpd.discovery.text import stem


@pytest.fixture(scope="module")
def thesaurus() -> synonyms.Thesaurus:
    assert spelling.load() is not None, "pyspellchecker's English list is a dependency of mcpd"
    loaded = synonyms.load()
    assert loaded is not None, "the thesaurus ships with mcpd"
    return loaded


def catalogue(params: Params | None = None, insurer: bool = False) -> ToolIndex:
    servers = {
        "files": [
            ToolText("files", "write_file", "Write text to a file, replacing what it held"),
            ToolText("files", "delete_file", "Delete a file"),
        ],
        "clock": [ToolText("clock", "get_current_time", "The current time in a timezone")],
        "cars": [ToolText("cars", "rent_car", "Rent a car for a trip")],
    }
    if insurer:
        servers["insurer"] = [ToolText("insurer", "insure_automobile", "Insure an automobile")]
    index = ToolIndex(params or Params())
    index.replace_servers(servers)
    return index


def readings(text: str, known: set[str], thesaurus: synonyms.Thesaurus) -> dict[str, list[str]]:
    english = spelling.loaded()
    assert english is not None
    return synonyms.readings(spelling.unknown(spelling.typed(text), known), known, english, thesaurus)


def best(index: ToolIndex, query: str) -> str | None:
    hits = index.search(query, limit=1)
    return hits[0].tool if hits else None


@pytest.mark.parametrize(
    ("query", "tool"),
    [
        ("I need an automobile on Friday", "rent_car"),  # "car" is a synonym of "automobile"
        ("what hour is it in Lisbon", "get_current_time"),  # "time" is a hypernym of "hour"
    ],
)
def test_an_english_word_no_tool_uses_finds_the_tool_through_its_relatives(
    thesaurus: synonyms.Thesaurus, query: str, tool: str
) -> None:
    """A request's English word that no tool uses matched nothing: it is read as those of its
    WordNet synonyms and direct hypernyms that the catalogue has, at a share of its weight."""
    assert best(catalogue(Params(synonyms=0.0)), query) is None  # what the ranking did without it
    assert best(catalogue(), query) == tool


def test_a_word_few_tools_use_is_read_also_as_its_synonyms_below_them(thesaurus: synonyms.Thesaurus) -> None:
    """ "automobile" is a tool's word: it finds that tool first, and the car hire only below it,
    through its synonym "car" at a share of its weight (``Params.rare_synonyms``); without that share
    it found its own tool alone. A word of a path ("/root/notes") is no word of the request, and a
    word whose relatives the catalogue lacks adds nothing."""
    index = catalogue(insurer=True)
    assert [hit.tool for hit in index.search("automobile")] == ["insure_automobile", "rent_car"]
    alone = catalogue(Params(rare_synonyms=0.0), insurer=True)
    assert [hit.tool for hit in alone.search("automobile")] == ["insure_automobile"]
    known = {"car", "automobil", "time", "origin", "sourc", "base"}
    assert readings("car and automobile hours", known, thesaurus) == {"hours": ["time"]}
    assert readings("files in /root/notes", known, thesaurus) == {}
    assert readings("hour", {"nothing"}, thesaurus) == {}


def test_a_word_many_tools_use_is_not_read_as_its_synonyms(thesaurus: synonyms.Thesaurus) -> None:
    """A word more than ``RARE_WORD_TOOLS`` tools use already finds what it names among them:
    "automobile" then finds those tools alone, not the car hire."""
    index = catalogue(insurer=True)
    index.replace_server(
        "dealers",
        [ToolText("dealers", f"sell_automobile_{i}", "Sell an automobile") for i in range(RARE_WORD_TOOLS)],
    )
    assert "rent_car" not in {hit.tool for hit in index.search("automobile")}


def test_hypernyms_are_read_only_when_asked(thesaurus: synonyms.Thesaurus) -> None:
    """ "hour" has "hr" and "minute" as synonyms and "time" as a hypernym."""
    assert "time" not in thesaurus.related("hour", hypernyms=False)
    assert {"hr", "minut", "time"} <= set(thesaurus.related("hour"))
    assert thesaurus.related("qzxv") == []


def test_a_query_looks_up_a_bounded_number_of_words(thesaurus: synonyms.Thesaurus) -> None:
    """A query is client input: English words past ``spelling.MAX_WORDS`` are not looked up."""
    words = ["hour", "store", "record", "disk", "month", "week", "clock", "watch", "diary", "automobile"]
    known = {term for word in words for term in thesaurus.related(stem(word))} - {stem(w) for w in words}
    assert len(readings(" ".join(words), known, thesaurus)) == spelling.MAX_WORDS


def test_a_table_out_of_order_is_searched_right() -> None:
    """The build sorts the table; one that is not sorted still finds every key."""
    table = synonyms.Thesaurus(b"zebra\thors\tequin\napple\tfruit\t\nmango\t\tfruit\n")
    assert len(table) == 3
    assert table.related("apple") == ["fruit"]
    assert table.related("mango", hypernyms=False) == []
    assert table.related("zebra") == ["hors", "equin"]
    assert table.related("kiwi") == []


@pytest.mark.parametrize(
    "data",
    [
        gzip.compress(b"apple\tfruit\n")[:-6],  # cut short
        gzip.compress(b"apple\tfruit\n"),  # a line without its hypernyms
        gzip.compress(b"apple\tfruit\t\n"),  # too few keys to be the thesaurus
    ],
    ids=["truncated", "malformed", "too few keys"],
)
def test_a_damaged_table_leaves_words_unexpanded(data: bytes) -> None:
    """A damaged table raises what ``load`` catches: it says so once and returns None, so that
    queries go on without synonyms instead of failing, each reading the table again."""
    reads: list[int] = []

    def read() -> synonyms.Thesaurus:
        reads.append(1)
        return synonyms.read_thesaurus(data)

    once = ReadOnce(read, synonyms.READ_ERRORS, "synonyms.unavailable")
    assert once.load() is None and once.load() is None
    assert once.tried() and once.loaded() is None and len(reads) == 1
