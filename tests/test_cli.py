"""The `mcpd` command end to end: a real daemon, real fixture servers, the real `mcpd` process."""

from __future__ import annotations

import base64
import functools
import json
import os
import pty
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from anyio.streams.text import TextReceiveStream

from mcpd.testing import fixture_toml, fullserver_toml, run_cli
from mcpd.testing.daemon import DaemonProcess, running_daemon

pytestmark = pytest.mark.anyio
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
async def daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DaemonProcess]:
    """fx: a fixture server (three stderr lines, `image` disabled by the config); bad: one whose tools
    carry injections, blocked by the verifier; dead: a command that does not exist; off: disabled."""
    path = tmp_path_factory.mktemp("cli") / "config.toml"
    path.write_text(
        fixture_toml("fx", "--stderr-lines", "3", disabled_tools=["crash"])
        + fixture_toml("bad", "--poisoned", verify="block")
        + '[servers.dead]\ncommand = "/nonexistent/mcp-server"\n'
        + '[servers.off]\ncommand = "off"\nenabled = false\n'
    )
    async with running_daemon(path) as running:
        # Ready means every server had its first start attempt; the tests want these two up.
        for name in ("fx", "bad"):
            await running.wait_for("server.state", server=name, new="running", timeout=120)
        yield running


def mcpd(
    *argv: str, socket: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    socket_env = {"MCPD_SOCKET": str(socket)} if socket is not None else {}
    return run_cli(*argv, env=(env or {}) | socket_env, timeout=60)


@dataclass
class OnTerminal:
    status: int
    terminal: str
    """What the command wrote to the terminal (its stdout or its stderr, as asked)."""
    other: str
    """The other stream, captured from a pipe."""


def on_terminal(
    *argv: str,
    socket: Path,
    stream: str = "stdout",
    env: dict[str, str] | None = None,
    interrupt_on: str | None = None,
) -> OnTerminal:
    """Run mcpd with ``stream`` on a pseudo-terminal; send Ctrl-C (SIGINT) once ``interrupt_on`` shows."""
    master, slave = pty.openpty()
    environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    environment.update(env or {}, MCPD_SOCKET=str(socket), TERM="xterm")
    out, err = (slave, subprocess.PIPE) if stream == "stdout" else (subprocess.PIPE, slave)
    process = subprocess.Popen(
        [sys.executable, "-m", "mcpd", *argv],
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=err,
        env=environment,
    )
    os.close(slave)
    seen = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 60)
            assert ready, f"no terminal output within 60 s: {seen!r}"
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal, it has exited
                break
            if not chunk:
                break
            seen += chunk
            if interrupt_on is not None and interrupt_on.encode() in seen:
                process.send_signal(signal.SIGINT)
                interrupt_on = None
        other = process.communicate(timeout=60)[0 if stream == "stderr" else 1]
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
    return OnTerminal(process.wait(), seen.decode(errors="replace"), other.decode(errors="replace"))


def usage_db(daemon: DaemonProcess) -> Path:
    # running_daemon puts XDG_STATE_HOME beside the socket; the store is mcpd/usage.db in it.
    return daemon.socket.parent / "state" / "mcpd" / "usage.db"


# -- what a person reads -------------------------------------------------------------------------


async def test_status_json_has_the_documented_fields(daemon: DaemonProcess) -> None:
    """`mcpd status --json` prints {"servers": [...]} with the fields scripts depend on."""
    result = mcpd("status", "--json", "--socket", str(daemon.socket))
    assert result.returncode == 0, result.stderr
    servers = {s["name"]: s for s in json.loads(result.stdout)["servers"]}
    assert sorted(servers) == ["bad", "dead", "fx", "off"]
    fields = ("name", "state", "alive", "degraded", "pid", "restarts", "uptime_s", "tools", "last_error")
    for key in (*fields, "blocked", "held", "attempt", "next_retry_at", "last_exit"):
        assert key in servers["fx"]
    assert servers["fx"]["state"] == "running" and servers["fx"]["alive"] is True


async def test_status_table_says_what_is_wrong(daemon: DaemonProcess) -> None:
    """The table has a PROBLEM column with the error; a server that is not live shows no tool count."""
    result = mcpd("status", socket=daemon.socket)
    assert result.returncode == 0, result.stderr
    header, *lines = result.stdout.splitlines()
    assert header.split() == ["NAME", "STATE", "PID", "UPTIME", "RESTARTS", "TOOLS", "PROBLEM"]
    rows = {line.split()[0]: line for line in lines}
    assert rows["fx"].split()[1] == "running" and int(rows["fx"].split()[5]) > 0
    assert rows["dead"].split()[1:2] == ["failed"] and rows["dead"].split()[5] == "-"
    assert "No such file or directory" in rows["dead"]
    assert rows["off"].split()[1:2] == ["disabled"] and rows["off"].split()[5] == "-"
    # Its process runs, but no agent sees it: the state says blocked, the problem says why.
    assert rows["bad"].split()[1] == "blocked" and rows["bad"].split()[5] == "-"
    assert "blocked by the verifier: TP00" in rows["bad"] and "mcpd diff bad" in rows["bad"]
    assert "\x1b[" not in result.stdout  # no colour into a pipe


async def test_status_colour_on_a_terminal_unless_no_color(daemon: DaemonProcess) -> None:
    """On a terminal the states are coloured (running green, failed red); NO_COLOR turns colour off."""
    coloured = await anyio.to_thread.run_sync(lambda: on_terminal("status", socket=daemon.socket))
    assert coloured.status == 0
    assert "\x1b[32mrunning\x1b[0m" in coloured.terminal and "\x1b[31mfailed\x1b[0m" in coloured.terminal
    plain = await anyio.to_thread.run_sync(
        lambda: on_terminal("status", socket=daemon.socket, env={"NO_COLOR": "1"})
    )
    assert plain.status == 0 and "\x1b[" not in plain.terminal and "running" in plain.terminal


async def test_tools_and_call(daemon: DaemonProcess) -> None:
    """`mcpd tools` lists qualified names; `mcpd call` prints the result; a tool error exits 1."""
    sock = str(daemon.socket)
    tools = mcpd("tools", "--socket", sock)
    assert "fx__echo" in tools.stdout
    listed = json.loads(mcpd("tools", "--json", "--server", "fx", "--socket", sock).stdout)["tools"]
    assert {t["server"] for t in listed} == {"fx"}
    call = mcpd("call", "fx", "echo", "--args", '{"text": "hello there"}', "--socket", sock)
    assert (call.returncode, call.stdout.strip()) == (0, "hello there")
    failed = mcpd("call", "fx", "fail", "--args", '{"message": "nope"}', "--socket", sock)
    assert failed.returncode == 1


async def test_limit_means_what_it_says(daemon: DaemonProcess) -> None:
    """`--limit N` is N tools in all, the reserved tool included, with or without a query."""
    sock = str(daemon.socket)
    one = mcpd("tools", "--limit", "1", "--socket", sock)
    assert len(one.stdout.splitlines()) == 2  # the header and one row
    three = json.loads(mcpd("tools", "--limit", "3", "--json", "--socket", sock).stdout)["tools"]
    assert len(three) == 3 and three[-1]["name"] == "mcpd_request_capability"
    ranked = json.loads(mcpd("tools", "echo text", "--limit", "2", "--json", "--socket", sock).stdout)
    assert len(ranked["tools"]) == 2


async def test_call_summarises_what_is_not_text(daemon: DaemonProcess) -> None:
    """An image is one line (type, MIME, size), not its base64; --raw writes its bytes, --json all."""
    sock = str(daemon.socket)
    shown = mcpd("call", "fx", "image", "--args", '{"size": 2048}', "--socket", sock)
    assert shown.returncode == 0
    assert shown.stdout.splitlines() == ["a test image", "[image image/png, 2.0 KiB]"]
    raw = subprocess.run(
        [sys.executable, "-m", "mcpd", "call", "fx", "image", "--raw", "--socket", sock],
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert raw.stdout == b"a test image" + PNG + bytes(2048 - len(PNG))
    document = json.loads(mcpd("call", "fx", "image", "--json", "--socket", sock).stdout)
    assert base64.b64decode(document["content"][1]["data"]).startswith(PNG)


async def test_call_json_says_false_where_the_server_left_is_error_out(tmp_path: Path) -> None:
    """`mcpd call --json` is mcpd's own output, not MCP passed on: a result without `isError` (the
    full server's `plain`) has `"is_error": false`, a boolean a script can compare (it was null)."""
    config = tmp_path / "config.toml"
    config.write_text(fullserver_toml("full"))
    async with running_daemon(config) as running:
        await running.wait_for("server.state", server="full", new="running", timeout=120)
        called = mcpd("call", "full", "plain", "--json", socket=running.socket)
    assert called.returncode == 0
    assert json.loads(called.stdout)["is_error"] is False


async def test_progress_bar_on_a_terminal_only(daemon: DaemonProcess) -> None:
    """A call whose server reports progress draws a bar on a terminal's stderr, and erases it;
    stdout holds the result alone, and a stderr that is a pipe gets nothing."""
    argv = ("call", "fx", "progress", "--args", '{"steps": 5}')
    shown = await anyio.to_thread.run_sync(lambda: on_terminal(*argv, socket=daemon.socket, stream="stderr"))
    assert shown.status == 0 and shown.other.strip() == "done 5 steps"
    assert "progress [" in shown.terminal and "step 5 of 5" in shown.terminal
    assert shown.terminal.endswith("\r\x1b[K")  # erased: the terminal is left clean
    piped = mcpd(*argv, socket=daemon.socket)
    assert (piped.returncode, piped.stdout.strip(), piped.stderr) == (0, "done 5 steps", "")


async def test_report_names_tools_as_everything_else_does(daemon: DaemonProcess) -> None:
    """`mcpd report` says fx__echo, like tools and status, never fx/echo."""
    sock = str(daemon.socket)
    mcpd("call", "fx", "echo", "--args", '{"text": "counted"}', "--socket", sock)
    report = json.loads(mcpd("report", "--json", "--socket", sock).stdout)
    assert "fx__echo" in {t["name"] for t in report["tools"]}
    table = mcpd("report", "--socket", sock).stdout
    assert "fx__echo" in table and "fx/echo" not in table


async def test_explain_shows_the_parts_of_each_score(daemon: DaemonProcess) -> None:
    """--explain asks the daemon for the score parts: after calls made for a query, the usage
    factor and the association with the query's words show."""
    sock = str(daemon.socket)
    for _ in range(3):
        mcpd("call", "fx", "echo", "--args", '{"text": "x"}', "--query", "parrot my words", "--socket", sock)
    explained = mcpd("tools", "parrot words", "--explain", "--socket", sock)
    assert explained.returncode == 0, explained.stderr
    row = next(line for line in explained.stdout.splitlines() if line.startswith("fx__echo"))
    assert "usage_factor=" in row and "association=" in row
    document = json.loads(mcpd("tools", "parrot words", "--explain", "--json", "--socket", sock).stdout)
    echo = next(t for t in document["tools"] if t["name"] == "fx__echo")
    assert echo["score_parts"]["association"] > 0
    parts = echo["score_parts"]  # the parts rebuild the score
    rebuilt = (parts["text"] + parts["association_lift"] * parts["association"]) * (1 + parts["usage_factor"])
    assert rebuilt == pytest.approx(echo["score"], abs=1e-3)  # each part rounded to 4 places


async def test_stop_start_restart_reload(daemon: DaemonProcess) -> None:
    """Lifecycle commands report the server's new state and exit 0 when it got there; a stopped
    server shows no tool count."""
    sock = str(daemon.socket)
    stopped = mcpd("stop", "fx", "--socket", sock)
    assert (stopped.returncode, stopped.stdout.strip()) == (0, "fx: stopped")
    row = next(
        line for line in mcpd("status", "--socket", sock).stdout.splitlines() if line.startswith("fx ")
    )
    assert row.split()[1] == "stopped" and row.split()[5] == "-"
    not_running = mcpd("call", "fx", "echo", "--args", '{"text": "x"}', "--socket", sock)
    assert not_running.returncode == 1 and "is stopped" in not_running.stderr
    started = mcpd("start", "fx", "--socket", sock)
    assert started.returncode == 0 and started.stdout.startswith("fx: running (pid ")
    restarted = json.loads(mcpd("restart", "fx", "--json", "--socket", sock).stdout)
    assert restarted["state"] == "running" and restarted["restarts"] >= 1
    reloaded = mcpd("reload", "--socket", sock)
    assert reloaded.returncode == 0 and "unchanged: 4" in reloaded.stdout


async def test_held_tools_show_in_status_until_approved(daemon: DaemonProcess) -> None:
    """A tool the server adds after approval is held back: status says how many and where to look;
    `mcpd diff` shows it, `mcpd approve` releases it and the note goes."""
    sock = str(daemon.socket)
    mark = len(daemon.events)
    added = mcpd("call", "fx", "add_tool", "--args", '{"name": "late_tool"}', "--socket", sock)
    assert added.returncode == 0, added.stderr
    await daemon.wait_for("trust.held_back", after=mark, server="fx")
    row = next(
        line for line in mcpd("status", "--socket", sock).stdout.splitlines() if line.startswith("fx ")
    )
    assert "1 tool awaits approval (mcpd diff fx)" in row
    assert "late_tool" in mcpd("diff", "fx", "--socket", sock).stdout
    approved = mcpd("approve", "fx", "--socket", sock)
    assert approved.returncode == 0 and "late_tool" in approved.stdout
    row = next(
        line for line in mcpd("status", "--socket", sock).stdout.splitlines() if line.startswith("fx ")
    )
    assert "approval" not in row


async def test_top_follows_the_event_stream(daemon: DaemonProcess) -> None:
    """`mcpd top` piped: the table once, then a line per event as the daemon pushes it (a restart,
    calls per second); Ctrl-C ends it with status 130 and nothing on stderr."""
    sock = str(daemon.socket)
    env = {**os.environ, "MCPD_SOCKET": sock}
    lines: list[str] = []
    async with await anyio.open_process([sys.executable, "-m", "mcpd", "top"], env=env) as top:
        assert top.stdout is not None and top.stderr is not None
        try:
            buffer, step = "", "table"
            with anyio.fail_after(60):
                async for chunk in TextReceiveStream(top.stdout):
                    buffer += chunk
                    *complete, buffer = buffer.split("\n")
                    lines += complete
                    if step == "table" and any(line.startswith("fx ") for line in lines):
                        step = "restart"  # the table is out, so top has subscribed
                        mcpd("restart", "fx", "--socket", sock)
                    if step == "restart" and any("fx: starting -> running" in line for line in lines):
                        step = "calls"
                        mcpd("call", "fx", "echo", "--args", '{"text": "counted"}', "--socket", sock)
                    if step == "calls" and any(" calls: fx " in line for line in lines):
                        break
            top.send_signal(signal.SIGINT)
            with anyio.fail_after(30):
                status = await top.wait()
            errors = "".join([chunk async for chunk in TextReceiveStream(top.stderr)])
        finally:
            # A failed step must not leave `top` running: closing the process would wait for it.
            if top.returncode is None:
                top.kill()
    assert lines[0].startswith("mcpd top - ")
    assert any("fx: running -> starting (restart requested)" in line for line in lines)
    assert (status, errors) == (130, "")


async def test_top_on_a_terminal_redraws_in_place_and_restores_the_screen(daemon: DaemonProcess) -> None:
    """On a terminal top draws on the alternate screen and gives the old screen back on Ctrl-C."""
    run = await anyio.to_thread.run_sync(lambda: on_terminal("top", socket=daemon.socket, interrupt_on="fx "))
    assert run.status == 130 and run.other == ""
    assert run.terminal.startswith("\x1b[?1049h\x1b[H\x1b[2Jmcpd top - ")
    assert run.terminal.endswith("\x1b[?1049l") and "Traceback" not in run.terminal


async def test_completion_offers_the_daemons_server_names(daemon: DaemonProcess, tmp_path: Path) -> None:
    """bash completes a server argument (and --server) with the names the daemon knows."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    script = tmp_path / "mcpd.bash"
    script.write_text(mcpd("completion", "bash").stdout)
    mcpd_bin = str(Path(sys.executable).with_name("mcpd"))

    def complete(*words: str) -> set[str]:
        program = (
            f"source {script}; COMP_WORDS=({mcpd_bin} {' '.join(words)} ''); COMP_CWORD={len(words) + 1}; "
            '_mcpd; printf "%s\\n" "${COMPREPLY[@]}"'
        )
        env = {**os.environ, "MCPD_SOCKET": str(daemon.socket)}
        result = subprocess.run(
            [bash, "-c", program], capture_output=True, text=True, timeout=60, env=env, check=True
        )
        return set(result.stdout.split())

    assert {"bad", "dead", "fx", "off"} <= complete("stop")
    assert {"bad", "dead", "fx", "off"} == complete("tools", "--server")
    assert "fx" not in complete("call", "fx")  # the second argument is a tool, not a server


# -- what goes wrong, and how it is said ---------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["tools", "--limit", "0"], "--limit"),
        (["tools", "--budget", "0"], "--budget"),
        (["report", "--top", "0"], "--top"),
        (["report", "--since", "soon"], "--since"),
        (["call", "fx", "echo", "--timeout", "0"], "--timeout"),
        (["call", "fx", "echo", "--args", "{oops"], "--args"),
        (["call", "fx", "echo", "--args", "[1]"], "--args"),
        (
            ["call", "fx", "echo", "--args", '{"text": "a", "n": {"k": 1, "k": 2}}'],
            "key 'k' is given more than once",
        ),
        (["select", "x", "--threshold", "2"], "--threshold"),
        (["call", "fx"], "tool"),
    ],
)
async def test_bad_usage_is_exit_2_with_one_line(daemon: DaemonProcess, argv: list[str], option: str) -> None:
    """A bad value is refused before any request: exit 2, one line naming the option; with --json
    one JSON document on stdout and nothing on stderr."""
    plain = mcpd(*argv, "--socket", str(daemon.socket))
    assert plain.returncode == 2 and plain.stdout == ""
    assert plain.stderr.count("\n") == 1 and option in plain.stderr and "Traceback" not in plain.stderr
    as_json = mcpd(*argv, "--json", "--socket", str(daemon.socket))
    assert (as_json.returncode, as_json.stderr) == (2, "")
    error = json.loads(as_json.stdout)["error"]
    assert error["type"] == "UsageError" and option in error["message"] and error["exit"] == 2


async def test_json_errors_are_one_document_and_said_once(daemon: DaemonProcess) -> None:
    """With --json a daemon error is one JSON document on stdout and nothing on stderr; without it,
    one line on stderr and nothing on stdout."""
    as_json = mcpd("call", "ghost", "echo", "--json", "--socket", str(daemon.socket))
    assert (as_json.returncode, as_json.stderr) == (1, "")
    error = json.loads(as_json.stdout)["error"]
    assert (error["type"], error["code"], error["exit"]) == ("UnknownServer", 1005, 1)
    plain = mcpd("call", "ghost", "echo", "--socket", str(daemon.socket))
    assert plain.returncode == 1 and plain.stdout == "" and plain.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["call", "fx", "echo", "--args", '{"text": "into a closed pipe"}'],
        ["tools"],
        ["diff", "fx"],
        ["status", "--json"],
    ],
)
async def test_a_closed_pipe_ends_quietly(daemon: DaemonProcess, argv: list[str]) -> None:
    """`mcpd ... | head` with the reader gone: exit 141 (as after SIGPIPE), nothing on stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the first byte
    try:
        result = subprocess.run(
            [sys.executable, "-m", "mcpd", *argv, "--socket", str(daemon.socket)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (141, "")


@pytest.mark.parametrize("argv", [["status", "--json"], ["status"], ["tools"]])
async def test_an_output_that_cannot_be_written_is_one_line_not_a_traceback(
    daemon: DaemonProcess, argv: list[str]
) -> None:
    """stdout refusing what is written (``> /dev/full``, a full disk) or closed (``>&-``): one line
    on stderr saying so, exit 1, no traceback."""
    command = [sys.executable, "-m", "mcpd", *argv, "--socket", str(daemon.socket)]
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        into_full = subprocess.run(
            command, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60, check=False
        )
    finally:
        os.close(full)
    # stdout closed: the child starts with no file descriptor 1 at all.
    closed = subprocess.run(
        ["sh", "-c", '"$@" >&-', "sh", *command], capture_output=True, text=True, timeout=60, check=False
    )
    assert (into_full.returncode, into_full.stderr.count("\n")) == (1, 1), into_full.stderr
    assert "No space left" in into_full.stderr
    assert closed.returncode == 0 and "Traceback" not in closed.stderr, closed.stderr


DAEMONLESS_OUTPUT = [
    ["completion", "bash"],  # larger than stdout's buffer: refused inside the command, not at exit
    ["service", "install", "--dry-run"],
    ["--help"],
    ["config", "check"],  # the embedded default config: no file needed
]


def run_into(argv: list[str], stdout: int, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``mcpd ARGV`` with ``stdout`` as its output and a private home (service files, configs)."""
    home = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    return subprocess.run(
        [sys.executable, "-m", "mcpd", *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
        env=os.environ | home,
    )


@pytest.mark.parametrize("argv", DAEMONLESS_OUTPUT)
def test_every_command_says_its_output_could_not_be_written(argv: list[str], tmp_path: Path) -> None:
    """Whichever command it is, and wherever the write fails (a flush at the end, a write in the
    middle, inside a command that names the files it writes): stdout on a full disk is the one line
    `mcpd: cannot write the output: ...`, exit 1; never an internal error, never a config error."""
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        result = run_into(argv, full, tmp_path)
    finally:
        os.close(full)
    assert result.returncode == 1, result.stderr
    assert result.stderr == "mcpd: cannot write the output: No space left on device\n"


@pytest.mark.parametrize("argv", DAEMONLESS_OUTPUT)
def test_every_command_ends_quietly_on_a_closed_pipe(argv: list[str], tmp_path: Path) -> None:
    """`mcpd ... | head` for commands that write without a daemon too: 141 and nothing on stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = run_into(argv, write_end, tmp_path)
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (141, "")


@pytest.mark.parametrize("unbuffered", [True, False])
def test_a_reader_gone_mid_write_ends_quietly(unbuffered: bool, tmp_path: Path) -> None:
    """`mcpd ... | head` with the reader gone while one large write is under way: 141, as when it
    left before the first byte, with `python -u` or PYTHONUNBUFFERED too (whose text layer took
    the short write for the whole and ended with 0, the rest of the output dropped)."""
    hosts = {f"s{i}": {"command": "x", "args": ["a" * 200]} for i in range(2000)}
    (tmp_path / "hosts.json").write_text(json.dumps({"mcpServers": hosts}))
    env = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    argv = ["import", str(tmp_path / "hosts.json"), "--config", str(tmp_path / "c.toml"), "--dry-run"]
    with subprocess.Popen(
        [sys.executable, "-m", "mcpd", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as child:
        assert child.stdout is not None and child.stderr is not None
        # Its first bytes: the write (half a megabyte, past what the pipe holds) is under way, and waits.
        assert os.read(child.stdout.fileno(), 10)
        child.stdout.close()
        status = child.wait(timeout=60)
        assert (status, child.stderr.read()) == (141, b"")


def test_an_unwritable_stderr_keeps_the_exit_status(tmp_path: Path) -> None:
    """With stderr on a full disk, the error that cannot be said still decides the exit status
    (3: no daemon), and nothing else goes wrong on its way out."""
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "mcpd", "status", "--socket", str(tmp_path / "none.sock")],
            stdout=subprocess.PIPE,
            stderr=full,
            text=True,
            timeout=60,
            check=False,
        )
    assert (result.returncode, result.stdout) == (3, "")


LONG_SOCKET = "/tmp/" + "s" * 120 + ".sock"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["logs", "fx", "-n", "18446744073709551616"], "expected a whole number from 0 to 2147483647"),
        (["tools", "--explain"], "--explain needs a QUERY"),
        (["tools", "files", "--budget", "100", "--explain"], "--explain and --budget do not go together"),
        (["status", "--socket", LONG_SOCKET], "choose a shorter socket path"),
    ],
)
def test_what_cannot_work_is_a_usage_error_before_anything_is_sent(argv: list[str], says: str) -> None:
    """A count past what the protocol carries, `--explain` where nothing is ranked or it would not be
    shown, a socket path too long for any daemon to listen on: exit 2 naming the problem, with no
    daemon needed (nothing is sent), never an internal error nor advice to start a daemon."""
    result = mcpd(*argv, env={"MCPD_SOCKET": "/nonexistent/mcpd.sock"})
    assert result.returncode == 2 and says in result.stderr, result.stderr
    assert "mcpd serve" not in result.stderr and result.stderr.count("\n") == 1


def test_an_invalid_command_lists_only_the_commands_people_use() -> None:
    """The hidden command the completion scripts call is not among the choices offered."""
    result = mcpd("statu")
    assert result.returncode == 2 and "'status'" in result.stderr and "__servers" not in result.stderr


TITLE = "\x1b]0;PWNED\x07"
CLIPBOARD = "\x1b]52;c;cHduZWQ=\x07"
CLEAR = "\x1b[2J"


async def test_escape_sequences_from_a_server_never_reach_the_terminal(tmp_path: Path) -> None:
    """A server's stderr, its tool's description and its call result carrying escape sequences
    (window title, clipboard write, clear screen) are shown with the control characters written
    out, in `logs`, `status SERVER`, `tools` and `call`; `--json` keeps the text as it was."""
    config = tmp_path / "config.toml"
    config.write_text(
        fixture_toml(
            "ev",
            "--stderr-text",
            f"starting {TITLE}{CLEAR}",
            "--echo-description",
            f"Echo {CLIPBOARD} the text.",
            pinning="trust",
            verify="off",
        )
    )
    async with running_daemon(config) as running:
        await running.wait_for("server.state", server="ev", new="running", timeout=120)
        args = json.dumps({"text": f"result {TITLE}"})
        for argv in (
            ["logs", "ev"],
            ["status", "ev"],
            ["tools"],
            ["tools", "echo"],
            ["call", "ev", "echo", "--args", args],
        ):
            shown = await anyio.to_thread.run_sync(
                functools.partial(on_terminal, *argv, socket=running.socket)
            )
            assert shown.status == 0, (argv, shown)
            assert "\x1b]" not in shown.terminal and "\x1b[2J" not in shown.terminal, argv
            assert "\\x1b]" in shown.terminal, (argv, shown.terminal)
        logged = json.loads(mcpd("logs", "ev", "--json", socket=running.socket).stdout)
        assert f"starting {TITLE}{CLEAR}" in [entry["text"] for entry in logged["entries"]]


# Shows as "report_exe.pdf" on a terminal that applies the bidi algorithm; a model reads ".exe".
TROJAN = "Saves the text to report_\u202efdp.exe\u202c for you to open."


async def test_a_description_that_reorders_itself_is_shown_as_a_model_reads_it(tmp_path: Path) -> None:
    """A tool's description changed to one with a right-to-left override: `mcpd diff`, the review
    read before approving, and then `mcpd tools` write the override and its end as ``\\u202e``
    and ``\\u202c``, so the terminal shows the text in the order a model reads it; `--json` gives
    the description exactly as the server sent it, the override as a JSON escape."""
    config = tmp_path / "config.toml"
    config.write_text(fixture_toml("rl"))
    async with running_daemon(config) as running:
        await running.wait_for("server.state", server="rl", new="running", timeout=120)
        config.write_text(fixture_toml("rl", "--echo-description", TROJAN))
        running.signal(signal.SIGHUP)
        await running.wait_for("trust.held_back", server="rl", timeout=120)
        shown: dict[str, OnTerminal] = {}
        shown["diff"] = await anyio.to_thread.run_sync(
            functools.partial(on_terminal, "diff", "rl", socket=running.socket)
        )
        assert mcpd("approve", "rl", socket=running.socket).returncode == 0
        shown["tools"] = await anyio.to_thread.run_sync(
            functools.partial(on_terminal, "tools", socket=running.socket)
        )
        as_json = mcpd("tools", "--json", socket=running.socket).stdout
    for command, run in shown.items():
        assert run.status == 0, (command, run)
        assert "\u202e" not in run.terminal and "report_\\u202efdp.exe\\u202c" in run.terminal, (command, run)
    assert "\u202e" not in as_json and "\\u202e" in as_json, as_json
    assert TROJAN in [tool["description"] for tool in json.loads(as_json)["tools"]]


# A server that writes escape sequences to stderr and exits: they reach its `last_error`.
EXITS_WITH_ESCAPES = json.dumps(["-c", "printf 'bad \\033]0;PWNED\\007 \\033[2J\\n' >&2; exit 1"])


def shown_not_obeyed(text: str) -> bool:
    """The escape sequences are in ``text`` written out, none as it was sent."""
    return "\x1b]" not in text and "\x1b[2J" not in text and "\\x1b]" in text


async def test_server_text_in_errors_progress_blocks_and_resources_is_shown_not_obeyed(
    tmp_path: Path,
) -> None:
    """Escape sequences a server sent reach no terminal as such: in the error of `mcpd call` and
    `mcpd start` (the server's stderr, carried in `last_error`), in `mcpd check`'s report, in a
    progress message, in a content block's URI and MIME type, and in a text resource `mcpd read`
    writes to a terminal; `mcpd read` piped writes the resource as the server sent it."""
    config = tmp_path / "config.toml"
    config.write_text(
        f'[servers.crashy]\ncommand = "sh"\nargs = {EXITS_WITH_ESCAPES}\n'
        "restart = { initial_delay = 0.05, max_delay = 0.1, max_retries = 1 }\n"
        + fixture_toml("hx", "--hostile-text", f"{TITLE}{CLEAR}", pinning="trust", verify="off")
    )
    said: dict[str, str] = {}  # what each command wrote, by command
    async with running_daemon(config) as running:
        await running.wait_for("server.state", server="hx", new="running", timeout=120)
        await running.wait_for("server.state", server="crashy", new="failed", timeout=60)
        for argv in (["call", "crashy", "x"], ["start", "crashy"]):
            result = mcpd(*argv, socket=running.socket)
            assert result.returncode == 1, (argv, result)
            said[" ".join(argv)] = result.stdout + result.stderr
        for argv, stream in (
            (["call", "hx", "hostile_link"], "stdout"),
            (["read", "mcpd://hx/fixture://hostile"], "stdout"),
            (["call", "hx", "progress", "--args", '{"steps": 3, "pause": 0.2}'], "stderr"),
        ):
            shown = await anyio.to_thread.run_sync(
                functools.partial(on_terminal, *argv, socket=running.socket, stream=stream)
            )
            assert shown.status == 0, (argv, shown)
            said[" ".join(argv)] = shown.terminal
        piped = mcpd("read", "mcpd://hx/fixture://hostile", socket=running.socket)
        assert piped.returncode == 0 and piped.stdout == f"{TITLE}{CLEAR}", piped
    checked = await anyio.to_thread.run_sync(functools.partial(mcpd, "check", "--config", str(config)))
    assert "crashy: NOT CHECKED" in checked.stdout, checked
    said["check"] = checked.stdout
    assert {command: text for command, text in said.items() if not shown_not_obeyed(text)} == {}


async def test_ctrl_c_during_a_call_is_quiet_and_recorded_as_cancelled(daemon: DaemonProcess) -> None:
    """Ctrl-C while a call runs: exit 130, no traceback, the bar erased; the daemon withdraws the
    call and records it with the outcome `cancelled`."""
    mark = len(daemon.events)
    argv = ("call", "fx", "progress", "--args", '{"steps": 100000}')
    run = await anyio.to_thread.run_sync(
        lambda: on_terminal(*argv, socket=daemon.socket, stream="stderr", interrupt_on="%")
    )
    assert run.status == 130 and run.other == ""
    assert "Traceback" not in run.terminal and run.terminal.endswith("\r\x1b[K")
    await daemon.wait_for("client.disconnected", after=mark, client="mcpd-cli/call")
    mcpd("report", "--json", "--socket", str(daemon.socket))  # runs after every queued record is written
    with sqlite3.connect(usage_db(daemon)) as db:
        outcomes = db.execute("SELECT outcome FROM calls WHERE tool = 'progress' AND ts > 0").fetchall()
    assert ("cancelled",) in outcomes


async def test_no_daemon_is_one_clear_line(tmp_path: Path) -> None:
    """Without a daemon every command says how to start one, exit status 3, no traceback."""
    result = mcpd("status", "--socket", str(tmp_path / "absent.sock"))
    assert result.returncode == 3
    assert result.stderr.strip().count("\n") == 0
    assert "mcpd serve" in result.stderr and "Traceback" not in result.stderr
    as_json = mcpd("status", "--json", "--socket", str(tmp_path / "absent.sock"))
    assert as_json.returncode == 3 and as_json.stderr == ""
    assert json.loads(as_json.stdout)["error"]["type"] == "DaemonNotRunning"


async def test_status_of_one_server_has_history_and_stderr(daemon: DaemonProcess) -> None:
    """`mcpd status fx`: the facts, the recent state changes, the last lines of its stderr;
    --json gives the ServerDetail document; an unknown name is exit 1 in one line."""
    sock = str(daemon.socket)
    shown = mcpd("status", "fx", "--socket", sock)
    assert shown.returncode == 0, shown.stderr
    first, *rest = shown.stdout.splitlines()
    assert first.startswith("● fx: running for ")
    assert any(line.strip().startswith("transport: stdio") for line in rest)
    assert any("starting -> running" in line for line in rest)
    assert "fixture fx stderr line 2" in shown.stdout
    detail = json.loads(mcpd("status", "fx", "--json", "--socket", sock).stdout)
    assert detail["status"]["name"] == "fx" and detail["history"] and detail["stderr"]
    ghost = mcpd("status", "ghost", "--socket", sock)
    assert ghost.returncode == 1 and ghost.stderr.count("\n") == 1


async def test_disabled_tools_are_hidden_and_refused(daemon: DaemonProcess) -> None:
    """`disabled_tools` (Roo Code / Cline's `disabledTools`) hides a tool and refuses calls to it."""
    sock = str(daemon.socket)
    listed = json.loads(mcpd("tools", "--server", "fx", "--json", "--socket", sock).stdout)
    refused = mcpd("call", "fx", "crash", "--socket", sock)
    assert "fx__crash" not in {t["name"] for t in listed["tools"]} and "fx__echo" in {
        t["name"] for t in listed["tools"]
    }
    assert refused.returncode == 1 and "disabled in the config" in refused.stderr


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["tools", "--limit", "9" * 30], "whole number from 1 to"),
        (["call", "fx", "echo", "--args", '{"text": NaN}'], "NaN is not a JSON number"),
        (["call", "fx", "echo", "--args", '{"n": ' + "9" * 30 + "}"], "too large for a 64-bit integer"),
        (["call", "fx", "echo", "--args", "[" * 30_000], "nested too deeply"),
        (["serve", "--socket", ""], "an empty one"),
        (["status", ""], "expected a name"),  # it used to list every server
        (["approve", "fx", ""], "expected a name"),  # it used to approve nothing and exit 0
    ],
)
def test_input_the_protocol_cannot_carry_is_a_usage_error(argv: list[str], needle: str) -> None:
    """Bytes that are not UTF-8, numbers past 64 bits (or NaN), JSON nested past the recursion limit,
    an empty path: exit 2 with the reason, never an internal error (they used to be)."""
    result = run_cli(*argv, timeout=60)
    assert result.returncode == 2 and needle in result.stderr, result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("argv", [["serve", "--log-level", "nope"], ["serve"]])
def test_serve_usage_errors_with_json_are_one_document(argv: list[str]) -> None:
    """``mcpd serve`` parses its own options, and with --json its usage errors are still one JSON
    document on stdout and nothing on stderr, as the README says of every command (they were a
    line on stderr once serve parsed apart)."""
    result = run_cli(*argv, "--json", timeout=60)
    assert (result.returncode, result.stderr) == (2, ""), result.stderr
    error = json.loads(result.stdout)["error"]
    assert (error["type"], error["exit"]) == ("UsageError", 2)


def test_a_file_mcpd_cannot_write_is_named_not_an_internal_error(tmp_path: Path) -> None:
    """``token`` whose file cannot be made, ``service install`` whose unit directory cannot be:
    exit 2 naming the path (they were internal errors)."""
    config = tmp_path / "c.toml"
    config.write_text('[daemon]\nhttp_token_file = "/dev/full/token"\n')
    token = run_cli("token", "--config", str(config), timeout=60)
    unwritable = {"XDG_CONFIG_HOME": "/dev/full/config", "HOME": "/dev/full"}
    install = run_cli("service", "install", env=unwritable, timeout=60)
    for result in (token, install):
        assert result.returncode == 2 and "/dev/full" in result.stderr, result.stderr
        assert "internal error" not in result.stderr and "Traceback" not in result.stderr


async def test_bytes_that_are_not_utf8_are_a_usage_error_where_they_must_be_text(
    daemon: DaemonProcess,
) -> None:
    """An argument of bytes the locale could not decode, sent to the daemon (a server name here):
    exit 2 saying so (an internal error before); a file path of such bytes still works elsewhere."""
    result = mcpd("status", "a\udcffb", socket=daemon.socket)
    assert result.returncode == 2 and "not valid UTF-8" in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["call", "fx", "echo", '{"text": "hi"}'], "mcpd call"),
        (["status", "fx", "extra"], "mcpd status"),
        (["config", "check", "c.toml"], "mcpd config"),
    ],
)
def test_an_argument_no_command_takes_points_to_that_commands_help(argv: list[str], command: str) -> None:
    """An argument the command does not take (the JSON of ``call`` without ``--args``) is exit 2 with
    one line pointing to that command's help, which lists what it takes (it pointed to `mcpd --help`,
    which lists only the commands)."""
    result = run_cli(*argv, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"{command}: unrecognized arguments: {argv[-1]} (see `{command} --help`)\n"
