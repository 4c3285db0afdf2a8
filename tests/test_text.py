"""Text analysis: each class of term-matching behaviour that discovery relies on."""

from __future__ import annotations

import pytest

from mcpd.discovery import text
from mcpd.discovery.text import (
    REQUEST_WORDS,
    name_words,
    query_terms,
    split_identifier,
    stem,
    terms,
    weighted_query_terms,
)


def test_identifiers_split_into_words() -> None:
    """snake_case, camelCase, acronyms, dots and dashes all separate words."""
    assert split_identifier("getHTTPResponse") == ["get", "HTTP", "Response"]
    assert split_identifier("create_issue.v2-beta") == ["create", "issue", "v2", "beta"]


@pytest.mark.parametrize(
    ("plural", "singular"),
    [
        ("images", "image"),
        ("issues", "issue"),
        ("messages", "message"),
        ("services", "service"),
        ("databases", "database"),
        ("creates", "create"),
        ("files", "file"),
        ("directories", "directory"),
    ],
)
def test_singular_and_plural_meet(plural: str, singular: str) -> None:
    """The Snowball stemmer gives a plural (or third person) the stem of its singular."""
    assert terms(plural) == terms(singular)


def test_inflections_meet_and_exceptions_stay_whole() -> None:
    """-ing and -ed forms meet their base; 'news' is not the plural of 'new'."""
    assert terms("searching") == terms("search") == terms("searched")
    assert stem("running") == stem("run")
    assert terms("news") == ["news"] and terms("news") != terms("new")


@pytest.mark.parametrize(("text", "term"), [("PDFs", "pdf"), ("APIs", "api"), ("IDs", "id"), ("URLs", "url")])
def test_acronym_plurals_are_the_acronym(text: str, term: str) -> None:
    """An acronym's plural is the acronym, not a camelCase split ('PDFs' is not 'PD Fs'), in either case."""
    assert terms(text) == terms(text.lower()) == terms(term) == [term]


def test_short_and_double_s_words_are_not_taken_for_plurals() -> None:
    """'dns', 'rss', 'css' and 'sms' keep their final s, which is part of the word."""
    assert [stem(w) for w in ("dns", "rss", "css", "sms")] == ["dns", "rss", "css", "sms"]


def test_compounds_meet_both_ways() -> None:
    """Adjacent words are also a joined term, so 'mind map', 'mindmap', 'MindMap' and 'mind-map' meet."""
    joined = set(terms("mindmap"))
    assert joined <= set(terms("mind map"))
    assert joined <= set(terms("MindMap"))
    assert joined <= set(terms("mind-map"))
    assert joined <= set(terms("create_mind_map"))
    assert {"mind", "map"} <= set(terms("MindMap"))


def test_compounds_stop_at_punctuation_and_stop_words() -> None:
    """Words that a comma, full stop or stop word separates do not form a compound."""
    assert terms("mind, map") == ["mind", "map"]
    assert terms("mind. Map") == ["mind", "map"]
    assert terms("map of mind") == ["map", "mind"]
    assert terms("mind map", compounds=False) == ["mind", "map"]


def test_stop_words_contractions_and_single_letters_are_not_terms() -> None:
    """Function words, "'s"/"'m"/"n't" endings and one-letter fragments carry no meaning."""
    assert terms("Searching the files") == ["search", "file"]
    assert terms("I'm sure the company's website can't load") == terms("sure, company website, load")
    assert terms("a b c x") == []


def test_cjk_text_becomes_bigrams() -> None:
    """Chinese without spaces still yields matchable terms."""
    assert terms("搜索关键词") == ["搜索", "索关", "关键", "键词"]
    assert "bing" in terms("必应bing搜索")


def test_queries_drop_request_words_that_no_tool_name_uses() -> None:
    """A query loses the general stop list's words ("help", "find", "show", "latest"), which say how
    a request is put; a word that a tool's name uses is kept; tool texts keep every such word."""
    assert {"help", "find", "show", "latest"} <= REQUEST_WORDS
    query = "Help me find the latest weather and show it"
    assert query_terms(query) == ["weather"]
    assert query_terms(query, keep=set(name_words("showForecast"))) == ["weather", "show"]
    assert terms(query) == ["help", "find", "latest", "weather", "latestweath", "show"]


def test_weighted_query_terms_weigh_request_words_less() -> None:
    """Request words and the compounds they form weigh ``request_weight``, unless a tool name uses
    the word; weight 0 leaves them out, as ``query_terms`` does."""
    query = "Help me find the latest weather and show it"
    assert weighted_query_terms(query, keep=set(name_words("showForecast")), request_weight=0.2) == {
        "help": 0.2,
        "find": 0.2,
        "latest": 0.2,
        "weather": 1.0,
        "latestweath": 0.2,
        "show": 1.0,
    }
    assert weighted_query_terms(query) == {"weather": 1.0}


def test_name_words_are_the_lowercase_words_of_a_name() -> None:
    """Tool names are split as identifiers and lowercased, the form a query's words are compared in."""
    assert name_words("find_nearbyPlaces") == ["find", "nearby", "places"]


def test_stems_of_client_words_cannot_pin_memory() -> None:
    """Queries are client input: the stem cache holds at most STEM_CACHE words of at most
    CACHED_WORD characters, and a longer word stems the same without entering it."""
    long_words = [f"{i:04d}" + "searching" * 400 for i in range(200)]
    before = text._cached_stem.cache_info().currsize
    stems = [stem(word) for word in long_words]
    assert text._cached_stem.cache_info().currsize == before
    assert stems == [word.removesuffix("ing") for word in long_words]
    for i in range(text.STEM_CACHE + 100):
        stem(f"word{i}s")
    assert text._cached_stem.cache_info().currsize == text.STEM_CACHE
    assert stem("images") == "imag" and stem("pdfs") == "pdf"


def test_usage_learns_a_bounded_number_of_terms_per_query() -> None:
    """Every term learned is kept for as long as its call: a long query teaches its first
    LEARNED_TERMS distinct terms, a usual one all of them, in order."""
    assert text.learned_terms("convert the PDF to markdown, then convert again") == terms(
        "convert the PDF to markdown then"
    )
    long_query = " ".join(f"word{i}" for i in range(2000))
    learned = text.learned_terms(long_query)
    assert len(learned) == text.LEARNED_TERMS and learned[:2] == ["word0", "word1"]
