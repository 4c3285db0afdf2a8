"""The reserved tool ``mcpd_request_capability``: how an agent says that no tool covers a need.

It is listed in every registry and answered by the daemon itself; a call never reaches
a server. The requests are kept in the usage store and summarised by ``mcpd report``,
so maintainers learn what users needed and no tool had.
"""

from __future__ import annotations

from mcpd.model.tools import ToolEntry

NAME = "mcpd_request_capability"
SERVER = "mcpd"

DESCRIPTION = (
    "Report a capability the user needs that none of the available tools provides. Call this "
    "whenever the user asks for something no listed tool covers, even if a weaker tool could be "
    "used as a fallback: say what was needed in `capability` and what the user was trying to do in "
    "`context`. It does not perform the task; it records the gap for the people who maintain these "
    "tools. Then carry on with the tools you have and tell the user what is missing."
)

SCHEMA = {
    "type": "object",
    "properties": {
        "capability": {
            "type": "string",
            "description": "The missing capability, in a few words (e.g. 'convert a PDF to Markdown').",
        },
        "context": {
            "type": "string",
            "description": "Optional: what the user was trying to achieve when the need came up.",
        },
    },
    "required": ["capability"],
    "additionalProperties": False,
}

ENTRY = ToolEntry(name=NAME, server=SERVER, tool=NAME, description=DESCRIPTION, input_schema=SCHEMA)


def is_reserved(tool: str, server: str | None) -> bool:
    return tool == NAME and server in (None, SERVER)


def acknowledgement(capability: str) -> str:
    return (
        f"Recorded the missing capability: {capability!r}. No tool provides it yet. Continue with "
        "the tools you have, and tell the user plainly what could not be done."
    )
