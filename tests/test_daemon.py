"""`mcpd serve` as a real process: readiness, SIGTERM, SIGKILL, SIGHUP reload, bad config."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
import pytest

from mcpd.client.aio import connect
from mcpd.testing import fixture_toml, fullserver_command, fullserver_toml, open_quiet, process_gone, run_cli
from mcpd.testing.daemon import running_daemon

pytestmark = pytest.mark.anyio


async def wait_all_gone(pids: list[int], timeout: float) -> None:
    with anyio.fail_after(timeout):
        while not all(process_gone(pid) for pid in pids):
            await anyio.sleep(0.05)


async def test_sigterm_stops_every_child(tmp_path: Path) -> None:
    """SIGTERM: all children stopped in parallel and reaped, exit status 0, in bounded time."""
    path = tmp_path / "config.toml"
    path.write_text(
        "".join(fullserver_toml(f"s{i}") for i in range(2)) + fixture_toml("stubborn", "--ignore-sigterm")
    )
    async with running_daemon(path, wait_ready=False) as daemon:
        ready = await daemon.wait_for("daemon.ready")
        assert ready["running"] == 3
        pids = list(daemon.pids().values())
        daemon.signal(signal.SIGTERM)
        assert await daemon.wait_exit(15) == 0
        # Reaped by the daemon itself: gone, not zombies waiting for it.
        assert all(not os.path.exists(f"/proc/{pid}") for pid in pids)


async def test_sigkill_of_daemon_leaves_no_child(tmp_path: Path) -> None:
    """kill -9 of the daemon: its children die within a few seconds, even one that ignores stdin."""
    path = tmp_path / "config.toml"
    # `hung` never reads stdin, so only the kernel's parent-death signal can end it.
    hung = fixture_toml("hung", "--hang-initialize", connect_timeout=1.0, stop_grace=10)
    path.write_text(fullserver_toml("a") + hung)
    async with running_daemon(path, wait_ready=False) as daemon:
        degraded = await daemon.wait_for("server.state", server="hung", new="degraded")
        await daemon.wait_for("daemon.ready")
        pids = [*daemon.pids().values(), degraded["pid"]]
        assert len(pids) == 2 and not process_gone(degraded["pid"])
        daemon.process.kill()
        await daemon.process.wait()
        await wait_all_gone(pids, timeout=5)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reaping reads /proc (Linux only)")
async def test_next_daemon_reaps_what_a_killed_one_left(tmp_path: Path) -> None:
    """kill -9 of the daemon: a grandchild that never reads stdin outlives it (the parent-death
    signal reaches the server only), and the next daemon at the same socket path SIGKILLs it before
    it starts its servers, saying so (`supervisor.reaped`); a process of ours in another session is
    left alone, even one whose pid the ledger names as a session of the killed daemon's."""
    path = tmp_path / "config.toml"
    leftover = tmp_path / "sleep.pid"
    script = f'sleep 300 & echo $! > {leftover}; exec "$@"'
    argv = ["-c", script, "sh", *fullserver_command()]
    path.write_text(f'[servers.wrapped]\ncommand = "sh"\nargs = {json.dumps(argv)}\n')
    # One socket path for both daemons, short enough for a Unix socket.
    socket = Path(tempfile.mkdtemp(prefix="mcpd-", dir="/tmp")) / "mcpd.sock"
    bystander = await open_quiet(["sleep", "300"], start_new_session=True)
    # pidfds: the cleanup can never hit a process that took a reaped one's number.
    started = [os.pidfd_open(bystander.pid)]
    try:
        async with running_daemon(path, socket=socket) as first:
            orphan = int(leftover.read_text())  # written before the server, which is running now
            started.append(os.pidfd_open(orphan))
            first.process.kill()
            await first.process.wait()
            await wait_all_gone([first.pids()["wrapped"]], timeout=5)
            assert not process_gone(orphan)
        # An entry whose session id now names another process (the number given again, here to a
        # process of ours that leads a session): left alone, though it started before the daemon.
        ledger = socket.with_name(socket.name + ".groups")
        record = json.loads(ledger.read_text())
        record["groups"].append([bystander.pid, 0])
        ledger.write_text(json.dumps(record))
        async with running_daemon(path, socket=socket) as second:
            reaped = await second.wait_for("supervisor.reaped")
            assert (reaped["groups"], reaped["processes"]) == (2, 1)
            await wait_all_gone([orphan], timeout=5)
            assert not process_gone(bystander.pid)
            # The new daemon's own server runs, its wrapper's sleep too (in a session of its own).
            current = int(leftover.read_text())
            started.append(os.pidfd_open(current))
            assert current != orphan and not process_gone(current)
        # Stopped as usual, its children leave nothing for the next daemon to reap.
        assert not ledger.exists()
    finally:
        for pidfd in started:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.close(pidfd)
        with anyio.move_on_after(5):
            await bystander.wait()
        shutil.rmtree(socket.parent, ignore_errors=True)


BROWSER_LAUNCHER = (
    "import subprocess, sys\n"
    "helper = subprocess.Popen(['sleep', '300'], start_new_session=True, stdin=subprocess.DEVNULL)\n"
    "open(sys.argv[1], 'w').write(f'{helper.pid}\\n')\n"
    "sys.exit(subprocess.call(sys.argv[2:]))\n"
)
"""A launcher as ``npx`` is one (the server its child, not exec'd) whose server starts a helper in a
session of its own, as Puppeteer and Playwright start their browser (Node's ``detached``); the
helper's pid goes to the file named first, the server's argv follows."""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reaping reads /proc (Linux only)")
async def test_next_daemon_reaps_a_browser_the_killed_ones_server_detached(tmp_path: Path) -> None:
    """kill -9 of the daemon: a process its server started in a session of its own (a browser that
    Puppeteer or Playwright launched) outlives it, and the next daemon at the same socket path
    SIGKILLs it as it does what was left in the server's session. Before, only the sessions the
    ledger named were looked into: every crash of the daemon left a browser running."""
    path = tmp_path / "config.toml"
    helper_file = tmp_path / "helper.pid"
    argv = ["-c", BROWSER_LAUNCHER, str(helper_file), *fullserver_command()]
    path.write_text(f"[servers.browser]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps(argv)}\n")
    socket = Path(tempfile.mkdtemp(prefix="mcpd-", dir="/tmp")) / "mcpd.sock"
    pidfds: list[int] = []
    try:
        async with running_daemon(path, socket=socket) as first:
            helper = int(helper_file.read_text())  # written before the server, which is running now
            pidfds.append(os.pidfd_open(helper))
            assert os.getsid(helper) == helper != first.pids()["browser"]
            first.process.kill()
            await first.process.wait()
            await wait_all_gone([first.pids()["browser"]], timeout=5)
            assert not process_gone(helper)
        async with running_daemon(path, socket=socket) as second:
            reaped = await second.wait_for("supervisor.reaped")
            assert reaped["processes"] == 1
            await wait_all_gone([helper], timeout=5)
            pidfds.append(os.pidfd_open(int(helper_file.read_text())))  # the new server's
    finally:
        for pidfd in pidfds:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.close(pidfd)
        shutil.rmtree(socket.parent, ignore_errors=True)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reaping reads /proc (Linux only)")
async def test_a_session_of_a_reused_number_is_not_reaped(tmp_path: Path) -> None:
    """A ledger's session id whose leader is gone may have been given again to a process that led a
    session and exited in turn (a double fork: how a program puts itself in the background). What
    is left in that session is this user's and started between the ledger's leader and the new
    daemon, as a killed daemon's grandchild would be, yet it is not the daemon's: left alone."""
    path = tmp_path / "config.toml"
    path.write_text(fixture_toml("echo"))
    leftover = tmp_path / "sleep.pid"
    leader = await open_quiet(["sh", "-c", f"sleep 300 & echo $! > {leftover}"], start_new_session=True)
    await leader.wait()
    other = int(leftover.read_text())
    pidfd = os.pidfd_open(other)
    socket = Path(tempfile.mkdtemp(prefix="mcpd-", dir="/tmp")) / "mcpd.sock"
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        # The ledger of a daemon that is gone (the exited leader's number, a start no process had),
        # naming the session by the number its own child had once, when it started at boot.
        record = {"boot": boot, "daemon": leader.pid, "daemon_start": 1, "mark": "0" * 32}
        record["groups"] = [[leader.pid, 0]]
        socket.with_name(socket.name + ".groups").write_text(json.dumps(record))
        async with running_daemon(path, socket=socket) as daemon:
            # Read and taken for a dead daemon's: the session was looked into.
            reaped = await daemon.wait_for("supervisor.reaped")
            assert (reaped["groups"], reaped["processes"]) == (1, 0)
        assert not process_gone(other)
    finally:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        os.close(pidfd)
        shutil.rmtree(socket.parent, ignore_errors=True)


def job_server(name: str, jobs: Path, before: str = "", after: str = "") -> str:
    """A ``[servers.NAME]`` section: a shell with job control (``set -m``) that leaves a ``sleep``
    in a process group of its own (its pid in ``jobs/NAME``), then execs the server; ``before``
    runs ahead of the job (``trap '' TERM``: a job deaf to SIGTERM), ``after`` ahead of the exec."""
    script = f'set -m; {before} sleep 300 & echo $! > {jobs / name}; {after} exec "$@"'
    args = json.dumps(["-c", script, "sh", *fullserver_command()])
    return f'[servers.{name}]\ncommand = "bash"\nargs = {args}\nstop_grace = 0.3\n'


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="sessions are looked up in /proc (Linux only)"
)
async def test_a_job_in_a_group_of_its_own_ends_with_its_server_however_it_stops(tmp_path: Path) -> None:
    """A server's background job in a process group of its own (a shell's job control) is ended
    whichever way the server stops: stopped while it starts, removed by a reload, and at the
    daemon's SIGTERM, one job deaf to SIGTERM. Before, each stop signalled the group only, and the
    job ran on (stopped without error, its session dropped from the ledger)."""
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    path = tmp_path / "config.toml"
    kept = job_server("keep", jobs) + job_server("deaf", jobs, before="trap '' TERM;")
    path.write_text(kept + job_server("drop", jobs) + job_server("slow", jobs, after="sleep 3;"))
    pidfds: list[int] = []

    async def job(name: str) -> int:
        with anyio.fail_after(20):
            while not (jobs / name).is_file() or not (jobs / name).read_text().endswith("\n"):
                await anyio.sleep(0.02)
        pid = int((jobs / name).read_text())
        pidfds.append(os.pidfd_open(pid))
        return pid

    try:
        async with running_daemon(path, wait_ready=False) as daemon:
            slow = await job("slow")
            async with connect(daemon.socket) as client:
                await client.stop("slow")
                await wait_all_gone([slow], timeout=5)
                await daemon.wait_for("daemon.ready")
                drop, keep, deaf = [await job(name) for name in ("drop", "keep", "deaf")]
                path.write_text(kept)
                await client.reload()
                await wait_all_gone([drop], timeout=5)
            daemon.signal(signal.SIGTERM)
            assert await daemon.wait_exit(15) == 0
            assert process_gone(keep) and process_gone(deaf)
    finally:
        for pidfd in pidfds:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.close(pidfd)


async def test_sighup_reloads_the_diff(tmp_path: Path) -> None:
    """SIGHUP re-reads the file: added starts, removed stops, unchanged keeps its process, changed
    restarts (and counts as a restart); a broken file changes nothing."""
    path = tmp_path / "config.toml"
    path.write_text(fullserver_toml("keep") + fullserver_toml("drop"))
    async with running_daemon(path, wait_ready=False) as daemon:
        await daemon.wait_for("daemon.ready")
        before = daemon.pids()
        path.write_text(fullserver_toml("keep") + fullserver_toml("new"))
        daemon.signal(signal.SIGHUP)
        reloaded = await daemon.wait_for("config.reloaded")
        assert (reloaded["added"], reloaded["removed"], reloaded["changed"]) == (["new"], ["drop"], [])
        await daemon.wait_for("server.state", server="new", new="running")
        assert daemon.pids()["keep"] == before["keep"]
        await wait_all_gone([before["drop"]], timeout=5)
        # A broken file on reload is rejected; everything keeps running.
        path.write_text("[servers.keep\n")
        daemon.signal(signal.SIGHUP)
        rejected = await daemon.wait_for("config.reload_rejected")
        assert "not valid TOML" in rejected["error"]
        assert not process_gone(before["keep"])
        # A changed server is restarted, and counted as such.
        path.write_text(fullserver_toml("keep", description="now described") + fullserver_toml("new"))
        mark = len(daemon.events)
        daemon.signal(signal.SIGHUP)
        await daemon.wait_for("config.reloaded", after=mark)
        async with connect(daemon.socket) as client:
            kept = next(s for s in await client.status() if s.name == "keep")
        assert kept.restarts == 1
        daemon.signal(signal.SIGTERM)
        assert await daemon.wait_exit(15) == 0


async def wait_mapped(pid: int, library: str, timeout: float = 30.0) -> None:
    """Wait until process ``pid`` has ``library`` (a shared object's file name) mapped."""
    with anyio.fail_after(timeout):
        while library not in Path(f"/proc/{pid}/maps").read_text():
            await anyio.sleep(0.001)  # the load is all there is to watch for


def ignores(pid: int, signum: signal.Signals) -> bool:
    """Process ``pid`` ignores ``signum`` (its ``SigIgn`` mask, from /proc)."""
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("SigIgn:"))
    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)


async def test_a_sighup_while_the_daemon_loads_leaves_it_starting(tmp_path: Path) -> None:
    """A SIGHUP (a reload asked for) while `mcpd serve` still loads its modules, before it has read
    its config (~0.5 s, longer on a busy machine): the daemon starts on and serves, and its servers
    do not inherit SIGHUP ignored (before: the default action killed it, exit -SIGHUP)."""
    path = tmp_path / "config.toml"
    path.write_text(fullserver_toml("s"))
    async with running_daemon(path, wait_ready=False) as daemon:
        # The usage store's sqlite3, which only the daemon's own modules load: it is loading them.
        await wait_mapped(daemon.process.pid, "_sqlite3")
        daemon.signal(signal.SIGHUP)
        ready = await daemon.wait_for("daemon.ready")
        assert ready["running"] == 1 and daemon.process.returncode is None
        assert not ignores(daemon.pids()["s"], signal.SIGHUP)


async def test_status_names_the_entries_skipped_at_start(tmp_path: Path) -> None:
    """A bad entry is skipped at start and the others run; `mcpd status` said nothing of it (the
    server was just missing from the table), so the user had to find it in the daemon's log."""
    path = tmp_path / "config.toml"
    path.write_text(fixture_toml("good") + '[servers.typo]\ncomand = "x"\n')
    async with running_daemon(path) as daemon:
        socket = ["--socket", str(daemon.socket)]
        text = run_cli("status", *socket, env={"NO_COLOR": "1"})
        expected = f"skipped at start: {path}: server 'typo', field `comand`: unknown field `comand`"
        assert (text.returncode, text.stdout.splitlines()[-1]) == (0, expected)
        as_json = json.loads(run_cli("status", "--json", *socket).stdout)
        assert as_json["skipped"] == [expected.removeprefix("skipped at start: ")]
        # A good reload puts a whole config in force: nothing skipped any more.
        path.write_text(fixture_toml("good"))
        assert run_cli("reload", *socket).returncode == 0
        assert json.loads(run_cli("status", "--json", *socket).stdout)["skipped"] == []


async def test_a_reload_never_swaps_the_users_servers_for_the_demo(tmp_path: Path) -> None:
    """The default file appearing replaces the demo; the file going away (moved aside to edit it)
    made `mcpd reload` and SIGHUP stop every server it configured and start the demo instead."""
    path = tmp_path / "mcpd" / "config.toml"
    async with running_daemon(None, env={"XDG_CONFIG_HOME": str(tmp_path)}) as daemon:
        path.parent.mkdir()
        path.write_text(fixture_toml("keep"))
        added = run_cli("reload", "--json", "--socket", str(daemon.socket))
        assert json.loads(added.stdout)["plan"]["removed"] == ["demo"]
        pid = (await daemon.wait_for("server.state", server="keep", new="running"))["pid"]
        path.rename(path.with_suffix(".bak"))
        refused = run_cli("reload", "--socket", str(daemon.socket))
        assert refused.returncode == 2 and f"{path} is not there any more" in refused.stderr
        daemon.signal(signal.SIGHUP)
        await daemon.wait_for("config.reload_rejected")
        async with connect(daemon.socket) as client:
            assert [(s.name, s.pid) for s in await client.status()] == [("keep", pid)]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "[daemon]\nmax_frame_bytes = 5\n",
            "the [daemon] table, field `max_frame_bytes`: `max_frame_bytes` must be",
        ),
        ("[servers.keep\n", "not valid TOML"),
    ],
)
async def test_mcpd_reload_of_a_file_it_cannot_use_says_reload_refused(
    tmp_path: Path, text: str, said: str
) -> None:
    """Every refused `mcpd reload` starts "reload refused, nothing changed": a bad [daemon] table or a
    file that is not TOML said only "<file>: [daemon], field ..." as if no daemon were running. The
    daemon's log says it too (`config.reload_rejected`, as for SIGHUP): a reload refused through the
    socket left no trace in the journal."""
    path = tmp_path / "config.toml"
    path.write_text(fullserver_toml("keep"))
    async with running_daemon(path) as daemon:
        pid = daemon.pids()["keep"]
        path.write_text(text + fullserver_toml("keep"))
        refused = run_cli("reload", "--socket", str(daemon.socket))
        assert refused.returncode == 2
        assert refused.stderr.startswith(f"mcpd: reload refused, nothing changed: {path}: ")
        assert said in refused.stderr
        assert said in (await daemon.wait_for("config.reload_rejected", timeout=10))["error"]
        assert daemon.pids()["keep"] == pid


async def test_a_reload_says_which_daemon_settings_wait_for_a_restart(tmp_path: Path) -> None:
    """[daemon] settings are read at start: a reload that changes them applies the servers and says
    which settings wait for a restart (in its result, the CLI's output and the log); status keeps
    answering under the limits in force."""
    path = tmp_path / "config.toml"
    # What is checked is the reload's plan, not the servers' processes: disabled, they start none.
    keep, new = fixture_toml("keep", enabled=False), fixture_toml("new", enabled=False)
    path.write_text("[daemon]\nmax_in_flight = 64\n" + keep)
    async with running_daemon(path) as daemon:
        path.write_text("[daemon]\nmax_in_flight = 8\nusage = false\n" + keep + new)
        env = {"MCPD_SOCKET": str(daemon.socket)}
        result = run_cli("reload", "--json", env=env)
        assert result.returncode == 0, result.stderr
        document = json.loads(result.stdout)
        assert document["plan"]["added"] == ["new"]
        assert document["restart_needed"] == ["max_in_flight", "usage"]
        said = run_cli("reload", env=env)
        assert "max_in_flight, usage: read at start only" in said.stdout
        await daemon.wait_for("config.restart_needed", settings=["max_in_flight", "usage"])
        path.write_text("[daemon]\nmax_in_flight = 64\n" + keep)
        assert json.loads(run_cli("reload", "--json", env=env).stdout)["restart_needed"] == []


async def test_invalid_entry_is_reported_and_others_run(tmp_path: Path) -> None:
    """One bad entry is logged with file, server and field; the valid one runs."""
    path = tmp_path / "config.toml"
    path.write_text(fullserver_toml("good") + '[servers.bad]\ncommand = "x"\nconnect_timeout = "soon"\n')
    async with running_daemon(path, wait_ready=False) as daemon:
        issue = await daemon.wait_for("config.invalid_server")
        assert (issue["file"], issue["server"], issue["field"]) == (str(path), "bad", "connect_timeout")
        ready = await daemon.wait_for("daemon.ready")
        assert ready["running"] == 1


async def test_unreadable_config_exits_2_without_traceback(tmp_path: Path) -> None:
    """A config file that cannot be parsed stops start-up with one clear line and status 2."""
    path = tmp_path / "config.toml"
    path.write_text("this is = = not toml")
    result = subprocess.run(
        [sys.executable, "-m", "mcpd", "serve", "--config", str(path), "--log-format", "json"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    event = json.loads(result.stderr.strip().splitlines()[-1])
    assert event["event"] == "config.invalid" and str(path) in event["error"]


async def test_embedded_default_runs_the_demo(tmp_path: Path) -> None:
    """With no config file anywhere, `mcpd serve` runs the demo server."""
    async with running_daemon(None, env={"XDG_CONFIG_HOME": str(tmp_path)}, wait_ready=False) as daemon:
        starting = await daemon.wait_for("daemon.starting")
        assert starting["config"] == "<embedded default>"
        ready = await daemon.wait_for("daemon.ready")
        assert ready["running"] == 1
        daemon.signal(signal.SIGINT)
        assert await daemon.wait_exit(15) == 0


SPAWN_WATCH = """
import json, sys
from mcpd.cli import main
out = sys.argv[1]
def watch(event, args):
    # The first server's spawn: what the daemon had imported by then.
    if event == "subprocess.Popen" and "mcpd.testing.fullserver" in args[1] and not watch.seen:
        watch.seen = True
        with open(out, "w") as file:
            json.dump(sorted(sys.modules), file)
watch.seen = False
sys.addaudithook(watch)
sys.argv = ["mcpd", *sys.argv[5:]]  # past the out file and `python -m mcpd`
main()
"""


async def test_the_servers_are_spawned_before_the_rest_of_the_daemon_is_imported(tmp_path: Path) -> None:
    """A running `mcpd serve` spawns its servers before it imports what serves them (the methods,
    the socket server, the catalogue, the usage store, the trust gate), as the import set of
    ``daemon.app`` alone (the test below) cannot show: an import at run time before the spawn
    would pass that one. Nor does it build the parsers of every other command (``cli.app``) first:
    it parses its own options (``cli.serve``)."""
    config = tmp_path / "config.toml"
    config.write_text(
        f"[daemon]\nusage_db = {json.dumps(str(tmp_path / 'usage.db'))}\n" + fullserver_toml("a")
    )
    launcher, seen = tmp_path / "launcher.py", tmp_path / "modules.json"
    launcher.write_text(SPAWN_WATCH)
    wrapper = [sys.executable, str(launcher), str(seen)]
    async with running_daemon(config, wrapper=wrapper):
        pass
    later = [
        "mcpd.cli.app",
        "mcpd.daemon.methods",
        "mcpd.ipc.server",
        "mcpd.registry.catalog",
        "mcpd.store.db",
        "mcpd.trust.gate",
    ]
    loaded = set(json.loads(seen.read_text()))
    assert [name for name in later if name in loaded] == []


LEDGER_WATCH = """
import json, sys
from pathlib import Path
from mcpd.cli import main
out, ledger = sys.argv[1], Path(sys.argv[2])
def watch(event, args):
    # The rest of the daemon imported, once its servers are spawned: what the ledger held by then.
    if event == "import" and args[0] == "mcpd.daemon.serving" and not watch.seen:
        watch.seen = True
        with open(out, "w") as file:
            json.dump(json.loads(ledger.read_text())["groups"] if ledger.exists() else [], file)
watch.seen = False
sys.addaudithook(watch)
sys.argv = ["mcpd", *sys.argv[6:]]  # past the out file, the ledger and `python -m mcpd`
main()
"""


async def test_the_ledger_names_the_first_children_before_the_rest_of_the_daemon_is_imported(
    tmp_path: Path,
) -> None:
    """The servers spawned first, at start-up, are in the ledger before the daemon goes on to import
    and open the rest of itself (``daemon.serving``, tens of milliseconds of CPU on the event loop):
    a kill -9 meanwhile must not leave what they started (a wrapper's background job) unknown to the
    next daemon. Before, the spawn's pipes were connected, and the ledger written, only after that
    import: the file did not exist yet when it began."""
    config = tmp_path / "config.toml"
    config.write_text(
        f"[daemon]\nusage_db = {json.dumps(str(tmp_path / 'usage.db'))}\n" + fullserver_toml("a")
    )
    socket = Path(tempfile.mkdtemp(prefix="mcpd-", dir="/tmp")) / "mcpd.sock"
    launcher, seen = tmp_path / "launcher.py", tmp_path / "ledger.json"
    launcher.write_text(LEDGER_WATCH)
    wrapper = [sys.executable, str(launcher), str(seen), str(socket) + ".groups"]
    try:
        async with running_daemon(config, socket=socket, wrapper=wrapper), connect(socket) as client:
            (status,) = await client.status()
        assert status.restarts == 0 and status.pid is not None
        assert [sid for sid, _start in json.loads(seen.read_text())] == [status.pid]
    finally:
        shutil.rmtree(socket.parent, ignore_errors=True)


def test_the_first_spawn_waits_on_no_more_than_it_needs(tmp_path: Path) -> None:
    """What `mcpd serve` imports before it spawns its children (the CLI, ``daemon.app``, and with
    ``[daemon] http`` set the address bound and the token read) holds none of what only serves
    them later: the methods, the socket server, the catalogue, discovery, the usage store, the
    trust gate, starlette and uvicorn are imported (``daemon.serving``) while the children boot."""
    later = [
        "mcpd.daemon.serving",
        "mcpd.daemon.methods",
        "mcpd.ipc.server",
        "mcpd.registry",
        "mcpd.discovery",
        "mcpd.store",
        "mcpd.trust",
        "mcpd.front.http.server",
        "sqlite3",
        "starlette",
        "uvicorn",
    ]
    config = tmp_path / "config.toml"
    token = json.dumps(str(tmp_path / "token"))
    config.write_text(f'[daemon]\nhttp = "127.0.0.1:0"\nhttp_token_file = {token}\n')
    script = f"""
import sys, mcpd.cli.app
from pathlib import Path
from mcpd.config.load import load_config
from mcpd.daemon import app
front = app._open_http(load_config(Path({str(config)!r})))
assert front is not None
front.listener.close()
print(*sys.modules)
"""
    loaded = set(subprocess.check_output([sys.executable, "-c", script], text=True, timeout=60).split())
    assert [name for name in later if name in loaded] == []


async def test_a_stop_signal_at_start_up_stops_the_daemon_and_its_children_at_once(tmp_path: Path) -> None:
    """SIGINT (a user's Ctrl-C) while the daemon still opens its usage store (another process holds
    it locked: SQLite waits out its 5 s busy timeout) stops it at once, and the children it spawned
    already with it. Before, the signal was acted on only once serving was set up, after the store's
    first attempt ended (``usage.retrying``), seconds later."""
    usage = tmp_path / "usage.db"
    config = tmp_path / "config.toml"
    config.write_text(f"[daemon]\nusage_db = {json.dumps(str(usage))}\n" + fullserver_toml("a"))
    holder = sqlite3.connect(usage, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        async with running_daemon(config, wait_ready=False) as daemon:
            running = await daemon.wait_for("server.state", server="a", new="running", timeout=30)
            daemon.signal(signal.SIGINT)
            assert await daemon.wait_exit(5) == 0
            assert process_gone(running["pid"])
            # Gone before the store's first attempt ended (its busy timeout), not after it.
            assert not [e for e in daemon.events if e["event"].startswith("usage.")]
    finally:
        holder.close()


async def test_a_usage_store_opened_after_a_stop_at_start_up_is_let_go_quietly(tmp_path: Path) -> None:
    """SIGINT while the daemon waits for its usage store (locked by another process), which is
    released while the daemon still stops its children (one slow to go): the store's open, done
    after the stop, ends in its thread with nothing written to stderr, the daemon's log. Before,
    the thread set the result of a future the stop had cancelled: an ``InvalidStateError``
    traceback ("Exception in thread mcpd-usage-open") amid the daemon's JSON lines."""
    usage = tmp_path / "usage.db"
    config = tmp_path / "config.toml"
    # Deaf to stdin's end and to SIGTERM: stopped by SIGKILL, after twice its grace.
    script = 'trap "" TERM; "$0" -m mcpd.testing.fullserver; exec sleep 60'
    config.write_text(
        f"[daemon]\nusage_db = {json.dumps(str(usage))}\n"
        f'[servers.slow]\ncommand = "sh"\nargs = {json.dumps(["-c", script, sys.executable])}\n'
        "stop_grace = 1.5\n"
    )
    holder = sqlite3.connect(usage, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        async with running_daemon(config, wait_ready=False) as daemon:
            await daemon.wait_for("server.state", server="slow", new="running", timeout=30)
            daemon.signal(signal.SIGINT)
            await daemon.wait_for("daemon.stopping", timeout=10)
            holder.close()
            assert await daemon.wait_exit(15) == 0
            assert daemon.stderr_text == []
    finally:
        holder.close()
