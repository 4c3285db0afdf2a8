"""A flood of tokenless HTTP connections: ``python -m mcpd.testing.flood HOST PORT SECONDS``.

Opens connections as fast as it can, 200 at a time, each sending a request without the token and
closed once the next 200 are open. Prints ``flooding`` once under way and, at the end, how many
connections it opened. For ``tests/test_http.py`` and ``bench/http_flood.py``: a process of its
own, so the flood does not share the measuring process's interpreter.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import time

BATCH = 200
_REQUEST = b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"


def flood(host: str, port: int, seconds: float) -> int:
    """Connections opened until ``seconds`` have passed."""
    opened: list[socket.socket] = []
    count, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(BATCH):
            sock = socket.socket()
            sock.setblocking(False)
            sock.connect_ex((host, port))
            opened.append(sock)
            count += 1
        for sock in opened[:-BATCH]:
            with contextlib.suppress(OSError):  # refused, reset: the next one comes anyway
                sock.send(_REQUEST)
            sock.close()
        del opened[:-BATCH]
    for sock in opened:
        sock.close()
    return count


if __name__ == "__main__":
    print("flooding", flush=True)
    print(flood(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])), flush=True)
