"""Qualified tool names: valid for every host, unique, stable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mcpd.config.load import load_config
from mcpd.model.uris import qualify_uri, split_uri
from mcpd.registry.names import qualify

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_plain_names_stay_readable() -> None:
    """The common case is just server__tool."""
    assert qualify("github", "create_issue") == "github__create_issue"


@pytest.mark.parametrize(
    ("server", "tool"),
    [
        ("files.local", "read"),  # dots are not allowed by hosts
        ("a" * 40, "b" * 40),  # too long
        ("srv", "tool with spaces/and:colons"),
        ("srv", "工具"),  # non-ASCII
    ],
)
def test_awkward_names_are_cleaned_and_hashed(server: str, tool: str) -> None:
    """Anything outside the host-safe pattern is cleaned, cut to 64 and suffixed with a hash."""
    name = qualify(server, tool)
    assert VALID.match(name), name
    assert qualify(server, tool) == name  # stable


def test_cleaning_never_merges_two_tools() -> None:
    """Pairs that clean to the same text still get different names."""
    names = {
        qualify("my.server", "x"),
        qualify("my_server", "x"),
        qualify("my-server", "x"),
        qualify("a" * 70, "x"),
        qualify("a" * 70, "y"),
    }
    assert len(names) == 5


def test_server_names_that_could_share_a_qualified_name_are_refused(tmp_path: Path) -> None:
    """`a` + `b__c` and `a__b` + `c` would share a name, and so would `x` + `_y` and `x_` + `y`
    (`x___y`): a server name holding `__` or ending with `_` is refused. So is `mcpd`, the name of
    the daemon's own tools (its tools were rendered and answered as the daemon's)."""
    config = tmp_path / "c.toml"
    config.write_text(
        "".join(f'[servers."{name}"]\ncommand = "x"\n' for name in ("a__b", "a", "x_", "x", "mcpd"))
    )
    loaded = load_config(config)
    assert [s.name for s in loaded.servers] == ["a", "x"]
    assert [i.server for i in loaded.issues] == ["a__b", "x_", "mcpd"]
    assert "__" in loaded.issues[0].message and "end with '_'" in loaded.issues[1].message
    assert "mcpd answers itself" in loaded.issues[2].message
    assert {qualify("x", "_y"), qualify("x_", "y")} == {"x___y"}  # why `x_` must go


@pytest.mark.parametrize(
    ("server", "uri"),
    [
        ("files", "file:///a/b"),
        ("everything", "demo://resource/static/document/architecture.md"),
        ("x.y", "https://example.com/a?b=c#d"),
        ("t", "file:///{path}"),
    ],
)
def test_resource_uris_round_trip_unchanged(server: str, uri: str) -> None:
    """A qualified resource URI splits back into the server and its URI, byte for byte."""
    assert split_uri(qualify_uri(server, uri)) == (server, uri)


@pytest.mark.parametrize("text", ["file:///a", "mcpd://", "mcpd://files", "mcpd://files/", "mcpd:///x"])
def test_not_a_qualified_uri(text: str) -> None:
    """Anything without a server and a URI after ``mcpd://`` is not a qualified URI."""
    assert split_uri(text) is None
