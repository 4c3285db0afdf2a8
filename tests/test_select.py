"""Compatible server selection: the reference's word_hash tokenisation, threshold and fallbacks."""

from __future__ import annotations

from collections import Counter

import pytest

from mcpd.discovery.select import Candidate, reaches, select_servers, tf_cosine, word_hash

SERVERS = [
    Candidate("filesystem", "Read, write, and search local files and directories"),
    Candidate("github", "GitHub repos, issues, pull requests, code search"),
    Candidate("brew", "Install, update, and manage macOS packages via Homebrew"),
]


def test_word_hash_follows_the_gem() -> None:
    """Punctuation is deleted inside words, short and stop words go, words are Porter-stemmed,
    and each run of punctuation is a term of its own."""
    assert word_hash("Installing the greeting's files, in /tmp...") == Counter(
        {"instal": 1, "greet": 1, "file": 1, "tmp": 1, "'": 1, ",": 1, "/": 1, "...": 1}
    )
    assert word_hash("file-system is it") == Counter({"filesystem": 1, "-": 1})
    assert word_hash("new url like") == Counter()  # all three are in the gem's stop list


def test_select_picks_brew_for_installing() -> None:
    """'installing imagemagick' meets brew's 'Install' through the stemmer, and selects only brew."""
    for query in ("install imagemagick", "installing imagemagick"):
        selection = select_servers(query, SERVERS)
        assert selection.names == ["brew"] and not selection.fallback


def test_stop_words_and_short_words_select_nothing() -> None:
    """'in', 'is', 'it' do not make a file server relevant to a question about the time."""
    servers = [*SERVERS, Candidate("files", "Files in a folder, and it is in reach")]
    selection = select_servers("what time is it in Tokyo", servers)
    assert selection.fallback and selection.scores["files"] == 0.0


def test_select_keeps_config_order() -> None:
    """Matches come back in the order they were configured, not by score."""
    selection = select_servers("search code", SERVERS)
    assert selection.names == ["filesystem", "github"]
    assert selection.scores["github"] > selection.scores["filesystem"]


@pytest.mark.parametrize(
    ("query", "servers"),
    [
        ("install imagemagick", []),  # empty list
        ("   ", SERVERS),  # blank query
        ("install imagemagick", [Candidate("a", None), Candidate("b", "")]),  # no descriptions
        ("install imagemagick", [Candidate("a", "  \n"), Candidate("b", None)]),  # blank is none
        ("quantum chromodynamics", SERVERS),  # nothing reaches the threshold
    ],
)
def test_select_falls_back_to_the_full_list(query: str, servers: list[Candidate]) -> None:
    """Each fallback returns the list unchanged and says it is a fallback."""
    selection = select_servers(query, servers)
    assert selection.fallback
    assert selection.names == [s.name for s in servers]


def test_select_threshold_is_adjustable() -> None:
    """A high threshold falls back; a low one keeps anything with a shared term; 0 keeps everything."""
    assert select_servers("install imagemagick", SERVERS, threshold=0.99).fallback
    assert select_servers("search", SERVERS, threshold=0.01).names == ["filesystem", "github"]
    assert select_servers("quantum", SERVERS, threshold=0.0).names == ["filesystem", "github", "brew"]


def test_a_score_of_exactly_the_threshold_is_selected() -> None:
    """cosine = 1/sqrt(2 * 200) = 1/20 exactly, which floating point computes as 0.04999...; it counts."""
    description = "backup " + "zeta " * 13 + "omega " * 5 + "delta " * 2 + "kappa"
    query, document = word_hash("backup weather"), word_hash(f"x {description}")
    assert sum(v * v for v in query.values()) == 2 and sum(v * v for v in document.values()) == 200
    assert tf_cosine(query, document) < 0.05  # the float is below the threshold ...
    assert reaches(query, document, 0.05)  # ... the exact value is not
    assert not reaches(query, document, 0.050001)
    assert select_servers("backup weather", [Candidate("x", description)], threshold=0.05).names == ["x"]
