"""A daemon connection upgraded to a mode (``mcp``): a blocking socket carrying raw frames.

``open_channel`` connects, checks that the daemon runs as this user, and says ``hello``
with the mode (and a ``resume`` state); from then on each frame is one message of that
mode, as bytes, in both directions. No event loop and no threads, so a relay such as
``mcpd bridge`` stays small: it selects on ``fileno()`` and calls ``receive()``.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import msgspec

from mcpd.client import _wire
from mcpd.config.paths import likely_socket_path
from mcpd.errors import DECODE_FAILURES, ProtocolError, TransportError
from mcpd.ipc.framing import DEFAULT_MAX_FRAME, MAX_CLIENT_FRAME, FrameBuffer, frame
from mcpd.model.protocol import PROTOCOL_VERSION, HelloParams, HelloResult, Response
from mcpd.readsize import READ_SIZE

if TYPE_CHECKING:
    from pathlib import Path


class Channel:
    """An upgraded connection; ``receive()`` after ``fileno()`` turned readable."""

    def __init__(
        self, sock: socket.socket, hello: HelloResult, backlog: list[bytes], frames: FrameBuffer
    ) -> None:
        self.sock = sock
        self.hello = hello
        self.backlog = backlog
        """Frames that arrived with the hello answer: take them before waiting on the socket."""
        self._frames = frames

    def fileno(self) -> int:
        return self.sock.fileno()

    @property
    def max_frame(self) -> int:
        """The largest message the daemon reads (``max_frame_of`` its hello)."""
        return max_frame_of(self.hello)

    def send(self, payload: bytes) -> None:
        """Send one message; ``TransportError`` if the daemon is gone or stopped reading."""
        try:
            self.sock.sendall(frame(payload))
        except OSError as exc:
            raise TransportError(f"lost the daemon connection: {exc}") from None

    def receive(self) -> list[bytes]:
        """The messages that have arrived (perhaps none yet); ``TransportError`` once the daemon is gone."""
        try:
            data = self.sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError as exc:
            raise TransportError(f"lost the daemon connection: {exc}") from None
        if not data:
            raise TransportError("the daemon closed the connection")
        try:
            return self._frames.feed(data)
        except ProtocolError:
            raise TransportError("the daemon sent a malformed frame") from None

    def close(self) -> None:
        self.sock.close()


def max_frame_of(hello: HelloResult | None) -> int:
    """The largest message a daemon reads: as its hello says; the default for one too old to say it,
    or not reached yet."""
    return (hello.max_frame if hello is not None else None) or DEFAULT_MAX_FRAME


def open_channel(
    socket_path: str | Path | None,
    *,
    mode: str | None,
    name: str,
    resume: bytes | None = None,
    timeout: float = 10.0,
    write_timeout: float | None = None,
) -> Channel:
    """Connect and upgrade; ``DaemonNotRunning`` if nothing listens, the daemon's error if it refuses.
    ``timeout`` bounds the connect and the hello; ``write_timeout`` (``timeout`` if None) each later
    write."""
    sock = _connect_default(socket_path, timeout)
    try:
        call = _wire.Call(
            "hello",
            HelloParams(protocol=PROTOCOL_VERSION, client=name, mode=mode, resume=resume),
            HelloResult,
            timeout,
        )
        frames = FrameBuffer(MAX_CLIENT_FRAME)
        hello, backlog = _hello(sock, call, frames)
    except BaseException:
        sock.close()
        raise
    # A write waits ``write_timeout`` at most for a daemon that does not read; reads happen only
    # when select says there is something to read.
    sock.settimeout(timeout if write_timeout is None else write_timeout)
    return Channel(sock, hello, backlog, frames)


def _connect_default(socket_path: str | Path | None, timeout: float) -> socket.socket:
    """A connected socket to this user's daemon at ``socket_path``, by default at the default
    path, found by ``likely_socket_path()`` without platformdirs where it can be."""
    if socket_path is None:
        socket_path = likely_socket_path() or _wire.resolve_socket(None)
    return _wire.connect_blocking(socket_path, timeout)


def _hello(
    sock: socket.socket, call: _wire.Call[HelloResult], frames: FrameBuffer
) -> tuple[HelloResult, list[bytes]]:
    try:
        sock.sendall(call.request(1))
        received: list[bytes] = []
        while not received:
            data = sock.recv(READ_SIZE)
            if not data:
                raise TransportError("the daemon closed the connection during hello")
            received = frames.feed(data)
    except TimeoutError:
        raise TransportError(f"no answer to hello within {call.timeout:g}s") from None
    except OSError as exc:
        raise TransportError(f"lost the daemon connection during hello: {exc}") from None
    try:
        response = msgspec.msgpack.decode(received[0], type=Response)
    except DECODE_FAILURES as exc:
        raise TransportError(f"the daemon's answer to hello did not decode: {exc}") from None
    return _wire.result_of(response, call), received[1:]
