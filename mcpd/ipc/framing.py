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
    """Accumulates received bytes and cuts complete frames out of them."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; return every frame now complete. Raises ``FrameTooLarge``."""
        buffer = self._buffer
        buffer += data
        frames: list[bytes] = []
        start = 0
        end = len(buffer)
        while end - start >= HEADER:
            size = int.from_bytes(buffer[start : start + HEADER], "big")
            if size > self.max_frame:
                raise FrameTooLarge(
                    f"frame of {size} bytes exceeds the limit of {self.max_frame}",
                    {"size": size, "limit": self.max_frame},
                )
            if end - start - HEADER < size:
                break
            frames.append(bytes(buffer[start + HEADER : start + HEADER + size]))
            start += HEADER + size
        if start:
            del buffer[:start]
        return frames

    @property
    def pending(self) -> int:
        return len(self._buffer)
