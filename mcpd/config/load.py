"""Reading config files: mcpd's TOML, and the ``mcpServers`` JSON that MCP hosts already use.

A file that cannot be read or parsed raises ``ConfigError``. A bad server entry does
not: it becomes a ``ConfigIssue`` naming the file, the server and the field, and the
other servers still run. A host's own keys in a JSON entry (see ``mcpd.config.hosts``) are
honoured or ignored, each ignored one a note in ``Config.notes`` and a debug log line.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import structlog

from mcpd.config import hosts
from mcpd.config.files import present, read_bounded
from mcpd.config.jsonc import plain_json
from mcpd.config.model import Config, ConfigIssue, DaemonSettings, ServerConfig
from mcpd.config.paths import default_config_path
from mcpd.errors import ConfigError
from mcpd.model.tools import OWN_SERVER, SEPARATOR

EMBEDDED_SOURCE = "<embedded default>"

log = structlog.get_logger("mcpd.config")

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_VALIDATION_PATH = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")
_NAMED_FIELD = re.compile(r"`(?P<field>\w+)` ")
_UNKNOWN_FIELD = re.compile(r"Object contains unknown field `(?P<field>[^`]+)`")


def embedded_config() -> Config:
    """The config used when the user has none: one demo server shipped inside the package."""
    demo = ServerConfig(
        name="demo",
        command=sys.executable,
        args=("-m", "mcpd.demo"),
        description="A small demo server shipped with mcpd: clock, echo and arithmetic tools.",
    )
    return Config(source=EMBEDDED_SOURCE, servers=(demo,))


def load_config(path: Path | None = None) -> Config:
    """Load ``path``, or the default file, or (when there is no default file) the embedded config.

    Only a default file that is not there at all means the embedded config: one that is there but
    cannot be read (a dangling link, a folder without permission) is a ``ConfigError``, never the
    demo servers in place of the user's.
    """
    if path is None:
        path = default_config_path()
        if not present(path, "the config file"):
            return embedded_config()
    raw = read_bounded(path, "config file")
    source = str(path)
    if is_json(path):
        # VS Code's and Cursor's `mcp.json` are JSON with comments under a `.json` name; comments
        # and trailing commas are never valid JSON, so reading every host file this way refuses
        # nothing that plain JSON would take.
        raw = plain_json(raw)
        return _build(source, _json_entries(source, raw), DaemonSettings(), host_base=path.parent)
    document = _toml_document(source, raw)
    return _build(source, _toml_servers(source, document), _toml_daemon(source, document), host_base=None)


def is_json(path: Path) -> bool:
    """A host's file (``.json`` or ``.jsonc``, both read as JSON with comments), not mcpd's TOML."""
    return path.suffix.lower() in (".json", ".jsonc")


def _toml_document(source: str, raw: bytes) -> dict[str, Any]:
    try:
        # utf-8-sig: Windows editors (Notepad) start a UTF-8 file with a byte-order mark.
        document = tomllib.loads(raw.decode("utf-8-sig"))
    except (ValueError, RecursionError) as exc:
        # ValueError: beyond the decode and syntax errors (both ValueErrors), an integer longer than
        # Python converts (4300 digits) is refused by ``int()`` inside the parser.
        raise ConfigError(f"{source}: not valid TOML: {exc or 'nested too deeply'}") from None
    unknown = sorted(set(document) - {"servers", "daemon"})
    if unknown:
        raise ConfigError(
            f"{source}: unknown top-level key(s) {', '.join(unknown)}; servers go in [servers.NAME], "
            "daemon settings in [daemon]"
        )
    return document


def _toml_daemon(source: str, document: dict[str, Any]) -> DaemonSettings:
    # Unlike a server entry, bad daemon settings cannot be skipped: the whole file is refused.
    try:
        return msgspec.convert(document.get("daemon", {}), DaemonSettings)
    except msgspec.ValidationError as exc:
        message, field = _explain(str(exc))
        where = f", field `{field}`" if field else ""
        raise ConfigError(f"{source}: the [daemon] table{where}: {message}") from None


def _toml_servers(source: str, document: dict[str, Any]) -> Mapping[str, Any]:
    servers = document.get("servers", {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{source}: `servers` must be a table of [servers.NAME] sections")
    return servers


class _Repeated(msgspec.Struct, frozen=True):
    """An entry that cannot be used because the server's name (``key`` None), or ``key`` inside it,
    is given twice in one JSON object: the host would silently take the last one, and nothing says
    that was the one meant."""

    key: str | None = None


class _Object(dict[str, Any]):
    """A JSON object that remembers the keys it was given more than once."""

    repeated: list[str]


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    found = _Object(pairs)
    found.repeated = [] if len(found) == len(pairs) else _twice([key for key, _ in pairs])
    return found


def _twice(keys: list[str]) -> list[str]:
    seen: set[str] = set()
    twice = []
    for key in keys:
        if key in seen:
            twice.append(key)
        seen.add(key)
    return twice


def _first_repeat(value: Any) -> str | None:
    """The path of a key given twice anywhere inside ``value`` (walked without recursion: a file
    nested as deep as the JSON parser goes must not exhaust Python's stack here)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, _Object):
            if item.repeated:
                return where + item.repeated[0]
            stack.extend((inner, f"{where}{key}.") for key, inner in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((inner, f"{where}{index}.") for index, inner in reversed(list(enumerate(item))))
    return None


def _json_entries(source: str, raw: bytes) -> Mapping[str, Any]:
    try:
        document = json.loads(raw, object_pairs_hook=_object)
    except (ValueError, RecursionError) as exc:  # ValueError: as for TOML, an integer too long too
        raise ConfigError(f"{source}: not valid JSON: {exc or 'nested too deeply'}") from None
    if not isinstance(document, _Object):
        raise ConfigError(f"{source}: expected a JSON object with an `mcpServers` key")
    # `mcpServers` is what Claude Desktop, Claude Code and Cursor write; VS Code writes `servers`.
    # A file with both (hand-merged) has servers in both: each is read.
    keys = [key for key in ("mcpServers", "servers") if key in document]
    if not keys:
        raise ConfigError(f"{source}: no `mcpServers` (or `servers`) object in this file")
    repeated = [key for key in keys if key in document.repeated]
    if repeated:
        raise ConfigError(f"{source}: `{repeated[0]}` appears more than once; merge them into one")
    entries: dict[str, Any] = {}
    for key in keys:
        servers = document[key]
        if not isinstance(servers, _Object):
            raise ConfigError(f"{source}: `{key}` must be an object of name -> server")
        for name, entry in servers.items():
            if name in entries or name in servers.repeated:
                entries[name] = _Repeated()
            else:
                repeat = _first_repeat(entry)
                entries[name] = entry if repeat is None else _Repeated(repeat)
    return entries


def _build(
    source: str, entries: Mapping[str, Any], daemon: DaemonSettings, *, host_base: Path | None
) -> Config:
    """Every entry as a server or an issue; ``host_base``: a host's JSON file's folder (its keys apply)."""
    servers: list[ServerConfig] = []
    issues: list[ConfigIssue] = []
    notes: list[ConfigIssue] = []
    for name, entry in entries.items():
        result = _server(source, name, entry, host_base, notes)
        if isinstance(result, ConfigIssue):
            issues.append(result)
        else:
            servers.append(result)
    for note in notes:
        log.debug("config.ignored", file=note.file, server=note.server, field=note.field, why=note.message)
    return Config(
        source=source, daemon=daemon, servers=tuple(servers), issues=tuple(issues), notes=tuple(notes)
    )


def _server(
    source: str, name: str, entry: Any, host_base: Path | None, notes: list[ConfigIssue]
) -> ServerConfig | ConfigIssue:
    def issue(message: str, field: str | None = None) -> ConfigIssue:
        return ConfigIssue(file=source, server=name, field=field, message=message)

    if not _NAME.fullmatch(name):
        return issue(
            "server names are 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"
        )
    if SEPARATOR in name or name.endswith("_"):
        # `a` + tool `b__c` and `a__b` + tool `c` would both be called `a__b__c`; `x` + tool `_y`
        # and `x_` + tool `y` both `x___y`.
        return issue(
            f"server names may not contain {SEPARATOR!r} or end with '_': {SEPARATOR!r} separates"
            " server and tool in tool names"
        )
    if name == OWN_SERVER:
        return issue(f"the server name {name!r} is taken by the tools mcpd answers itself")
    if isinstance(entry, _Repeated):
        where = "this server's name" if entry.key is None else f"`{entry.key}`"
        return issue(f"{where} is given more than once (a host takes the last one); keep one", entry.key)
    if not isinstance(entry, dict):
        return issue("expected a table/object of server settings")
    if host_base is not None:
        read = hosts.read_entry(entry, host_base)
        notes.extend(issue(why, key) for key, why in read.notes)
        if read.problem is not None:
            return issue(read.problem[1], read.problem[0])
        fields = read.fields
    else:
        fields = dict(entry)
        if fields.get("name", name) != name:
            # Overwritten by the table's name below, so `name = "b"` in [servers.a] was dropped
            # without a word, where any other key mcpd does not take is an error.
            return issue(f"a server is named by its table, [servers.{name}]; remove `name`", "name")
    untyped = _not_text(fields)
    if untyped is not None:
        return issue(untyped[1], untyped[0])
    try:
        return msgspec.convert({**fields, "name": name}, ServerConfig)
    except msgspec.ValidationError as exc:
        message, field = _explain(str(exc))
        return issue(message, field)


def _not_text(fields: dict[str, Any]) -> tuple[str, str] | None:
    """(table, message) for an ``env`` or ``headers`` value that is not text, naming the key: msgspec
    would say only ``env[...]``, leaving the user to find which of the variables it meant. The
    value itself is never quoted (it is often a secret)."""
    for table in ("env", "headers"):
        values = fields.get(table)
        if not isinstance(values, dict):
            continue
        for key, value in values.items():
            if not isinstance(value, str):
                kind = type(value).__name__
                return table, f"`{table}` value of {key!r} must be text (in quotes), not a {kind}"
    return None


def _explain(error: str) -> tuple[str, str | None]:
    """Split msgspec's ``"<what> - at `$.field`"`` into a message and a field path."""
    unknown = _UNKNOWN_FIELD.search(error)
    if unknown:
        return f"unknown field `{unknown['field']}`", unknown["field"]
    at = _VALIDATION_PATH.search(error)
    message, path = (error[: at.start()], at["path"] or None) if at else (error, None)
    # Checks across fields (in __post_init__) name their field in backticks at the start.
    named = _NAMED_FIELD.match(message)
    return message, path or (named["field"] if named else None)
