"""How many bytes one read asks for, on every socket and pipe mcpd reads, and how much of a body
is read at most."""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Only for the annotation: the bridge and the blocking client read with this module too, and
    # importing asyncio would cost each bridge process ~7 MB.
    import asyncio

READ_SIZE = 64 * 1024
"""Bytes asked of one read. Python allocates the whole size for each read and then shrinks it:
at 256 KiB (asyncio's default) that is above glibc's mmap threshold (128 KiB), so every read
also cost an mmap, an mremap and a munmap: ~13 us a read measured, against ~1 us at 64 KiB.
A bridge reads twice per tool call and paid it each time; the daemon did not (glibc raises its
threshold after the first large free, which a long-running process soon makes), but nothing
here needs larger reads."""


def read_in_pieces(transport: asyncio.BaseTransport) -> None:
    """Make an asyncio socket or pipe transport read ``READ_SIZE`` at a time.

    ``max_size`` is what CPython's selector and pipe transports pass to ``recv``/``read``; a
    transport without it (another event loop's) is left as it is.
    """
    if isinstance(getattr(transport, "max_size", None), int):
        transport.max_size = READ_SIZE  # type: ignore[attr-defined]


async def read_at_most(chunks: AsyncIterable[bytes], limit: int) -> bytes | None:
    """The chunks joined, or None once they pass ``limit`` bytes (reading stops there)."""
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
    return b"".join(parts)
