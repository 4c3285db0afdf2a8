"""sd_notify, with the standard library: one datagram to ``$NOTIFY_SOCKET`` per message.

Tells systemd the truth about the daemon: ``READY=1`` once the socket listens and every
enabled server has had its first start attempt, ``RELOADING=1``/``READY=1`` around a reload
(once started), ``STOPPING=1`` on shutdown, ``STATUS=`` a one-line summary, and ``WATCHDOG=1``
pings when the unit sets ``WatchdogSec``. Outside systemd (no ``NOTIFY_SOCKET``) every call is a no-op.
"""

from __future__ import annotations

import os
import socket
import time

import structlog

log = structlog.get_logger("mcpd.daemon")


class Notifier:
    def __init__(self, address: str | None = None) -> None:
        address = address if address is not None else os.environ.get("NOTIFY_SOCKET")
        self._address: str | bytes | None = None
        if address:
            # A leading '@' names a socket in the abstract namespace.
            self._address = b"\0" + address[1:].encode() if address.startswith("@") else address
        self._started = False
        """READY=1 of the start-up is sent: until then a reload's READY=1 would end the start-up early."""

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def send(self, *fields: str) -> None:
        """One message of ``KEY=value`` lines; failures are logged, never raised."""
        if self._address is None:
            return
        message = "\n".join(fields).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.sendto(message, self._address)
        except OSError as exc:
            log.warning("sd_notify.failed", error=str(exc))

    def ready(self, status: str) -> None:
        """The start-up is over (every server had its first start attempt)."""
        self._started = True
        self.send("READY=1", f"STATUS={status}")

    def reloading(self) -> None:
        # During the start-up systemd reloads nothing (it waits for READY=1): nothing to say.
        if self._started:
            # MONOTONIC_USEC lets Type=notify-reload units match the reload to this message.
            self.send("RELOADING=1", f"MONOTONIC_USEC={time.monotonic_ns() // 1000}")

    def reloaded(self, status: str) -> None:
        """A reload is over: READY=1 again once started, the status alone during the start-up."""
        if self._started:
            self.ready(status)
        else:
            self.status(status)

    def stopping(self) -> None:
        self.send("STOPPING=1")

    def status(self, status: str) -> None:
        self.send(f"STATUS={status}")

    def watchdog_interval(self) -> float | None:
        """Half the unit's WatchdogSec (seconds), if the watchdog is on for this process."""
        usec = os.environ.get("WATCHDOG_USEC")
        pid = os.environ.get("WATCHDOG_PID")
        if not usec or (pid and pid != str(os.getpid())):
            return None
        try:
            return int(usec) / 2e6
        except ValueError:
            return None
