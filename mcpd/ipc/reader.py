"""Frames from an anyio byte stream (the daemon's connections and the async client)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from anyio import EndOfStream
from anyio.abc import ByteReceiveStream

from mcpd.ipc.framing import DEFAULT_MAX_FRAME, FrameBuffer, TruncatedFrame

_READ_CHUNK = 256 * 1024


async def read_frames(stream: ByteReceiveStream, max_frame: int = DEFAULT_MAX_FRAME) -> AsyncIterator[bytes]:
    """Yield each frame of ``stream`` until it ends; ``TruncatedFrame`` if it ends mid-frame."""
    buffer = FrameBuffer(max_frame)
    while True:
        try:
            chunk = await stream.receive(_READ_CHUNK)
        except EndOfStream:
            if buffer.pending:
                raise TruncatedFrame(
                    f"connection closed with {buffer.pending} bytes of an unfinished frame"
                ) from None
            return
        for item in buffer.feed(chunk):
            yield item
