"""Qualified names: tools and prompts ``server__name``; resources ``mcpd://server/<uri>``.

Tool and prompt names are unique across servers, matching ``^[A-Za-z0-9_-]{1,64}$``.

Many hosts reject other names. Server names never contain ``__`` (the config refuses
them), so a plain name splits at its first ``__`` into exactly one (server, tool) pair.
The name is a pure function of (server, tool): when the plain form is not allowed as is
(other characters, or too long), it is cleaned and cut, and a hash of the original pair
is appended, so two different pairs never meet and the same pair always gets the same
name, whatever else is configured. Prompts are named exactly as tools (``qualify``).

Resources keep the server's URI byte for byte behind ``mcpd://<server>/``, templates too
(``mcpd://files/file:///{path}`` expands to ``mcpd://files/file:///a/b``). Server names
never contain ``/``, so routing strips the prefix up to the first ``/`` after the server
name and the remainder is the server's own URI, unchanged (``split_uri``).
"""

from __future__ import annotations

import hashlib
import re

from mcpd.model.tools import SEPARATOR

MAX_LENGTH = 64
_ALLOWED = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_DISALLOWED = re.compile(r"[^A-Za-z0-9_-]")
_HASH_LENGTH = 8


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


def qualify(server: str, tool: str) -> str:
    plain = f"{server}{SEPARATOR}{tool}"
    if _ALLOWED.match(plain):
        return plain
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:_HASH_LENGTH]
    cleaned = _DISALLOWED.sub("_", plain)
    return f"{cleaned[: MAX_LENGTH - _HASH_LENGTH - 1]}_{digest}"
