"""The one way into the daemon from outside: ``Client`` (blocking) and ``connect()`` (async).

Neither imports the mcp SDK or the daemon, so a short script or ``mcpd status`` starts fast.
Errors the daemon reports are raised as the same ``mcpd.errors`` classes.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcpd.client.aio import AsyncClient, connect
    from mcpd.client.sync import Client

__all__ = ["AsyncClient", "Client", "connect"]


def __getattr__(name: str) -> object:
    # Loaded on first use: the async client pulls in anyio, and a bridge (which imports only
    # mcpd.client.channel) needs neither client.
    if name == "Client":
        from mcpd.client import sync  # noqa: PLC0415

        return sync.Client
    if name in ("connect", "AsyncClient"):
        from mcpd.client import aio  # noqa: PLC0415

        return getattr(aio, name)
    raise AttributeError(name)
