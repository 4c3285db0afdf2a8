"""Switching the semantic ranking on from the config, without importing it when it is off."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import structlog

from mcpd.config.model import DaemonSettings
from mcpd.errors import ConfigError

if TYPE_CHECKING:
    from mcpd.discovery.semantic import SemanticIndex

log = structlog.get_logger("mcpd.discovery")


async def semantic_indexes(
    settings: DaemonSettings, cache_path: Path | None = None
) -> Callable[[], SemanticIndex] | None:
    """A maker of semantic indexes sharing one model and cache; None when off or unavailable.

    A missing extra or an unloadable model leaves the lexical ranking alone (logged), the
    daemon up. The model is read off the loop: tens of megabytes.
    """
    if not settings.semantic:
        return None
    try:
        from mcpd.discovery import semantic  # noqa: PLC0415 - the extra is imported only when on
    except ImportError as exc:
        log.error("semantic.unavailable", error=str(exc), fix="pip install 'mcpd[semantic]'")
        return None
    try:
        embedder, cache = await anyio.to_thread.run_sync(semantic.load, settings.semantic_model, cache_path)
    except ConfigError as exc:
        log.error("semantic.unavailable", error=exc.message)
        return None
    log.info("semantic.loaded", model=embedder.name)
    return functools.partial(semantic.SemanticIndex, embedder, cache)
