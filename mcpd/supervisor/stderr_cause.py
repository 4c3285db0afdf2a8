"""Which of a dead server's last stderr lines says why it died.

Usually the last one, but runtimes and launchers print trailers below the error, and a person
reading ``last_error`` then learns nothing: Node ends an uncaught error with its stack, the error's
properties and ``Node.js v20.20.2``; ``npx`` with a misspelt package ends its E404 with the path of
its debug log; Python ends an exception group's traceback with the frame's bottom line. The error
above those is what the line should be.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_TRAILER = re.compile(
    r"\s*$"  # blank
    r"|Node\.js v\d[\d.]*\s*$"  # Node's version, under an uncaught error
    r"|npm (?:error|ERR!) A complete log of this run can be found in"  # npm's pointer to its log ...
    r"|npm (?:error|ERR!)\s+\S+\.log\s*$"  # ... its path on a line of its own (npm 6-9)
    r"|\s*\+-+\s*$"  # the bottom of a Python exception group's traceback
)
_NODE_FRAME = re.compile(r"\s+at \S")
"""A line of a Node stack (``    at Module._load (node:internal/...)``)."""
_NPM = re.compile(r"npm (?:error|ERR!)(?: |$)")
_NPM_FIELD = re.compile(r"npm (?:error|ERR!) (?:code|syscall|errno|path|dest|signal|command)\b")
"""The fields npm lists above its message (``npm error code E404``)."""
_GROUP_MARGIN = re.compile(r"\s*\| (.*)")
"""A line inside a Python exception group's traceback, behind its margin."""
_PROPERTIES = 40
"""Most lines of a Node error's properties looked through for the stack above them."""


def cause_line(lines: Sequence[str]) -> str | None:
    """The line of ``lines`` (the last a server wrote to stderr, oldest first) that says why it
    ended: the last one but for the trailers above; None when there is none."""
    end = len(lines)
    while end and _TRAILER.match(lines[end - 1]):
        end -= 1
    if not end:
        return None
    last = end - 1
    if _NPM.match(lines[last]):
        return _npm_message(lines[:end])
    at = _stack_bottom(lines, last)
    if at is not None:
        while at > 0 and _NODE_FRAME.match(lines[at]):
            at -= 1
        # A stack longer than the tail kept its message out of it: the last line says most then.
        return lines[last] if _NODE_FRAME.match(lines[at]) else lines[at]
    group = _GROUP_MARGIN.fullmatch(lines[last])
    return group[1] if group is not None else lines[last]


def _stack_bottom(lines: Sequence[str], last: int) -> int | None:
    """Where the Node stack ending at ``last`` has its last frame: ``last`` itself, or above the
    error's properties (``    at ... {``, ``  code: 'MODULE_NOT_FOUND'``, ``}``); None when no
    stack ends there."""
    if _NODE_FRAME.match(lines[last]):
        return last
    if lines[last].strip() != "}":
        return None
    for index in range(last - 1, max(-1, last - _PROPERTIES), -1):
        if _NODE_FRAME.match(lines[index]) and lines[index].rstrip().endswith("{"):
            return index
    return None


def _npm_message(lines: Sequence[str]) -> str:
    """The message of npm's last error report (which ends ``lines``): its first line after the
    fields (``code E404``, ``syscall``, ``errno``), e.g. ``npm error 404 Not Found - GET ...``."""
    start = len(lines) - 1
    while start > 0 and _NPM.match(lines[start - 1]):
        start -= 1
    report = lines[start:]
    return next((line for line in report if not _NPM_FIELD.match(line)), report[-1])
