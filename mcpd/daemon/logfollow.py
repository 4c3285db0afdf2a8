"""``logs.follow``: each follower is a task that sends a server's new log entries to one connection.

The task reads the server's ring from where it left off and sends what is new as one
``logs`` notification, waiting for the client to take it before the next one. A flood
therefore costs the daemon one bounded ring per server and at most one notification per
follower in the socket's buffer; a follower slower than the flood skips the lines the
ring has dropped (their ``seq`` numbers show the gap), and the daemon never queues for it.
"""

from __future__ import annotations

import contextlib

import anyio
import msgspec

from mcpd.ipc.server import Connection, encode_message
from mcpd.model.logs import LOGS_NOTIFICATION, LogLines
from mcpd.model.protocol import Notification
from mcpd.supervisor.logring import LogRing

_encoder = msgspec.msgpack.Encoder()


class Followers:
    """The running follows, one per (connection, server)."""

    def __init__(self) -> None:
        self._scopes: dict[tuple[int, str], anyio.CancelScope] = {}

    def follow(self, conn: Connection, server: str, ring: LogRing, start: int) -> None:
        """Send ``conn`` the entries of ``ring`` from number ``start`` on, as they come.

        Replaces an earlier follow of the same server on the same connection; the follow ends
        with the connection, with ``unfollow``, or when the server leaves the config.
        """
        self.unfollow(conn, server)
        scope = anyio.CancelScope()
        self._scopes[conn.id, server] = scope
        conn.tasks.spawn(self._send(conn, server, ring, start, scope))

    def unfollow(self, conn: Connection, server: str) -> bool:
        """Stop following ``server`` on ``conn``; False if it was not followed."""
        scope = self._scopes.pop((conn.id, server), None)
        if scope is None:
            return False
        scope.cancel()
        return True

    async def _send(
        self, conn: Connection, server: str, ring: LogRing, seq: int, scope: anyio.CancelScope
    ) -> None:
        try:
            with scope, contextlib.suppress(ConnectionError, OSError):  # the client left
                ended = False
                while not ended:
                    await ring.wait_beyond(seq)
                    entries = ring.since(seq)
                    if entries:
                        seq = entries[-1].seq + 1
                    ended = ring.closed
                    lines = LogLines(server=server, entries=entries, ended=ended)
                    params = msgspec.Raw(_encoder.encode(lines))
                    await conn.send(encode_message(Notification(LOGS_NOTIFICATION, params)))
        finally:
            if self._scopes.get((conn.id, server)) is scope:
                del self._scopes[conn.id, server]
