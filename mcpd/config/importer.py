"""``mcpd import``: servers from a host's ``mcpServers`` file, appended to mcpd's TOML config.

The existing file is never rewritten: new ``[servers.NAME]`` sections are appended after its
last line, so its comments, order and layout stay byte for byte. A server whose name the
file already has is refused (or, when asked, skipped) rather than overwritten. The combined
text is loaded as a config before it replaces the file (atomically), so a bad import can
never leave a file the daemon refuses.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from mcpd.config.files import present
from mcpd.config.load import is_json, load_config
from mcpd.config.model import Config, ConfigIssue, RestartPolicy, ServerConfig
from mcpd.errors import ConfigError

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_DEFAULTS: dict[str, Any] = msgspec.to_builtins(ServerConfig(name="-", command="-"))


@dataclass
class ImportPlan:
    source: Config
    """What was read from the host file (servers, issues, notes)."""
    target: Path
    added: list[ServerConfig] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)
    """Names the target already configures (left as they are)."""
    text: str = ""
    """The TOML that would be appended."""


def plan_import(source: Path, target: Path) -> ImportPlan:
    """Read ``source`` (any file mcpd reads) and work out what appending it to ``target`` means."""
    if is_json(target):
        raise ConfigError(f"{target}: `mcpd import` writes mcpd's TOML config, not a JSON file")
    incoming = load_config(source)
    configured = _configured_names(target)
    plan = ImportPlan(source=incoming, target=target)
    for server in incoming.servers:
        if server.name in configured:
            plan.existing.append(server.name)
        else:
            plan.added.append(server)
    if plan.added:
        stamp = time.strftime("%Y-%m-%d")
        header = f"# Imported from {_comment_text(str(source.resolve()))} by `mcpd import` on {stamp}.\n"
        plan.text = header + "\n".join(server_toml(server) for server in plan.added)
    return plan


def write_import(plan: ImportPlan) -> None:
    """Append ``plan.text`` to the target, atomically, after checking the result loads cleanly.

    Through a symbolic link the file it names changes (the link stays); anything but a regular
    file (``/dev/null``, a FIFO) is refused, as is a target that cannot be written, naming it.
    """
    target = plan.target.resolve()
    if target.exists() and not target.is_file():
        raise ConfigError(f"{plan.target}: not a regular file; nothing was imported")
    try:
        _append(target, plan.text)
    except OSError as exc:
        raise ConfigError(f"{plan.target}: cannot write the config: {exc.strerror or exc}") from None


def _append(target: Path, text: str) -> None:
    old = target.read_text(encoding="utf-8") if target.exists() else ""
    separator = "" if not old or old.endswith("\n\n") else ("\n" if old.endswith("\n") else "\n\n")
    new = old + separator + text
    target.parent.mkdir(parents=True, exist_ok=True)
    # Server entries may hold secrets (env, headers): a new file is private to its user.
    mode = target.stat().st_mode & 0o777 if target.exists() else 0o600
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".toml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            stream.write(new)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp, mode)
        _check_combined(Path(temp), old_issues=_issues_of(target) if old else ())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _configured_names(target: Path) -> set[str]:
    if not present(target, "mcpd's config"):
        return set()
    config = load_config(target)
    return {s.name for s in config.servers} | {i.server for i in config.issues}


def _issues_of(target: Path) -> tuple[ConfigIssue, ...]:
    return load_config(target).issues


def _check_combined(path: Path, old_issues: tuple[ConfigIssue, ...]) -> None:
    try:
        combined = load_config(path)
    except ConfigError as exc:
        raise ConfigError(f"the import would make the config unusable, nothing written: {exc}") from None
    known = {(i.server, i.field, i.message) for i in old_issues}
    new = [i for i in combined.issues if (i.server, i.field, i.message) not in known]
    if new:
        raise ConfigError(f"the import would add a bad entry, nothing written: {new[0]}")


# -- TOML writing ----------------------------------------------------------------------------


def server_toml(server: ServerConfig) -> str:
    """``[servers.NAME]`` with the settings that differ from the defaults, in field order."""
    values: dict[str, Any] = msgspec.to_builtins(server)
    lines = [f"[servers.{key(server.name)}]"]
    restart = values.pop("restart")
    for name, value in values.items():
        if name != "name" and value is not None and value != _DEFAULTS[name]:
            lines.append(f"{name} = {toml_value(value)}")
    if restart != msgspec.to_builtins(RestartPolicy()):
        lines.append(f"\n[servers.{key(server.name)}.restart]")
        lines += [f"{name} = {toml_value(value)}" for name, value in restart.items()]
    return "\n".join(lines) + "\n"


def _comment_text(text: str) -> str:
    """``text`` quoted and escaped for a ``#`` comment: a file name may hold a newline, and written
    raw the rest of the name would become TOML of the user's config (``[daemon]``, a server)."""
    # Bytes of a name that are not UTF-8 (surrogates here) could not be written at all.
    return string(text).encode("utf-8", "backslashreplace").decode("utf-8")


def key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else string(name)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
