"""Hostile clients: what a broken or malicious local client can throw at the daemon's socket.

For tests and benchmarks of the daemon's defences. ``bad_inputs`` draws seeded payloads
of every kind the wire must survive; ``probe`` sends one on its own connection and
collects the answers; the other functions are the heavier attacks of ``bench/hostile.py``.
None of them needs the daemon to behave: they only ever wait with a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from mcpd.model.protocol import PROTOCOL_VERSION, HelloParams, Request

_encoder = msgspec.msgpack.Encoder()

INVALID_UTF8 = bytes.fromhex("940001a2e400c0")
"""``[0, 1, <2 bytes that are not UTF-8>, nil]``: a request whose method does not decode."""

KINDS = ("random", "truncated", "oversized", "shape", "utf8", "deep", "huge")


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def request(request_id: int, method: str, params: object = None) -> bytes:
    """One framed request; ``params`` any msgpack-able value (not necessarily what the method takes)."""
    raw = msgspec.Raw(_encoder.encode(params if params is not None else {}))
    return frame(_encoder.encode(Request(request_id, method, raw)))


def hello(request_id: int = 1, client: str = "hostile") -> bytes:
    return request(request_id, "hello", HelloParams(protocol=PROTOCOL_VERSION, client=client))


def deep(depth: int) -> bytes:
    """A status request whose params are ``depth`` nested one-element arrays."""
    return frame(b"\x94\x00\x02\xa6status" + b"\x91" * depth + b"\xc0")


def empty_maps(count: int) -> bytes:
    """tools.call whose arguments hold ``count`` empty maps: tiny on the wire, costly to build."""
    items = b"\xdd" + count.to_bytes(4, "big") + b"\x80" * count
    params = b"\x82\xa4tool\xa8fx__echo\xa9arguments\x81\xa1x" + items
    return frame(b"\x94\x00\x03\xaatools.call" + params)


@dataclass(frozen=True)
class BadInput:
    kind: str
    payload: bytes
    """Sent after a valid hello, so that requests reach the methods."""


def _shape(rng: random.Random) -> bytes:
    shapes: list[Any] = [
        [1, 2, 3],
        {"id": 1, "method": "status"},
        [0],
        [0, "x", "status", {}],
        [0, 1, 2, 3, 4, 5],
        [2, "event", {}],
        [1, 1, None, None],
        "status",
        5,
        None,
        [0, -1, "status", "not a map"],
        [0, 2**63, "hello", {}],
        [0, 4, "tools.call", {"tool": 5}],
        [0, 5, "tools.list", {"limit": -3, "surprise": True}],
        [0, 6, "servers.start", {"name": ["list"]}],
        [0, 7, "no.such.method", {}],
    ]
    return frame(_encoder.encode(rng.choice(shapes)))


def _utf8(rng: random.Random) -> bytes:
    bad = b"\xa2\xe4\x00"
    choices = [
        frame(INVALID_UTF8),
        frame(b"\x94\x00\x08\xaatools.list\x81\xa5query" + bad),
        frame(b"\x94\x00\x09\xa6status\x81" + bad + b"\x01"),
    ]
    return rng.choice(choices)


def bad_inputs(rng: random.Random, count: int, max_frame: int = 16 * 1024 * 1024) -> Iterator[BadInput]:
    """``count`` seeded bad inputs, cycling through ``KINDS``."""
    for index in range(count):
        kind = KINDS[index % len(KINDS)]
        if kind == "random":
            payload = rng.randbytes(rng.randint(1, 4096))
        elif kind == "truncated":
            whole = request(2, "tools.list", {"query": "x" * rng.randint(0, 512)})
            payload = whole[: rng.randint(1, len(whole) - 1)]
        elif kind == "oversized":
            payload = rng.randint(max_frame + 1, 2**32 - 1).to_bytes(4, "big") + rng.randbytes(64)
        elif kind == "shape":
            payload = _shape(rng)
        elif kind == "utf8":
            payload = _utf8(rng)
        elif kind == "deep":
            payload = deep(rng.choice([100, 2_000, 50_000]))
        else:  # huge
            payload = rng.choice(
                [
                    request(3, "tools.list", {"query": "x" * 100_000}),
                    request(3, "servers.select", {"query": "y" * 10_000}),
                    empty_maps(200_000),
                ]
            )
        yield BadInput(kind, payload)


async def probe(path: Path, payload: bytes, *, timeout: float = 10.0) -> list[Any]:
    """Send hello then ``payload`` on a new connection, stop writing, and collect every frame
    the daemon answers until it closes (decoded when they decode, raw bytes otherwise)."""
    reader, writer = await asyncio.open_unix_connection(str(path))
    answers: list[Any] = []
    try:
        async with asyncio.timeout(timeout):
            # The daemon may hang up mid-write on a hostile frame; the socket then reports
            # ENOTCONN or EPIPE, which is the behaviour under test, not a failure of the probe.
            with contextlib.suppress(OSError):
                writer.write(hello() + payload)
                await writer.drain()
                writer.write_eof()
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                while True:
                    size = int.from_bytes(await reader.readexactly(4), "big")
                    data = await reader.readexactly(size)
                    try:
                        answers.append(msgspec.msgpack.decode(data))
                    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                        answers.append(data)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return answers


def connect_close(path: Path, cycles: int) -> None:
    """Connect and hang up ``cycles`` times, as fast as the socket allows."""
    for _ in range(cycles):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(path))
        except (BlockingIOError, ConnectionError, OSError):
            pass
        finally:
            sock.close()


def send_and_wait(path: Path, data: bytes, answers: int, timeout: float = 60.0) -> None:
    """Say hello, send ``data``, and read ``answers`` responses after the hello's (or to EOF).

    Sends from a thread while reading, as a client must: the daemon stops reading from a
    client that leaves its answers unread.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sender = threading.Thread(target=_send_all, args=(sock, hello() + data), daemon=True)
        sender.start()
        try:
            for _ in range(answers + 1):
                header = sock.recv(4, socket.MSG_WAITALL)
                if len(header) < 4:
                    return
                size = int.from_bytes(header, "big")
                while size:
                    chunk = sock.recv(min(size, 1 << 20))
                    if not chunk:
                        return
                    size -= len(chunk)
        finally:
            sock.shutdown(socket.SHUT_RDWR)
            sender.join(timeout)


def _send_all(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(data)


async def parallel(path: Path, count: int, timeout: float = 60.0) -> None:
    """Open ``count`` connections at once, hello and status on each, then close them all."""

    async def one() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(hello() + request(2, "status"))
        for _ in range(2):
            size = int.from_bytes(await reader.readexactly(4), "big")
            await reader.readexactly(size)
        return reader, writer

    async with asyncio.timeout(timeout):
        opened = await asyncio.gather(*(one() for _ in range(count)), return_exceptions=True)
    for item in opened:
        if isinstance(item, tuple):
            item[1].close()
