"""The argument parser: one-line usage errors, value checks, the options every client command takes.

A bad value is refused by argparse itself, before any connection, so that ``--limit 0`` is
exit status 2 with a line naming ``--limit`` instead of the daemon's validation message.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias

import msgspec

from mcpd.cli.output import UsageError
from mcpd.model.protocol import MAX_CALL_TIMEOUT

if TYPE_CHECKING:
    from mcpd.client import Client

Handler = Callable[[argparse.Namespace], int]
ClientHandler: TypeAlias = "Callable[[argparse.Namespace, Client], int]"
Commands: TypeAlias = "argparse._SubParsersAction[Parser]"


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (raised, so ``--json`` can report them too)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.prog)


MAX_INT = 2**31 - 1
"""The largest count an option takes: larger ones cannot travel in the protocol's integers anyway."""


def _whole(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= {low}, got {text!r}") from None
    if not low <= value <= MAX_INT:
        raise argparse.ArgumentTypeError(f"expected a whole number from {low} to {MAX_INT}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    return _whole(text, 1)


def count(text: str) -> int:
    """A number of items, 0 included."""
    return _whole(text, 0)


def bounded_int(high: int) -> Callable[[str], int]:
    def check(text: str) -> int:
        value = positive_int(text)
        if value > high:
            raise argparse.ArgumentTypeError(f"expected a whole number from 1 to {high}, got {text!r}")
        return value

    return check


def _number(text: str) -> float:
    """The number ``text`` says, NaN when it says none (NaN fails every range check)."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def seconds(text: str) -> float:
    """A positive, finite number of seconds no longer than a call may last."""
    value = _number(text)
    if not (math.isfinite(value) and 0 < value <= MAX_CALL_TIMEOUT):
        raise argparse.ArgumentTypeError(f"expected seconds in (0, {MAX_CALL_TIMEOUT:g}], got {text!r}")
    return value


def fraction(text: str) -> float:
    value = _number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}")
    return value


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def age(text: str) -> float:
    """``90s``, ``15m``, ``12h``, ``7d`` (or plain seconds) -> seconds."""
    number, unit = (text[:-1], _UNITS[text[-1]]) if text[-1:] in _UNITS else (text, 1)
    value = _number(number) * unit
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a duration like 90s, 15m, 12h or 7d, got {text!r}")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def nonempty_name(text: str) -> str:
    """A server, tool or prompt name: never empty (an empty one used to mean "all of them")."""
    if not text:
        raise argparse.ArgumentTypeError("expected a name, got an empty one")
    return text


def socket_path(text: str) -> Path:
    if not text:
        raise argparse.ArgumentTypeError("expected a path, got an empty one")
    return Path(text)


def _unrepeated(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are each given once: JSON itself would keep the last of two, and
    whether that is the value meant cannot be told."""
    found = dict(pairs)
    if len(found) < len(pairs):
        keys = [key for key, _ in pairs]
        repeated = next(key for index, key in enumerate(keys) if key in keys[:index])
        raise argparse.ArgumentTypeError(f"the key {repeated!r} is given more than once; keep one")
    return found


def json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unrepeated)
        # What the socket cannot carry is refused here, not found as an internal error later.
        msgspec.msgpack.encode(value)
    except (json.JSONDecodeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    except RecursionError:
        raise argparse.ArgumentTypeError("JSON nested too deeply") from None
    except OverflowError:
        raise argparse.ArgumentTypeError("a number too large for a 64-bit integer") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError('expected a JSON object, e.g. \'{"text": "hi"}\'')
    return value


def client_options() -> Parser:
    """The options of every command that talks to the daemon."""
    common = Parser(add_help=False)
    common.add_argument(
        "--socket", type=socket_path, help="daemon socket (default: $MCPD_SOCKET or the runtime dir)"
    )
    common.add_argument("--json", action="store_true", help="print one JSON document (errors too)")
    common.add_argument(
        "--autostart", action="store_true", help="start a daemon in the background if none runs"
    )
    return common


def connected(handler: ClientHandler) -> Handler:
    """Run ``handler`` with a client connected to the daemon (started first with ``--autostart``)."""

    def run(args: argparse.Namespace) -> int:
        if args.autostart:
            from mcpd.client.autostart import ensure_daemon

            ensure_daemon(args.socket)
        # Imported here: the parser serves commands that need no client too (serve, config, ...).
        from mcpd.client import Client

        with Client(args.socket, name=f"mcpd-cli/{args.command}") as client:
            return handler(args, client)

    return run
