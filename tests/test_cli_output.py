"""What the CLI draws, from the structs the daemon sends: status problems, top's rates, the bar."""

from __future__ import annotations

import argparse
from typing import Any

import msgspec
import pytest

from mcpd.cli.output import InternalError, Style, duration, size, table
from mcpd.cli.progress import line
from mcpd.cli.servers import problems, show, state_label, tool_count
from mcpd.cli.top import TopView
from mcpd.model.protocol import Progress
from mcpd.model.servers import CallActivity, ServerDetail, ServerInfo, ServerStatus, StateChange, StateChanged
from mcpd.model.states import ServerState

NOW = 1_800_000_000.0


RUNNING = ServerStatus(
    name="s",
    state=ServerState.RUNNING,
    transport="stdio",
    alive=True,
    degraded=False,
    pid=42,
    restarts=0,
    uptime_s=10.0,
    last_error=None,
    tools=3,
    description=None,
    server_info=None,
)


def status(**fields: Any) -> ServerStatus:
    return msgspec.structs.replace(RUNNING, **fields)


def test_backoff_says_the_error_and_when_the_next_try_comes() -> None:
    """A server waiting to restart shows why it died and which try comes when, numbered as its state
    history numbers it (4 runs failed in a row: retry 4; it said retry 5); no tool count."""
    waiting = status(
        state=ServerState.BACKOFF,
        alive=False,
        pid=None,
        uptime_s=None,
        tools=0,
        last_error="exited with status 1",
        attempt=4,
        next_retry_at=NOW + 8,
    )
    assert problems(waiting, NOW) == ["exited with status 1", "retry 4 in 8s"]
    assert tool_count(waiting) == "-"


def test_blocked_and_held_back() -> None:
    """Blocked by the verifier: the state says so and no tools count; held tools are counted."""
    blocked = status(blocked="blocked by the verifier: TP001", trust="blocked by the verifier: TP001")
    assert (state_label(blocked), tool_count(blocked)) == ("blocked", "-")
    assert problems(blocked, NOW) == ["blocked by the verifier: TP001"]
    held = status(held=["a", "b"], trust="2 tool(s) held back until approved: a, b")
    assert problems(held, NOW) == ["2 tools await approval (mcpd diff s)"]


def test_top_rates_come_from_call_activity_and_fade() -> None:
    """Calls per second are the last interval's counts; once no event came for two intervals they
    show as 0, and a state change resets the uptime and the tool count."""
    view = TopView([status(name="a"), status(name="b")], NOW)
    view.apply(CallActivity(interval_s=1.0, calls={"a": 12}, errors={"a": 2}), NOW)
    assert "12.0" in view.render(NOW + 1, Style(False)).splitlines()[3]
    assert " 12.0 " not in view.render(NOW + 3, Style(False))
    view.apply(StateChanged(server="b", old=ServerState.RUNNING, new=ServerState.STOPPED, reason="stop"), NOW)
    row_b = view.render(NOW, Style(False)).splitlines()[4].split()
    assert row_b[:4] == ["b", "stopped", "-", "-"]


def test_small_formats() -> None:
    """Durations, sizes, the progress line and plain tables read as a person expects."""
    assert [duration(s) for s in (None, 3, 252, 7500, 280000)] == ["-", "3s", "4m12s", "2h5m", "3d5h"]
    assert [size(n) for n in (812, 2048, 3 * 1024 * 1024)] == ["812 B", "2.0 KiB", "3.0 MiB"]
    bar = line("slow", Progress(request=1, progress=1, total=4, message="one"), 80)
    assert bar == "slow [######..................]  25%  one"
    assert line("slow", Progress(request=1, progress=7), 80) == "slow 7"
    assert table(["A", "LONGER"], [["x", "y"], [("yy", "red"), "z"]]) == "A   LONGER\nx   y\nyy  z"


def test_one_server_in_detail(capsys: pytest.CaptureFixture[str]) -> None:
    """`mcpd status SERVER` as systemctl status lays it out: facts, state changes, stderr tail."""
    detail = ServerDetail(
        status=status(held=["late"], last_exit="exited with status 3"),
        history=[StateChange(ts=NOW, old=ServerState.STARTING, new=ServerState.RUNNING, reason="ready")],
        stderr=["warming up", "listening"],
    )
    assert show(argparse.Namespace(json=False), detail) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "● s: running for 10s"
    assert "    held back: late" in lines and "    last exit: exited with status 3" in lines
    history = lines.index("recent state changes:")
    assert lines[history + 1].endswith("starting -> running  ready")
    assert lines[-3:] == ["last 2 stderr line(s):", "  warming up", "  listening"]


def test_server_info_without_a_version(capsys: pytest.CaptureFixture[str]) -> None:
    """A server that sends an empty version (mcpd's own demo does) is shown by its name alone, with
    no trailing space, and its title still follows after one space."""
    for info, shown in (
        (ServerInfo(name="demo", version=""), "       server: demo"),
        (ServerInfo(name="demo", version="", title="Demo"), "       server: demo (Demo)"),
        (ServerInfo(name="demo", version="1.2"), "       server: demo 1.2"),
    ):
        detail = ServerDetail(status=status(server_info=info), history=[], stderr=[])
        show(argparse.Namespace(json=False), detail)
        assert shown in capsys.readouterr().out.splitlines()


def test_an_internal_error_from_a_task_group_names_what_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault inside task groups (``mcpd serve``'s set-up runs inside the supervisor's, once the
    servers are spawned) is said as the one exception it is, not as the groups around it; a group
    of several stays a group."""
    monkeypatch.delenv("MCPD_TRACEBACK", raising=False)
    nested = ExceptionGroup(
        "unhandled errors in a TaskGroup", [ExceptionGroup("inner", [RuntimeError("boom")])]
    )
    assert str(InternalError.of(nested)).startswith("internal error: RuntimeError: boom (")
    several = ExceptionGroup("unhandled errors in a TaskGroup", [RuntimeError("a"), OSError("b")])
    assert str(InternalError.of(several)).startswith("internal error: ExceptionGroup: ")
