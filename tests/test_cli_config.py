"""`mcpd config check`, `mcpd import` and `mcpd check` end to end: files read here, no daemon
asked, except to show that imported servers start on `mcpd reload`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcpd.testing import fixture_toml, fullserver_command, fullserver_toml, run_cli
from mcpd.testing.daemon import running_daemon

pytestmark = pytest.mark.anyio

HOST_FILE = {
    "mcpServers": {
        "roo": {"command": "npx", "args": ["-y", "x"], "alwaysAllow": ["a"], "disabledTools": ["b"]},
        "cline": {"command": "node", "autoApprove": [], "disabled": True},
        "old": {"type": "sse", "url": "https://example.invalid/sse"},
    }
}


def mcpd(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*argv, env=env)


def test_config_check_names_each_problem_and_exits_2(tmp_path: Path) -> None:
    """A file with a bad entry: exit 2, each problem on its own line naming file, server and field;
    ignored host keys are notes; the good servers are counted."""
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(HOST_FILE))
    result = mcpd("config", "check", "--config", str(path))
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {path}: server 'old', field `type`: " + errors[0].split("`type`: ")[1]]
    assert "note:" in result.stderr and "alwaysAllow" in result.stderr
    assert "2 server(s) (roo, cline), 1 problem(s)" in result.stdout
    as_json = mcpd("config", "check", "--config", str(path), "--json")
    assert (as_json.returncode, as_json.stderr) == (2, "")
    document = json.loads(as_json.stdout)
    assert document["ok"] is False and [i["server"] for i in document["issues"]] == ["old"]


def test_config_check_of_a_good_file_and_of_an_unreadable_one(tmp_path: Path) -> None:
    """A valid file is exit 0 and says ok; a file that cannot be parsed is exit 2 in one line."""
    good = tmp_path / "good.toml"
    good.write_text('[servers.a]\ncommand = "a"\n')
    ok = mcpd("config", "check", "--config", str(good))
    assert ok.returncode == 0 and ": ok: 1 server(s) (a)" in ok.stdout and ok.stderr == ""
    broken = tmp_path / "broken.toml"
    broken.write_text("[servers.a\n")
    bad = mcpd("config", "check", "--config", str(broken))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not valid TOML" in bad.stderr


def test_import_keeps_comments_refuses_overwrites_and_says_what_it_left_out(tmp_path: Path) -> None:
    """`mcpd import` appends the host's servers after the existing text, lists what it could not
    import (exit 1), and a second import of the same names writes nothing."""
    source = tmp_path / "mcp.json"
    source.write_text(json.dumps(HOST_FILE))
    target = tmp_path / "config.toml"
    existing = '# mine\n[servers.mine]  # keep this comment\ncommand = "mine"\n'
    target.write_text(existing)
    first = mcpd("import", str(source), "--config", str(target))
    assert first.returncode == 1  # `old` (SSE) could not be imported
    assert "not imported:" in first.stderr and "'old'" in first.stderr
    assert f"appended to {target}: roo, cline" in first.stdout
    text = target.read_text()
    assert text.startswith(existing) and 'disabled_tools = ["b"]' in text and "enabled = false" in text
    again = mcpd("import", str(source), "--config", str(target))
    assert again.returncode == 1 and "already configures roo, cline; nothing written" in again.stderr
    assert target.read_text() == text
    skipped = mcpd("import", str(source), "--config", str(target), "--skip-existing", "--json")
    document = json.loads(skipped.stdout)
    assert document["existing"] == ["roo", "cline"] and document["written"] is False


def test_import_dry_run_prints_and_writes_nothing(tmp_path: Path) -> None:
    """--dry-run shows the TOML that would be appended; no file is created."""
    source = tmp_path / "mcp.json"
    source.write_text(json.dumps({"mcpServers": {"a": {"command": "a", "args": ["x y"]}}}))
    target = tmp_path / "config.toml"
    result = mcpd("import", str(source), "--config", str(target), "--dry-run")
    assert result.returncode == 0 and "[servers.a]" in result.stdout and 'args = ["x y"]' in result.stdout
    assert not target.exists()


async def test_imported_servers_start_on_reload(tmp_path: Path) -> None:
    """Import into the running daemon's config, `mcpd reload`: the imported server runs."""
    config = tmp_path / "config.toml"
    config.write_text(fullserver_toml("base"))
    command, *args = fullserver_command()
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(json.dumps({"mcpServers": {"imported": {"command": command, "args": args}}}))
    async with running_daemon(config) as daemon:
        env = {"MCPD_SOCKET": str(daemon.socket)}
        assert mcpd("import", str(source), "--config", str(config)).returncode == 0
        reloaded = mcpd("reload", env=env)
        assert reloaded.returncode == 0 and "added: imported" in reloaded.stdout
        await daemon.wait_for("server.state", server="imported", new="running", timeout=60)
        status = json.loads(mcpd("status", "--json", env=env).stdout)["servers"]
    assert {s["name"]: s["state"] for s in status} == {"base": "running", "imported": "running"}


def test_check_marks_a_server_that_never_initialises(tmp_path: Path) -> None:
    """`mcpd check`: a server that hangs in initialize is NOT CHECKED and the exit status is 1,
    while a healthy one is listed with its tools."""
    config = tmp_path / "config.toml"
    hang = fixture_toml("hang", "--hang-initialize", connect_timeout=1, stop_grace=0.1)
    config.write_text(fullserver_toml("ok") + hang)
    result = mcpd("check", "--config", str(config), "--json")
    assert result.returncode == 1, result.stderr
    checked = {s["server"]: s for s in json.loads(result.stdout)["servers"]}
    assert checked["ok"]["initialized"] is True and checked["ok"]["tools"] > 0
    assert checked["hang"]["initialized"] is False and "initialize" in checked["hang"]["error"]


@pytest.mark.parametrize("kind", ["fifo", "device", "huge"])
def test_an_env_file_that_never_ends_is_a_note_not_a_hang(tmp_path: Path, kind: str) -> None:
    """An `envFile` naming a FIFO (opening it waits for a writer), /dev/zero (never ends) or a file
    over the size cap is not read: `config check` answers at once, the server loads with a note."""
    if kind == "fifo":
        env_file = tmp_path / "fifo.env"
        os.mkfifo(env_file)
    elif kind == "device":
        env_file = Path("/dev/zero")
    else:
        env_file = tmp_path / "huge.env"
        with env_file.open("wb") as sparse:  # sparse: no disk used
            sparse.truncate(17 * 1024 * 1024)
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "true", "envFile": str(env_file)}}}))
    result = run_cli("config", "check", "--config", str(path), "--json", timeout=30)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["servers"] == ["a"]
    [note] = document["notes"]
    assert note["field"] == "envFile" and str(env_file) in note["message"]


async def test_a_broken_link_at_the_default_config_is_an_error_not_the_demo(tmp_path: Path) -> None:
    """A dangling link (or a loop) where the default config should be is the user's config being
    unreachable: `reload` is refused (exit 2) and the running servers stay, `config check` names
    the path, instead of both taking it for "no config" and swapping in the embedded demo."""
    home = {"XDG_CONFIG_HOME": str(tmp_path)}
    default = tmp_path / "mcpd" / "config.toml"
    default.parent.mkdir()
    default.write_text(fullserver_toml("mine"))
    async with running_daemon(None, env=home) as daemon:
        env = {**home, "MCPD_SOCKET": str(daemon.socket)}
        await daemon.wait_for("server.state", server="mine", new="running", timeout=60)
        default.unlink()
        default.symlink_to(tmp_path / "dotfiles" / "mcpd.toml")
        reloaded = mcpd("reload", env=env)
        assert reloaded.returncode == 2 and str(default) in reloaded.stderr, reloaded
        status = json.loads(mcpd("status", "--json", env=env).stdout)["servers"]
        assert [s["name"] for s in status] == ["mine"]
    for target in (tmp_path / "dotfiles" / "mcpd.toml", default):  # dangling, then a loop
        default.unlink()
        default.symlink_to(target)
        checked = mcpd("config", "check", env=home)
        assert checked.returncode == 2 and str(default) in checked.stderr, checked
        assert "embedded" not in checked.stdout


def test_an_unsearchable_config_folder_is_a_config_error(tmp_path: Path) -> None:
    """A config folder mcpd may not look into: `config check` and `serve` exit 2 naming the path
    (systemd's RestartPreventExitStatus=2: restarting cannot fix it), never an internal error."""
    folder = tmp_path / "mcpd"
    folder.mkdir()
    (folder / "config.toml").write_text('[servers.a]\ncommand = "true"\n')
    env = {"XDG_CONFIG_HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    drop: list[str] = []
    if os.geteuid() == 0:  # root ignores modes unless it gives up the capabilities that let it
        if shutil.which("setpriv") is None:
            pytest.skip("needs setpriv to run without root's file-permission override")
        drop = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner", "--"]
    folder.chmod(0)
    try:
        for argv in (["config", "check"], ["serve", "--socket", str(tmp_path / "s.sock")]):
            result = subprocess.run(
                [*drop, sys.executable, "-m", "mcpd", *argv],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
                env={**os.environ, **env},
            )
            assert result.returncode == 2, result
            assert str(folder / "config.toml") in result.stderr and "internal error" not in result.stderr
    finally:
        folder.chmod(0o700)


def test_check_reports_bad_entries_and_exits_2(tmp_path: Path) -> None:
    """`mcpd check` on a config whose new server has a typo names the bad entry (text: an `error:`
    line; `--json`: `issues`) and exits 2, as `config check` does, while the good entries are still
    checked; before, the bad one was dropped and an empty check passed with 0."""
    config = tmp_path / "config.toml"
    config.write_text('[servers.newserver]\ncommand = "npx"\nenvv = { A = "1" }\n')
    text = mcpd("check", "--config", str(config))
    assert text.returncode == 2, text
    assert "error:" in text.stderr and "'newserver'" in text.stderr and "envv" in text.stderr
    config.write_text(fullserver_toml("ok") + '[servers.newserver]\ncommand = "npx"\nenvv = { A = "1" }\n')
    as_json = mcpd("check", "--config", str(config), "--json")
    assert as_json.returncode == 2, as_json.stderr
    document = json.loads(as_json.stdout)
    assert [(i["server"], i["field"]) for i in document["issues"]] == [("newserver", "envv")]
    assert [(s["server"], s["initialized"]) for s in document["servers"]] == [("ok", True)]


def test_a_newline_in_the_source_name_cannot_write_toml(tmp_path: Path) -> None:
    """The `# Imported from PATH` header quotes and escapes the path: a file name holding a newline
    and `[daemon]` stays inside the comment instead of becoming the user's daemon settings."""
    source = tmp_path / "x\n[daemon]\nusage = false\n#.json"
    source.write_text(json.dumps({"mcpServers": {"one": {"command": "true"}}}))
    target = tmp_path / "config.toml"
    target.write_text('[servers.z]\ncommand = "true"\n')
    result = mcpd("import", str(source), "--config", str(target))
    assert result.returncode == 0, result.stderr
    text = target.read_text()
    assert "\n[daemon]" not in text and "\\n[daemon]\\nusage = false\\n#.json" in text
    checked = json.loads(mcpd("config", "check", "--config", str(target), "--json").stdout)
    assert checked["ok"] is True and checked["servers"] == ["z", "one"]


def test_import_json_is_one_document_also_when_the_write_fails(tmp_path: Path) -> None:
    """`--json` prints exactly one document: when the write fails (here: no file may grow), that is
    the error, not a `written: true` result followed by an error."""
    source = tmp_path / "ok.json"
    source.write_text(json.dumps({"mcpServers": {"one": {"command": "true"}}}))
    target = tmp_path / "small.toml"
    target.write_text('[servers.z]\ncommand = "true"\n')
    argv = [sys.executable, "-m", "mcpd", "import", str(source), "--config", str(target), "--json"]
    limited = ["sh", "-c", 'ulimit -f 0 && exec "$@"', "sh", *argv]  # Python ignores SIGXFSZ: EFBIG
    result = subprocess.run(limited, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, result
    [document] = [json.loads(line) for line in result.stdout.splitlines()]
    assert "error" in document and "written" not in document
    assert target.read_text() == '[servers.z]\ncommand = "true"\n'


def test_dry_run_exits_as_the_import_would(tmp_path: Path) -> None:
    """An entry that cannot be imported makes the exit status 1 with and without --dry-run."""
    source = tmp_path / "part.json"
    entries = {"ok": {"command": "true"}, "bad name": {"command": "true"}}
    source.write_text(json.dumps({"mcpServers": entries}))
    target = tmp_path / "c.toml"
    dry = mcpd("import", str(source), "--config", str(target), "--dry-run")
    assert dry.returncode == 1 and "[servers.ok]" in dry.stdout and not target.exists()
    real = mcpd("import", str(source), "--config", str(target))
    assert real.returncode == 1 and "[servers.ok]" in target.read_text()


def test_import_names_the_references_the_host_would_have_expanded(tmp_path: Path) -> None:
    """Importing a `.jsonc` file whose entries hold `${...}` references: the servers are imported
    as written, and a `note:` line names each field holding one."""
    source = tmp_path / "mcp.jsonc"
    source.write_text(
        '{\n  // VS Code\n  "servers": {"web": {"url": "https://example.com/mcp",'
        ' "headers": {"Authorization": "Bearer ${env:TOKEN}"}},},\n}\n'
    )
    target = tmp_path / "config.toml"
    result = mcpd("import", str(source), "--config", str(target))
    assert result.returncode == 0, result.stderr
    [note] = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert "'web'" in note and "headers.Authorization" in note and "${env:TOKEN}" in note
    assert 'Authorization = "Bearer ${env:TOKEN}"' in target.read_text()


def test_output_a_non_utf8_locale_cannot_encode_is_escaped_not_a_usage_error(tmp_path: Path) -> None:
    """Under a latin-1 locale (``PYTHONIOENCODING`` stands in for one) a character outside it in the
    output, here the config's name, failed the whole command with exit 2 and "'\\u2603' in an
    argument is not valid UTF-8"; `mcpd tools` did the same over the "…" that cuts descriptions.
    Text escapes it as Python does; JSON, read as UTF-8 whatever the locale, writes JSON's escape
    (Python's \\U0001f600 is none)."""
    path = tmp_path / "snow\u2603\U0001f600.toml"
    path.write_text('[servers.s]\ncommand = "x"\n')
    latin = {"PYTHONIOENCODING": "latin-1"}
    text = mcpd("config", "check", "--config", str(path), env=latin)
    assert (text.returncode, text.stderr) == (0, "")
    assert text.stdout.startswith(f"{tmp_path}/snow\\u2603\\U0001f600.toml: ok")
    as_json = mcpd("config", "check", "--config", str(path), "--json", env=latin)
    assert (as_json.returncode, json.loads(as_json.stdout)["source"]) == (0, str(path))
