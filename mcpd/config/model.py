"""Configuration structs. Frozen, so two configs compare equal exactly when a reload may skip them."""

from __future__ import annotations

import ipaddress
import math
import os
import re
import urllib.parse
from typing import Literal

import msgspec

from mcpd.model.protocol import MAX_SERVER_CALL_TIMEOUT


def _require_finite(struct: msgspec.Struct) -> None:
    """NaN and infinity pass ``< 0`` checks yet break every timer; refuse them up front."""
    for name in struct.__struct_fields__:
        value = getattr(struct, name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"`{name}` must be a finite number")


def _require_within(struct: msgspec.Struct, bounds: dict[str, tuple[float, float]]) -> None:
    """Each named field in ``(low, high]`` seconds (or counts): a wait nobody could sit out is refused
    when the config is read, not discovered when a reload or a shutdown hangs on it."""
    for name, (low, high) in bounds.items():
        value = getattr(struct, name)
        if not low < value <= high:
            raise ValueError(f"`{name}` must be > {low:g} and <= {high:g} (got {value:g})")


MAX_STOP_GRACE = 10.0
"""Upper limit of ``stop_grace``. A stop takes at most about twice this, so the whole shutdown stays
within the supervisor's bound (25 s) and below the service unit's ``TimeoutStopSec`` (30 s)."""

_SERVER_BOUNDS = {
    "connect_timeout": (0.0, 600.0),
    "call_timeout": (0.0, MAX_SERVER_CALL_TIMEOUT),
    "ping_interval": (0.0, 3600.0),
    "ping_timeout": (0.0, 300.0),
    "stop_grace": (0.0, MAX_STOP_GRACE),
    "unhealthy_after": (0, 100),
}
_RESTART_BOUNDS = {"max_delay": (0.0, 3600.0), "stable_after": (0.0, 86400.0)}

MIN_RESTART_DELAY = 0.1
"""Lower limit of the delay a crash loop settles at (``max_delay``; ``initial_delay`` when
``multiplier`` is 1), systemd's default ``RestartSec``: a server that dies at once is spawned at most
ten times a second, whatever the policy says. Below it a tiny cap spawned such a server ~170 times a
second, a core busy and the log flooded with its state changes."""

FAST_RESTARTS = 10
"""Restarts a crash loop may make before its delay reaches ``MIN_RESTART_DELAY``: a multiplier just
above 1 grows a tiny first delay so slowly (1.001 from 1 ms: some 4600 restarts, at ~46 a second for
over a minute) that the floor would hold only in the end."""


class RestartPolicy(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """When and how often a dead or unhealthy server is started again."""

    initial_delay: float = 0.5
    max_delay: float = 60.0
    """The cap: a server that keeps crashing is spawned at most once per ``max_delay`` seconds."""
    multiplier: float = 2.0
    jitter: float = 0.2
    max_retries: int | None = None
    """Consecutive unstable runs tolerated before the server is left ``failed``; unset: retry for ever."""
    stable_after: float = 30.0
    """A run that lasts this long resets the retry count."""

    def __post_init__(self) -> None:
        _require_finite(self)
        _require_within(self, _RESTART_BOUNDS)
        if self.max_delay < MIN_RESTART_DELAY:
            raise ValueError(
                f"`max_delay` must be at least {MIN_RESTART_DELAY:g} s (got {self.max_delay:g}): "
                "a server that keeps crashing is spawned once per max_delay"
            )
        if not 0 < self.initial_delay <= self.max_delay:
            # 0 would stay 0 however often it is multiplied: restarts without any delay, for ever.
            raise ValueError("`initial_delay` must be > 0 and <= max_delay")
        if not 1 <= self.multiplier <= 10:
            raise ValueError("multiplier must be >= 1 and <= 10")
        if self.multiplier == 1 and self.initial_delay < MIN_RESTART_DELAY:
            raise ValueError(
                f"`initial_delay` must be at least {MIN_RESTART_DELAY:g} s when `multiplier` is 1, "
                "which keeps every delay at initial_delay"
            )
        if self.initial_delay * self.multiplier**FAST_RESTARTS < MIN_RESTART_DELAY:
            raise ValueError(
                f"`initial_delay` {self.initial_delay:g} s with `multiplier` {self.multiplier:g} stays "
                f"under {MIN_RESTART_DELAY:g} s for more than {FAST_RESTARTS} restarts; "
                "raise either"
            )
        if not 0 <= self.jitter < 1:
            raise ValueError("jitter must be in [0, 1)")
        if self.max_retries is not None and self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")


class ServerConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One MCP server: a command to spawn (stdio) or a URL to connect to (streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = msgspec.field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    description: str | None = None
    enabled: bool = True
    connect_timeout: float = 20.0
    """Seconds for spawn + initialize + the first tools/list."""
    call_timeout: float = 60.0
    """Default deadline of a tool call when the caller gives none."""
    ping_interval: float = 15.0
    ping_timeout: float = 5.0
    unhealthy_after: int = 3
    """Consecutive failed pings after which a live but unresponsive server is restarted."""
    stop_grace: float = 2.0
    """Seconds between closing stdin and SIGTERM, and again between SIGTERM and SIGKILL."""
    restart: RestartPolicy = RestartPolicy()
    verify: Literal["off", "warn", "block"] = "warn"
    """What the tool-poisoning verifier's high-severity findings do: nothing, a warning, keep it out."""
    pinning: Literal["pin", "trust"] = "pin"
    """pin: changed or added tools wait for `mcpd approve`; trust: they are used at once."""
    disabled_tools: tuple[str, ...] = ()
    """Tools of this server (as the server names them) kept out of every registry and refused
    when called; hosts write it as ``disabledTools``."""

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def __post_init__(self) -> None:
        _require_finite(self)
        for field, value in msgspec.structs.asdict(self).items():
            if _not_unicode(value):
                # A lone surrogate (JSON's "\ud800") passes JSON but no UTF-8 encoder: every later
                # status or log of this server would fail.
                raise ValueError(f"`{field}` holds text that is not valid Unicode")
        if (self.command is None) == (self.url is None):
            raise ValueError("exactly one of `command` (stdio) or `url` (streamable HTTP) is required")
        if self.command is not None and not self.command.strip():
            raise ValueError("`command` is empty")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("`url` must start with http:// or https://")
        _require_within(self, _SERVER_BOUNDS)
        self._check_spawnable()
        self._check_sendable()

    def _check_spawnable(self) -> None:
        """What exec would refuse later, refused now, where the message can name the field."""
        for field, values in (
            ("command", [self.command or ""]),
            ("args", self.args),
            ("cwd", [self.cwd or ""]),
        ):
            if any("\0" in value for value in values):
                raise ValueError(f"`{field}` contains a NUL byte")
        for key, value in self.env.items():
            if not key or "=" in key or "\0" in key:
                raise ValueError(
                    f"`env` has an invalid variable name {key!r}: empty, or holds '=' or a NUL byte"
                )
            if "\0" in value:
                raise ValueError(f"`env` variable {key!r} has a NUL byte in its value")
        if self.cwd is not None and not os.path.isabs(os.path.expanduser(self.cwd)):
            raise ValueError("`cwd` must be an absolute path")

    def _check_sendable(self) -> None:
        """What the HTTP client would refuse at every connect, refused now: otherwise the server sat
        in backoff for ever, its status an httpx error quoting the header (often a token). Neither
        the URL nor a header's value is quoted here, for the same reason."""
        if self.url is not None:
            if _UNSENDABLE.search(self.url):
                raise ValueError("`url` contains a control character (percent-encode it)")
            # urllib's own messages are not passed on: they quote the port or the whole host part,
            # a password in it included.
            try:
                parts = urllib.parse.urlsplit(self.url)
            except ValueError:
                raise ValueError("`url` is malformed: its host part cannot be read") from None
            try:
                port = parts.port
            except ValueError:
                raise ValueError("`url` is malformed: its port is not a number in 0-65535") from None
            if not parts.hostname:
                raise ValueError("`url` names no host")
            if port == 0:
                raise ValueError("`url` has port 0, on which nothing can be reached")
        for name, value in self.headers.items():
            if not _HEADER_NAME.fullmatch(name):
                # Quoted only up to its first bad character: a whole `Name: Bearer token` line
                # pasted in as the name must not be shown.
                valid = _HEADER_NAME.match(name)
                start = f" starting {valid.group()!r}" if valid else ""
                raise ValueError(
                    f"`headers` has an invalid header name{start} (a value goes on the right of `=`)"
                )
            if not _HEADER_VALUE.fullmatch(value):
                raise ValueError(
                    f"`headers` {name!r}: the value must be printable ASCII, without a line break "
                    "or a space at either end"
                )


_UNSENDABLE = re.compile(r"[\x00-\x1f\x7f]")
"""What httpx refuses in a URL (a space it percent-encodes)."""
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""RFC 9110's token: what a header's name may be made of."""
_HEADER_VALUE = re.compile(r"(?:[\x21-\x7e](?:[\t\x20-\x7e]*[\x21-\x7e])?)?")
"""Visible ASCII with inner spaces and tabs: HTTP/1.1 allows no line break and no space at either
end of a value, and the client encodes values as ASCII."""


def _not_unicode(value: object) -> bool:
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_not_unicode(key) or _not_unicode(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return any(map(_not_unicode, value))
    return False


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
"""Host names that always mean this machine (a Host or Origin header naming one is local)."""


def http_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as the host to bind and the port; ``ValueError`` if
    malformed. The host is an IP address or ``localhost`` (bound as 127.0.0.1): a name would bind
    wherever it resolves today."""
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"`http` must be HOST:PORT, e.g. 127.0.0.1:8765 (got {text!r})")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "localhost":
        return "127.0.0.1", int(port)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"`http` must name an IP address or localhost, not {host!r}") from None
    return host, int(port)


def is_loopback(host: str) -> bool:
    """``host`` (an address or a name, without brackets) is this machine's loopback."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost: whatever it resolves to, it is not ours to trust


MAX_RETENTION_DAYS = 36_500.0
"""A century: longer retention is no retention at all, and would not fit SQLite's integers."""


MAX_FRAME_BYTES = 256 * 1024 * 1024
"""Upper limit of ``max_frame_bytes``: what one client may make the daemon read into memory at once."""
MAX_IN_FLIGHT = 65536
"""Upper limit of ``max_in_flight``, the requests one connection may have running."""


class DaemonSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The ``[daemon]`` table: limits of the socket API, and the HTTP front end."""

    max_frame_bytes: int = 16 * 1024 * 1024
    """Largest message a client may send; a bigger frame closes that connection."""
    client_write_timeout: float = 10.0
    """A client that leaves its answers unread this long is disconnected."""
    max_in_flight: int = 256
    """Concurrent requests per connection; as many more wait, and past those one is refused."""
    usage: bool = True
    """Record tool calls and capability requests (ranking learns from them; ``mcpd report``)."""
    usage_db: str | None = None
    """SQLite file of the usage store; default ``usage.db`` in the user state directory."""
    usage_retention_days: float = 90.0
    semantic: bool = False
    """Fuse a semantic ranking with the lexical one (needs ``pip install 'mcpd[semantic]'``)."""
    semantic_model: str | None = None
    """A model2vec model: a local folder or a hub name (default ``minishlab/potion-base-8M``)."""
    http: str | None = None
    """``HOST:PORT`` to serve hosts over MCP Streamable HTTP (``/mcp``); unset: no HTTP front end.
    Read at start (``mcpd serve --http`` overrides it); a reload does not move it."""
    http_allow_remote: bool = False
    """Allow an ``http`` address that is not loopback (every request still needs the token)."""
    http_token_file: str | None = None
    """The bearer token's file; default ``http.token`` in the user state directory."""
    http_max_sessions: int = 256
    """HTTP sessions at once; an ``initialize`` beyond sets aside the one idle longest (resumed when
    its host returns), and is refused (503) only while every session is in use."""
    http_session_idle: float = 3600.0
    """Seconds after which a session with no request in progress and no GET stream is ended."""
    socket_check_interval: float = 2.0
    """Seconds between two looks at the socket path (``mcpd.daemon.socket_guard``): how soon a
    deleted socket is bound again, against two ``lstat`` calls a look."""

    def __post_init__(self) -> None:
        _require_finite(self)
        for name in ("usage_db", "http_token_file"):
            path = getattr(self, name) or ""
            if "\0" in path:
                # No file has such a name: opening it raised ValueError, and `serve` ended in an
                # internal error.
                raise ValueError(f"`{name}` contains a NUL byte")
            if path and not os.path.isabs(os.path.expanduser(path)):
                # Relative to each process's own working directory: `mcpd token` run elsewhere
                # than the daemon printed a token the daemon refused.
                raise ValueError(f"`{name}` must be an absolute path (or start with ~)")
        # Upper bounds too: a client of a daemon that accepts a gigabyte frame, or a million requests
        # at once, holds that much of its memory.
        if not 1024 <= self.max_frame_bytes <= MAX_FRAME_BYTES:
            raise ValueError(f"`max_frame_bytes` must be at least 1024 and at most {MAX_FRAME_BYTES}")
        _require_within(self, {"client_write_timeout": (0.0, 600.0)})
        if not 1 <= self.max_in_flight <= MAX_IN_FLIGHT:
            raise ValueError(f"`max_in_flight` must be at least 1 and at most {MAX_IN_FLIGHT}")
        if self.usage_retention_days <= 0:
            raise ValueError("`usage_retention_days` must be > 0")
        _require_within(self, {"usage_retention_days": (0.0, MAX_RETENTION_DAYS)})
        _require_within(self, {"http_max_sessions": (0, 100_000), "http_session_idle": (0.1, 7 * 86400.0)})
        if not 0.1 <= self.socket_check_interval <= 60.0:
            # Below, the looks (a worker thread each) would keep an idle daemon busy.
            raise ValueError("`socket_check_interval` must be at least 0.1 and at most 60 seconds")
        if self.http is not None:
            host, _ = http_address(self.http)
            if not (self.http_allow_remote or is_loopback(host)):
                raise ValueError(
                    f"`http` {self.http} is not a loopback address: other machines could reach it; "
                    "set `http_allow_remote = true` to mean it (every request still needs the token)"
                )


class ConfigIssue(msgspec.Struct, frozen=True, kw_only=True):
    """One rejected server entry: where it is and why it was skipped."""

    file: str
    server: str
    field: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: server {self.server!r}"
        if self.field:
            where += f", field `{self.field}`"
        return f"{where}: {self.message}"


class Config(msgspec.Struct, frozen=True, kw_only=True):
    """A loaded config: the valid servers (in file order) and what was wrong with the rest."""

    source: str
    """The file it came from, or ``<embedded default>``."""
    daemon: DaemonSettings = DaemonSettings()
    servers: tuple[ServerConfig, ...] = ()
    issues: tuple[ConfigIssue, ...] = ()
    notes: tuple[ConfigIssue, ...] = ()
    """Host keys that were ignored (or only partly honoured), and why; the servers still load."""
