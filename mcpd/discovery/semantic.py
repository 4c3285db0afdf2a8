"""Optional semantic ranking: static embeddings (model2vec) fused with BM25F by a convex combination.

Installed with ``pip install 'mcpd[semantic]'`` and switched on with ``[daemon] semantic = true``.
Static embeddings were chosen by measurement (``bench/semantic.py``): a query is a table
lookup and a mean on numpy (well under a millisecond), where a contextual model costs a
transformer pass per query and minutes of CPU per 10k tools.

Each tool's vector is cached on disk (SQLite in the user cache directory) under the hash of
the model and of the text embedded, so a restart or a server that comes back re-embeds
nothing. The file is only a cache: one that cannot be used is set aside for memory (logged
once), never an error. Only this module imports numpy and model2vec, and nothing imports it unless the
setting is on.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import sqlite3
import stat
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import platformdirs
import structlog
from model2vec import StaticModel

from mcpd.errors import ConfigError

if TYPE_CHECKING:
    from mcpd.discovery.index import ToolText

log = structlog.get_logger("mcpd.discovery")

DEFAULT_MODEL = "minishlab/potion-base-8M"
"""A model2vec model on the Hugging Face hub, downloaded once into its usual cache."""

LEXICAL_WEIGHT = 0.3
"""The lexical share of a fused score: ``w * lexical / best lexical + (1 - w) * semantic`` with
the cosines min-max scaled over the catalogue (Bruch et al., "An Analysis of Fusion Functions
for Hybrid Retrieval": a convex combination beats reciprocal-rank fusion and needs few
queries to tune). Chosen by cross-validation on MetaTool (``bench/semantic.py``); LiveMCPBench
was not looked at."""

SEMANTIC_DEPTH = 100
"""Tools taken from each ranking into the fusion."""

CACHE_BUSY_TIMEOUT = 1.0
"""Seconds to wait for another process's write lock on the cache before doing without it. Short:
the front index embeds small changes on the event loop, and a cache is not worth a stalled daemon."""


def tool_document(tool: ToolText) -> str:
    """What is embedded of a tool: its server, name, description and parameter names."""
    params = ", ".join(name for name, _ in tool.params)
    return f"{tool.server} {tool.tool}: {tool.description} ({params})"


class Embedder:
    """A model2vec static model: text -> unit vectors (float32)."""

    def __init__(self, model: str) -> None:
        local = Path(model).expanduser()
        try:
            if local.exists():
                self._model = StaticModel.from_pretrained(local, force_download=False)
            else:
                self._model = StaticModel.from_pretrained(model, force_download=False)
        except Exception as exc:
            # Damaged model files fail deep in safetensors or tokenizers, with their own exception
            # types (or a bare ``Exception``): any of them means "no model", never a dead daemon.
            raise ConfigError(f"cannot load the semantic model {model!r}: {exc}", {"model": model}) from exc
        self.name = model
        # Cache rows are valid only for the exact weights that made them.
        digest = hashlib.sha256(np.ascontiguousarray(self._model.embedding).tobytes())
        self.fingerprint = digest.hexdigest()[:16]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.asarray(self._model.encode(list(texts), use_multiprocessing=False), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit: np.ndarray = vectors / np.maximum(norms, 1e-12)
        return unit


class VectorCache:
    """Tool vectors by (model fingerprint, text hash); safe to share between threads.

    On disk when the file can be used; otherwise (garbage, a directory, a read-only file, another
    process holding its write lock too long) in memory for the rest of the run, said once as
    ``semantic.cache_unavailable``: vectors are then only computed again at the next start.
    """

    def __init__(self, path: Path | None, fingerprint: str) -> None:
        if path is None:
            path = Path(platformdirs.user_cache_dir("mcpd")) / "embeddings.sqlite"
        self.path = path
        self.on_disk = True
        self._prefix = fingerprint + ":"
        self._lock = threading.Lock()
        try:
            self._db = _open_cache(path)
        except (OSError, sqlite3.Error) as exc:
            self._db = self._in_memory(exc)

    def _in_memory(self, exc: Exception) -> sqlite3.Connection:
        log.warning(
            "semantic.cache_unavailable",
            path=str(self.path),
            error=str(exc) or type(exc).__name__,
            consequence="tool vectors are kept in memory for this run",
            fix="nothing needed; it is only a cache, safe to remove",
        )
        self.on_disk = False
        db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        db.execute(_SCHEMA)
        return db

    def key(self, text: str) -> str:
        return self._prefix + hashlib.sha256(text.encode()).hexdigest()

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        with self._lock:
            try:
                return self._get_many(keys)
            except sqlite3.Error as exc:
                if not self.on_disk:
                    raise
                self._give_up_disk(exc)
                return {}

    def _get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", chunk)
            found.update((key, np.frombuffer(blob, dtype=np.float32)) for key, blob in rows)
        return found

    def put_many(self, items: Mapping[str, np.ndarray]) -> None:
        with self._lock:
            try:
                self._put_many(items)
            except sqlite3.Error as exc:
                if not self.on_disk:
                    raise
                self._give_up_disk(exc)
                self._put_many(items)

    def _put_many(self, items: Mapping[str, np.ndarray]) -> None:
        self._db.executemany(
            "INSERT OR REPLACE INTO vectors VALUES (?, ?)",
            ((key, vector.astype(np.float32).tobytes()) for key, vector in items.items()),
        )

    def _give_up_disk(self, exc: sqlite3.Error) -> None:
        """Leave the file (it broke or stayed locked while running) for memory; under the lock."""
        with contextlib.suppress(sqlite3.Error):
            self._db.close()
        self._db = self._in_memory(exc)

    def close(self) -> None:
        self._db.close()


_SCHEMA = "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)"


def _open_cache(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        pass
    else:
        # Looked at first: opening a device can act, and SQLite says only "disk I/O error" of a FIFO.
        if not stat.S_ISREG(info.st_mode):
            raise sqlite3.DatabaseError(f"{path} is not a regular file")
    db = sqlite3.connect(path, timeout=CACHE_BUSY_TIMEOUT, check_same_thread=False, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(_SCHEMA)
    except BaseException:
        db.close()
        raise
    return db


@dataclass
class SemanticIndex:
    """Tool vectors per server, ranked by cosine to a query; fed by ``ToolIndex.replace_servers``."""

    embedder: Embedder
    cache: VectorCache
    depth: int = SEMANTIC_DEPTH
    """Tools taken from each ranking into the fusion."""
    weight: float = LEXICAL_WEIGHT
    """The lexical share of a fused score."""
    embedded: int = 0
    """Texts embedded by the model so far (not found in the cache)."""
    _by_server: dict[str, tuple[list[tuple[str, str]], np.ndarray]] = field(default_factory=dict)
    _keys: list[tuple[str, str]] = field(default_factory=list)
    _rows: dict[tuple[str, str], int] = field(default_factory=dict)
    _server_codes: dict[str, int] = field(default_factory=dict)
    _codes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    """Each row's server, as an index into ``_server_codes``: a server filter is one ``isin``."""
    _matrix: np.ndarray | None = None

    def replace_servers(self, changes: Mapping[str, Iterable[ToolText]]) -> None:
        for server, tools in changes.items():
            texts = list(tools)
            if texts:
                self._by_server[server] = ([(t.server, t.tool) for t in texts], self._vectors(texts))
            else:
                self._by_server.pop(server, None)
        self._keys = [key for keys, _ in self._by_server.values() for key in keys]
        self._rows = {key: row for row, key in enumerate(self._keys)}
        self._server_codes = {server: code for code, server in enumerate(self._by_server)}
        self._codes = np.array([self._server_codes[server] for server, _ in self._keys], dtype=np.int32)
        vectors = [matrix for _, matrix in self._by_server.values()]
        self._matrix = np.vstack(vectors) if vectors else None

    def _vectors(self, tools: Sequence[ToolText]) -> np.ndarray:
        documents = [tool_document(tool) for tool in tools]
        keys = [self.cache.key(text) for text in documents]
        cached = self.cache.get_many(keys)
        missing = sorted({i for i, key in enumerate(keys) if key not in cached}, key=keys.__getitem__)
        if missing:
            fresh = self.embedder.encode([documents[i] for i in missing])
            new = {keys[i]: fresh[row] for row, i in enumerate(missing)}
            self.cache.put_many(new)
            cached.update(new)
            self.embedded += len(new)
        return np.vstack([cached[key] for key in keys])

    def similarities(self, query: str, servers: set[str] | None) -> Similarities | None:
        """Every tool's cosine to ``query`` (minus infinity outside ``servers``), or None if there is none."""
        if self._matrix is None or not query.strip():
            return None
        # einsum runs numpy's own single-threaded loop: ``@`` hands a matrix-vector product to
        # a threaded BLAS, which on a busy laptop measured 18 ms a query against 0.4 ms here.
        scores = np.einsum("ij,j->i", self._matrix, self.embedder.encode([query])[0])
        if servers is not None:
            codes = [self._server_codes[server] for server in servers if server in self._server_codes]
            scores = np.where(np.isin(self._codes, codes), scores, -np.inf)
        return Similarities(self._keys, self._rows, scores)

    def fused(
        self, lexical: Mapping[tuple[str, str], float], query: str, servers: set[str] | None
    ) -> dict[tuple[str, str], float]:
        """``lexical`` (a ranking's best scores, by tool) fused with this ranking's for ``query``."""
        return fuse(lexical, self.similarities(query, servers), self.weight, self.depth)


@dataclass(frozen=True)
class Similarities:
    """One query's cosines, with the tool of each row."""

    keys: list[tuple[str, str]]
    rows: dict[tuple[str, str], int]
    scores: np.ndarray

    def top(self, depth: int) -> list[int]:
        """Rows of the ``depth`` closest tools, best first."""
        depth = min(depth, len(self.scores))
        top = np.argpartition(-self.scores, depth - 1)[:depth]
        top = top[np.argsort(-self.scores[top], kind="stable")]
        return [int(i) for i in top if np.isfinite(self.scores[i])]


def fuse(
    lexical: Mapping[tuple[str, str], float],
    semantic: Similarities | None,
    weight: float = LEXICAL_WEIGHT,
    depth: int = SEMANTIC_DEPTH,
) -> dict[tuple[str, str], float]:
    """``weight * lexical / best lexical + (1 - weight) * scaled cosine`` for the lexical candidates
    and the ``depth`` semantically closest tools.

    Cosines are min-max scaled over the tools allowed (the best gets 1, the worst 0), lexical
    scores divided by the best one (BM25F is never negative), so both lie in [0, 1]. A tool in
    neither list is left out: it is below both lists' last entry, so it could only enter a
    fused top ``depth`` by a near-tie.
    """
    best = max(lexical.values(), default=0.0) or 1.0
    if semantic is None:
        return {key: weight * score / best for key, score in lexical.items()}
    scores = semantic.scores
    allowed = scores[np.isfinite(scores)]
    low = float(allowed.min()) if allowed.size else 0.0
    spread = (float(allowed.max()) - low if allowed.size else 0.0) or 1.0
    candidates = dict.fromkeys(lexical)
    candidates.update(dict.fromkeys(semantic.keys[row] for row in semantic.top(depth)))
    fused: dict[tuple[str, str], float] = {}
    rows = semantic.rows
    for key in candidates:
        row = rows.get(key)
        cosine = float(scores[row]) if row is not None else -math.inf
        closeness = (cosine - low) / spread if math.isfinite(cosine) else 0.0
        fused[key] = weight * lexical.get(key, 0.0) / best + (1 - weight) * closeness
    return fused


def load(model: str | None, cache_path: Path | None = None) -> tuple[Embedder, VectorCache]:
    """The model named in the config (a local folder or a hub name) and its vector cache."""
    embedder = Embedder(model or DEFAULT_MODEL)
    return embedder, VectorCache(cache_path, embedder.fingerprint)
