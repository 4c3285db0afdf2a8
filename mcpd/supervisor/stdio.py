"""A stdio MCP server as a child process: spawn, JSON-RPC lines, stderr, and a bounded stop.

The SDK's ``stdio_client`` hides the process, so it cannot report a pid, tell when the
process died, tie the child's life to the daemon's, or route stderr to our log; this
module does those. Requests go out through the child's ``rpc`` (``rawrpc``), whose replies
are taken off stdout as they arrive (once the session has taken every line before them); every
other line goes to the session (``stdio_session``).

Each child gets its own session and process group, so stopping it reaches the
grandchildren too (``npx`` -> ``node``, ``uvx`` -> ``python``), and on Linux also those that
left the group or the session (``orphans.leftovers``: a shell's background job, a browser). On Linux the child
also gets ``PR_SET_PDEATHSIG = SIGKILL`` (through ``setpriv``, else a ``preexec_fn``): if
the daemon is killed with SIGKILL, the kernel kills the child at once; its own children
see stdin close and exit, and those that never read it are ended by the next daemon (``orphans``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import itertools
import os
import shutil
import signal
import stat
import sys
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import anyio
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from mcpd import memory
from mcpd.config.model import ServerConfig
from mcpd.readsize import read_in_pieces
from mcpd.supervisor.orphans import (
    UNKNOWN_START,
    GroupLedger,
    child_mark,
    leftovers,
    marked_environment,
    signal_all,
    start_of,
)
from mcpd.supervisor.rawrpc import RawRpc
from mcpd.supervisor.replies import DirectPipe, RoutingReader
from mcpd.supervisor.stderr_cause import cause_line
from mcpd.supervisor.stdin import StdinPipe

log = structlog.get_logger("mcpd.supervisor")

MAX_LINE_BYTES = 32 * 1024 * 1024
"""One JSON-RPC message per line; a line longer than this ends the connection."""
LARGE_LINE_BYTES = 64 * 1024
"""A stdout line past this is told to the reclaimer (``memory.freed``): its memory is given back
once the burst is over (3 lines of 30 MiB left the daemon's RSS 90 MiB up, measured)."""
STDERR_LINE_BYTES = 64 * 1024
"""Bytes of a stderr line read; the rest of a longer one is dropped."""

KILL_WAIT = 2.0
"""Seconds to wait for the group to go after SIGKILL."""
SCAN_WAIT = 1.0
"""Seconds a look at ``/proc`` for what a child left may go without reaching the next process (a
few microseconds as a rule). A read of a process's environment waits for its memory map's lock,
which another of the user's processes can hold for as long as its page fault on a hung network
filesystem lasts: the stop, shielded, waited as long (its daemon's exit with it). Counted from
the last process read, not from the look's start: a look that is only slow (200 servers stopped
at once on a loaded machine) is no stalled one, and giving it up would leave what the children
left running."""
_LOOK_POLL = 0.05
"""Seconds between two checks that a look at ``/proc`` still moves."""
_GROUP_POLL = 0.02
_SESSION_POLL = 0.1
"""A look at the session is a read of all ``/proc``: less often than at the group."""
_STDERR_TURN = 64
"""stderr lines read between two yields to the event loop."""
_INHERITED_ENV = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE",
    "TMPDIR", "TZ", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    # The user's desktop session: a browser server opens a window, a notifier reaches the bus.
    "DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "DBUS_SESSION_BUS_ADDRESS",
    # What reaching the network takes behind a proxy or a company's own CA, and git over ssh.
    "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy",
    "all_proxy", "SSH_AUTH_SOCK",
)  # fmt: skip
"""Not the rest of the daemon's environment: its own secrets (tokens of other services) would
reach every server. Anything else a server needs goes in its ``env``."""


class _StalledLook:
    """The look at ``/proc`` given up last (``SCAN_WAIT``), until its thread is back. Meanwhile no
    other look is begun: it would stall on the same process's memory map (a look reads every
    environment) and leave one more thread stuck for as long as the filesystem hangs, seven for a
    stop of a child that ignores SIGTERM, without bound for a server restarting in a loop."""

    def __init__(self) -> None:
        self._done: threading.Event | None = None

    def holds(self) -> bool:
        return self._done is not None and not self._done.is_set()

    def given_up(self, done: threading.Event) -> None:
        self._done = done


_STALLED_LOOK = _StalledLook()


class _Look:
    """One look at ``/proc`` for ``leftovers`` of a mark, run in a worker thread."""

    def __init__(self, mark: str) -> None:
        self.mark = mark
        self.done = threading.Event()
        """Set once the thread is back (``_StalledLook``)."""
        self._moved: float | None = None

    def run(self) -> list[tuple[int, int]]:
        self._move()
        try:
            return leftovers(self.mark, self._move)
        finally:
            self.done.set()

    def _move(self) -> None:
        self._moved = time.monotonic()

    def stalled(self) -> bool:
        """Whether the look has read no process for ``SCAN_WAIT``; not before its thread began (a wait
        for a worker thread is no stall)."""
        return self._moved is not None and time.monotonic() - self._moved > SCAN_WAIT


def child_environment(extra: dict[str, str]) -> dict[str, str]:
    """What a child sees: the basics a program needs from ours, then the entry's own ``env``."""
    env = {key: os.environ[key] for key in _INHERITED_ENV if key in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update(extra)
    return env


_SETPRIV = shutil.which("setpriv") if sys.platform.startswith("linux") else None
"""util-linux's ``setpriv``: sets the parent-death signal, then execs the server in its place."""


def _launch(config: ServerConfig, env: dict[str, str]) -> tuple[list[str], Callable[[], None] | None]:
    """The argv (and ``preexec_fn``) that start ``config``'s server with ``PR_SET_PDEATHSIG = SIGKILL``.

    Through ``setpriv`` where there is one: a ``preexec_fn`` makes Python fork the whole daemon
    on the event loop (~20 ms per spawn, against under 1 ms for the vfork it uses otherwise).
    """
    assert config.command is not None
    argv = [config.command, *config.args]
    if not sys.platform.startswith("linux"):
        return argv, None
    if _SETPRIV is None:
        return argv, _die_with_parent()
    return [_SETPRIV, "--pdeathsig", "KILL", "--", _resolve(config, env), *config.args], None


def _resolve(config: ServerConfig, env: dict[str, str]) -> str:
    """The command's path, looked up as exec would: a command that cannot run stays a spawn error
    (``OSError``) rather than becoming setpriv's exit status."""
    assert config.command is not None
    command = config.command
    cwd = os.path.expanduser(config.cwd) if config.cwd else None
    if os.sep not in command:
        found = shutil.which(command, path=env.get("PATH", os.defpath))
        if found is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
        _check_interpreter(found, command, cwd)
        return found
    path = os.path.join(cwd, command) if cwd else command
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), command)
    if not os.path.isfile(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
    if not os.access(path, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), command)
    _check_interpreter(path, command, cwd)
    return os.path.abspath(path)


def _check_interpreter(path: str, command: str, cwd: str | None) -> None:
    """A script's ``#!`` interpreter must be there too (an old venv's python, once the venv is gone):
    exec refuses the script with ENOENT, which setpriv turns into exit status 127, retried for ever.
    Read from the script's first line, nothing run."""
    try:
        with open(path, "rb") as script:
            head = script.read(256)
    except OSError:
        return  # executable yet unreadable: exec decides
    if not head.startswith(b"#!"):
        return
    # As the kernel reads it: spaces and tabs skipped, the name ends at the next space or tab.
    # Only those: a CRLF script's ``\r`` is part of the name, and exec fails on it.
    line = head[2:].split(b"\n", 1)[0].lstrip(b" \t")
    interpreter = os.fsdecode(line.replace(b"\t", b" ").split(b" ", 1)[0])
    if not interpreter:
        return
    # A relative interpreter is found from the process's working directory, as the kernel does.
    located = os.path.join(cwd, interpreter) if cwd else interpreter
    # A name with a control character (that ``\r``) is shown as repr shows it, not as a blank.
    named = interpreter if interpreter.isprintable() else repr(interpreter)
    if not os.path.isfile(located):
        reason = f"{os.strerror(errno.ENOENT)}: its #! interpreter {named}"
        raise FileNotFoundError(errno.ENOENT, reason, command)
    if not os.access(located, os.X_OK):
        reason = f"{os.strerror(errno.EACCES)}: its #! interpreter {named}"
        raise PermissionError(errno.EACCES, reason, command)


def _die_with_parent() -> Callable[[], None]:
    """A ``preexec_fn`` that makes the kernel SIGKILL the child when the daemon dies (Linux only)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_pdeathsig = 1
    parent = os.getpid()

    def preexec() -> None:
        prctl(pr_set_pdeathsig, signal.SIGKILL)
        # The daemon may have died between fork and prctl; then nobody would kill us later.
        if os.getppid() != parent:
            os._exit(1)

    return preexec


class StderrLog:
    """Forwards a child's stderr lines to the daemon log, rate-limited, keeping a short tail.

    A token bucket: ``burst`` lines at once, then ``per_second``; what is dropped is
    counted and reported once lines flow again, so a chatty server cannot flood the log.
    """

    def __init__(
        self,
        server: str,
        *,
        burst: int = 50,
        per_second: float = 10.0,
        tail: int = 20,
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self.server = server
        self._on_line = on_line
        """Also receives every line, not rate-limited (the server's log ring)."""
        self.tail: deque[str] = deque(maxlen=tail)
        self.written = 0
        """Lines received so far, by every process of the server (``since`` tells one's from another's)."""
        self._burst = burst
        self._rate = per_second
        self._tokens = float(burst)
        self._stamp = time.monotonic()
        self._dropped = 0

    def since(self, written: int) -> list[str]:
        """The kept lines that came after the first ``written`` (a ``written`` read earlier)."""
        count = min(self.written - written, len(self.tail))
        return list(self.tail)[len(self.tail) - count :]

    def line(self, text: str) -> None:
        self.tail.append(text)
        self.written += 1
        if self._on_line is not None:
            self._on_line(text)
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now
        if self._tokens < 1:
            self._dropped += 1
            return
        self._tokens -= 1
        if self._dropped:
            log.warning("server.stderr_dropped", server=self.server, lines=self._dropped)
            self._dropped = 0
        log.info("server.stderr", server=self.server, line=text)


async def _skip_line(reader: asyncio.StreamReader) -> bool:
    """Drop what is left of the current line; False when the stream ended first."""
    while True:
        try:
            await reader.readuntil(b"\n")
        except asyncio.LimitOverrunError as exc:
            await reader.read(exc.consumed)
        except asyncio.IncompleteReadError:
            return False
        else:
            return True


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """The asyncio protocol, plus a hook when the process exits, and a small stderr buffer.

    ``Process.wait()`` also waits for every pipe to close, which a grandchild holding
    stdout open can delay forever; ``process_exited`` fires on the exit itself.
    """

    def __init__(self, on_exit: Callable[[], None]) -> None:
        self._event_loop = asyncio.get_running_loop()
        super().__init__(limit=MAX_LINE_BYTES, loop=self._event_loop)
        self._on_exit = on_exit

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        # stdout's limit fits a whole JSON-RPC message, and a reader pauses the pipe only past twice
        # its limit: a stderr flood faster than the daemon reads would buffer 64 MiB. stderr gets
        # a limit of its own, so the pipe pushes back on the server after 2 * STDERR_LINE_BYTES.
        assert isinstance(transport, asyncio.SubprocessTransport)
        for fd in (1, 2):
            pipe = transport.get_pipe_transport(fd)
            if pipe is not None:
                read_in_pieces(pipe)
        pipe = transport.get_pipe_transport(2)
        if pipe is not None:
            self.stderr = asyncio.StreamReader(limit=STDERR_LINE_BYTES, loop=self._event_loop)
            self.stderr.set_transport(pipe)
        # stdout hands the raw path its replies as they arrive (see ``mcpd.supervisor.replies``).
        pipe = transport.get_pipe_transport(1)
        if isinstance(pipe, asyncio.ReadTransport):
            self.stdout = RoutingReader(limit=MAX_LINE_BYTES, loop=self._event_loop)
            self.stdout.set_transport(pipe)
            pipe.set_protocol(DirectPipe(pipe.get_protocol(), self.stdout.feed_data))

    def process_exited(self) -> None:
        super().process_exited()
        self._on_exit()


@dataclass
class StdioChild:
    """A running stdio server process and the message streams of its JSON-RPC connection."""

    server: str
    process: asyncio.subprocess.Process
    stdin: StdinPipe
    stderr: StderrLog
    lines: MemoryObjectSendStream[bytes]
    """Where the lines of stdout that the raw path does not take go, in order, for the session."""
    exited: anyio.Event = field(default_factory=anyio.Event)
    started: int | None = None
    """Its start time (clock ticks since boot; Linux), which tells its session from a later one."""
    mark: str = ""
    """Its ``orphans`` mark, inherited by what it starts: what of that is left at a stop is ended."""
    stdout_closed: anyio.Event = field(default_factory=anyio.Event)
    """Set at EOF on stdout: from then on no answer can come, whether or not the exit was seen yet."""
    ended_by_mcpd: bool = False
    """mcpd began stopping the child before its output ended: mcpd ended the run, not the server."""
    ended_for: str | None = None
    """Why mcpd ended the run of the process while it was up (its pings failed, a stop, restart or
    reload asked for): told to the calls the stop fails."""
    stdout_cut: str | None = None
    """Why mcpd stopped reading the child's stdout itself (a line over ``MAX_LINE_BYTES``)."""
    rpc: RawRpc = field(init=False)
    _stderr_from: int = field(init=False)
    """The lines of ``stderr`` written before this process's (an earlier run's, the log spans them)."""

    def __post_init__(self) -> None:
        self.rpc = RawRpc(self.stdin.write, self.stdin.not_reading)
        self._stderr_from = self.stderr.written
        if isinstance(self.process.stdout, RoutingReader):
            self.process.stdout.route = self._route

    def _route(self, line: bytes) -> bool:
        """Give ``line`` to the raw path if it answers one of its requests, but only once the session
        has taken every line before it: a call's log messages and progress reach hosts before its
        answer, which would otherwise overtake them while they wait in ``lines`` (the session routes
        a reply that waited its turn)."""
        waiting = self.lines.statistics()
        return waiting.current_buffer_used == 0 and waiting.tasks_waiting_receive > 0 and self.rpc.route(line)

    def _settle(self) -> None:
        """The connection ended: fail the requests still waiting, telling which the server never read.

        Those it never read whole (taken back out of its stdin, see ``StdinPipe``) end as never
        sent, so their callers send them to the next process; the others were in flight.
        """
        self.stdin.end()
        self.rpc.close(self.stdin.read())

    def abandon_output(self) -> None:
        """It exited, and its stdout stays open (another process holds it): no answer will come,
        as at the end of its output; the requests still waiting end now, as lost, not as stopped."""
        self._settle()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def exit_reason(self) -> str:
        """Why it is gone, with the last line it wrote to stderr (the error above a runtime's
        trailers: see ``stderr_cause``): the usual answer to "why did it die". Only its own: an
        earlier run's error said nothing of why this one, which wrote none, ended."""
        code = self.returncode
        reason = "process is running" if code is None else describe_exit(code)
        if self.stdout_cut:
            reason = f"{self.stdout_cut}; {reason}"
        if (line := cause_line(self.stderr.since(self._stderr_from))) is not None:
            reason += f"; last stderr: {line[:300]}"
        return reason

    async def _read_stdout(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            await self._pump_stdout(stdout)
            # No answer can come any more, so no request may go out: settled at once, whether the
            # process exits or not (it may have closed only its stdout). Cancelled, the run is
            # being stopped, and ``stop`` settles (which tells the callers that mcpd ended it).
            self._settle()
        finally:
            self.lines.close()
            self.stdout_closed.set()

    async def _pump_stdout(self, stdout: asyncio.StreamReader) -> None:
        while True:
            # Not the last line: it would stay alive while the server is silent (a 6 MiB reply
            # was still held after the bench's attacks, measured).
            line = b""
            try:
                line = await stdout.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                line = exc.partial
                if not line:
                    return
            except asyncio.LimitOverrunError:
                log.error("server.line_too_long", server=self.server, limit=MAX_LINE_BYTES)
                self.stdout_cut = f"it wrote a line over {MAX_LINE_BYTES // (1024 * 1024)} MiB"
                memory.freed(MAX_LINE_BYTES)  # what was buffered of it goes with the connection
                return
            if len(line) > LARGE_LINE_BYTES:
                memory.freed(len(line))
            if line.strip() and not self._route(line):
                try:
                    await self._queue(line)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return

    async def _queue(self, line: bytes) -> None:
        """Into ``lines`` at once where there is room: a line read but not yet queued would let a
        reply read after it overtake it (``_route`` would find the queue empty)."""
        try:
            self.lines.send_nowait(line)
        except anyio.WouldBlock:
            await self.lines.send(line)

    async def _read_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        for count in itertools.count(1):
            try:
                line = await stderr.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:  # the end, perhaps after an unfinished line
                if exc.partial:
                    self.stderr.line(exc.partial.decode("utf-8", "replace").rstrip())
                return
            except asyncio.LimitOverrunError:
                # A line over the limit: keep its start (the log cuts it shorter still), drop the rest.
                line = await stderr.read(STDERR_LINE_BYTES)
                if not await _skip_line(stderr):
                    return
            self.stderr.line(line.decode("utf-8", "replace").rstrip())
            if count % _STDERR_TURN == 0:
                # readuntil() does not yield while whole lines are buffered: a flood of short
                # lines would otherwise hold the loop for a whole pipe read of them.
                await asyncio.sleep(0)

    def _signal_group(self, signum: int) -> bool:
        """Send ``signum`` to the child's whole process group; False when the group is gone."""
        if self.exited.is_set() and os.path.exists(f"/proc/{self.pid}"):
            # The leader was collected, so a process of its number is another's, and so is any
            # group of that number (one is never given out while a group holds it): a stop that
            # waits on what the child left in a session of its own would signal it.
            return False
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            return False
        except PermissionError:  # pragma: no cover - a setuid child; nothing more we may do
            return False
        return True

    async def _leftovers(self) -> list[tuple[int, int]]:
        """The processes left of the child and what it started (Linux; a read of ``/proc``, in a
        thread, given up after ``SCAN_WAIT``: then none are seen, and the group is all a stop reaches)."""
        # Not its start time: a child that exited at once has none, and what it left carries its mark.
        if not self.mark or not sys.platform.startswith("linux") or _STALLED_LOOK.holds():
            return []
        look = _Look(self.mark)
        found: list[tuple[int, int]] | None = None

        async def read() -> None:
            nonlocal found
            try:
                # Abandoned, the thread gives its worker token back: a stalled look holds up no
                # other use of the threads.
                found = await anyio.to_thread.run_sync(look.run, abandon_on_cancel=True)
            except OSError:  # /proc unreadable: the group is all that can be seen
                found = []
            looking.cancel_scope.cancel()

        async with anyio.create_task_group() as looking:
            looking.start_soon(read)
            while not look.stalled():  # noqa: ASYNC110 - a thread's progress, no event to wait on
                await anyio.sleep(_LOOK_POLL)
            looking.cancel_scope.cancel()
        if found is not None:
            return found
        _STALLED_LOOK.given_up(look.done)
        log.warning("server.leftovers_scan_stalled", server=self.server, pid=self.pid, seconds=SCAN_WAIT)
        return []

    async def _signal_session(self, signum: int) -> bool:
        """Send ``signum`` to the child's group and what else is left of what it started, in its
        session or another; False when nothing is."""
        sent = self._signal_group(signum)
        rest = await self._leftovers()
        signal_all(rest, signum)
        return sent or bool(rest)

    async def _wait_session_gone(self, timeout: float) -> bool:
        """Wait until the leader has exited and no process is left in its group, nor any it started."""
        with anyio.move_on_after(timeout):
            await self.exited.wait()
            # Grandchildren are not ours to wait for; polling the group is the only way to see them go.
            while self._signal_group(0):  # noqa: ASYNC110
                await anyio.sleep(_GROUP_POLL)
            while await self._leftovers():  # noqa: ASYNC110 - as the group, not ours to wait for
                await anyio.sleep(_SESSION_POLL)
            return True
        return False

    async def stop(self, grace: float) -> bool:
        """Close stdin, wait ``grace``; SIGTERM the session, wait ``grace``; SIGKILL the session.
        True once the session is gone.

        The requests still waiting end first: those the child never read go to the next
        process, those it read fail.

        Shielded and bounded: a cancelled caller still gets a dead child, and never waits
        more than about ``2 * grace + 2`` seconds.
        """
        with anyio.CancelScope(shield=True):
            self.ended_by_mcpd = not self.stdin.ended
            # Settled before its stdin closes: what it never read is taken back, so it cannot
            # read it on its way out, and goes to the next process. Those it read fail now, not
            # once it is gone: an SDK server answers them with an error as it exits, which
            # would pass for a failure of the tool.
            self._settle()
            self.stdin.close()
            if await self._wait_session_gone(grace):
                return True
            if await self._signal_session(signal.SIGTERM):
                # A stopped process (SIGSTOP, a debugger let go) acts on SIGTERM only once continued,
                # as systemd knows: it was left to SIGKILL, its clean-up undone.
                await self._signal_session(signal.SIGCONT)
                if await self._wait_session_gone(grace):
                    return True
            if await self._signal_session(signal.SIGKILL) and not await self._wait_session_gone(KILL_WAIT):
                log.error("server.unkillable", server=self.server, pid=self.pid)
                return False
        return True


_TRANSIENT_SPAWN_ERRORS = frozenset({errno.EAGAIN, errno.ENOMEM, errno.EMFILE, errno.ENFILE, errno.ENOSPC})
"""exec refusals that say the machine is short of something now, not that the command is wrong."""


class SpawnError(Exception):
    """The command could not be started (not found, not executable, bad cwd, or out of resources)."""

    def __init__(self, reason: str, *, transient: bool) -> None:
        super().__init__(reason)
        self.transient = transient
        """True when the system was short of processes, memory or files: a later try may work."""


async def _spawn(
    config: ServerConfig, exited: anyio.Event, mark: str
) -> tuple[asyncio.SubprocessTransport, asyncio.subprocess.SubprocessStreamProtocol, StdinPipe]:
    # Marked whether or not a ledger is kept: a stop ends what is left of the child by it.
    env = child_environment({**config.env, **marked_environment(mark)})
    problem = _cwd_problem(os.path.expanduser(config.cwd)) if config.cwd else None  # noqa: ASYNC240 - a stat
    if problem is not None:
        # exec would blame the command for it ("No such file or directory: '/bin/cat'").
        raise FileNotFoundError(errno.ENOENT, f"the working directory (`cwd`) {problem}", config.cwd)
    argv, preexec = _launch(config, env)
    # stdin is a pipe of ours, not asyncio's: see ``StdinPipe`` for why.
    child_end, our_end = os.pipe()
    try:
        transport, protocol = await asyncio.get_running_loop().subprocess_exec(
            lambda: _Protocol(exited.set),
            *argv,
            stdin=child_end,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=os.path.expanduser(config.cwd) if config.cwd else None,  # noqa: ASYNC240 - no I/O
            start_new_session=True,
            preexec_fn=preexec,
        )
    except BaseException:
        os.close(our_end)
        raise
    finally:
        os.close(child_end)
    return transport, protocol, StdinPipe(our_end)


def can_spawn(config: ServerConfig) -> bool:
    """Whether exec would find the command (and its ``#!`` interpreter) and the working directory
    now; nothing is run (a few stats: call it in a worker thread)."""
    if config.cwd and _cwd_problem(os.path.expanduser(config.cwd)) is not None:
        return False
    try:
        _resolve(config, child_environment(dict(config.env)))
    except OSError:
        return False
    return True


def _spaced(command: str | None) -> bool:
    return command is not None and any(char.isspace() for char in command)


def _cwd_problem(cwd: str) -> str | None:
    """Why ``cwd`` cannot be the child's working directory (one stat), or None."""
    try:
        return None if stat.S_ISDIR(os.stat(cwd).st_mode) else "is not a directory"
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:  # a folder on the way that may not be searched, a link loop
        return f"cannot be reached: {exc.strerror or exc}"


def _spawn_error(config: ServerConfig, exc: OSError | ValueError) -> SpawnError:
    """What the user is told of a spawn that failed: the command (or the cwd) named."""
    assert config.command is not None
    named = exc.filename if isinstance(exc, OSError) and exc.filename == config.cwd else config.command
    reason = f"{exc.strerror} ({named!r})" if isinstance(exc, OSError) and exc.strerror else str(exc)
    if isinstance(exc, FileNotFoundError) and named == config.command and _spaced(config.command):
        # `command = "npx -y server"`, as a shell line: exec looks for a program of that name.
        reason += "; `command` is one program, its arguments go in `args`"
    transient = isinstance(exc, OSError) and exc.errno in _TRANSIENT_SPAWN_ERRORS
    return SpawnError(reason, transient=transient)


@contextlib.asynccontextmanager
async def open_stdio_child(
    config: ServerConfig, stderr: StderrLog | None = None, groups: GroupLedger | None = None
) -> AsyncIterator[tuple[StdioChild, MemoryObjectReceiveStream[bytes]]]:
    """Spawn the server; yield it with the lines of its stdout that are not replies to its ``rpc``.

    Raises ``SpawnError`` when the command cannot be started. On exit the child is stopped.
    ``stderr`` (a fresh one by default) receives its stderr lines; pass the same one to each
    process of a server so that its tail spans restarts. ``groups`` records the child's session
    from spawn until nothing of it is left (see ``orphans``).
    """
    assert config.command is not None
    loop = asyncio.get_running_loop()
    exited = anyio.Event()
    # Until the child is in the ledger: the daemon's start-up waits for that (``GroupLedger.settled``).
    spawning = contextlib.ExitStack()
    if groups is not None:
        spawning.enter_context(groups.spawning())
    with spawning:
        mark = child_mark()
        try:
            transport, protocol, stdin = await _spawn(config, exited, mark)
        except (OSError, ValueError) as exc:
            raise _spawn_error(config, exc) from exc
        read_in, read_out = anyio.create_memory_object_stream[bytes](32)
        child = StdioChild(
            server=config.name,
            process=asyncio.subprocess.Process(transport, protocol, loop),
            stdin=stdin,
            stderr=stderr or StderrLog(config.name),
            lines=read_in,
            exited=exited,
            started=start_of(transport.get_pid()),
            mark=mark,
        )
        # Recorded without a start time too (a child that exited at once, as a wrapper that put
        # the server in the background does): what it left carries the mark the ledger names, and
        # went unreaped after a daemon's crash. The ledger's start times tell its entries apart only.
        recorded = child.started if child.started is not None else UNKNOWN_START
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(child._read_stdout)
                tg.start_soon(child._read_stderr)
                try:
                    # Inside: a run cancelled while the ledger is written still stops the child.
                    if groups is not None:
                        await groups.add(child.pid, recorded)
                    spawning.close()
                    yield child, read_out
                finally:
                    if await child.stop(config.stop_grace) and groups is not None:
                        groups.discard(child.pid, recorded)
                    tg.cancel_scope.cancel()
        finally:
            read_out.close()
            stdin.close()
            transport.close()
