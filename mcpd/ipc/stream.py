"""Frames over an asyncio stream pair: the daemon's connections and the async client.

asyncio's protocol-based streams, not anyio's socket streams: on asyncio, anyio serves
Unix sockets through raw non-blocking calls that register and unregister the socket
with the selector on every read, which measured slower than the protocol path on the
per-request hot path. Writes are single synchronous ``write()`` calls, so frames from
concurrent tasks never interleave and no lock is needed.

A reader returns at once while data is buffered, so a peer that keeps the socket full
would keep its connection's task running forever; ``frames()`` hands out at most
``TURN`` units of work (frames, reads, bytes read) before it lets every other task run.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable, Iterable
from typing import SupportsIndex

from mcpd.ipc.endpoint import QUEUE_RETRY, connect_now
from mcpd.ipc.framing import DEFAULT_MAX_FRAME, HEADER, FrameBuffer, TruncatedFrame
from mcpd.readsize import READ_SIZE, read_in_pieces

_BUFFERED = 256 * 1024
"""Bytes a connection's reader buffers before it stops reading from the socket (twice this)."""
TURN = 32
"""Units of work one connection does before it yields to the event loop: a frame, or a
read and each 64 KiB it brought."""
_WORK_BYTES = 64 * 1024


EXPRESS_FRAME = 16 * 1024
"""Largest frame offered to ``express``: above it a frame's decoding takes the careful way (``codec``)."""


class _ExpressReader(asyncio.StreamReader):
    """A ``StreamReader`` that offers a read holding one whole small frame to ``express`` in the read
    callback itself, while the reading task waits for data with nothing read ahead of it.

    The task would take the frame only in the next event-loop iteration, and what it starts for it
    in the one after: one iteration, and the task's resume through its frames, less per request (see
    ``mcpd.supervisor.replies`` for the same on a child's stdout). Only then: the reading task has
    finished with every frame before (it waits in ``read``) and holds no part of one (``framing``),
    so frames are still handled in the order they came. Only a read of one frame alone: frames read
    together are handled together by the task, as before (a request and its ``cancel`` in one read
    stop the request before its first step). What ``express`` declines is read by the task.
    """

    express: Callable[[bytes], bool] | None = None
    """Takes a frame and says whether it took it."""
    framing: FrameBuffer | None = None
    """The reading task's frame buffer (``FrameStream.frames``)."""

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        framing = self.framing
        # ``_buffer`` and ``_waiter`` are StreamReader's own: nothing unread, and a read waiting.
        # The frame's size is checked against the reader's own limit too: ``max_frame`` may be
        # configured below ``EXPRESS_FRAME``, and a frame over it must close the connection.
        if (
            self.express is not None
            and framing is not None
            and self._waiter is not None  # type: ignore[attr-defined]
            and not self._buffer  # type: ignore[attr-defined]
            and not framing.pending
            and isinstance(data, bytes)
            and HEADER < len(data) <= HEADER + min(EXPRESS_FRAME, framing.max_frame)
            and int.from_bytes(data[:HEADER], "big") == len(data) - HEADER
            and self.express(data[HEADER:])
        ):
            return
        super().feed_data(data)


class FrameStream:
    """One connection: ``frames()`` to read, ``send()`` to write whole frames."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._framing: FrameBuffer | None = None
        read_in_pieces(writer.transport)

    @classmethod
    async def connect(cls, path: str) -> FrameStream:
        """Connect to ``path``, waiting out a full listen queue (the caller's deadline bounds it)."""
        delay = QUEUE_RETRY[0]
        while (sock := connect_now(path)) is None:
            await asyncio.sleep(delay)
            delay = min(2 * delay, QUEUE_RETRY[1])
        try:
            reader, writer = await asyncio.open_unix_connection(sock=sock, limit=_BUFFERED)
        except BaseException:
            sock.close()
            raise
        return cls(reader, writer)

    @classmethod
    async def adopt(cls, sock: socket.socket) -> FrameStream:
        """Wrap a socket accepted by the listener (its frames may go ``express``)."""
        loop = asyncio.get_running_loop()
        reader = _ExpressReader(limit=_BUFFERED, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        transport, _ = await loop.create_unix_connection(lambda: protocol, sock=sock)
        return cls(reader, asyncio.StreamWriter(transport, protocol, reader, loop))

    def express(self, take: Callable[[bytes], bool] | None) -> None:
        """Offer frames to ``take`` as they arrive while ``frames()`` waits for more (None: no longer).
        ``take`` runs in the read callback: it must not raise, nor wait."""
        if isinstance(self._reader, _ExpressReader):
            self._reader.express = take

    @property
    def socket(self) -> socket.socket:
        sock: socket.socket = self._writer.get_extra_info("socket")
        return sock

    async def frames(self, max_frame: int = DEFAULT_MAX_FRAME) -> AsyncIterator[bytes]:
        """Each frame until the peer closes; ``TruncatedFrame`` if it closes mid-frame."""
        buffer = self._framing = FrameBuffer(max_frame)
        if isinstance(self._reader, _ExpressReader):
            self._reader.framing = buffer
        work = 0
        while True:
            chunk = await self._reader.read(READ_SIZE)
            if not chunk:
                if buffer.pending:
                    raise TruncatedFrame(f"connection closed in a frame, {buffer.pending} bytes into it")
                return
            work += 1 + len(chunk) // _WORK_BYTES
            batch = buffer.feed(chunk, TURN)
            # Neither the read nor the last frame is kept while the peer is silent: a client
            # idle after a 16 MiB request would hold it until its next one.
            del chunk
            while batch:
                for item in batch:
                    yield item
                del item
                work += len(batch)
                if work >= TURN:
                    work = 0
                    await asyncio.sleep(0)
                # More to take only if the batch was cut short by TURN or by an oversized frame.
                batch = buffer.feed(b"", TURN) if len(batch) == TURN or buffer.refused else []

    async def send(self, data: bytes) -> None:
        """Queue ``data`` and wait only if the peer has let the write buffer fill up."""
        transport = self._writer.transport
        transport.write(data)
        # Sent whole at once (the usual case), the writer cannot be paused (it is only while more
        # than the low-water mark waits): ``drain`` would return at once, a few calls later, and
        # this is every answer's path.
        if transport.get_write_buffer_size() or transport.is_closing():
            await self._writer.drain()

    def send_nowait(self, data: bytes) -> None:
        """Queue ``data`` without waiting (for a last word from a task being cancelled)."""
        self._writer.write(data)

    @property
    def pending(self) -> int:
        """Bytes read from the peer and not yet handed out by ``frames()``: a frame cut short, mostly."""
        return 0 if self._framing is None else self._framing.pending

    def backed_up(self) -> bool:
        """More is queued than the peer lets through: ``send`` would wait (``drain``)."""
        transport = self._writer.transport
        return transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]

    async def drain(self) -> None:
        """Wait until the peer has taken what is queued, down to the buffer's limit."""
        await self._writer.drain()

    def backlog(self) -> int:
        """Bytes written but not yet taken by the peer."""
        return self._writer.transport.get_write_buffer_size()

    def close(self) -> None:
        """Close after flushing what is queued (the usual end of a connection)."""
        self._writer.close()

    def abort(self) -> None:
        """Close at once, dropping unsent data: for a peer that stopped reading."""
        self._writer.transport.abort()
