"""The server entries MCP hosts write, read as mcpd's own: what is honoured, what is ignored, and why.

Claude Desktop, Claude Code, Cursor, VS Code, Windsurf, Roo Code and Cline each add keys of
their own to an ``mcpServers`` (VS Code: ``servers``) entry. A key mcpd can honour is mapped
onto its config (``serverUrl`` -> ``url``, ``disabled`` -> ``enabled``, ``disabledTools`` ->
``disabled_tools``, ``envFile`` read into ``env``); any other key is ignored with a note,
never a reason to drop the server, as the hosts themselves skip keys they do not know.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

from mcpd.config.files import read_bounded
from mcpd.config.model import ServerConfig
from mcpd.errors import ConfigError

FIELDS = frozenset(ServerConfig.__struct_fields__) - {"name"}

RENAMED = {"serverUrl": "url", "disabledTools": "disabled_tools"}
"""Host keys that mean exactly an mcpd field: Windsurf's ``serverUrl``; Roo Code's and Windsurf's
``disabledTools``."""

IGNORED = {
    "alwaysAllow": "the host's list of tools it runs without asking (Roo Code)",
    "autoApprove": "the host's list of tools it runs without asking (Cline)",
    "timeout": "a host's call timeout, in seconds or milliseconds depending on the host; "
    "mcpd's is `call_timeout` (seconds)",
    "networkTimeout": "a host's network timeout; mcpd's is `call_timeout` (seconds)",
    "watchPaths": "Roo Code restarts the server when these files change; use `mcpd restart`",
    "dev": "VS Code's development mode (watch and debug)",
    "oauth": "OAuth sign-in is done by the host; give mcpd a token in `headers`",
    "auth": "OAuth sign-in is done by the host; give mcpd a token in `headers`",
    "headersHelper": "a command Claude Code runs for headers; give mcpd the `headers` themselves",
    "sandbox": "VS Code's sandbox settings",
    "sandboxEnabled": "VS Code's sandbox settings",
    "gallery": "VS Code's gallery metadata",
    "version": "VS Code's gallery metadata",
    "trust": "the host's own confirmation setting",
    "includeTools": "a host's tool allow-list; list the others in `disabled_tools`",
    "excludeTools": "a host's tool deny-list; mcpd's is `disabled_tools` (or `disabledTools`)",
}

_TRANSPORTS = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamableHttp": "http",
    "sse": "sse",
}


class Entry:
    """One host entry turned into ServerConfig fields, with notes on what was left out."""

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}
        self.notes: list[tuple[str, str]] = []
        """(key, why it was ignored or approximated)"""
        self.problem: tuple[str, str] | None = None
        """(key, message) when the entry cannot be used at all."""


def read_entry(entry: dict[str, Any], base: Path) -> Entry:
    """Map a host entry onto mcpd's fields; relative ``envFile`` paths are read from ``base``."""
    result = Entry()
    env_file = None
    declared: tuple[str, str | None] | None = None
    for key, value in entry.items():
        if key == "env" and isinstance(value, dict):
            result.fields["env"] = _env(result, value)
        elif key in FIELDS:
            result.fields[key] = value
        elif key in RENAMED:
            result.fields.setdefault(RENAMED[key], value)
        elif key == "disabled":
            _disabled(result, value)
        elif key in ("type", "transport", "transportType"):
            declared = (key, _transport(result, key, value))
        elif key == "envFile":
            env_file = value
        else:
            result.notes.append((key, IGNORED.get(key, "not a setting mcpd knows; ignored")))
    if env_file is not None:
        _read_env_file(result, env_file, base)
    _check_aliases(result, entry)
    if declared is not None and result.problem is None:
        _check_transport(result, *declared)
    for field, found in _references(result.fields):
        result.notes.append((field, _REFERENCE_NOTE.format(found=", ".join(found))))
    return result


def _check_aliases(result: Entry, entry: dict[str, Any]) -> None:
    """An mcpd field and the host key that means it (``url`` and ``serverUrl``, ``enabled`` and
    ``disabled``) both given and disagreeing: one of them would be dropped without a word, and
    which was meant cannot be told, so the entry is refused naming both."""
    implied = [(alias, field, entry[alias]) for alias, field in RENAMED.items() if alias in entry]
    if isinstance(entry.get("disabled"), bool):
        implied.append(("disabled", "enabled", not entry["disabled"]))
    for alias, field, value in implied:
        if field in entry and entry[field] != value:
            result.problem = (field, f"`{field}` and `{alias}` are both given and disagree; keep one")


def _disabled(result: Entry, value: object) -> None:
    if not isinstance(value, bool):
        # Hosts test it for truth, so "false" (a string) would disable: no guess either way.
        result.problem = ("disabled", f"must be true or false, not {value!r}")
    elif value:
        result.fields["enabled"] = False


def _transport(result: Entry, key: str, value: object) -> str | None:
    transport = _TRANSPORTS.get(str(value))
    if transport == "sse":
        result.problem = (key, "the SSE transport is not supported; use the server's streamable HTTP URL")
    elif transport is None:
        result.problem = (key, f"unknown transport {value!r}; mcpd speaks stdio and streamable HTTP")
    return transport


def _check_transport(result: Entry, key: str, transport: str | None) -> None:
    """A declared transport the entry contradicts (``stdio`` with only a ``url``): which one was
    meant cannot be told, so the entry is refused rather than run the other way."""
    wants, other = ("command", "url") if transport == "stdio" else ("url", "command")
    if wants not in result.fields and other in result.fields:
        result.problem = (key, f"says {transport!r}, which needs `{wants}`, but the entry gives `{other}`")


_REFERENCE = re.compile(r"\$\{[^{}]{1,200}\}")
"""``${VAR}``, ``${env:VAR}``, ``${input:id}``, ``${workspaceFolder}``, ``${userHome}``: what Claude
Code, Cursor and VS Code replace in an entry before they start the server."""

_REFERENCE_NOTE = (
    "holds {found}, which the host would have replaced (from its environment, workspace or a prompt); "
    "mcpd passes the text as written: put the value itself here"
)


def _references(fields: dict[str, Any]) -> Iterator[tuple[str, list[str]]]:
    """(field, the references in it) for each string of the entry that holds any. The references
    alone are named, never the rest of the value (a header or env value may be a secret)."""
    for name in ("command", "args", "cwd", "url", "env", "headers"):
        value = fields.get(name)
        if isinstance(value, str):
            items: list[tuple[str, Any]] = [(name, value)]
        elif isinstance(value, list):
            items = [(f"{name}[{index}]", item) for index, item in enumerate(value)]
        elif isinstance(value, dict):
            items = [(f"{name}.{key}", item) for key, item in value.items()]
        else:
            continue
        for field, item in items:
            found = _REFERENCE.findall(item) if isinstance(item, str) else []
            if found:
                yield field, found


def _env(result: Entry, env: dict[str, Any]) -> dict[str, Any]:
    """VS Code allows numbers (taken as text) and null (unset a variable: mcpd passes a small
    environment anyway, so the variable is just left out)."""
    kept: dict[str, Any] = {}
    for name, value in env.items():
        if value is None:
            result.notes.append((f"env.{name}", "null (unset) leaves the variable out"))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            kept[name] = _js_text(value)
        else:
            kept[name] = value
    return kept


def _js_text(value: float) -> str:
    """A JSON number as the hosts (JavaScript's ``String()``) turn it into an environment value:
    ``1.0`` is ``"1"`` and ``1e3`` is ``"1000"``, where Python's ``str`` gives ``"1.0"`` and
    ``"1000.0"``, a value the server would not get from the host. (Both write the shortest digits
    that read back as the same number; only the notation differs.) JavaScript reads every number
    as a double, an integer too: ``9007199254740993`` reaches the server as ``"9007199254740992"``,
    ``10**21`` as ``"1e+21"``, one beyond a double's range as ``"Infinity"``."""
    try:
        number = float(value)
    except OverflowError:  # an integer too long for a double: JavaScript reads it as infinite
        number = math.inf if value > 0 else -math.inf
    if not math.isfinite(number):
        return "NaN" if math.isnan(number) else ("-" if number < 0 else "") + "Infinity"
    if number == 0:
        return "0"
    if 1e-6 <= abs(number) < 1e21:
        return format(Decimal(repr(number)).normalize(), "f")
    mantissa, _, exponent = repr(number).partition("e")
    return f"{mantissa}e{int(exponent):+d}"


def _read_env_file(result: Entry, value: object, base: Path) -> None:
    """``envFile`` (VS Code, Cursor): KEY=VALUE lines; ``env`` wins where both set a variable."""
    if not isinstance(value, str) or "${" in value:
        result.notes.append(("envFile", f"{value!r} names a path mcpd cannot resolve; not read"))
        return
    path = Path(value).expanduser()
    path = path if path.is_absolute() else base / path
    try:
        # Bounded like the config itself: a FIFO or /dev/zero named here must not hang the load.
        text = read_bounded(path, "an env file").decode("utf-8")
    except ConfigError as exc:
        result.notes.append(("envFile", f"{exc.message}; the server starts without it"))
        return
    except UnicodeDecodeError as exc:
        result.notes.append(("envFile", f"{path}: not UTF-8 ({exc}); the server starts without it"))
        return
    loaded = parse_env_file(text)
    env = result.fields.get("env")
    result.fields["env"] = {**loaded, **env} if isinstance(env, dict) else loaded


def parse_env_file(text: str) -> dict[str, str]:
    """Dotenv lines: ``KEY=VALUE``, optional ``export``, quotes and ``#`` comments."""
    found: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.removeprefix("export ").split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        found[key.strip()] = value
    return found
