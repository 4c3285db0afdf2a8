"""What a killed daemon's children left running, ended by the next daemon at the same socket path.

Each stdio child leads a session of its own, and on Linux dies with the daemon (``stdio``'s
parent-death signal). Its own children do not: one that never reads stdin (the ``sleep`` a
wrapper script left in the background, a browser the server launched) outlives a ``kill -9``
of the daemon. systemd ends them with the unit's cgroup; a daemon run by hand or started by a
bridge has no such help. So the daemon keeps a ledger of its children's sessions beside its
socket (``<socket>.groups``: one daemon per socket path, under its lock), and the next daemon
there, before it spawns anything, SIGKILLs what is left in the sessions of a daemon that is gone.

Against reused numbers, the ledger holds the boot it was written in, the daemon's pid and start
time, and each session's id (its leader's pid) with the leader's start time. A process is ended
only when it is this user's, in a recorded session, started no earlier than the session's leader
and no later than the new daemon, and carries the daemon's mark in its environment (``MARK``, set
in each child's and inherited by what it starts); a session whose id now names a different process
(the number was given again) is left alone. The mark is what tells a killed daemon's session from
one whose leader took the number after it and is gone too (a program that put itself in the
background by a double fork): the numbers and start times of what is left in both look alike.

Linux only: the start times and session ids come from ``/proc``. Elsewhere nothing is recorded
(``take_over`` gives None) and a killed daemon's grandchildren may stay.
"""

from __future__ import annotations

import os
import secrets
import signal
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

import anyio
import msgspec
import structlog

log = structlog.get_logger("mcpd.supervisor")

SUFFIX = ".groups"
"""The ledger is the socket path with this added (as the lock adds ``.lock``)."""
MARK = "MCPD_DAEMON_MARK"
"""The variable in each child's environment whose value (random, one per daemon) the ledger holds."""
_MAX_LEDGER_BYTES = 1024 * 1024
"""More than any number of servers writes: a larger file is not ours, and not read."""


class _Group(msgspec.Struct, frozen=True, array_like=True):
    sid: int
    """The session's id: its leader's pid (a child is spawned as a session leader)."""
    start: int
    """The leader's start time, in clock ticks since boot."""


class _Ledger(msgspec.Struct, frozen=True):
    boot: str
    daemon: int
    daemon_start: int
    mark: str
    groups: tuple[_Group, ...]


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(_Ledger).decode


def _stat(pid: int | str) -> tuple[int, int] | None:
    """``pid``'s session id and start time, from ``/proc/<pid>/stat``; None when it is gone (a
    zombie included: it has exited, only its parent has yet to collect it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read()
    except OSError:
        return None
    # The command (field 2) may hold spaces and parentheses: the fields count from its last ")",
    # after which field 3 (the state) comes first: the session is field 6, the start time field 22.
    fields = text.rpartition(b")")[2].split()
    try:
        return None if fields[0] in (b"Z", b"X") else (int(fields[3]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def _boot_id() -> str:
    with open("/proc/sys/kernel/random/boot_id") as file:
        return file.read().strip()


class GroupLedger:
    """This daemon's children's sessions, in the file the next daemon at its socket path reads."""

    def __init__(self, path: Path, boot: str, start: int) -> None:
        self.path = path
        self._boot = boot
        self._start = start
        self._mark = secrets.token_hex(16)
        self._groups: dict[int, int] = {}
        self._given_up = False

    @property
    def environment(self) -> dict[str, str]:
        """What a child's environment gets, so that the next daemon knows its processes for ours."""
        return {MARK: self._mark}

    def add(self, pid: int) -> None:
        """Record the session that the child ``pid``, just spawned, leads."""
        found = _stat(pid)
        if found is None:
            return  # gone already: its stop, which follows at once, ends what it left
        self._groups[pid] = found[1]
        self.save()

    def discard(self, pid: int) -> None:
        """Forget ``pid``'s session: it was stopped and nothing of it is left."""
        if self._groups.pop(pid, None) is not None:
            self.save()

    def give_up(self) -> None:
        """Another daemon took the socket path, and the ledger beside it is that one's: written no
        more (what this daemon stops would replace it, the last stop remove it)."""
        self._given_up = True

    def save(self) -> None:
        """The ledger as it is now, replaced whole (a daemon killed while writing leaves the last
        one complete); removed when it holds nothing. Not synced: a crash of the machine, the one
        thing that would lose it, takes the processes with it."""
        if self._given_up:
            return
        temp = self.path.with_name(self.path.name + ".tmp")
        try:
            if not self._groups:
                self.path.unlink(missing_ok=True)
                return
            groups = tuple(_Group(sid, start) for sid, start in self._groups.items())
            data = _encode(_Ledger(self._boot, os.getpid(), self._start, self._mark, groups))
            # Made anew, never followed or opened in place: a FIFO there would hold the event loop
            # at the open, and a link would have another file written.
            temp.unlink(missing_ok=True)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with open(fd, "wb") as file:
                file.write(data)
            os.replace(temp, self.path)
        except OSError as exc:
            log.warning("supervisor.ledger_unwritable", path=str(self.path), error=str(exc))


@dataclass(frozen=True)
class _Reaped:
    groups: int
    processes: int


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


def _marked(pid: str, mark: bytes) -> bool:
    """``pid`` was started with ``mark`` in its environment (False when that cannot be read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            return mark in file.read().split(b"\0")
    except OSError:  # gone, or not ours to read
        return False


def _kill_sessions(groups: tuple[_Group, ...], until: int, mark: str) -> int:
    """SIGKILL this user's processes in ``groups``' sessions started by ``until`` with ``mark`` in
    their environment; how many."""
    entry_mark = f"{MARK}={mark}".encode()
    sessions: dict[int, int] = {}
    for group in groups:
        leader = _stat(group.sid)
        # A leader that is there with another start time is another process: not our session.
        if leader is None or leader[1] == group.start:
            sessions[group.sid] = group.start
    killed = 0
    uid = os.getuid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or (found := _stat(entry.name)) is None:
            continue
        sid, start = found
        first = sessions.get(sid)
        if first is None or not first <= start <= until or not _marked(entry.name, entry_mark):
            continue
        try:
            if entry.stat().st_uid == uid:
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
        except OSError:  # gone meanwhile
            continue
    return killed


def _take_over(path: Path) -> tuple[GroupLedger, _Reaped | None]:
    own = _stat("self")
    assert own is not None  # /proc is there (Linux), and we run
    try:
        boot = _boot_id()
    except OSError:
        boot = ""  # a ledger is then never taken for this boot's: nothing is reaped, nothing wrong killed
    ledger = GroupLedger(path, boot, own[1])
    old = _read(path)
    if old is None:
        return ledger, None
    # Dealt with below, whatever it held: this daemon's children start a new one.
    ledger.save()
    if not boot or old.boot != boot or not old.groups:
        return ledger, None
    daemon = _stat(old.daemon)
    if daemon is not None and daemon[1] == old.daemon_start:
        return ledger, None  # its daemon lives on (it lost this path): its children are its to stop
    try:
        killed = _kill_sessions(old.groups, own[1], old.mark)
    except OSError as exc:  # /proc unreadable: the daemon runs on without reaping
        log.warning("supervisor.reap_failed", path=str(path), error=str(exc))
        return ledger, None
    return ledger, _Reaped(len(old.groups), killed)


async def take_over(socket: Path) -> GroupLedger | None:
    """End what a killed daemon at ``socket`` left running; the ledger for this daemon's children.

    Call it holding the socket's lock, before any child is spawned. None off Linux (see the module).
    """
    if not sys.platform.startswith("linux"):
        return None
    path = socket.with_name(socket.name + SUFFIX)
    # A look at every process in /proc: milliseconds, off the event loop.
    ledger, reaped = await anyio.to_thread.run_sync(_take_over, path)
    if reaped is not None:
        log.warning("supervisor.reaped", groups=reaped.groups, processes=reaped.processes)
    return ledger
