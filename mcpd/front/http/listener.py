"""The HTTP front end's listener and token, had at start like the socket, before any server is spawned.

``HttpFront.open`` binds the address and reads (or makes) the token, so a port in use or an
unsafe token file stops ``mcpd serve`` at once with a clear line. Serving it (``server``:
uvicorn and starlette, ~85 ms of CPU to import) waits until the children are booting.
"""

from __future__ import annotations

import contextlib
import socket
from dataclasses import dataclass

from mcpd.config.model import DaemonSettings, http_address
from mcpd.front.http.token import load_token, token_path

MCP_PATH = "/mcp"


def _bind(host: str, port: int) -> socket.socket:
    # IPPROTO_TCP named, not left 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP,
    # and without it each answer (headers, then body) waits out the host's delayed ACK (~40 ms).
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    with contextlib.ExitStack() as on_failure:
        on_failure.callback(sock.close)
        # A restarted daemon need not wait out the old one's TIME_WAIT connections.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(1024)
        sock.setblocking(False)
        on_failure.pop_all()
    return sock


@dataclass
class HttpFront:
    """The bound listener and the token; ``server.serve`` serves it for as long as the daemon runs."""

    listener: socket.socket
    token: str
    settings: DaemonSettings

    @classmethod
    def open(cls, settings: DaemonSettings) -> HttpFront:
        """Read (or make) the token and bind ``settings.http``: ``McpdError`` or ``OSError``."""
        assert settings.http is not None
        token = load_token(token_path(settings))
        return cls(_bind(*http_address(settings.http)), token, settings)

    @property
    def url(self) -> str:
        host, port = self.listener.getsockname()[:2]
        return f"http://[{host}]:{port}{MCP_PATH}" if ":" in host else f"http://{host}:{port}{MCP_PATH}"
