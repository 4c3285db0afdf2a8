"""Qualified resource URIs: ``mcpd://<server>/<uri>``.

Resources keep the server's URI byte for byte behind ``mcpd://<server>/``, templates too
(``mcpd://files/file:///{path}`` expands to ``mcpd://files/file:///a/b``). Server names
never contain ``/``, so routing strips the prefix up to the first ``/`` after the server
name and the remainder is the server's own URI, unchanged (``split_uri``).

Here, not beside the tools' names in ``mcpd.registry.names``, because the client library needs them
too: that module imports ``hashlib``, whose OpenSSL costs every bridge process ~4 MiB of RSS.
"""

from __future__ import annotations

URI_PREFIX = "mcpd://"


def qualify_uri(server: str, uri: str) -> str:
    """``mcpd://<server>/<uri>``: the server's URI (or URI template) kept unchanged."""
    return f"{URI_PREFIX}{server}/{uri}"


def split_uri(qualified: str) -> tuple[str, str] | None:
    """(server, the server's own URI) of a qualified URI; None if ``qualified`` is not one."""
    if not qualified.startswith(URI_PREFIX):
        return None
    server, slash, uri = qualified[len(URI_PREFIX) :].partition("/")
    if not server or not slash or not uri:
        return None
    return server, uri
