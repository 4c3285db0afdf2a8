"""Running as a service: sd_notify, socket activation, reload safety, generated unit and plist files."""

from __future__ import annotations

import os
import plistlib
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from mcpd import service
from mcpd.cli.app import build_parser
from mcpd.cli.shells import tree
from mcpd.client import Client
from mcpd.testing import fixture_toml, fullserver_toml
from mcpd.testing.daemon import running_daemon

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parent.parent


@contextmanager
def notify_socket(abstract: bool) -> Iterator[tuple[str, socket.socket]]:
    """A datagram socket standing in for systemd's NOTIFY_SOCKET; yields (address for env, socket)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    directory = tempfile.mkdtemp(prefix="mcpd-notify-", dir="/tmp")
    try:
        if abstract:
            name = f"mcpd-test-{os.getpid()}-{id(sock)}"
            sock.bind("\0" + name)
            address = "@" + name
        else:
            address = f"{directory}/notify"
            sock.bind(address)
        sock.setblocking(False)
        yield address, sock
    finally:
        sock.close()
        shutil.rmtree(directory, ignore_errors=True)


async def next_message(sock: socket.socket, timeout: float = 30) -> dict[str, str]:
    with anyio.fail_after(timeout):
        while True:
            try:
                data = sock.recv(4096)
            except BlockingIOError:
                await anyio.sleep(0.02)
                continue
            return dict(line.split("=", 1) for line in data.decode().splitlines())


async def wait_for_key(sock: socket.socket, key: str) -> dict[str, str]:
    while True:
        message = await next_message(sock)
        if key in message:
            return message


@pytest.mark.parametrize("abstract", [False, True])
async def test_sd_notify_sequence(tmp_path: Path, abstract: bool) -> None:
    """READY=1 with a STATUS once servers are up; RELOADING=1 then READY=1 around SIGHUP; STOPPING=1."""
    config = tmp_path / "c.toml"
    config.write_text(fullserver_toml("one") + fullserver_toml("two"))
    with notify_socket(abstract) as (address, sock):
        async with running_daemon(config, env={"NOTIFY_SOCKET": address}) as daemon:
            ready = await wait_for_key(sock, "READY")
            assert ready["READY"] == "1" and ready["STATUS"] == "2/2 servers running"
            daemon.signal(signal.SIGHUP)
            reloading = await wait_for_key(sock, "RELOADING")
            assert int(reloading["MONOTONIC_USEC"]) > 0
            again = await wait_for_key(sock, "READY")
            assert again["STATUS"].startswith("2/2")
            daemon.signal(signal.SIGTERM)
            stopping = await wait_for_key(sock, "STOPPING")
            assert stopping == {"STOPPING": "1"}
            assert await daemon.wait_exit() == 0


async def test_a_reload_during_start_up_leaves_ready_to_the_first_start_attempts(tmp_path: Path) -> None:
    """A SIGHUP while a server is still in its first start attempt (one that never answers
    ``initialize`` here) reloads, but systemd hears READY=1 only once that attempt is over, as
    without the reload: READY=1 ends a unit's start-up whichever message it comes in."""
    config = tmp_path / "c.toml"
    config.write_text(fullserver_toml("one") + fixture_toml("hung", "--hang-initialize", connect_timeout=8.0))
    with notify_socket(False) as (address, sock):
        env = {"NOTIFY_SOCKET": address}
        async with running_daemon(config, env=env, wait_ready=False) as daemon:
            await daemon.wait_for("server.state", server="one", new="running")
            daemon.signal(signal.SIGHUP)
            await daemon.wait_for("config.reloaded")
            ready = await wait_for_key(sock, "READY")
            # Logged just before the first READY=1 is sent: there already, or READY came early.
            await daemon.wait_for("daemon.ready", timeout=2)
            assert "trouble: hung" in ready["STATUS"]


async def test_watchdog_pings(tmp_path: Path) -> None:
    """With WATCHDOG_USEC set, WATCHDOG=1 arrives at half that interval."""
    config = tmp_path / "c.toml"
    config.write_text(fullserver_toml("one"))
    with notify_socket(False) as (address, sock):
        env = {"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "200000"}
        async with running_daemon(config, env=env, wait_ready=False):
            pings = 0
            with anyio.fail_after(20):
                while pings < 3:
                    pings += "WATCHDOG" in await next_message(sock)


async def test_socket_activation(tmp_path: Path) -> None:
    """Given a listening socket as fd 3 with LISTEN_FDS/LISTEN_PID, the daemon serves on it, and leaves it."""
    config = tmp_path / "c.toml"
    config.write_text(fullserver_toml("one"))
    directory = Path(tempfile.mkdtemp(prefix="mcpd-act-", dir="/tmp"))
    path = directory / "mcpd.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(16)
    fd = listener.fileno()
    # What systemd does: the socket becomes fd 3 and LISTEN_PID names the daemon itself.
    argv = [sys.executable, "-m", "mcpd", "serve", "--config", str(config), "--socket", str(path)]
    launcher = (
        "import os, sys\n"
        f"os.dup2({fd}, 3)\n"
        f"os.close({fd})\n"
        "os.environ.update(LISTEN_FDS='1', LISTEN_PID=str(os.getpid()))\n"
        f"os.execv(sys.executable, {argv!r})\n"
    )
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    process = await anyio.open_process(
        [sys.executable, "-c", launcher],
        pass_fds=[fd],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    listener.close()  # the daemon holds it now, as after a systemd hand-over
    try:
        with anyio.fail_after(30):
            while True:
                try:
                    with Client(path) as client:
                        if [s.state for s in client.status()] == ["running"]:
                            break
                except Exception:
                    pass
                await anyio.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(20):
            assert await process.wait() == 0
        assert path.exists()  # systemd's socket file is not the daemon's to remove
    finally:
        if process.returncode is None:
            process.kill()
        shutil.rmtree(directory, ignore_errors=True)


async def test_invalid_reload_changes_nothing(tmp_path: Path) -> None:
    """A new config with one bad entry is refused as a whole: no server stops, no pid changes."""
    config = tmp_path / "c.toml"
    config.write_text(fullserver_toml("keep") + fullserver_toml("other"))
    async with running_daemon(config) as daemon:
        before = daemon.pids()
        bad = '[servers.other]\ncommand = "x"\nconnect_timeout = "soon"\n'
        config.write_text(fullserver_toml("keep") + bad)
        daemon.signal(signal.SIGHUP)
        rejected = await daemon.wait_for("config.reload_rejected")
        with Client(daemon.socket) as client:
            after = {s.name: s.pid for s in client.status()}
    assert "nothing changed" in rejected["error"] and "connect_timeout" in rejected["error"]
    assert after == before


# -- generated files ----------------------------------------------------------------------------


def test_repository_files_are_the_generated_ones() -> None:
    """systemd/ and launchd/ hold exactly what `mcpd service install` writes, with generic paths."""
    generic = service.GENERIC
    assert (REPO / "systemd" / "mcpd.service").read_text() == service.systemd_service(generic["systemd"])
    assert (REPO / "systemd" / "mcpd.socket").read_text() == service.systemd_socket(generic["systemd"])
    assert (REPO / "launchd" / "io.mcpd.daemon.plist").read_text() == service.launchd_plist(
        generic["launchd"]
    )


def test_plist_is_valid_and_complete() -> None:
    """The LaunchAgent parses, runs at load, restarts on a crash, logs to files, knows the socket."""
    document = plistlib.loads((REPO / "launchd" / "io.mcpd.daemon.plist").read_bytes())
    assert document["RunAtLoad"] is True and document["KeepAlive"] == {"SuccessfulExit": False}
    assert document["ProgramArguments"][1] == "serve"
    assert document["StandardErrorPath"].endswith(".log") and document["StandardOutPath"].endswith(".log")
    assert document["EnvironmentVariables"]["MCPD_SOCKET"].endswith("mcpd.sock")


def test_unit_contents_and_systemd_analyze(tmp_path: Path) -> None:
    """The units say what the daemon does (notify, reload, restart on a failure that a restart can
    heal) and pass systemd-analyze."""
    unit = service.systemd_service(service.GENERIC["systemd"])
    for line in (
        "Type=notify",
        "Restart=on-failure",
        "RestartPreventExitStatus=2 4",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "WatchdogSec=",
    ):
        assert line in unit
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    paths = service.Paths(
        executable=(str(Path(sys.executable).with_name("mcpd")),),
        config=None,
        socket=str(tmp_path / "mcpd.sock"),
        log_dir="",
    )
    (tmp_path / "mcpd.service").write_text(service.systemd_service(paths))
    (tmp_path / "mcpd.socket").write_text(service.systemd_socket(paths))
    result = subprocess.run(
        [analyze, "verify", str(tmp_path / "mcpd.service"), str(tmp_path / "mcpd.socket")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    ours = [line for line in result.stderr.splitlines() if str(tmp_path) in line]
    assert result.returncode == 0 and not ours, result.stderr


def test_service_install_dry_run_uses_this_installation() -> None:
    """`mcpd service install --dry-run` prints the unit with this environment's mcpd and writes nothing."""
    result = subprocess.run(
        [sys.executable, "-m", "mcpd", "service", "install", "--dry-run", "--socket", "/tmp/x/mcpd.sock"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    mcpd_path = Path(sys.executable).with_name("mcpd")
    expected = str(mcpd_path) if mcpd_path.exists() else f"{sys.executable} -m mcpd"
    if sys.platform == "darwin":
        assert expected.split(" ")[0] in result.stdout
    else:
        assert f"ExecStart={expected} serve --socket /tmp/x/mcpd.sock" in result.stdout


def dry_run_in(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`mcpd service install --dry-run ARGS` run from ``cwd``, with ``env`` added."""
    return subprocess.run(
        [sys.executable, "-m", "mcpd", "service", "install", "--dry-run", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def directives(result: subprocess.CompletedProcess[str], name: str) -> list[str]:
    return [
        line.removeprefix(f"{name}=") for line in result.stdout.splitlines() if line.startswith(f"{name}=")
    ]


@pytest.mark.skipif(sys.platform == "darwin", reason="the systemd path")
def test_unit_paths_are_those_serve_would_use_here(tmp_path: Path) -> None:
    """The unit runs in another directory and no shell expands its words: a relative --config and
    --socket become absolute (`ListenStream=rel.sock` is no address systemd takes), `~` in
    `--config=~/x.toml` is the home directory, `$MCPD_SOCKET` is honoured as serve honours it, and a
    config that does not exist is refused (exit 2) rather than written into a unit that cannot start."""
    (tmp_path / "rel.toml").write_text("")
    result = dry_run_in(tmp_path, "--socket", "rel.sock", "--config", "rel.toml", "--socket-activation")
    (exec_start,) = directives(result, "ExecStart")
    assert f"--config {tmp_path / 'rel.toml'} --socket {tmp_path / 'rel.sock'} " in exec_start
    assert directives(result, "ListenStream") == [str(tmp_path / "rel.sock")]
    from_env = dry_run_in(tmp_path, env={"MCPD_SOCKET": str(tmp_path / "custom.sock")})
    assert f"--socket {tmp_path / 'custom.sock'} " in directives(from_env, "ExecStart")[0]
    (tmp_path / "home.toml").write_text("")
    home = dry_run_in(tmp_path, "--config=~/home.toml", env={"HOME": str(tmp_path)})
    assert f"--config {tmp_path / 'home.toml'} " in directives(home, "ExecStart")[0]
    missing = dry_run_in(tmp_path, "--config", "missing.toml")
    assert missing.returncode == 2 and str(tmp_path / "missing.toml") in missing.stderr
    assert missing.stdout == ""


def test_every_socket_option_says_its_default_comes_from_the_environment() -> None:
    """Every `--socket` takes its default from `$MCPD_SOCKET` (`service` too: the test above), so
    each option's help says so; `mcpd service --help` named only the runtime dir."""
    helps = {
        command.path: option.help
        for command in tree(build_parser()).walk()
        for option in command.options
        if "--socket" in option.flags
    }
    assert {"mcpd serve", "mcpd service", "mcpd bridge", "mcpd status"} <= helps.keys()
    assert {path for path, text in helps.items() if "$MCPD_SOCKET" not in text} == set()


@pytest.mark.skipif(sys.platform == "darwin", reason="the systemd path")
def test_a_socket_from_the_environment_cannot_add_a_line_either(tmp_path: Path) -> None:
    """The default socket comes from `$MCPD_SOCKET`, which no option check sees: a newline in it
    is refused (exit 2) as one in `--socket` is, and no `ExecStartPre=` line is written."""
    injected = f"{tmp_path}/x.sock\nExecStartPre=/bin/touch {tmp_path}/owned"
    result = dry_run_in(tmp_path, "--socket-activation", env={"MCPD_SOCKET": injected})
    assert result.returncode == 2 and "control character" in result.stderr, result
    assert "ExecStartPre" not in result.stdout and result.stdout == ""


@pytest.mark.skipif(sys.platform == "darwin", reason="the systemd path")
def test_install_without_socket_activation_removes_an_earlier_socket_unit(tmp_path: Path) -> None:
    """An mcpd.socket from an install with --socket-activation would go on starting a daemon on its
    own socket: installing without it disables and removes that unit, and says so."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "systemctl.log"
    stub = bin_dir / "systemctl"
    stub.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexit 0\n')
    stub.chmod(0o755)
    units = tmp_path / "systemd" / "user"
    units.mkdir(parents=True)
    (units / "mcpd.socket").write_text("[Socket]\nListenStream=/tmp/old.sock\n")
    env = {"XDG_CONFIG_HOME": str(tmp_path), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    planned = dry_run_in(tmp_path, env=env)
    assert f"# {units / 'mcpd.socket'} would be disabled and removed" in planned.stdout
    assert (units / "mcpd.socket").exists() and not log.exists()
    result = subprocess.run(
        [sys.executable, "-m", "mcpd", "service", "install"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, **env},
    )
    assert result.returncode == 0, result.stderr
    assert f"removed {units / 'mcpd.socket'}" in result.stdout
    assert not (units / "mcpd.socket").exists() and (units / "mcpd.service").exists()
    assert log.read_text().splitlines() == [
        "--user disable --now mcpd.socket",
        "--user daemon-reload",
        "--user enable --now mcpd.service",
    ]


# -- uninstall ----------------------------------------------------------------------------------


def uninstall_with(
    tmp_path: Path, systemctl_status: int
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """`mcpd service uninstall` with XDG_CONFIG_HOME in tmp_path and a `systemctl` on PATH that
    logs its arguments and exits with ``systemctl_status`` (no user systemd runs in a test)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "systemctl.log"
    stub = bin_dir / "systemctl"
    stub.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexit {systemctl_status}\n')
    stub.chmod(0o755)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = subprocess.run(
        [sys.executable, "-m", "mcpd", "service", "uninstall"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env=env,
    )
    return result, log.read_text().splitlines() if log.exists() else []


@pytest.mark.skipif(sys.platform == "darwin", reason="the systemd path")
def test_uninstall_with_nothing_installed_removes_nothing(tmp_path: Path) -> None:
    """Nothing installed: it says so, runs no systemctl, prints no `removed` line, exit 0."""
    result, calls = uninstall_with(tmp_path, 0)
    assert (result.returncode, result.stdout.strip(), calls) == (0, "not installed: nothing to remove", [])


@pytest.mark.skipif(sys.platform == "darwin", reason="the systemd path")
def test_uninstall_says_only_what_it_removed_and_fails_with_systemctl(tmp_path: Path) -> None:
    """Only mcpd.service installed: only it is disabled and reported removed (never mcpd.socket);
    a failing systemctl makes the exit status 1; a working one 0."""
    units = tmp_path / "systemd" / "user"
    for status in (1, 0):
        units.mkdir(parents=True, exist_ok=True)
        (units / "mcpd.service").write_text("[Service]\n")
        result, calls = uninstall_with(tmp_path, status)
        assert result.returncode == status, result.stderr
        removed = [line for line in result.stdout.splitlines() if line.startswith("removed ")]
        assert removed == [f"removed {units / 'mcpd.service'}"]
        assert calls[0] == "--user disable --now mcpd.service"
        assert not (units / "mcpd.service").exists()
        (tmp_path / "systemctl.log").unlink()


@pytest.mark.skipif(sys.platform == "darwin", reason="the systemd path")
def test_a_config_path_is_one_argument_of_the_unit_and_cannot_add_a_line(tmp_path: Path) -> None:
    """A space, a quote, a ``%`` or a ``$`` in the config path: quoted and escaped as systemd reads an
    ``ExecStart=`` line, so the daemon gets the path whole; a newline would start another
    directive: refused (exit 2)."""
    config = tmp_path / 'my "odd" config %h $HOME.toml'
    config.write_text("")  # a config that does not exist is refused

    def dry_run(path: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "mcpd", "service", "install", "--dry-run", "--config", path]
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)

    result = dry_run(str(config))
    (exec_start,) = [line for line in result.stdout.splitlines() if line.startswith("ExecStart=")]
    words = shlex.split(exec_start.removeprefix("ExecStart="))
    assert words[words.index("--config") + 1] == str(config).replace("%", "%%").replace("$", "$$")
    injected = dry_run(f"{tmp_path}/c.toml\nExecStartPre=/bin/touch {tmp_path}/owned")
    assert injected.returncode == 2 and "control character" in injected.stderr
    assert "ExecStartPre" not in injected.stdout
