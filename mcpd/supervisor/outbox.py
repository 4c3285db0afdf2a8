"""The SDK session's write stream to a stdio child, which remembers which call sent each request.

The session writes a request from the task that makes it, so the message can take that task's
``CallMark`` (``sdk.track_call``) along. A call whose request the pipe refused, or that the child
was gone before reading, is marked refused: it may go to the next process
(``calls.send_request``), as a raw tool call may (``rawrpc``).
"""

from __future__ import annotations

import math
import weakref
from types import TracebackType
from typing import TYPE_CHECKING, TypeAlias

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from mcpd.supervisor.sdkload import sdk

if TYPE_CHECKING:
    # Types only: the SDK is imported while the first children start (``sdkload``).
    from mcpd.supervisor.sdk import CallMark, SessionMessage

Outgoing: TypeAlias = "tuple[CallMark | None, SessionMessage]"
"""A message of the session, with the mark of the call that sent it, if it is tracked."""


class Outbox:
    """What the session sends, queued for the task that writes the child's stdin (``receive``)."""

    def __init__(self) -> None:
        self._send: MemoryObjectSendStream[Outgoing]
        self.receive: MemoryObjectReceiveStream[Outgoing]
        self._send, self.receive = anyio.create_memory_object_stream(32)
        self._first: weakref.WeakKeyDictionary[CallMark, float] = weakref.WeakKeyDictionary()
        """Where each tracked call's first request ends in the stream (inf: never written); an
        entry goes with its call. A call that sent several reached the server if its first did."""

    # -- the session's side (the SDK's WriteStream protocol)

    async def send(self, item: SessionMessage) -> None:
        await self._send.send((sdk.current_call(), item))

    def close(self) -> None:
        self._send.close()

    async def aclose(self) -> None:
        self._send.close()

    async def __aenter__(self) -> Outbox:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self._send.close()

    # -- the writer's side

    def written(self, item: Outgoing, end: float) -> None:
        """``item`` went into the pipe, its last byte at offset ``end``."""
        mark, message = item
        # Only a request has a caller waiting on its fate.
        if mark is not None and sdk.is_request(message):
            self._first.setdefault(mark, end)

    def refused(self, item: Outgoing) -> None:
        """The pipe refused ``item``: the child never saw it."""
        mark = item[0]
        self.written(item, math.inf)
        if mark is not None and self._first.get(mark) == math.inf:
            mark.refused = True

    def refuse_unread(self, read: int) -> None:
        """The child is gone having read ``read`` bytes: refuse the calls it never saw."""
        while True:
            try:
                self.refused(self.receive.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                break
        for mark, end in self._first.items():
            if end > read:
                mark.refused = True
