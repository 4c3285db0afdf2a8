"""What a killed daemon's children left running, ended by the next daemon at the same socket path.

Each stdio child leads a session of its own, and on Linux dies with the daemon (``stdio``'s
parent-death signal). Its own children do not: one that never reads stdin (the ``sleep`` a
wrapper script left in the background, a browser the server launched) outlives a ``kill -9``
of the daemon. systemd ends them with the unit's cgroup; a daemon run by hand or started by a
bridge has no such help. So the daemon keeps a ledger of its children's sessions beside its
socket (``<socket>.groups``: one daemon per socket path, under its lock), and the next daemon
there, before it spawns anything, SIGKILLs what a daemon that is gone left running.

A process is ended when it is this user's and carries the killed daemon's mark in its environment
(``MARK``: random, one per daemon, set in each child's and inherited by what it starts), wherever
it is now: a browser that Puppeteer or Playwright launch runs in a session of its own (Node's
``detached``), as does a helper that put itself in the background by a double fork, and both
outlived every look at the sessions alone. Each child's mark is the daemon's and a number of its
own, so the look at a stop (``leftovers``) finds what that child started and nothing of another
server's. The mark tells a killed daemon's processes from all others: its random part is in no
other environment, so neither reused numbers nor what started after the new daemon need telling
apart (a process one of them forks carries it too). This process and its ancestors are spared (a
daemon started from a killed daemon's server runs under a process with its mark). The look is made
again until it finds nothing new, and the new daemon spawns nothing before what it killed is gone
(a port it held is free only then). The ledger names the sessions, each with its leader's start
time, so that a child stopped with nothing left is forgotten (and a daemon none of whose children
are left has nothing to reap), and the daemon's pid and start time, which tell whether it is gone.

A stop ends, by the child's mark, what its process group did not take: a descendant that moved to
a group or a session of its own (``setpgid``, a shell's job control, ``setsid``).

The ledger is written in a worker thread by one task (``open_ledger``): spawns and stops never
wait on the file (a slow filesystem), and each write holds the whole state as it was when the
write began, so a later state is never overwritten by an earlier one. That task also writes the
ledger again when it is found gone (a cleaner of plain files), and at the end waits for the
last write, bounded.

Linux only: the start times and session ids come from ``/proc``. Elsewhere nothing is recorded
(``open_ledger`` gives None) and a killed daemon's grandchildren may stay.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import secrets
import signal
import stat
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import msgspec
import structlog
from anyio.abc import TaskStatus

from mcpd.supervisor.wakeup import Wakeup

log = structlog.get_logger("mcpd.supervisor")

SUFFIX = ".groups"
"""The ledger is the socket path with this added (as the lock adds ``.lock``)."""
MARK = "MCPD_DAEMON_MARK"
"""The variable in each child's environment whose value (random, one per daemon) the ledger holds."""
_OWN_MARK = secrets.token_hex(16)
"""This process's mark: one daemon (or ``mcpd check``) per process."""
_children = itertools.count(1)
"""Numbers the marks of this process's children (``child_mark``)."""
_MAX_LEDGER_BYTES = 1024 * 1024
"""More than any number of servers writes: a larger file is not ours, and not read."""
REAP_WAIT = 5.0
"""Seconds the next daemon waits for what it SIGKILLed to be gone (a port, a lock it held),
before it spawns anything: a large process takes a while to exit (2 GiB: ~0.3 s, measured)."""
_REAP_PASSES = 10
"""Looks at ``/proc`` at most, each killing what the one before it missed: a leftover that forked
meanwhile. Each pass kills every process forking there, so two are the rule."""
TAKE_OVER_WAIT = 30.0
"""Seconds the daemon's start waits for what a killed daemon left to be found and ended (a few
``REAP_WAIT`` when a check finds several ledgers); past it the daemon starts without, the look left
to finish in its thread."""
FLUSH_WAIT = 5.0
"""Seconds the daemon's end waits for the ledger's last write (a hung filesystem)."""
_POLL = 0.02


UNKNOWN_START = 0
"""The start time recorded of a child that had none to read (gone at once): no process has it."""


class _Group(msgspec.Struct, frozen=True, array_like=True):
    sid: int
    """The session's id: its leader's pid (a child is spawned as a session leader)."""
    start: int
    """The leader's start time, in clock ticks since boot (``UNKNOWN_START`` when it had none)."""


class _Ledger(msgspec.Struct, frozen=True):
    boot: str
    daemon: int
    daemon_start: int
    mark: str
    groups: tuple[_Group, ...]


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(_Ledger).decode


def _fields(pid: int | str) -> list[bytes]:
    """The fields of ``/proc/<pid>/stat`` from the state on (field 3); none when it is gone (a
    zombie included: it has exited, only its parent has yet to collect it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read()
    except OSError:
        return []
    # The command (field 2) may hold spaces and parentheses: the fields count from its last ")".
    fields = text.rpartition(b")")[2].split()
    return [] if len(fields) < 20 or fields[0] in (b"Z", b"X") else fields


def _stat(pid: int | str) -> tuple[int, int] | None:
    """``pid``'s session id (field 6) and start time (field 22); None when it is gone."""
    fields = _fields(pid)
    try:
        return (int(fields[3]), int(fields[19])) if fields else None
    except ValueError:
        return None


def _lineage() -> set[int]:
    """This process and its ancestors: a daemon started from a killed daemon's server through a
    wrapper that stays (``sh -c`` with more to do) runs in that server's session, under a process
    with the killed daemon's mark."""
    found: set[int] = set()
    pid = os.getpid()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            pid = int(_fields(pid)[1])  # field 4, the parent
        except (IndexError, ValueError):
            break
    return found


def start_of(pid: int) -> int | None:
    """``pid``'s start time (clock ticks since boot); None when it is gone or off Linux."""
    found = _stat(pid) if sys.platform.startswith("linux") else None
    return None if found is None else found[1]


def child_mark() -> str:
    """A new child's mark: this daemon's, a dot and the child's number, so that one look finds what
    the daemon's children left (a reap) and another what one child left (its stop)."""
    return f"{_OWN_MARK}.{next(_children)}"


def marked_environment(mark: str) -> dict[str, str]:
    """What a child's environment gets, so that its processes are known for its own (``child_mark``)."""
    return {MARK: mark}


def _boot_id() -> str:
    with open("/proc/sys/kernel/random/boot_id") as file:
        return file.read().strip()


def _marked(pid: str, mark: bytes) -> bool:
    """``pid`` was started with ``mark`` (``MARK=value`` as bytes) in its environment, or with a
    child's mark of which it is the daemon's (False when that cannot be read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            data = file.read()
    except OSError:  # gone, or not ours to read
        return False
    if mark not in data:  # most processes: one search, no split into entries
        return False
    child = mark + b"."
    return any(entry == mark or entry.startswith(child) for entry in data.split(b"\0"))


def _nothing() -> None:
    pass


def _members(mark: str, moved: Callable[[], None] = _nothing) -> list[tuple[int, int]]:
    """(pid, start) of this user's processes with ``mark`` in their environment (see ``_marked``),
    in whatever session; never this process or its ancestors. ``moved`` is called before each
    process is looked at: a look that is slow (a loaded machine) is told from one that is stuck."""
    entry_mark = f"{MARK}={mark}".encode()
    uid = os.getuid()
    spared = _lineage()
    found: list[tuple[int, int]] = []
    for entry in os.scandir("/proc"):
        moved()
        if not entry.name.isdigit() or int(entry.name) in spared:
            continue
        try:
            if entry.stat().st_uid != uid or not _marked(entry.name, entry_mark):
                continue
        except OSError:  # gone meanwhile
            continue
        # Read last, for the few marked: a zombie (an empty environment) is never read.
        if (seen := _stat(entry.name)) is not None:
            found.append((int(entry.name), seen[1]))
    return found


def signal_all(processes: Iterable[tuple[int, int]], signum: int) -> None:
    """Send ``signum`` to each of ``processes`` ((pid, start), as ``leftovers`` gives) that is still
    the one seen: through a pidfd, opened before its start time is checked again, so that a number
    given again is never hit."""
    for pid, start in processes:
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:  # gone meanwhile
            continue
        try:
            if (found := _stat(pid)) is not None and found[1] == start:
                signal.pidfd_send_signal(pidfd, signum)
        except OSError:  # gone meanwhile
            pass
        finally:
            os.close(pidfd)


def leftovers(mark: str, moved: Callable[[], None] = _nothing) -> list[tuple[int, int]]:
    """What is left of the child marked ``mark`` and what it started, in its session or another:
    (pid, start) of each process; ``OSError`` when ``/proc`` cannot be read. ``moved``: see ``_members``."""
    return _members(mark, moved)


def _gone(processes: Iterable[tuple[int, int]]) -> bool:
    return all((found := _stat(pid)) is None or found[1] != start for pid, start in processes)


class GroupLedger:
    """This daemon's children's sessions, in the file the next daemon at its socket path reads."""

    def __init__(self, path: Path, boot: str, start: int) -> None:
        self.path = path
        self._boot = boot
        self._start = start
        self._groups: dict[int, int] = {}
        self._given_up = False
        self._changed = Wakeup()
        self._dirty = False
        """Changed since the last write began."""
        self._version = 0
        """Changes so far; ``_saved_version``: of those, how many the file holds (or were let go)."""
        self._saved_version = 0
        self._saved = anyio.Event()
        self._written: tuple[int, int] | None = None
        """The file this daemon wrote last, to tell it was removed or replaced."""
        self._failing: str | None = None
        """The error the last write failed with (written in the worker thread only)."""
        self._closing = False
        self._closed = anyio.Event()
        self._scope: anyio.CancelScope | None = None
        """The writing task's: shielded from its owner's cancellation, cancelled by ``_open``."""
        self._spawning = 0
        """Children being spawned whose ``add`` is not back yet (``spawning``)."""
        self._spawned = anyio.Event()

    async def add(self, pid: int, start: int) -> None:
        """Record the session that the child ``pid`` (started at ``start``), just spawned, leads;
        back once it is written (bounded by ``FLUSH_WAIT``: a hung filesystem holds no server up),
        so that nothing it starts runs unrecorded for long."""
        self._groups[pid] = start
        self._change()
        wanted = self._version
        with anyio.move_on_after(FLUSH_WAIT):
            while self._saved_version < wanted:
                await self._saved.wait()

    @contextlib.contextmanager
    def spawning(self) -> Iterator[None]:
        """Around a child's spawn and its ``add`` (or the spawn's failure): ``settled`` waits for it."""
        self._spawning += 1
        try:
            yield
        finally:
            self._spawning -= 1
            if not self._spawning:
                spawned, self._spawned = self._spawned, anyio.Event()
                spawned.set()

    async def settled(self) -> None:
        """Wait until the children being spawned are written (or failed to spawn); the caller
        bounds it (``add`` is bounded by ``FLUSH_WAIT``)."""
        while self._spawning:
            await self._spawned.wait()

    def discard(self, pid: int, start: int) -> None:
        """Forget ``pid``'s session: it was stopped and nothing of it is left. Only that one: a
        child spawned since may have been given the same number."""
        if self._groups.get(pid) == start:
            del self._groups[pid]
            self._change()

    def give_up(self) -> None:
        """Another daemon took the socket path, and the ledger beside it is that one's: written no
        more (what this daemon stops would replace it, the last stop remove it)."""
        self._given_up = True

    def _change(self) -> None:
        self._dirty = True
        self._version += 1
        self._changed.set()

    async def _keep(
        self, interval: float, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Write each change, one write at a time, each with the state as it is when it begins;
        every ``interval`` seconds, look whether the file is still the one written, else write it
        again. After ``_close``, one last write, then ``_closed``."""
        # Shielded: a cancelled owner (a check given up at a signal) still has the last state
        # written; only the end of ``_open``, after that write, cancels it.
        with anyio.CancelScope(shield=True) as self._scope:
            task_status.started()
            while True:
                with anyio.move_on_after(interval):
                    await self._changed.wait()
                last = self._closing
                await self._write_now()
                if last:
                    self._closed.set()
                    return

    def _close(self) -> None:
        self._closing = True
        self._changed.set()

    async def _write_now(self) -> None:
        version = self._version
        if not self._given_up and (self._dirty or self._groups):
            dirty, self._dirty = self._dirty, False
            data = self._encoded()
            self._written = await anyio.to_thread.run_sync(
                self._write, data, self._written, dirty, abandon_on_cancel=True
            )
            if self._failing is not None:
                self._dirty = True  # made again at the next look
        self._saved_version = version
        saved, self._saved = self._saved, anyio.Event()
        saved.set()

    def _encoded(self) -> bytes | None:
        """The ledger as it is now; None when it names nothing (then no file)."""
        if not self._groups:
            return None
        groups = tuple(_Group(sid, start) for sid, start in self._groups.items())
        return _encode(_Ledger(self._boot, os.getpid(), self._start, _OWN_MARK, groups))

    def _write(
        self, data: bytes | None, written: tuple[int, int] | None, dirty: bool
    ) -> tuple[int, int] | None:
        """Replace the file whole with ``data`` (a daemon killed while writing leaves the last one
        complete) if it is missing, or ``written`` (the file this daemon wrote last) and ``dirty``;
        removed when ``data`` is None. Any other file there is another daemon's, which took the
        socket path before this one saw it go: left alone. Not synced: a crash of the machine, the
        one thing that would lose it, takes the processes with it. Returns the file now there (the
        one there before when the write failed)."""
        temp = self.path.with_name(self.path.name + ".tmp")
        try:
            there = _identity(self.path)
            if there is not None and (there != written or not self._names_us()):
                return written
            if data is None:
                self.path.unlink(missing_ok=True)
                return None
            if there is not None and not dirty:
                return written
            # Made anew, never followed or opened in place: a FIFO there would hold the write
            # at the open, and a link would have another file written.
            temp.unlink(missing_ok=True)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with open(fd, "wb") as file:
                file.write(data)
                identity = _identity_of(os.fstat(fd))
            os.replace(temp, self.path)
        except OSError as exc:
            # Said once while it stays the same: a look tries again every interval.
            if str(exc) != self._failing:
                log.warning("supervisor.ledger_unwritable", path=str(self.path), error=str(exc))
            self._failing = str(exc)
            # Unchanged: what is there is still the file written last (or none). Taken for none,
            # that file would be another daemon's from then on, never written again nor removed.
            return written
        self._failing = None
        return identity

    def _names_us(self) -> bool:
        """Whether the file at ``path`` (of the identity written last) names this daemon: a file
        another daemon wrote after ours was removed (at its take-over) can have been given our
        file's inode number (ext4 gives a freed one out again at once). One that cannot be read
        is ours still, as its identity says."""
        try:
            there = _load(self.path)
        except (OSError, ValueError):
            return True
        return there is None or (there.daemon, there.daemon_start) == (os.getpid(), self._start)


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("supervisor.ledger_unwritable", path=str(path), error=str(exc))


def _identity_of(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        return _identity_of(os.lstat(path))
    except OSError:
        return None


@dataclass(frozen=True)
class _Reaped:
    groups: int
    processes: int
    left: int
    """Of those, how many were still there when the wait for them ended."""


def _read(path: Path) -> _Ledger | None:
    """The ledger a previous daemon left at ``path``; None when there is none or it cannot be read
    (said, and otherwise ignored: the daemon starts as if there were none)."""
    try:
        return _load(path)
    except (OSError, ValueError) as exc:  # msgspec's DecodeError is a ValueError
        log.warning("supervisor.ledger_unreadable", path=str(path), error=str(exc))
        return None


def _load(path: Path) -> _Ledger | None:
    try:
        # Non-blocking: a FIFO in its place must not hold the daemon's start up at the open.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    with open(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a plain file")
        data = file.read(_MAX_LEDGER_BYTES + 1)
    if len(data) > _MAX_LEDGER_BYTES:
        raise ValueError(f"over {_MAX_LEDGER_BYTES} bytes")
    return _decode(data)


def _kill_marked(mark: str) -> tuple[int, int]:
    """SIGKILL this user's processes with ``mark`` in their environment, look after look until one
    finds none (what forked meanwhile), then wait for them to be gone (what they held, a port, is
    free only then); how many were killed, and left."""
    killed: set[tuple[int, int]] = set()
    for _ in range(_REAP_PASSES):
        # What was killed may not have exited yet: seen again, it is not killed again.
        found = set(_members(mark)) - killed
        if not found:
            break
        signal_all(found, signal.SIGKILL)
        killed |= found
    deadline = time.monotonic() + REAP_WAIT
    while not _gone(killed) and time.monotonic() < deadline:
        time.sleep(_POLL)
    left = [process for process in killed if not _gone([process])]
    return len(killed), len(left)


def _reap(path: Path, boot: str) -> tuple[bool, _Reaped | None]:
    """End what the ledger at ``path`` names if the daemon that wrote it is gone; whether the file
    is done with (none, unreadable, of another boot, its daemon gone), and what was reaped."""
    old = _read(path)
    if old is None or old.boot != boot:
        return True, None
    daemon = _stat(old.daemon)
    if daemon is not None and daemon[1] == old.daemon_start:
        return False, None  # its daemon lives on (it lost this path): its children are its to stop
    if not old.groups:
        return True, None
    try:
        killed, left = _kill_marked(old.mark)
    except OSError as exc:  # /proc unreadable: the daemon runs on without reaping
        log.warning("supervisor.reap_failed", path=str(path), error=str(exc))
        return True, None
    return True, _Reaped(len(old.groups), killed, left)


def _sweep_temporaries(directory: Path) -> None:
    """Remove the temporary files of runs gone (the pid they are named after): one killed while it
    wrote its ledger, or whose last write failed, left it, and no later run would make it again."""
    for temp in directory.glob(f"*{SUFFIX}.tmp"):
        pid = temp.name.removesuffix(f"{SUFFIX}.tmp")
        if pid.isdigit() and _stat(pid) is None:
            with contextlib.suppress(OSError):
                temp.unlink()


def _new_ledger(path: Path) -> GroupLedger:
    """This daemon's ledger at ``path`` (empty: nothing is written until a child is added)."""
    own = _stat("self")
    assert own is not None  # /proc is there (Linux), and we run
    try:
        boot = _boot_id()
    except OSError:
        boot = ""  # a ledger is then never taken for this boot's: nothing is reaped, nothing wrong killed
    return GroupLedger(path, boot, own[1])


def _take_over(path: Path, siblings: bool, boot: str, given_up: threading.Event) -> list[_Reaped]:
    """End what the ledger at ``path`` named; with ``siblings``, also what the ledgers beside it
    name whose daemons are gone (removed then). Once ``given_up`` is set (the daemon went on
    without waiting, ``TAKE_OVER_WAIT``), no file is removed any more: the one at ``path`` is the
    new daemon's by then."""
    reaped: list[_Reaped] = []
    if siblings:
        _sweep_temporaries(path.parent)
    others = sorted(path.parent.glob(f"*{SUFFIX}")) if siblings and boot else []
    for other in [path, *(other for other in others if other != path)]:
        done, found = _reap(other, boot) if boot else (True, None)
        if found is not None:
            reaped.append(found)
        if given_up.is_set():
            break
        # Ours whatever it held (unreadable too): this daemon's children start a new one.
        if other == path:
            _remove(path)
        elif done:
            with contextlib.suppress(OSError):
                other.unlink()
    return reaped


@contextlib.asynccontextmanager
async def open_ledger(socket: Path, interval: float) -> AsyncIterator[GroupLedger | None]:
    """End what a killed daemon at ``socket`` left running; yield the ledger for this daemon's
    children, kept written (and looked at every ``interval`` seconds) by a task of its own.

    Enter it holding the socket's lock, before any child is spawned; on exit the last state is
    written (bounded by ``FLUSH_WAIT``). None off Linux (see the module).
    """
    async with _open(socket.with_name(socket.name + SUFFIX), interval, siblings=False) as ledger:
        yield ledger


def _private_directory(directory: Path) -> None:
    """Make ``directory`` (0700) unless it is there; ``OSError`` unless it is a real directory of
    this user's that no one else may write to: what the ledgers in it name is killed, and one that
    anyone else could have put there must not be read (a link is refused, not followed). Its parent
    too, when missing, is made 0700 (not by the umask): a check's is the daemon's socket directory,
    which the daemon refuses when its group may write to it."""
    directory.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory.mkdir(mode=0o700, exist_ok=True)
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise OSError(errno.EPERM, "not a directory of this user's alone", str(directory))


@contextlib.asynccontextmanager
async def open_run_ledger(directory: Path, interval: float) -> AsyncIterator[GroupLedger | None]:
    """The ledger of a run with no socket (``mcpd check``): one file per process in ``directory``,
    where each run first ends what the runs killed before it left (their files removed). None off
    Linux, or when ``directory`` cannot be made (said)."""
    path = directory / f"{os.getpid()}{SUFFIX}"
    try:
        await anyio.to_thread.run_sync(_private_directory, directory)
    except OSError as exc:
        log.warning("supervisor.ledger_unwritable", path=str(path), error=str(exc))
        yield None
        return
    async with _open(path, interval, siblings=True) as ledger:
        yield ledger


@contextlib.asynccontextmanager
async def _open(path: Path, interval: float, *, siblings: bool) -> AsyncIterator[GroupLedger | None]:
    if not sys.platform.startswith("linux"):
        yield None
        return
    ledger = await anyio.to_thread.run_sync(_new_ledger, path)
    # A look at every process in /proc, and a wait for what it killed: off the event loop, and
    # bounded: a read of a process's environment waits on its memory map's lock, which a page fault
    # on a hung network filesystem holds, and the daemon never started.
    given_up = threading.Event()
    reaped: list[_Reaped] = []
    with anyio.move_on_after(TAKE_OVER_WAIT) as waited:
        reaped = await anyio.to_thread.run_sync(
            _take_over, path, siblings, ledger._boot, given_up, abandon_on_cancel=True
        )
    if waited.cancelled_caught:
        given_up.set()
        log.warning("supervisor.reap_stalled", path=str(path), seconds=TAKE_OVER_WAIT)
        # Ours from now on: a ledger left there would be taken for another daemon's, and this
        # daemon's never written (what the look was to remove, as it does when it ends in time).
        await anyio.to_thread.run_sync(_remove, path)
    for found in reaped:
        log.warning("supervisor.reaped", groups=found.groups, processes=found.processes, left=found.left)
    async with anyio.create_task_group() as tg:
        await tg.start(ledger._keep, interval)
        try:
            yield ledger
        finally:
            # The last state written by the task itself, after any write it is in: never two at once.
            ledger._close()
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(FLUSH_WAIT):
                    await ledger._closed.wait()
                assert ledger._scope is not None  # set when the task started
                ledger._scope.cancel()
