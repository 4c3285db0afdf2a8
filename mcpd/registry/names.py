"""Qualified names of tools and prompts: ``server__name`` (resources: ``mcpd.model.uris``).

Tool and prompt names are unique across servers, matching ``^[A-Za-z0-9_-]{1,64}$``.

Many hosts reject other names. Server names never contain ``__`` (the config refuses
them), so a plain name splits at its first ``__`` into exactly one (server, tool) pair.
The name is a pure function of (server, tool): when the plain form is not allowed as is
(other characters, or too long), it is cleaned and cut, and a hash of the original pair
is appended, so two different pairs never meet and the same pair always gets the same
name, whatever else is configured. Prompts are named exactly as tools (``qualify``).
"""

from __future__ import annotations

import hashlib
import re

from mcpd.model.tools import SEPARATOR

MAX_LENGTH = 64
_ALLOWED = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_DISALLOWED = re.compile(r"[^A-Za-z0-9_-]")
_HASH_LENGTH = 8


def qualify(server: str, tool: str) -> str:
    plain = f"{server}{SEPARATOR}{tool}"
    if _ALLOWED.match(plain):
        return plain
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:_HASH_LENGTH]
    cleaned = _DISALLOWED.sub("_", plain)
    return f"{cleaned[: MAX_LENGTH - _HASH_LENGTH - 1]}_{digest}"
