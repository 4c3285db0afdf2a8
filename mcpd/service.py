"""``mcpd service install | uninstall | status``: run mcpd as a systemd user service or a launchd agent.

The files are generated with this installation's paths (the ``mcpd`` next to the running
interpreter, the config and the socket), so a venv, a pipx or a uv tool install all work.
``systemd/`` and ``launchd/`` in the repository hold the same files rendered with generic
paths, for reading and for packagers.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mcpd.config.paths import default_socket_path
from mcpd.errors import ConfigError

UNIT = "mcpd.service"
SOCKET_UNIT = "mcpd.socket"
LABEL = "io.mcpd.daemon"


@dataclass(frozen=True)
class Paths:
    executable: tuple[str, ...]
    """The command that runs mcpd: its script, or the interpreter with ``-m mcpd``."""
    config: str | None
    """None: the daemon finds the user config itself (or runs the embedded default)."""
    socket: str
    log_dir: str
    specifiers: bool = False
    """The paths hold systemd specifiers (``%h``, ``%t``) on purpose; else a ``%`` is a ``%``."""

    def __post_init__(self) -> None:
        # Checked here, on the values the files are written with, whatever they came from (an
        # option, $MCPD_SOCKET, $HOME, the interpreter's path): a newline would start a line of
        # its own in the unit file, another directive.
        for value in (*self.executable, self.config or "", self.socket, self.log_dir):
            if any(ord(char) < 32 or char == "\x7f" for char in value):
                raise ConfigError(f"{value!r}: a path with a control character cannot go in a service file")

    def serve_args(self) -> list[str]:
        config = ["--config", self.config] if self.config else []
        return [
            *self.executable,
            "serve",
            *config,
            "--socket",
            self.socket,
            "--log-format",
            "json",
        ]


GENERIC = {
    "systemd": Paths(
        executable=("%h/.local/bin/mcpd",),
        config=None,
        socket="%t/mcpd/mcpd.sock",
        log_dir="",
        specifiers=True,
    ),
    "launchd": Paths(
        executable=("/Users/USER/.local/bin/mcpd",),
        config=None,
        socket="/Users/USER/Library/Caches/TemporaryItems/mcpd/mcpd.sock",
        log_dir="/Users/USER/Library/Logs/mcpd",
    ),
}
"""The paths the repository's systemd/ and launchd/ files are rendered with."""


def current_paths(config: Path | None = None, socket: Path | None = None) -> Paths:
    """The paths of this installation: the mcpd script beside this interpreter, else on PATH; the
    config and the socket as ``serve`` would find them here (``$MCPD_SOCKET`` too), made absolute
    with ``~`` expanded: the service runs in another directory, and no shell expands its words."""
    beside = Path(sys.executable).with_name("mcpd")
    found = str(beside) if beside.exists() else shutil.which("mcpd")
    executable = (found,) if found else (sys.executable, "-m", "mcpd")
    config = config.expanduser().resolve() if config is not None else None
    paths = Paths(
        executable=executable,
        config=str(config) if config else None,
        socket=str((socket or default_socket_path()).expanduser().resolve()),
        log_dir=str(Path.home() / "Library" / "Logs" / "mcpd"),
    )
    if config is not None and not config.is_file():
        # The service would fail at each start (exit 2), with the reason only in its log.
        raise ConfigError(f"{config}: no such config file (write it first, or leave out --config)")
    return paths


def _systemd_word(arg: str, specifiers: bool) -> str:
    """One argument of an ``ExecStart=`` line: ``%`` and ``$`` doubled unless meant as a specifier
    (systemd expands both), and quoted (C-style, as systemd reads it) when it holds a space, a
    quote or a backslash."""
    if not specifiers:
        arg = arg.replace("%", "%%").replace("$", "$$")
    if any(char.isspace() or char in "\"'\\;" for char in arg):
        arg = '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return arg


def systemd_service(paths: Paths) -> str:
    return f"""[Unit]
Description=mcpd: supervised MCP servers shared by every agent

[Service]
Type=notify
NotifyAccess=main
ExecStart={" ".join(_systemd_word(arg, paths.specifiers) for arg in paths.serve_args())}
ExecReload=/bin/kill -HUP $MAINPID
Restart=on-failure
RestartSec=2
# A config that does not load (2) does not heal in 2 s, and another daemon that serves the socket
# (4) goes on serving it: the unit fails at once, with the reason in the journal, instead of after
# five tries. (3 restarts: a busy HTTP port or a runtime directory not there yet may heal.)
RestartPreventExitStatus=2 4
# A stop is bounded by the servers' grace periods; leave room, then systemd kills what is left.
TimeoutStopSec=30
WatchdogSec=60
KillMode=mixed

[Install]
WantedBy=default.target
"""


def systemd_socket(paths: Paths) -> str:
    return f"""[Unit]
Description=mcpd socket: clients can connect while the daemon (re)starts

[Socket]
ListenStream={paths.socket if paths.specifiers else paths.socket.replace("%", "%%")}
SocketMode=0600
DirectoryMode=0700

[Install]
WantedBy=sockets.target
"""


def launchd_plist(paths: Paths) -> str:
    document = {
        "Label": LABEL,
        "ProgramArguments": paths.serve_args(),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ProcessType": "Background",
        "StandardOutPath": f"{paths.log_dir}/mcpd.out.log",
        "StandardErrorPath": f"{paths.log_dir}/mcpd.err.log",
        "EnvironmentVariables": {"MCPD_SOCKET": paths.socket},
    }
    return plistlib.dumps(document).decode()


def _run(argv: list[str]) -> int:
    print("$ " + " ".join(argv))
    return subprocess.run(argv, check=False).returncode


def install(paths: Paths, *, dry_run: bool, socket_activation: bool) -> int:
    if sys.platform == "darwin":
        target = Path.home() / "Library" / "LaunchAgents" / f"{LABEL}.plist"
        text = launchd_plist(paths)
        if dry_run:
            print(f"# {target}\n{text}")
            return 0
        Path(paths.log_dir).mkdir(parents=True, exist_ok=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"wrote {target}")
        _run(["launchctl", "bootout", f"gui/{os.getuid()}", str(target)])
        return _run(["launchctl", "bootstrap", f"gui/{os.getuid()}", str(target)])
    directory = _systemd_dir()
    files = {directory / UNIT: systemd_service(paths)}
    if socket_activation:
        files[directory / SOCKET_UNIT] = systemd_socket(paths)
    # A socket unit from an earlier install with --socket-activation would go on starting the
    # daemon on its own socket, beside the one this install configures.
    stale = None if socket_activation else directory / SOCKET_UNIT
    stale = stale if stale is not None and stale.exists() else None
    if dry_run:
        for path, text in files.items():
            print(f"# {path}\n{text}")
        if stale is not None:
            print(f"# {stale} would be disabled and removed")
        return 0
    has_systemctl = shutil.which("systemctl") is not None
    if stale is not None:
        if has_systemctl:
            _run(["systemctl", "--user", "disable", "--now", SOCKET_UNIT])
        stale.unlink()
        print(f"removed {stale}")
    directory.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        path.write_text(text)
        print(f"wrote {path}")
    if not has_systemctl:
        print("systemctl not found: enable the unit yourself")
        return 1
    if _run(["systemctl", "--user", "daemon-reload"]) != 0:
        return 1
    unit = SOCKET_UNIT if socket_activation else UNIT
    return _run(["systemctl", "--user", "enable", "--now", unit])


def uninstall() -> int:
    """Remove what ``install`` wrote; says only what it really removed, non-zero when a step failed."""
    if sys.platform == "darwin":
        target = Path.home() / "Library" / "LaunchAgents" / f"{LABEL}.plist"
        if not target.exists():
            print("not installed: nothing to remove")
            return 0
        # bootout fails when the agent is not loaded, which is fine: removing the file is what counts.
        _run(["launchctl", "bootout", f"gui/{os.getuid()}", str(target)])
        target.unlink()
        print(f"removed {target}")
        return 0
    directory = _systemd_dir()
    installed = [directory / name for name in (SOCKET_UNIT, UNIT) if (directory / name).exists()]
    if not installed:
        print("not installed: nothing to remove")
        return 0
    failed = 0
    if shutil.which("systemctl") is None:
        print("systemctl not found: only the unit files are removed")
    else:
        failed |= _run(["systemctl", "--user", "disable", "--now", *(path.name for path in installed)])
    for path in installed:
        path.unlink()
        print(f"removed {path}")
    if shutil.which("systemctl") is not None:
        failed |= _run(["systemctl", "--user", "daemon-reload"])
    if failed:
        print(
            "systemctl failed (see above): the units may still be loaded until the next login",
            file=sys.stderr,
        )
    return 1 if failed else 0


def _systemd_dir() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "systemd" / "user"


def status() -> int:
    if sys.platform == "darwin":
        return _run(["launchctl", "print", f"gui/{os.getuid()}/{LABEL}"])
    if shutil.which("systemctl") is None:
        print("systemctl not found")
        return 1
    return _run(["systemctl", "--user", "status", "--no-pager", UNIT])
