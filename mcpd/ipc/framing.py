"""Frames: a 4-byte big-endian length, then that many bytes of one msgpack message.

A msgpack decoder takes whole buffers, so the length prefix is what lets a reader
cut the byte stream into messages without parsing it. Pure byte handling, no I/O: the
sync client uses it on a blocking socket, ``mcpd.ipc.reader`` on anyio streams.
"""

from __future__ import annotations

from mcpd.errors import ProtocolError

HEADER = 4
DEFAULT_MAX_FRAME = 16 * 1024 * 1024
"""What the daemon accepts from a client (configurable)."""
MAX_CLIENT_FRAME = 64 * 1024 * 1024
"""What clients accept from the daemon: above the 32 MiB a stdio server's message may be."""


class FrameTooLarge(ProtocolError):
    """The peer announced a frame over the limit; the stream cannot be trusted after this."""


class TruncatedFrame(ProtocolError):
    """The stream ended in the middle of a frame."""


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(HEADER, "big") + payload


class FrameBuffer:
    """Accumulates received bytes and cuts complete frames out of them.

    Each frame is copied out once; a buffer that grew for a large frame is dropped once
    that frame is out, so a connection does not keep megabytes of capacity it no longer needs.
    """

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buffer = bytearray()
        self._start = 0

    def feed(self, data: bytes, limit: int | None = None) -> list[bytes]:
        """Add ``data``; return the frames now complete, at most ``limit`` of them.

        The rest stay buffered for the next call (``feed(b"", limit)`` to take them without
        new data). Raises ``FrameTooLarge`` once the frames before the oversized one are out.
        """
        buffer = self._buffer
        if data:
            buffer += data
        frames: list[bytes] = []
        start = self._start
        end = len(buffer)
        with memoryview(buffer) as view:
            while end - start >= HEADER and len(frames) != limit:
                size = int.from_bytes(view[start : start + HEADER], "big")
                if size > self.max_frame:
                    if frames:  # deliver the frames before it first; the next call raises
                        break
                    raise FrameTooLarge(
                        f"frame of {size} bytes exceeds the limit of {self.max_frame}",
                        {"size": size, "limit": self.max_frame},
                    )
                if end - start - HEADER < size:
                    break
                frames.append(bytes(view[start + HEADER : start + HEADER + size]))
                start += HEADER + size
            rest = bytearray(view[start:end]) if start > _KEEP else None
        if rest is not None:
            self._buffer, start = rest, 0
        elif start and (start == end or len(frames) != limit):
            del buffer[:start]  # nothing more to take now: make room at the front
            start = 0
        self._start = start
        return frames

    @property
    def pending(self) -> int:
        return len(self._buffer) - self._start


_KEEP = 1024 * 1024
"""Past this much consumed, the rest moves to a fresh buffer and the grown one is freed."""
