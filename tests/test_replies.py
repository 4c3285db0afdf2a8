"""The stdout reader that hands the raw path its replies as the bytes arrive (``mcpd.supervisor.replies``)."""

from __future__ import annotations

import pytest

from mcpd.supervisor.replies import RoutingReader

pytestmark = pytest.mark.anyio


def reader_taking(prefix: bytes, taken: list[bytes]) -> RoutingReader:
    """A reader whose ``route`` takes the lines that start with ``prefix``."""

    def route(line: bytes) -> bool:
        if line.startswith(prefix):
            taken.append(line)
            return True
        return False

    reader = RoutingReader()
    reader.route = route
    return reader


async def test_leading_replies_are_routed_and_the_rest_read_in_order() -> None:
    """Whole lines that ``route`` takes go to it; from the first it leaves on, lines are read as usual,
    a routable one among them included, so the reading task sees them in the server's order."""
    taken: list[bytes] = []
    reader = reader_taking(b"R", taken)
    reader.feed_data(b"R1\n\nR2\nS1\nR3\npartial")
    assert taken == [b"R1\n", b"R2\n"]
    reader.feed_data(b" line\nR4\n")  # something is buffered: nothing is routed past it
    reader.feed_eof()
    lines = [line async for line in reader]
    assert lines == [b"S1\n", b"R3\n", b"partial line\n", b"R4\n"]
    assert taken == [b"R1\n", b"R2\n"]


async def test_routing_resumes_once_the_buffer_is_read() -> None:
    """Once the reading task has taken every buffered line, replies are routed again as they come;
    a reply split across two reads is buffered like any partial line."""
    taken: list[bytes] = []
    reader = reader_taking(b"R", taken)
    reader.feed_data(b"S1\n")
    assert await reader.readline() == b"S1\n"
    reader.feed_data(b"R1\nR2")
    assert taken == [b"R1\n"]
    reader.feed_data(b"\n")
    assert await reader.readline() == b"R2\n"
