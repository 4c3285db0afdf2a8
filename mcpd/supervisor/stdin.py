"""A child's stdin, written here rather than through an asyncio pipe transport, so that what the
child never read can be counted once it is gone.

asyncio's write-pipe transport closes its descriptor as soon as the reading end goes and drops
what it still buffered; after that nobody can tell which of the requests written were read.
Holding the write end ourselves we can: the child never read what is still in our buffer plus
what the pipe still holds (``FIONREAD``, which Linux answers on either end of a pipe, also after
the reader has gone). Every byte for the child goes through one ``StdinPipe``, so a byte offset
names one place in the stream, and a request whose last byte lies past ``read()`` never reached
the child whole: it cannot have acted on it.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import select
import struct
import sys
import termios

_LINUX = sys.platform.startswith("linux")


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
        self._read_at_close: int | None = None
        self.written = 0
        """Bytes accepted by ``write`` so far, which is also the offset just past the last of them."""

    def backlog(self) -> int:
        """Bytes accepted but not yet in the pipe (it was full)."""
        return len(self._buffer)

    def write(self, data: bytes) -> int:
        """Queue ``data``; returns ``written`` after it.

        Raises ``BrokenPipeError`` (or another ``OSError``) when the pipe is closed or refused it;
        then no byte of ``data`` reached the child.
        """
        if self._fd is None or self._refused:
            raise BrokenPipeError("the server's stdin is closed")
        if self._buffer:
            self._buffer += data
        else:
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
        """How many of the bytes written the child has read, once nothing can read any more.

        None while a process may still read (the child lives, or another one holds its stdin),
        or where the system cannot tell (not Linux). The count stays known after ``close()`` if
        the reader had gone before it.
        """
        if self._fd is None:
            return self._read_at_close
        if not _LINUX:
            return None
        poller = select.poll()
        poller.register(self._fd, select.POLLOUT)
        # A pipe's write end polls as an error once no process holds the read end.
        if not any(events & select.POLLERR for _, events in poller.poll(0)):
            return None
        in_pipe: int = struct.unpack("i", fcntl.ioctl(self._fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        return self.written - len(self._buffer) - in_pipe

    def close(self) -> None:
        """Close the write end, so the child reads EOF; what was still buffered is dropped."""
        if self._fd is None:
            return
        self._read_at_close = self.read()
        self._loop.remove_writer(self._fd)
        os.close(self._fd)
        self._fd = None
        self._flushed.set()
