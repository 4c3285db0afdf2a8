"""Frames: a 4-byte big-endian length, then that many bytes of one msgpack message.

A msgpack decoder takes whole buffers, so the length prefix is what lets a reader
cut the byte stream into messages without parsing it. Pure byte handling, no I/O: the
sync client uses it on a blocking socket, ``mcpd.ipc.stream`` on asyncio streams.
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

    Each frame is copied out once. A frame over ``LARGE`` is instead filled in place in a
    buffer of its own, started when its header arrives, and handed out as that ``bytearray``:
    no copy of megabytes at the end, and nothing of it kept by the connection once the frame
    is out. The buffer grows as the bytes arrive rather than being allocated whole: a zeroed
    16 MiB ``bytearray`` took ~10 ms at once (fresh pages, each faulted in), one loop turn's
    worth for every other client; grown by each read it takes ~0.3 ms a step (measured).
    """

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buffer = bytearray()
        self._start = 0
        self._large: bytearray | None = None
        self._size = 0
        """Of the large frame being filled."""
        self.refused = False
        """An oversized frame waits behind the frames just returned: the next ``feed`` raises."""

    def feed(self, data: bytes, limit: int | None = None) -> list[bytes]:
        """Add ``data``; return the frames now complete, at most ``limit`` of them.

        The rest stay buffered for the next call (``feed(b"", limit)`` to take them without
        new data). Raises ``FrameTooLarge`` once the frames before the oversized one are out.
        """
        frames: list[bytes] = []
        if self._large is not None:
            data = self._fill(data, frames)
            if self._large is not None:
                return frames
        buffer = self._buffer
        if data:
            buffer += data
        start = self._start
        end = len(buffer)
        with memoryview(buffer) as view:
            while end - start >= HEADER and len(frames) != limit:
                size = int.from_bytes(view[start : start + HEADER], "big")
                if size > self.max_frame:
                    if frames:  # deliver the frames before it first; the next call raises
                        self.refused = True
                        break
                    raise FrameTooLarge(
                        f"frame of {size} bytes exceeds the limit of {self.max_frame}",
                        {"size": size, "limit": self.max_frame},
                    )
                if end - start - HEADER < size:
                    if size > LARGE:
                        self._large = bytearray(view[start + HEADER : end])
                        self._size = size
                        start = end
                    break
                frames.append(bytes(view[start + HEADER : start + HEADER + size]))
                start += HEADER + size
        if start and (start == end or len(frames) != limit):
            del buffer[:start]  # nothing more to take now: make room at the front
            start = 0
        self._start = start
        return frames

    def _fill(self, data: bytes, frames: list[bytes]) -> bytes:
        """Copy ``data`` into the large frame; once it is whole, move it to ``frames``.
        Returns what of ``data`` follows the frame."""
        large = self._large
        assert large is not None
        taken = min(self._size - len(large), len(data))
        large += memoryview(data)[:taken]
        if len(large) < self._size:
            return b""
        frames.append(large)  # type: ignore[arg-type]  # a bytearray serves wherever bytes are read
        self._large = None
        return data[taken:]

    @property
    def pending(self) -> int:
        large = 0 if self._large is None else HEADER + len(self._large)
        return len(self._buffer) - self._start + large


LARGE = 1024 * 1024
"""Frames above this are filled in place (see ``FrameBuffer``)."""
