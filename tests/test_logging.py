"""Logs that explain failures: the exception's type, message and frames in JSON, a traceback on a console."""

from __future__ import annotations

import json
import subprocess
import sys

PROGRAM = """
import sys, structlog
from mcpd.daemon.logging import configure_logging
configure_logging("info", sys.argv[1])

def connect_server(password="hunter2"):
    raise ValueError("the server went away")

try:
    connect_server()
except ValueError:
    structlog.get_logger("mcpd.test").exception("server.failed", server="alpha")
"""


def logged(fmt: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, fmt], capture_output=True, text=True, timeout=60, check=True
    )
    return result.stderr


def test_json_lines_carry_type_message_and_frames() -> None:
    """A JSON line (the service's format) names the exception, its message and where it was raised,
    and leaves frame locals out (they may hold secrets)."""
    line = json.loads(logged("json").strip())
    assert line["event"] == "server.failed" and line["level"] == "error" and line["server"] == "alpha"
    (exception,) = line["exception"]
    assert exception["exc_type"] == "ValueError"
    assert exception["exc_value"] == "the server went away"
    assert [frame["name"] for frame in exception["frames"]] == ["<module>", "connect_server"]
    assert "hunter2" not in json.dumps(line)


def test_console_keeps_a_readable_traceback() -> None:
    """On a terminal the same event comes with the usual Python traceback, without locals."""
    text = logged("console")
    assert "server.failed" in text
    assert "Traceback (most recent call last):" in text
    assert "in connect_server" in text
    assert "ValueError: the server went away" in text
    assert "hunter2" not in text
