"""Logs that explain failures: the exception's type, message and frames in JSON, a traceback on a console."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from mcpd.client.sync import Client
from mcpd.errors import DaemonNotRunning

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


ESCAPES = """
import logging, sys, structlog
from mcpd.daemon.logging import configure_logging
configure_logging("info", sys.argv[1])
structlog.get_logger("mcpd.test").info("server.stderr", server="fx", line="\\x1b]0;owned\\x07\\x1b[2Jhi")
logging.getLogger("mcp.client.stdio").warning("\\x1b]52;c;Y2xpcA\\x07")
"""


def test_a_console_log_shows_what_servers_wrote_and_never_obeys_it() -> None:
    """On a terminal, a server's stderr line and a library's message are logged with their control
    characters written out (``\\x1b``), as the command line shows them: a server could otherwise
    retitle the terminal of ``mcpd serve``, clear it or write its clipboard (OSC 52). The JSON log
    escapes them anyway."""
    result = subprocess.run(
        [sys.executable, "-c", ESCAPES, "console"], capture_output=True, text=True, timeout=60, check=True
    )
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "line=\\x1b]0;owned\\x07\\x1b[2Jhi" in lines[0], lines[0]
    assert "message=\\x1b]52;c;Y2xpcA\\x07" in lines[1], lines[1]


TRACED = """
import sys, structlog
from mcpd.daemon.logging import configure_logging
configure_logging("info", "console")
try:
    raise ValueError("the server said \x1b]0;owned\x07\x1b[2J")
except ValueError:
    structlog.get_logger("mcpd.test").exception("server.failed", server="fx")
"""


def test_a_console_traceback_shows_what_an_exception_carried_and_never_obeys_it() -> None:
    """On a terminal, a logged exception's message is shown with its control characters written out,
    the traceback's lines kept: an exception may carry what a server sent. (Escaping covered the
    event's values only: the traceback was written as it was, escape sequences and all.)"""
    result = subprocess.run(
        [sys.executable, "-c", TRACED], capture_output=True, text=True, timeout=60, check=True
    )
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "Traceback (most recent call last):\n" in result.stderr, result.stderr
    assert "ValueError: the server said \\x1b]0;owned\\x07\\x1b[2J" in result.stderr, result.stderr


LIBRARY = """
import logging, sys
from mcpd.daemon.logging import configure_logging
configure_logging(sys.argv[2], sys.argv[1])
try:
    raise ValueError("not an event stream")
except ValueError:
    logging.getLogger("mcp.client.streamable_http").exception("Error parsing SSE message")
"""


def test_a_librarys_exception_is_one_line_unless_debugging() -> None:
    """The SDK logs a server's garbage with its traceback: in mcpd's log that is one line saying
    the error (a traceback at each handshake read as a crash of mcpd's), the frames at debug."""

    def library_logged(fmt: str, level: str) -> str:
        command = [sys.executable, "-c", LIBRARY, fmt, level]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stderr

    line = json.loads(library_logged("json", "info"))
    assert line["message"] == "Error parsing SSE message" and line["level"] == "error"
    assert line["error"] == "ValueError: not an event stream" and "exception" not in line
    console = library_logged("console", "info")
    assert "ValueError: not an event stream" in console and "Traceback" not in console
    assert len(console.splitlines()) == 1
    assert "frames" in json.loads(library_logged("json", "debug"))["exception"][0]
    assert "Traceback (most recent call last):" in library_logged("console", "debug")


CALLBACK = """
import asyncio, sys
from mcpd.daemon.logging import configure_logging
configure_logging("info", "json")
def expire():
    raise KeyError("a request already gone")
loop = asyncio.new_event_loop()
loop.call_soon(expire)
loop.call_soon(loop.stop)
loop.run_forever()
"""


def test_a_callback_of_mcpds_that_raised_keeps_its_traceback() -> None:
    """What asyncio logs is a callback or protocol of mcpd's own that raised (rawrpc's expiry
    timer, a child's pipes): a fault of mcpd's, whose frames say where, at any level."""
    command = [sys.executable, "-c", CALLBACK]
    stderr = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stderr
    line = json.loads(stderr)
    assert line["message"].startswith("Exception in callback expire()")
    assert [frame["name"] for frame in line["exception"][0]["frames"]][-1] == "expire"


# -- a log that cannot be written -------------------------------------------------------------

LOG_LIMIT = 16 * 1024


@contextlib.contextmanager
def serving(tmp_path: Path, stderr: IO[bytes], *, file_limit: int | None = None) -> Iterator[Path]:
    """``mcpd serve`` on a demo server (no usage store: the file limit is for the log alone) with
    ``stderr`` as its log; yields its socket once it answers, and checks it stops cleanly."""
    config = tmp_path / "config.toml"
    config.write_text(
        f'[daemon]\nusage = false\n[servers.demo]\ncommand = "{sys.executable}"\nargs = ["-m", "mcpd.demo"]\n'
    )
    # Unix socket paths are limited to ~104 bytes: a short directory of its own.
    workdir = Path(tempfile.mkdtemp(prefix="mcpd-", dir="/tmp"))
    socket = workdir / "mcpd.sock"

    def limit_files() -> None:
        if file_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    argv = ["serve", "--log-format", "json", "--config", str(config), "--socket", str(socket)]
    process = subprocess.Popen(
        [sys.executable, "-m", "mcpd", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        env={**os.environ, "XDG_STATE_HOME": str(workdir / "state")},
        preexec_fn=limit_files,  # noqa: PLW1509 - only setrlimit, in a child of a test
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, f"mcpd serve exited with {process.returncode}"
            try:
                Client(socket).connect().close()
                break
            except DaemonNotRunning:
                assert time.monotonic() < deadline, "the daemon never listened"
                time.sleep(0.05)
        yield socket
        assert process.poll() is None, f"mcpd serve exited with {process.returncode}"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_log_on_a_full_disk_costs_no_request(tmp_path: Path) -> None:
    """Once the log file reaches its size limit (a full disk), every request is still served, the
    lines that could not be written are counted, and the first line written once the log takes
    lines again says how many were lost."""
    log = tmp_path / "mcpd.log"
    # Appended, so that once truncated the file is written from its start again.
    with log.open("ab") as stderr, serving(tmp_path, stderr, file_limit=LOG_LIMIT) as socket:
        served = 0
        # Each connection logs two lines (connected, disconnected): the log fills, then overflows.
        while log.stat().st_size < LOG_LIMIT - 512 or served < 200:
            with Client(socket, name="full-disk") as client:
                assert [server.name for server in client.status()] == ["demo"]
            served += 1
            assert served < 2000, "the log never filled"
        log.write_bytes(b"")
        with Client(socket, name="after") as client:
            client.status()
        # An empty line may come first: the newline that ends a torn line, which the daemon wrote
        # (to the log it saw still full) as the file was emptied under it, as a rotation by
        # truncation may (CI saw it once).
        first, *_ = [line for line in log.read_text().splitlines() if line]
        notice = json.loads(first)
        assert notice["event"] == "log.lines_dropped" and notice["level"] == "warning"
        assert notice["lines"] > 100


def test_serve_with_an_unwritable_stderr_keeps_serving(tmp_path: Path) -> None:
    """``mcpd serve 2>/dev/full`` runs and answers clients instead of exiting at its first log line."""
    with open("/dev/full", "wb") as full, serving(tmp_path, full) as socket, Client(socket) as client:
        assert [server.name for server in client.status()] == ["demo"]


TORN = """
import resource, sys, structlog
from mcpd.daemon.logging import configure_logging
configure_logging("info", "json")
log = structlog.get_logger("mcpd.test")
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), hard))
log.info("too.long", padding="x" * 4 * int(sys.argv[1]))  # written in part, then EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
log.info("after.the.gap")
"""


def test_a_line_cut_short_by_a_full_log_is_not_glued_to_the_next(tmp_path: Path) -> None:
    """A line the file took only part of (the size limit reached mid-line) is dropped and counted,
    and the notice written once the log takes lines again starts a line of its own: every line
    after the fragment is whole JSON."""
    log = tmp_path / "mcpd.log"
    with log.open("ab") as stderr:
        subprocess.run([sys.executable, "-c", TORN, "200"], stderr=stderr, timeout=60, check=True)
    fragment, notice, after, end = log.read_bytes().split(b"\n")
    assert len(fragment) == 200 and fragment.startswith(b"{") and end == b""
    assert json.loads(notice)["event"] == "log.lines_dropped" and json.loads(notice)["lines"] == 1
    assert json.loads(after)["event"] == "after.the.gap"
