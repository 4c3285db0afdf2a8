"""``mcpd top``: a live view of the servers and their calls per second, fed by the daemon's events.

The daemon pushes every state change, tool-list change and, once per interval with calls, the
calls and errors per server; the view changes only when an event arrives, it never polls. On a
terminal it redraws in place (a clock thread re-renders each second so uptimes tick and quiet
servers fall back to 0 calls/s); piped, it prints one line per event, and with ``--json`` one
JSON object per event (JSON lines, as ``docker events --format json`` does). Ctrl-C ends it.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcpd.cli import output
from mcpd.cli.output import EXIT_OK, STATE_COLOURS, Style, clip, duration, emit_json
from mcpd.cli.parsing import Commands, Parser, connected
from mcpd.model.servers import (
    CallActivity,
    Event,
    ServerStatus,
    StateChanged,
    SurfaceChanged,
    ToolsChanged,
)
from mcpd.model.states import LIVE_STATES

if TYPE_CHECKING:
    from mcpd.client import Client

_HOME_CLEAR = "\x1b[H\x1b[2J"
_ALTERNATE_SCREEN = ("\x1b[?1049h", "\x1b[?1049l")
"""Entered and left as top does, so the terminal shows what it showed before once the view ends."""


@dataclass
class Row:
    name: str
    state: str
    tools: int
    up_since: float | None
    """Wall-clock time the server became live, for a ticking uptime."""
    note: str = ""
    calls: float = 0.0
    errors: float = 0.0


class TopView:
    """The servers as the events describe them; rendering is separate from updating."""

    def __init__(self, servers: list[ServerStatus], now: float) -> None:
        self.rows = {
            s.name: Row(
                name=s.name,
                state="blocked" if s.blocked else str(s.state),
                tools=s.tools,
                up_since=now - s.uptime_s if s.uptime_s is not None else None,
                note=s.last_error or "",
            )
            for s in servers
        }
        self.rates_until = 0.0
        """Rates older than this are stale: no calls arrived since."""
        self.lock = threading.Lock()

    def apply(self, event: Event, now: float) -> str:
        """Update from one event; returns a one-line description of it."""
        with self.lock:
            if isinstance(event, StateChanged):
                row = self._row(event.server)
                row.state = str(event.new)
                row.note = event.reason
                if event.new in LIVE_STATES and event.old not in LIVE_STATES:
                    row.up_since = now
                elif event.new not in LIVE_STATES:
                    row.up_since = None
                    row.tools = 0
                return f"{event.server}: {event.old} -> {event.new} ({event.reason})"
            if isinstance(event, ToolsChanged):
                self._row(event.server).tools = event.tools
                return f"{event.server}: {event.tools} tools"
            if isinstance(event, SurfaceChanged):
                return f"{event.server}: resources or prompts changed"
            if not isinstance(event, CallActivity):
                return f"{event.server}: {event.uri} updated"
            interval = event.interval_s or 1.0
            for row in self.rows.values():
                row.calls = event.calls.get(row.name, 0) / interval
                row.errors = event.errors.get(row.name, 0) / interval
            self.rates_until = now + 2 * interval
            rates = ", ".join(
                f"{name} {count / interval:.1f}/s" for name, count in sorted(event.calls.items())
            )
            return f"calls: {rates}"

    def _row(self, name: str) -> Row:
        return self.rows.setdefault(name, Row(name=name, state="stopped", tools=0, up_since=None))

    def render(self, now: float, style: Style) -> str:
        with self.lock:
            fresh = now <= self.rates_until
            rows: list[list[output.Cell]] = []
            for row in sorted(self.rows.values(), key=lambda r: r.name):
                calls = row.calls if fresh else 0.0
                errors = row.errors if fresh else 0.0
                rows.append(
                    [
                        row.name,
                        (row.state, STATE_COLOURS.get(row.state)),
                        duration(now - row.up_since) if row.up_since is not None else "-",
                        str(row.tools) if row.state in LIVE_STATES else "-",
                        f"{calls:.1f}",
                        (f"{errors:.1f}", "red" if errors else None),
                        clip(row.note, 60),
                    ]
                )
            total = sum(r.calls for r in self.rows.values()) if fresh else 0.0
        headers = ["NAME", "STATE", "UPTIME", "TOOLS", "CALLS/S", "ERRORS/S", "LAST CHANGE"]
        title = f"mcpd top - {time.strftime('%H:%M:%S', time.localtime(now))} - {total:.1f} calls/s"
        return f"{title}\n\n{output.table(headers, rows, style)}\n"


def cmd_top(args: argparse.Namespace, client: Client) -> int:
    view = TopView(client.status(), time.time())
    events = client.events()  # subscribes at the first iteration
    if args.json:
        for event in events:
            emit_json(event)
            sys.stdout.flush()
        return EXIT_OK
    if not sys.stdout.isatty():
        print(view.render(time.time(), Style(False)), flush=True)
        for event in events:
            print(f"{output.clock(time.time())} {output.visible(view.apply(event, time.time()))}", flush=True)
        return EXIT_OK
    style = Style.of(sys.stdout)
    draw_lock = threading.Lock()

    def draw() -> None:
        frame = view.render(time.time(), style)
        with draw_lock:
            sys.stdout.write(_HOME_CLEAR + frame)
            sys.stdout.flush()

    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(1.0):
            draw()

    clock = threading.Thread(target=tick, name="mcpd-top-clock", daemon=True)
    sys.stdout.write(_ALTERNATE_SCREEN[0])
    try:
        draw()
        clock.start()
        for event in events:
            view.apply(event, time.time())
            draw()
    finally:
        stop.set()
        with draw_lock:
            sys.stdout.write(_ALTERNATE_SCREEN[1])
            sys.stdout.flush()
    return EXIT_OK


def register(commands: Commands, common: Parser) -> None:
    top = commands.add_parser(
        "top", parents=[common], help="live view of the servers and calls per second (Ctrl-C ends it)"
    )
    top.set_defaults(run=connected(cmd_top))
