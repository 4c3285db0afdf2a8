"""Config loading: TOML, host JSON, per-entry errors that name file, server and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcpd.config.load import EMBEDDED_SOURCE, load_config
from mcpd.errors import ConfigError

TOML = """
[servers.files]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
description = "Read, write, and search local files"
env = { DEBUG = "1" }
connect_timeout = 5

[servers.files.restart]
max_retries = 2

[servers.remote]
url = "http://127.0.0.1:9/mcp"
headers = { Authorization = "Bearer secret" }

[servers.broken]
command = "x"
args = "not-a-list"

[servers.typo]
comand = "x"

[servers.neither]
description = "no command and no url"
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_toml_valid_entries_load_and_bad_ones_are_reported(tmp_path: Path) -> None:
    """Valid servers load with their settings; each bad entry becomes an issue naming file, server, field."""
    path = write(tmp_path, "config.toml", TOML)
    config = load_config(path)
    assert [s.name for s in config.servers] == ["files", "remote"]
    files = config.servers[0]
    assert files.args == ("-y", "@modelcontextprotocol/server-filesystem", "/tmp")
    assert files.env == {"DEBUG": "1"}
    assert files.connect_timeout == 5
    assert files.restart.max_retries == 2
    assert config.servers[1].transport == "http"
    issues = {i.server: i for i in config.issues}
    assert set(issues) == {"broken", "typo", "neither"}
    assert issues["broken"].field == "args"
    assert issues["broken"].file == str(path)
    assert issues["typo"].field == "comand"
    assert "exactly one of `command`" in issues["neither"].message
    assert str(path) in str(issues["broken"]) and "'broken'" in str(issues["broken"])


def test_host_json_mcpservers(tmp_path: Path) -> None:
    """A Claude-Desktop-style file works as is: host-only keys are ignored, `disabled` is honoured."""
    document = {
        "mcpServers": {
            "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
            "web": {"type": "http", "url": "https://example.invalid/mcp", "headers": {"X-Key": "k"}},
            "off": {"command": "x", "disabled": True, "autoApprove": ["a"]},
            "old": {"type": "sse", "url": "https://example.invalid/sse"},
        }
    }
    config = load_config(write(tmp_path, ".mcp.json", json.dumps(document)))
    by_name = {s.name: s for s in config.servers}
    assert sorted(by_name) == ["off", "time", "web"]
    assert by_name["time"].env == {"TZ": "UTC"}
    assert by_name["web"].headers == {"X-Key": "k"}
    assert by_name["off"].enabled is False
    assert [(i.server, i.field) for i in config.issues] == [("old", "type")]


def test_vscode_servers_key(tmp_path: Path) -> None:
    """VS Code's `servers` key is read like `mcpServers`."""
    config = load_config(write(tmp_path, "mcp.json", json.dumps({"servers": {"a": {"command": "a"}}})))
    assert [s.name for s in config.servers] == ["a"]


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("bad.toml", "[servers.a\ncommand='x'", "not valid TOML"),
        ("bad.json", "{not json", "not valid JSON"),
        ("list.json", "[]", "expected a JSON object"),
        ("none.json", "{}", "no `mcpServers`"),
        ("top.toml", "[server.a]\ncommand='x'", "unknown top-level key(s) server"),
    ],
)
def test_broken_files_raise_config_error_naming_the_file(
    tmp_path: Path, name: str, text: str, needle: str
) -> None:
    """A file that cannot be used at all is one clear ConfigError with the path in it."""
    path = write(tmp_path, name, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert needle in str(info.value)
    assert str(path) in str(info.value)


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    """--config pointing nowhere is an error, not a silent fallback."""
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.toml")


def test_no_config_at_all_gives_the_embedded_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a user config file mcpd runs its demo server."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    config = load_config(None)
    assert config.source == EMBEDDED_SOURCE
    assert [s.name for s in config.servers] == ["demo"]


def test_default_file_is_used_when_present(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user config dir's mcpd/config.toml is the default."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "mcpd").mkdir()
    (tmp_path / "mcpd" / "config.toml").write_text('[servers.x]\ncommand = "x"\n')
    assert [s.name for s in load_config(None).servers] == ["x"]


def test_bad_server_name(tmp_path: Path) -> None:
    """Names that could not be used in tool names are rejected per entry."""
    config = load_config(
        write(tmp_path, "c.json", json.dumps({"mcpServers": {"has space": {"command": "x"}}}))
    )
    assert config.servers == ()
    assert config.issues[0].server == "has space"


@pytest.mark.parametrize(
    ("entry", "field", "needle"),
    [
        ('command = "x"\nstop_grace = nan', "stop_grace", "finite"),
        ('command = "x"\nconnect_timeout = inf', "connect_timeout", "finite"),
        ('command = "x"\n[servers.s.restart]\ninitial_delay = nan', "restart", "finite"),
        ('command = "x"\nargs = ["a\\u0000b"]', None, "NUL"),
        ('command = "x"\nenv = { "A=B" = "1" }', None, "invalid variable name"),
        ('command = "x"\ncwd = "relative/dir"', None, "absolute"),
    ],
)
def test_values_that_would_break_timers_or_exec_are_refused(
    tmp_path: Path, entry: str, field: str | None, needle: str
) -> None:
    """NaN, infinity, NUL bytes and similar are entry errors, not crashes later."""
    config = load_config(write(tmp_path, "c.toml", f"[servers.s]\n{entry}\n"))
    assert config.servers == ()
    (issue,) = config.issues
    assert needle in issue.message
    if field:
        assert issue.field == field


def test_trailing_newline_in_a_name_is_refused(tmp_path: Path) -> None:
    """Names are matched whole: a newline at the end is not a valid name."""
    config = load_config(write(tmp_path, "c.json", json.dumps({"mcpServers": {"b\n": {"command": "x"}}})))
    assert config.servers == ()


def test_deeply_nested_file_is_a_config_error(tmp_path: Path) -> None:
    """A pathologically nested file is a ConfigError, not a RecursionError."""
    path = write(tmp_path, "deep.json", "[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(path)
