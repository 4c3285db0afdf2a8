"""The optional semantic ranking, proved on a tiny static model the tests build themselves."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import numpy as np
import pytest
import structlog
from model2vec import StaticModel
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace

from mcpd.client.aio import connect
from mcpd.config.model import DaemonSettings
from mcpd.discovery import semantic
from mcpd.discovery.index import ToolIndex, ToolText
from mcpd.discovery.semantic_setup import semantic_indexes
from mcpd.testing import fixture_toml
from mcpd.testing.daemon import running_daemon

# Word -> direction: synonyms share one, so only meaning (not spelling) links them.
_MEANINGS = {
    "move": 0,
    "drag": 0,
    "element": 1,
    "widget": 1,
    "history": 2,
    "log": 2,
    "commits": 2,
    "git": 3,
    "repository": 3,
    "weather": 4,
    "forecast": 4,
}

TOOLS = [
    ToolText("browser", "drag_element", "Drag an element"),
    ToolText("git", "git_log", "Show the commits history of a repository"),
    ToolText("weather", "forecast", "Weather forecast"),
]


def _build_model(directory: Path, scale: float = 1.0) -> Path:
    """A model2vec model: a word-level tokenizer and one embedding row per word."""
    vocab = {"[UNK]": 0, **{word: i + 1 for i, word in enumerate(_MEANINGS)}}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    vectors = np.zeros((len(vocab), 8), dtype=np.float32)
    for word, meaning in _MEANINGS.items():
        vectors[vocab[word], meaning] = scale
        vectors[vocab[word], 7] = 0.1 * vocab[word]  # words differ a little, synonyms stay close
    StaticModel(vectors, tokenizer, normalize=True).save_pretrained(directory)
    return directory


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return _build_model(tmp_path / "model")


def _index(model: Path, cache: Path) -> tuple[ToolIndex, semantic.SemanticIndex]:
    embedder, vectors = semantic.load(str(model), cache)
    ranking = semantic.SemanticIndex(embedder, vectors)
    index = ToolIndex(semantic=ranking)
    index.replace_servers({tool.server: [tool] for tool in TOOLS})
    return index, ranking


def test_fusion_finds_a_tool_by_meaning_alone(model: Path, tmp_path: Path) -> None:
    """A query sharing no word with a tool ("move the widget" vs "Drag an element") still finds it."""
    index, _ = _index(model, tmp_path / "cache.sqlite")
    assert ToolIndex().search("move the widget") == []
    hits = index.search("move the widget", limit=2)
    assert (hits[0].server, hits[0].tool) == ("browser", "drag_element")


def test_fusion_keeps_lexical_agreement_on_top(model: Path, tmp_path: Path) -> None:
    """A tool that both rankings put first stays first, and a server filter holds for both."""
    index, _ = _index(model, tmp_path / "cache.sqlite")
    assert [(h.server, h.tool) for h in index.search("git log history", limit=1)] == [("git", "git_log")]
    assert {h.server for h in index.search("move the widget", servers={"weather"})} <= {"weather"}


def test_a_restart_re_embeds_nothing(model: Path, tmp_path: Path) -> None:
    """Vectors are cached on disk by tool text: a second daemon (new model object, same cache) embeds none."""
    cache = tmp_path / "cache.sqlite"
    _, first = _index(model, cache)
    assert first.embedded == len(TOOLS)
    first.cache.close()
    _, second = _index(model, cache)
    assert second.embedded == 0
    changed = ToolText("git", "git_log", "Show the commits history")
    second.replace_servers({"git": [changed]})
    assert second.embedded == 1  # only the tool whose text changed


def test_the_cache_is_per_model(tmp_path: Path) -> None:
    """Another model's weights never reuse vectors cached for the first one."""
    cache = tmp_path / "cache.sqlite"
    _index(_build_model(tmp_path / "a"), cache)[1].cache.close()
    _, other = _index(_build_model(tmp_path / "b", scale=2.0), cache)
    assert other.embedded == len(TOOLS)


def test_convex_fusion() -> None:
    """Fused = w * lexical / best lexical + (1 - w) * min-max scaled cosine; w = 1 is the lexical
    order, w = 0 the semantic one, and a tool found by meaning alone joins the candidates."""
    keys = [("s", "a"), ("s", "b"), ("s", "c")]
    cosines = semantic.Similarities(
        keys, {key: row for row, key in enumerate(keys)}, np.array([0.2, 0.6, 0.4])
    )
    lexical = {("s", "a"): 2.0, ("s", "b"): 1.0}
    fused = semantic.fuse(lexical, cosines, weight=0.5)
    assert fused == pytest.approx({("s", "a"): 0.5, ("s", "b"): 0.75, ("s", "c"): 0.25})
    by_lexical = semantic.fuse(lexical, cosines, weight=1.0)
    assert sorted(by_lexical, key=by_lexical.__getitem__, reverse=True)[:2] == [("s", "a"), ("s", "b")]
    by_meaning = semantic.fuse(lexical, cosines, weight=0.0)
    assert sorted(by_meaning, key=by_meaning.__getitem__, reverse=True) == [
        ("s", "b"),
        ("s", "c"),
        ("s", "a"),
    ]


def test_config_switches_it_on_and_a_bad_model_leaves_it_off(model: Path, tmp_path: Path) -> None:
    """`semantic = true` with a model folder gives indexes; an unloadable model gives None (daemon up)."""

    async def main() -> None:
        cache = tmp_path / "cache.sqlite"
        assert await semantic_indexes(DaemonSettings(), cache) is None
        make = await semantic_indexes(DaemonSettings(semantic=True, semantic_model=str(model)), cache)
        assert make is not None
        assert isinstance(make(), semantic.SemanticIndex)
        broken = tmp_path / "broken"
        broken.mkdir()
        off = await semantic_indexes(DaemonSettings(semantic=True, semantic_model=str(broken)), cache)
        assert off is None

    anyio.run(main)


def test_off_imports_nothing_extra() -> None:
    """With the setting off, a daemon-side search imports neither the semantic module nor its runtime."""
    script = """
import sys, anyio
from mcpd.config.model import DaemonSettings
from mcpd.daemon.serving import semantic_indexes
from mcpd.discovery.index import ToolIndex, ToolText
assert anyio.run(semantic_indexes, DaemonSettings()) is None
index = ToolIndex()
index.replace_servers({"git": [ToolText("git", "git_log", "Show the commit history")]})
assert index.search("commit history")
loaded = [m for m in ("mcpd.discovery.semantic", "model2vec", "numpy", "tokenizers") if m in sys.modules]
assert not loaded, loaded
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


def _spoil(cache: Path, kind: str) -> None:
    if kind == "garbage":
        cache.write_bytes(b"not a database, " * 2000)
    elif kind == "directory":
        cache.mkdir()
    elif kind == "fifo":
        os.mkfifo(cache)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["garbage", "directory", "fifo"])
def test_an_unusable_cache_file_is_replaced_by_memory(model: Path, tmp_path: Path, kind: str) -> None:
    """The cache is disposable: a file that is not one is said once, and ranking works from memory."""
    cache = tmp_path / "cache.sqlite"
    _spoil(cache, kind)
    with structlog.testing.capture_logs() as logs:
        index, ranking = _index(model, cache)
    assert [entry["event"] for entry in logs] == ["semantic.cache_unavailable"]
    assert logs[0]["path"] == str(cache)
    assert not ranking.cache.on_disk
    hits = index.search("move the widget", limit=1)
    assert (hits[0].server, hits[0].tool) == ("browser", "drag_element")
    ranking.replace_servers({"git": [ToolText("git", "git_log", "Show the commits history")]})
    assert ranking.embedded == len(TOOLS) + 1


def _on_disk(ranking: semantic.SemanticIndex) -> bool:
    # Read through a call: mypy would keep the narrowing of an earlier assert on the attribute.
    return ranking.cache.on_disk


@pytest.mark.timeout(30)
def test_a_cache_locked_while_running_is_left_for_memory(model: Path, tmp_path: Path) -> None:
    """Another process holding the cache's write lock makes a write fail (after a short wait): the
    index goes on from memory, said once, instead of the error killing the daemon's indexer."""
    cache = tmp_path / "cache.sqlite"
    _, ranking = _index(model, cache)
    assert ranking.cache.on_disk
    holder = sqlite3.connect(cache, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with structlog.testing.capture_logs() as logs:
            ranking.replace_servers({"git": [ToolText("git", "git_log", "Show the commits history")]})
            ranking.replace_servers({"git": [ToolText("git", "git_log", "Show the history")]})
    finally:
        holder.close()
    assert [entry["event"] for entry in logs] == ["semantic.cache_unavailable"]
    assert "locked" in logs[0]["error"]
    assert not _on_disk(ranking)
    assert ranking.embedded == len(TOOLS) + 2


def test_damaged_model_files_leave_the_ranking_lexical(model: Path, tmp_path: Path) -> None:
    """A model whose files are damaged (they fail inside tokenizers or safetensors, with their own
    exception types) is an unavailable model, not an error out of the daemon."""

    async def main() -> None:
        for damaged in ("tokenizer.json", "model.safetensors"):
            broken = _build_model(tmp_path / damaged)
            (broken / damaged).write_bytes(b"\xb1\xff" * 64)
            settings = DaemonSettings(semantic=True, semantic_model=str(broken))
            assert await semantic_indexes(settings, tmp_path / "cache.sqlite") is None

    anyio.run(main)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", ["garbage", "locked"])
def test_a_daemon_serves_with_a_bad_or_busy_cache(model: Path, tmp_path: Path, kind: str) -> None:
    """`semantic = true` with a garbage cache file, or one another process keeps locked: the daemon
    comes up, logs the cache unavailable, and keeps ranking by meaning (it used to exit 1)."""
    cache = tmp_path / "cache" / "mcpd" / "embeddings.sqlite"
    cache.parent.mkdir(parents=True)
    holder = None
    if kind == "garbage":
        _spoil(cache, kind)
    else:
        semantic.VectorCache(cache, "x").close()
        holder = sqlite3.connect(cache, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
    config = tmp_path / "config.toml"
    config.write_text(
        f"[daemon]\nsemantic = true\nsemantic_model = {str(model)!r}\n\n"
        + fixture_toml("browser", "--tools", "1", description="Drag an element")
    )

    async def main() -> None:
        env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
        async with running_daemon(config, env=env) as daemon:
            await daemon.wait_for("semantic.cache_unavailable", path=str(cache))
            await daemon.wait_for("index.updated")
            async with connect(daemon.socket, name="semantic-test") as client:
                hits = await client.search("drag element")
                assert hits.tools
                await anyio.sleep(2 * semantic.CACHE_BUSY_TIMEOUT)
                assert len(await client.status()) == 1
            assert daemon.process.returncode is None

    try:
        anyio.run(main)
    finally:
        if holder is not None:
            holder.close()
