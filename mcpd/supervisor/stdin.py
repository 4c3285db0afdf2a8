"""A child's stdin, written here rather than through an asyncio pipe transport, so that what the
child never read can be counted when its input ends.

asyncio's write-pipe transport closes its descriptor as soon as the reading end goes and drops
what it still buffered; after that nobody can tell which of the requests written were read.
Holding the write end ourselves we can. When the input ends (``end``) we stop writing and take
back what is still in the pipe, through a read end of our own opened on it through ``/proc``
(Linux). Each byte of a pipe goes to exactly one reader, so what we took back no process can ever
read, whether the child is alive, stopped, dead, or a descendant of it still holds its stdin; the
child read the rest. Every byte for the child goes through one
``StdinPipe``, so a byte offset names one place in the stream, and a request whose last byte lies
past ``read()`` never reached the child whole: it cannot have acted on it.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import sys

_LINUX = sys.platform.startswith("linux")
_TAKE = 64 * 1024
"""Bytes taken back per read: a default pipe's whole capacity."""
MAX_BACKLOG = 4 * 1024 * 1024
"""Bytes queued for a child (its pipe full) past which it may have stopped reading its stdin."""
STALLED_AFTER = 5.0
"""Seconds without the child taking a byte, with more than ``MAX_BACKLOG`` queued, that mean it
stopped reading. A burst of large requests to a server that reads is only queued."""
MAX_QUEUED = 16 * MAX_BACKLOG
"""Bytes queued past which a child counts as not reading however it reads: what one server may
hold of the daemon's memory."""


class StdinPipe:
    """The write end of a child's stdin: non-blocking writes, buffered while the pipe is full."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd: int | None = fd
        self._loop = asyncio.get_running_loop()
        self._buffer = bytearray()
        self._flushed = asyncio.Event()
        self._flushed.set()
        self._refused = False
        self._ended = False
        self._read_at_end: int | None = None
        self._moved_at = self._loop.time()
        """When the child last took bytes (or nothing waited for it)."""
        self.written = 0
        """Bytes accepted by ``write`` so far, which is also the offset just past the last of them."""

    @property
    def ended(self) -> bool:
        """Nothing more is written (``end``)."""
        return self._ended

    def backlog(self) -> int:
        """Bytes accepted but not yet in the pipe (it was full)."""
        return len(self._buffer)

    def not_reading(self) -> bool:
        """The child has left more than ``MAX_BACKLOG`` bytes queued and taken none of them for
        ``STALLED_AFTER`` seconds, or has ``MAX_QUEUED`` queued: it gets nothing more."""
        queued = len(self._buffer)
        if queued <= MAX_BACKLOG:
            return False
        return queued > MAX_QUEUED or self._loop.time() - self._moved_at > STALLED_AFTER

    def write(self, data: bytes) -> int:
        """Queue ``data``; returns ``written`` after it.

        Raises ``BrokenPipeError`` (or another ``OSError``) when the pipe is closed or refused it;
        then no byte of ``data`` reached the child.
        """
        if self._fd is None or self._ended or self._refused:
            raise BrokenPipeError("the server's stdin is closed")
        if self._buffer:
            self._buffer += data
        else:
            self._moved_at = self._loop.time()
            try:
                sent = os.write(self._fd, data)
            except BlockingIOError:
                sent = 0
            except OSError:
                self._refused = True
                raise
            if sent < len(data):
                self._buffer += data[sent:]
                self._flushed.clear()
                self._loop.add_writer(self._fd, self._flush)
        self.written += len(data)
        return self.written

    def _flush(self) -> None:
        assert self._fd is not None
        try:
            del self._buffer[: os.write(self._fd, self._buffer)]
            self._moved_at = self._loop.time()
        except BlockingIOError:
            return
        except OSError:
            # The reader is gone: what is left stays counted as unread.
            self._refused = True
        if self._refused or not self._buffer:
            self._loop.remove_writer(self._fd)
            self._flushed.set()

    async def drain(self) -> None:
        """Wait until what was written is in the pipe, or the pipe refused it."""
        await self._flushed.wait()

    def read(self) -> int | None:
        """How many of the bytes written the child read: known once ``end`` has taken back the
        rest. None before that, or where it could not be taken back (no ``/proc``, not Linux)."""
        return self._read_at_end

    def end(self) -> None:
        """Write nothing more, and take back what the child has not read: it never will, and
        ``read()`` counts it. The pipe stays open: the child reads EOF at ``close``."""
        if self._ended:
            return
        self._ended = True
        self._flushed.set()
        if self._fd is None:
            return
        self._loop.remove_writer(self._fd)
        taker = _open_reader(self._fd)
        if taker is None:
            return
        try:
            # At most what of ours can be in the pipe: more would be another writer's.
            most = min(self.written - len(self._buffer), fcntl.fcntl(self._fd, fcntl.F_GETPIPE_SZ))
            taken = _take_all(taker, most)
        finally:
            os.close(taker)
        if taken is not None:
            self._read_at_end = self.written - len(self._buffer) - taken
        self._buffer.clear()

    def close(self) -> None:
        """``end``, then close the write end, so the child reads EOF."""
        self.end()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _open_reader(fd: int) -> int | None:
    """A read end of our own on the pipe whose write end is ``fd``, non-blocking, or None.

    Opened through ``/proc``, which makes a new open file of the pipe: a ``dup`` of the child's end
    would share its flags, and making ours non-blocking would make the child's so too.
    """
    if not _LINUX:
        return None
    try:
        return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None


def _take_all(reader: int, most: int) -> int | None:
    """Read the pipe empty; the bytes taken, or None when more than ``most`` came (then they are
    not all ours: the child writes into its own stdin, and nothing is known)."""
    taken = 0
    while taken <= most:
        try:
            data = os.read(reader, _TAKE)
        except BlockingIOError:  # empty, and we still hold the write end
            return taken
        if not data:  # empty, and nobody holds a write end any more
            return taken
        taken += len(data)
    return None
