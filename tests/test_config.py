"""Config loading: TOML, host JSON, per-entry errors that name file, server and field."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from mcpd.config.importer import plan_import, write_import
from mcpd.config.load import EMBEDDED_SOURCE, load_config
from mcpd.config.paths import default_socket_path, likely_socket_path
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
        ("unclosed.json", '{"mcpServers": {} /* mine', "not valid JSON"),
        ("list.json", "[]", "expected a JSON object"),
        ("none.json", "{}", "no `mcpServers`"),
        ("top.toml", "[server.a]\ncommand='x'", "unknown top-level key(s) server"),
        # More digits than Python's int() takes: its ValueError was an internal error (exit 1).
        ("long.toml", "[servers.a]\ncommand='x'\ncall_timeout = 1" + "0" * 5000, "not valid TOML"),
        (
            "long.json",
            '{"mcpServers": {"a": {"command": "x", "env": {"N": 1' + "0" * 5000 + "}}}}",
            "not valid JSON",
        ),
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


def test_a_config_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path) -> None:
    """A FIFO (reading would wait for a writer) or a device (/dev/zero never ends) is not a config."""
    fifo = tmp_path / "c.toml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(ConfigError, match="not a regular file"):
            load_config(path)


def test_import_writes_through_a_link_and_never_over_a_device(tmp_path: Path) -> None:
    """The file a link names gets the servers (the link stays a link); a FIFO or a device (``/dev/null``)
    is refused, not replaced by a file."""
    real = write(tmp_path, "real.toml", EXISTING)
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    source = write(tmp_path, "mcp.json", json.dumps({"mcpServers": HOST_ENTRIES}))
    write_import(plan_import(source, link))
    assert link.is_symlink() and set(HOST_ENTRIES) <= {s.name for s in load_config(real).servers}
    fifo = tmp_path / "fifo.toml"  # as /dev/null would be, without risking the machine's own
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        write_import(plan_import(source, fifo))
    assert fifo.is_fifo()


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


@pytest.mark.parametrize(
    ("restart", "needle"),
    [
        ("{ max_delay = 0.0001, initial_delay = 0.0001 }", "`max_delay` must be at least 0.1 s (got 0.0001)"),
        ("{ initial_delay = 0.0 }", "`initial_delay` must be > 0"),
        (
            "{ initial_delay = 0.01, multiplier = 1 }",
            "`initial_delay` must be at least 0.1 s when `multiplier` is 1",
        ),
        (
            "{ initial_delay = 0.001, multiplier = 1.001 }",
            "`initial_delay` 0.001 s with `multiplier` 1.001 stays under 0.1 s for more than 10 restarts",
        ),
    ],
)
def test_a_crash_loop_cannot_be_configured_faster_than_ten_spawns_a_second(
    tmp_path: Path, restart: str, needle: str
) -> None:
    """A restart policy whose delays settle below 0.1 s (a tiny cap, a zero delay that never
    grows, a tiny delay that multiplier 1 never grows, or grows past 0.1 s only after thousands of
    restarts) is an entry error saying which value, not a
    server that dies at once spawned ~170 times a second; short first delays under the floor stay."""
    config = load_config(write(tmp_path, "c.toml", f'[servers.s]\ncommand = "x"\nrestart = {restart}\n'))
    assert config.servers == ()
    (issue,) = config.issues
    assert issue.field == "restart" and needle in issue.message
    fine = load_config(
        write(
            tmp_path,
            "d.toml",
            '[servers.s]\ncommand = "x"\nrestart = { initial_delay = 0.01, max_delay = 0.1 }\n',
        )
    )
    assert fine.issues == () and fine.servers[0].restart.initial_delay == 0.01


@pytest.mark.parametrize(
    ("entry", "field", "needle"),
    [
        ('url = "http://"', "url", "names no host"),
        ('url = "http://[::1/mcp"', "url", "malformed"),
        ('url = "http://localhost:99999/mcp"', "url", "malformed"),
        ('url = "http://localhost:0/mcp"', "url", "port 0"),
        ('url = "http://h/mcp?key=SECRET\\t"', "url", "control character"),
        ('url = "http://h/mcp?key=SECRET\\n"', "url", "control character"),
        ('url = "http://h/"\nheaders = { A = "Bearer SECRET\\r\\nX-Other: 1" }', "headers", "line break"),
        ('url = "http://h/"\nheaders = { A = "Bearer SECRET " }', "headers", "either end"),
        ('url = "http://h/"\nheaders = { A = "Bearer SECRET\u00e9" }', "headers", "ASCII"),
        ('url = "http://h/"\nheaders = { "X Key" = "SECRET" }', "headers", "invalid header name"),
        ('url = "http://h/"\nheaders = { "" = "SECRET" }', "headers", "invalid header name"),
        # A token pasted into the name (as a `Name: value` line) or the URL's password: urllib's
        # own message for the latter quotes the whole netloc.
        ('url = "http://h/"\nheaders = { "Authorization: Bearer SECRET" = "" }', "headers", "invalid"),
        ('url = "https://user:SECRET\uff03@h/mcp"', "url", "malformed"),
        ('url = "https://user:SECRET@h:SECRET/mcp"', "url", "port"),
    ],
)
def test_a_url_or_header_no_http_client_would_send_is_refused_unquoted(
    tmp_path: Path, entry: str, field: str, needle: str
) -> None:
    """These passed the config and then kept the server in backoff for ever, its status an httpx
    error (`OverflowError: connect(): port must be 0-65535`, `LocalProtocolError: Illegal header
    value b'Bearer ...'`) that quoted the token. Now an entry error, quoting neither."""
    config = load_config(
        write(tmp_path, "c.toml", f"[servers.s]\n{entry}\n[servers.ok]\nurl = 'https://h:8/p'\n")
    )
    assert [s.name for s in config.servers] == ["ok"]
    (issue,) = config.issues
    assert (issue.field, needle in issue.message) == (field, True), issue
    assert "SECRET" not in issue.message


def test_a_name_key_that_differs_from_the_table_is_an_entry_error(tmp_path: Path) -> None:
    """`name = "b"` in [servers.a] was dropped silently (the server stayed `a`), unlike any other
    key mcpd does not take; the same name as the table's is harmless and still loads."""
    text = '[servers.a]\ncommand = "x"\nname = "b"\n[servers.c]\ncommand = "x"\nname = "c"\n'
    config = load_config(write(tmp_path, "c.toml", text))
    assert [s.name for s in config.servers] == ["c"]
    (issue,) = config.issues
    assert (issue.server, issue.field) == ("a", "name")


def test_a_retention_longer_than_dates_can_hold_is_refused(tmp_path: Path) -> None:
    """``usage_retention_days = 1e308`` stopped the usage store's thread; it is a config error."""
    with pytest.raises(ConfigError, match="usage_retention_days"):
        load_config(write(tmp_path, "c.toml", "[daemon]\nusage_retention_days = 1e308\n"))


@pytest.mark.parametrize(
    ("setting", "refused"),
    [
        ("max_frame_bytes = 1023", True),
        ("max_frame_bytes = 9223372036854775807", True),
        ("max_frame_bytes = 268435456", False),
        ("max_in_flight = 0", True),
        ("max_in_flight = 9223372036854775807", True),
        ("max_in_flight = 65536", False),
        ("socket_check_interval = 0.05", True),
        ("socket_check_interval = 61", True),
        ("socket_check_interval = 0.1", False),
    ],
)
def test_daemon_limits_have_upper_bounds(tmp_path: Path, setting: str, refused: bool) -> None:
    """2**63-1 was accepted for both: a client could then make the daemon hold gigabytes. (A socket
    check interval out of its bounds would keep an idle daemon busy, or leave a deleted socket for
    minutes.)"""
    path = write(tmp_path, "c.toml", f"[daemon]\n{setting}\n")
    if refused:
        with pytest.raises(ConfigError, match=setting.split(maxsplit=1)[0]):
            load_config(path)
    else:
        load_config(path)


@pytest.mark.parametrize("field", ["usage_db", "http_token_file"])
def test_a_daemon_path_with_a_nul_byte_is_a_config_error(tmp_path: Path, field: str) -> None:
    """Such a path reached sqlite3 or open() at start: `mcpd serve` said 'internal error' (exit 1)."""
    text = f'[daemon]\nhttp = "127.0.0.1:0"\n{field} = "/tmp/a\\u0000b"\n'
    with pytest.raises(ConfigError, match=f"field `{field}`: `{field}` contains a NUL byte"):
        load_config(write(tmp_path, "c.toml", text))


@pytest.mark.parametrize("field", ["usage_db", "http_token_file"])
def test_a_relative_daemon_path_is_a_config_error(tmp_path: Path, field: str) -> None:
    """Each process read it from its own working directory: `mcpd token` run from another folder
    than the daemon's made a token of its own, which the daemon answered with 401."""
    with pytest.raises(ConfigError, match=f"`{field}` must be an absolute path"):
        load_config(write(tmp_path, "c.toml", f'[daemon]\n{field} = "state/file"\n'))
    home = load_config(write(tmp_path, "c.toml", f'[daemon]\n{field} = "~/state/file"\n'))
    assert getattr(home.daemon, field) == "~/state/file"


def test_text_that_is_not_unicode_is_an_entry_error(tmp_path: Path) -> None:
    """A lone surrogate passes JSON but no UTF-8 encoder (every status of the server failed later):
    the entry is refused, naming the field; the others load."""
    entries = (
        '{"mcpServers": {"bad": {"command": "x", "description": "d \\ud800"}, "good": {"command": "y"}}}'
    )
    config = load_config(write(tmp_path, "mcp.json", entries))
    assert [s.name for s in config.servers] == ["good"]
    (issue,) = config.issues
    assert issue.server == "bad" and "not valid Unicode" in issue.message


def test_trailing_newline_in_a_name_is_refused(tmp_path: Path) -> None:
    """Names are matched whole: a newline at the end is not a valid name."""
    config = load_config(write(tmp_path, "c.json", json.dumps({"mcpServers": {"b\n": {"command": "x"}}})))
    assert config.servers == ()


def test_deeply_nested_file_is_a_config_error(tmp_path: Path) -> None:
    """A pathologically nested file is a ConfigError, not a RecursionError."""
    path = write(tmp_path, "deep.json", "[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(path)


# -- what hosts write ---------------------------------------------------------------------------

HOST_ENTRIES = {
    # Roo Code: per-tool approvals, a timeout in seconds, watched paths, tools switched off.
    "roo": {
        "type": "stdio",
        "command": "npx",
        "args": ["-y", "server"],
        "alwaysAllow": ["read"],
        "disabledTools": ["delete", "drop"],
        "timeout": 60,
        "watchPaths": ["/tmp/x"],
        "disabled": False,
    },
    # Cline: auto-approval, the legacy transportType, a disabled server.
    "cline": {
        "command": "node",
        "args": ["s.js"],
        "autoApprove": [],
        "transportType": "stdio",
        "disabled": True,
    },
    # Windsurf: serverUrl for a remote server.
    "windsurf": {"serverUrl": "https://example.invalid/mcp", "headers": {"Authorization": "Bearer t"}},
    # Cline's streamableHttp, Claude Code's oauth and headersHelper.
    "claude": {"type": "streamableHttp", "url": "https://example.invalid/mcp", "oauth": {"clientId": "x"}},
    # VS Code: numbers and null in env, dev mode, sandbox flags; Cursor: auth.
    "vscode": {
        "type": "stdio",
        "command": "python",
        "env": {"PORT": 8080, "UNSET": None, "NAME": "x"},
        "dev": {"watch": "src/**"},
        "sandboxEnabled": True,
        "auth": {"CLIENT_ID": "x"},
        "somethingNew": 1,
    },
}


def test_every_host_key_is_honoured_or_ignored_never_a_rejected_server(tmp_path: Path) -> None:
    """Entries as Roo Code, Cline, Windsurf, Claude Code, VS Code and Cursor write them all load;
    what mcpd can honour is honoured, each ignored key is a note naming it."""
    path = write(tmp_path, "mcp.json", json.dumps({"mcpServers": HOST_ENTRIES}))
    config = load_config(path)
    assert config.issues == ()
    by_name = {s.name: s for s in config.servers}
    assert sorted(by_name) == sorted(HOST_ENTRIES)
    assert by_name["roo"].disabled_tools == ("delete", "drop")
    assert by_name["roo"].enabled is True
    assert by_name["cline"].enabled is False
    assert by_name["windsurf"].url == "https://example.invalid/mcp"
    assert by_name["windsurf"].headers == {"Authorization": "Bearer t"}
    assert by_name["claude"].transport == "http"
    assert by_name["vscode"].env == {"PORT": "8080", "NAME": "x"}
    noted = {(n.server, n.field) for n in config.notes}
    assert {("roo", "alwaysAllow"), ("roo", "timeout"), ("roo", "watchPaths")} <= noted
    assert {("cline", "autoApprove"), ("claude", "oauth"), ("vscode", "dev"), ("vscode", "auth")} <= noted
    assert {("vscode", "env.UNSET"), ("vscode", "somethingNew"), ("vscode", "sandboxEnabled")} <= noted
    assert all(n.file == str(path) and n.message for n in config.notes)


def test_a_host_key_and_the_mcpd_field_it_means_disagreeing_is_an_issue_naming_both(tmp_path: Path) -> None:
    """`url` beside Windsurf's `serverUrl` (either order), `enabled` beside `disabled`, `disabled_tools`
    beside `disabledTools`: disagreeing, the entry is an issue naming both keys (before, one of them
    was dropped without a word); agreeing, it loads."""
    entries = {
        "urls": {"url": "https://a.invalid/mcp", "serverUrl": "https://b.invalid/mcp"},
        "slru": {"serverUrl": "https://b.invalid/mcp", "url": "https://a.invalid/mcp"},
        "flags": {"command": "x", "enabled": True, "disabled": True},
        "tools": {"command": "x", "disabled_tools": ["a"], "disabledTools": ["b"]},
        "agree": {"url": "https://a.invalid/mcp", "serverUrl": "https://a.invalid/mcp", "disabled": False},
    }
    config = load_config(write(tmp_path, "mcp.json", json.dumps({"mcpServers": entries})))
    assert [s.name for s in config.servers] == ["agree"]
    issues = {i.server: i for i in config.issues}
    assert {name: i.field for name, i in issues.items()} == {
        "urls": "url",
        "slru": "url",
        "flags": "enabled",
        "tools": "disabled_tools",
    }
    assert "`url` and `serverUrl` are both given" in issues["urls"].message
    assert "`enabled` and `disabled`" in issues["flags"].message
    assert "`disabled_tools` and `disabledTools`" in issues["tools"].message


def host_env(tmp_path: Path, env: str) -> dict[str, str]:
    """The env mcpd gives the server of a host's file whose entry has ``env`` (JSON text)."""
    config = load_config(
        write(tmp_path, "mcp.json", '{"servers": {"s": {"command": "x", "env": ' + env + "}}}")
    )
    return config.servers[0].env


def test_a_number_in_a_host_env_is_the_text_the_host_would_pass(tmp_path: Path) -> None:
    """VS Code takes numbers as env values and passes JavaScript's text of them: `1.0` is "1" and
    `1e3` is "1000" (before: Python's "1.0" and "1000.0", values the server never got from a host)."""
    env = '{"ONE": 1.0, "K": 1e3, "F": 1.10, "TINY": 1e-7, "BIG": 12345678901234567890.5, "N": -2}'
    assert host_env(tmp_path, env) == {
        "ONE": "1",
        "K": "1000",
        "F": "1.1",
        "TINY": "1e-7",
        "BIG": "12345678901234567000",
        "N": "-2",
    }


def test_an_integer_in_a_host_env_is_read_as_javascript_reads_it(tmp_path: Path) -> None:
    """JavaScript has doubles only: a host passes an integer beyond 2**53 rounded, one from 1e21 up
    in exponent notation and one past a double's range (or `1E400`) as "Infinity" (before: Python's
    exact digits and "inf", values the server never got from a host; node's String(JSON.parse(...)))."""
    long_ = "1" + "0" * 400
    env = (
        '{"SAFE": 9007199254740993, "LONG": 12345678901234567890, "E21": 1000000000000000000000, '
        f'"WIDE": {long_}, "NEG": -{long_}, "FAR": 1E400}}'
    )
    assert host_env(tmp_path, env) == {
        "SAFE": "9007199254740992",
        "LONG": "12345678901234567000",
        "E21": "1e+21",
        "WIDE": "Infinity",
        "NEG": "-Infinity",
        "FAR": "Infinity",
    }


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        (
            "c.toml",
            '[servers.s]\ncommand = "x"\nenv = { OK = "1", PORT = 8080.5 }\n',
            "`env` value of 'PORT' must be text",
        ),
        (
            "c.toml",
            '[servers.s]\nurl = "http://h/"\nheaders = { X-Token = 3 }\n',
            "`headers` value of 'X-Token'",
        ),
        ("c.json", '{"servers": {"s": {"command": "x", "env": {"FLAG": true}}}}', "`env` value of 'FLAG'"),
        (
            "c.toml",
            '[servers.s]\ncommand = "x"\nenv = { A = "a\\u0000b" }\n',
            "`env` variable 'A' has a NUL byte",
        ),
    ],
)
def test_an_env_or_header_value_error_names_the_variable(
    tmp_path: Path, name: str, text: str, needle: str
) -> None:
    """A value that is not text (or holds a NUL byte) is an issue naming the variable or header (before:
    msgspec's `env[...]`, leaving the user to find which one), never quoting the value."""
    config = load_config(write(tmp_path, name, text))
    (issue,) = config.issues
    assert needle in issue.message and "8080.5" not in issue.message


def test_env_file_is_read_relative_to_the_config_and_env_wins(tmp_path: Path) -> None:
    """VS Code's and Cursor's envFile: KEY=VALUE lines beside the config; `env` overrides them."""
    write(tmp_path, ".env", "# secrets\nexport TOKEN='abc'\nMODE=file # comment\nEMPTY=\n")
    entry = {"command": "x", "envFile": ".env", "env": {"MODE": "env"}}
    config = load_config(write(tmp_path, "mcp.json", json.dumps({"servers": {"s": entry}})))
    assert config.servers[0].env == {"TOKEN": "abc", "MODE": "env", "EMPTY": ""}


def test_an_unreadable_env_file_is_a_note_not_a_rejected_server(tmp_path: Path) -> None:
    """A missing envFile leaves the server configured, with a note saying the file was not read."""
    entry = {"command": "x", "envFile": "absent.env"}
    config = load_config(write(tmp_path, "mcp.json", json.dumps({"mcpServers": {"s": entry}})))
    assert [s.name for s in config.servers] == ["s"]
    assert [n.field for n in config.notes] == ["envFile"]


def test_unsupported_transports_are_named(tmp_path: Path) -> None:
    """SSE and unknown transports are the one thing a host entry can be refused for, naming the key."""
    entries = {"a": {"type": "sse", "url": "https://x.invalid/sse"}, "b": {"type": "ws", "url": "ws://x"}}
    config = load_config(write(tmp_path, "mcp.json", json.dumps({"mcpServers": entries})))
    assert [(i.server, i.field) for i in config.issues] == [("a", "type"), ("b", "type")]


def test_disabled_tools_in_mcpd_toml(tmp_path: Path) -> None:
    """mcpd's own TOML spells it `disabled_tools`."""
    config = load_config(write(tmp_path, "c.toml", '[servers.s]\ncommand = "x"\ndisabled_tools = ["a"]\n'))
    assert config.servers[0].disabled_tools == ("a",)


# -- mcpd import ----------------------------------------------------------------------------------

EXISTING = """# my servers, hand-written
[daemon]
max_in_flight = 64   # keep it small

[servers.kept]  # the one I use most
command = "kept"
"""


def test_import_appends_and_leaves_the_existing_text_byte_for_byte(tmp_path: Path) -> None:
    """New sections go after the last line; comments, order and layout of the file stay as they were."""
    target = write(tmp_path, "config.toml", EXISTING)
    source = write(tmp_path, "mcp.json", json.dumps({"mcpServers": HOST_ENTRIES}))
    plan = plan_import(source, target)
    assert sorted(s.name for s in plan.added) == sorted(HOST_ENTRIES)
    write_import(plan)
    text = target.read_text()
    assert text.startswith(EXISTING)
    merged = load_config(target)
    assert merged.issues == ()
    assert merged.daemon.max_in_flight == 64
    by_name = {s.name: s for s in merged.servers}
    imported = {s.name: s for s in load_config(source).servers}
    for name, server in imported.items():
        assert by_name[name] == server  # the TOML says exactly what the host file meant
    assert "kept" in by_name


def test_import_refuses_names_already_configured(tmp_path: Path) -> None:
    """A server the target already has is never overwritten: the plan lists it as existing."""
    target = write(tmp_path, "config.toml", EXISTING)
    source = write(
        tmp_path,
        "mcp.json",
        json.dumps({"mcpServers": {"kept": {"command": "other"}, "new": {"command": "n"}}}),
    )
    plan = plan_import(source, target)
    assert plan.existing == ["kept"]
    assert [s.name for s in plan.added] == ["new"]


@pytest.mark.parametrize(
    "value",
    [
        'quote " and \\ backslash',
        "tab\tnewline\n",
        "unicode é 中文 😀",
        "control \x01 and del \x7f",
        "${input:key}",
    ],
)
def test_imported_strings_survive_toml(tmp_path: Path, value: str) -> None:
    """Every string a JSON file can hold is written as a TOML string that reads back the same."""
    source = write(
        tmp_path,
        "mcp.json",
        json.dumps({"mcpServers": {"s": {"command": "x", "env": {"V": value}, "args": [value]}}}),
    )
    target = tmp_path / "config.toml"
    write_import(plan_import(source, target))
    server = load_config(target).servers[0]
    assert server.env == {"V": value} and server.args == (value,)


def test_import_creates_a_private_file(tmp_path: Path) -> None:
    """A new config may hold secrets (env, headers): it is created readable by its owner only."""
    source = write(tmp_path, "mcp.json", json.dumps({"mcpServers": {"s": {"command": "x"}}}))
    target = tmp_path / "sub" / "config.toml"
    write_import(plan_import(source, target))
    assert target.stat().st_mode & 0o777 == 0o600


def test_import_that_would_break_the_file_writes_nothing(tmp_path: Path) -> None:
    """`servers` written as an inline table cannot take more sections: refused, the file unchanged."""
    original = 'servers = { a = { command = "a" } }\n'
    target = write(tmp_path, "config.toml", original)
    source = write(tmp_path, "mcp.json", json.dumps({"mcpServers": {"b": {"command": "b"}}}))
    with pytest.raises(ConfigError, match="nothing written"):
        write_import(plan_import(source, target))
    assert target.read_text() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml", "mcp.json"]


def test_import_never_writes_into_a_json_config(tmp_path: Path) -> None:
    """mcpd's own config is TOML; a JSON target is refused before anything is read from it."""
    source = write(tmp_path, "mcp.json", json.dumps({"mcpServers": {"s": {"command": "x"}}}))
    with pytest.raises(ConfigError, match="TOML"):
        plan_import(source, tmp_path / "other.json")


def test_the_likely_socket_path_is_the_default_one_or_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a bridge connects to before it would load platformdirs: $MCPD_SOCKET, else the socket in
    $XDG_RUNTIME_DIR where platformdirs puts it, once the daemon's folder is there; nothing for a
    relative, missing, loose (not 0700) or another user's directory (after `su` the variable names
    the other user's), nor before any daemon made its folder."""
    monkeypatch.delenv("MCPD_SOCKET", raising=False)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert likely_socket_path() is None  # no daemon has made mcpd/ yet
    (runtime / "mcpd").mkdir(mode=0o700)
    assert likely_socket_path() == str(runtime / "mcpd" / "mcpd.sock") == str(default_socket_path())
    for unusable in ("run", str(tmp_path / "missing")):
        monkeypatch.setenv("XDG_RUNTIME_DIR", unusable)
        assert likely_socket_path() is None
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    runtime.chmod(0o755)
    assert likely_socket_path() is None
    runtime.chmod(0o700)
    if os.geteuid() == 0:
        os.chown(runtime, 65534, 65534)
        others = runtime
    else:
        others = Path("/")  # root's
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(others))
    assert likely_socket_path() is None
    monkeypatch.setenv("MCPD_SOCKET", "/elsewhere/d.sock")
    assert likely_socket_path() == "/elsewhere/d.sock" == str(default_socket_path())


def test_the_likely_socket_path_on_macos_is_platformdirs_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without $XDG_RUNTIME_DIR, macOS keeps runtime files in ~/Library/Caches/TemporaryItems: the
    guess names the path platformdirs' macOS rules give (they run anywhere)."""
    from platformdirs.macos import MacOS  # noqa: PLC0415 - only this test needs it

    for name in ("MCPD_SOCKET", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(sys, "platform", "darwin")
    items = tmp_path / "Library" / "Caches" / "TemporaryItems"
    (items / "mcpd").mkdir(parents=True)
    items.chmod(0o700)
    assert likely_socket_path() == os.path.join(MacOS("mcpd").user_runtime_dir, "mcpd.sock")
    assert likely_socket_path() == str(tmp_path / "Library/Caches/TemporaryItems/mcpd/mcpd.sock")


def test_variable_references_a_host_would_expand_are_noted_per_field(tmp_path: Path) -> None:
    """`${VAR}`, `${env:VAR}`, `${input:id}`, `${workspaceFolder}` are passed as written, each field
    holding one named in a note with the reference (never the rest of the value: it may be a secret)."""
    entries = {
        "gh": {
            "command": "npx",
            "args": ["-y", "server-github", "${HOME}/repo"],
            "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}", "PLAIN": "x"},
            "cwd": "/work/${workspaceFolderBasename}",
        },
        "web": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer s3cret ${env:TOKEN}"}},
        "vs": {"command": "x", "env": {"KEY": "${input:api-key}"}},
        "none": {"command": "x", "args": ["$HOME", "{}"]},
    }
    config = load_config(write(tmp_path, "mcp.json", json.dumps({"mcpServers": entries})))
    assert config.issues == () and config.servers[0].args[2] == "${HOME}/repo"
    notes = {(n.server, n.field): n.message for n in config.notes}
    assert set(notes) == {
        ("gh", "args[2]"),
        ("gh", "env.GITHUB_TOKEN"),
        ("gh", "cwd"),
        ("web", "headers.Authorization"),
        ("vs", "env.KEY"),
    }
    assert "${env:TOKEN}" in notes["web", "headers.Authorization"]
    assert "s3cret" not in notes["web", "headers.Authorization"]


def test_a_key_given_twice_in_a_host_file_is_an_issue_not_a_silent_pick(tmp_path: Path) -> None:
    """A server name given twice (also once under `mcpServers` and once under `servers`), or a key
    given twice inside an entry, makes that entry an issue; the other entries load."""
    text = (
        '{"mcpServers": {"fs": {"command": "first"}, "fs": {"command": "second"},'
        ' "envy": {"command": "x", "env": {"A": "1", "A": "2"}}, "ok": {"command": "x"},'
        ' "both": {"command": "x"}}, "servers": {"both": {"command": "y"}, "vs": {"command": "z"}}}'
    )
    config = load_config(write(tmp_path, "dup.json", text))
    assert [s.name for s in config.servers] == ["ok", "vs"]
    assert [(i.server, i.field) for i in config.issues] == [("fs", None), ("envy", "env.A"), ("both", None)]
    with pytest.raises(ConfigError, match="`mcpServers` appears more than once"):
        load_config(write(tmp_path, "twice.json", '{"mcpServers": {}, "mcpServers": {}}'))
    # The search for repeated keys goes as deep as the JSON parser does, without recursion.
    deep = '{"mcpServers": {"a": {"command": "x", "x": ' + "[" * 900 + "]" * 900 + "}}}"
    assert [s.name for s in load_config(write(tmp_path, "deep.json", deep)).servers] == ["a"]


@pytest.mark.parametrize("name", ["mcp.jsonc", "mcp.json"])
def test_host_json_is_read_as_json_with_comments(tmp_path: Path, name: str) -> None:
    """VS Code's `mcp.json` is JSON with comments under a `.json` name: comments and trailing commas
    are allowed in both suffixes; `//` inside a string is text."""
    text = """{
      // my servers
      "servers": {
        "web": {"url": "https://example.com/mcp", /* remote */ "headers": {"X": "a /* b */ // c"},},
      },
    }"""
    config = load_config(write(tmp_path, name, text))
    assert config.issues == () and config.servers[0].url == "https://example.com/mcp"
    assert config.servers[0].headers == {"X": "a /* b */ // c"}
    with pytest.raises(ConfigError, match="not a JSON file"):
        plan_import(write(tmp_path, "h.json", '{"mcpServers": {}}'), tmp_path / "mine.jsonc")


def test_a_toml_file_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    """Notepad starts UTF-8 files with a BOM: the file loads as without it."""
    path = tmp_path / "bom.toml"
    path.write_bytes(b'\xef\xbb\xbf[servers.a]\ncommand = "true"\n')
    assert [s.name for s in load_config(path).servers] == ["a"]


def test_an_entry_that_contradicts_itself_is_refused(tmp_path: Path) -> None:
    """A `type` the entry contradicts (`stdio` with only a `url`, `http` with only a `command`) and a
    `disabled` that is not true or false are issues naming the key, not silently read one way."""
    entries = {
        "a": {"type": "stdio", "url": "https://example.com/mcp"},
        "b": {"type": "http", "command": "x"},
        "c": {"command": "x", "disabled": "true"},
        "d": {"type": "streamable-http", "serverUrl": "https://example.com/mcp"},
        "e": {"transport": "stdio", "command": "x", "disabled": False},
    }
    config = load_config(write(tmp_path, "mcp.json", json.dumps({"mcpServers": entries})))
    assert [s.name for s in config.servers] == ["d", "e"]
    assert [(i.server, i.field) for i in config.issues] == [("a", "type"), ("b", "type"), ("c", "disabled")]


def test_an_env_file_path_with_a_nul_byte_is_a_note_not_an_internal_error(tmp_path: Path) -> None:
    """``"envFile": "a\\u0000b"`` made os.stat raise ValueError: `config check`, `serve` and `reload`
    failed with an internal error instead of loading the server without the file."""
    entry = {"command": "x", "envFile": "a\0b"}
    config = load_config(write(tmp_path, "mcp.json", json.dumps({"mcpServers": {"s": entry}})))
    assert [s.name for s in config.servers] == ["s"]
    (note,) = config.notes
    assert note.field == "envFile" and "NUL" in note.message
