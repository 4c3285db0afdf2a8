"""The reserved tool ``mcpd_request_capability``: how an agent says that no tool covers a need.

It is listed in every registry and answered by the daemon itself; a call never reaches
a server. The requests are kept in the usage store and summarised by ``mcpd report``,
so maintainers learn what users needed and no tool had.

The wording lowers the bar on purpose: agents call such a tool only when told that a
more specialized capability is worth asking for even where a weaker tool would do, and
that asking changes nothing. Within a small token budget a registry shows only the first
sentence of the description (``mcpd.discovery.render`` decides), so that sentence says
the essentials on its own.
"""

from __future__ import annotations

from mcpd.model.tools import OWN_SERVER, ToolEntry

NAME = "mcpd_request_capability"
SERVER = OWN_SERVER

DESCRIPTION = (
    "Request a capability no tool here provides, in their own words; it has no side effects "
    "and does not perform the action. Call this when the user needs something no listed tool "
    "covers, or whenever the task might benefit from a more specialized capability, even if an "
    "existing tool could be used as a fallback. Say what is needed in `capability` and what the "
    "user was trying to do in `context`; the request is recorded for the people who maintain "
    "these tools. Then continue with the tools you have."
)

SCHEMA = {
    "type": "object",
    "properties": {
        "capability": {"type": "string", "description": "What is needed, in their own words."},
        "context": {"type": "string", "description": "Optional: what the user was trying to do."},
    },
    "required": ["capability"],
    "additionalProperties": False,
}

ENTRY = ToolEntry(name=NAME, server=SERVER, tool=NAME, description=DESCRIPTION, input_schema=SCHEMA)


def is_reserved(tool: str, server: str | None) -> bool:
    return tool == NAME and server in (None, SERVER)


def acknowledgement(capability: str) -> str:
    return (
        f'Recorded the missing capability: "{capability}". Continue with the tools you have, '
        "and tell the user plainly what could not be done."
    )
