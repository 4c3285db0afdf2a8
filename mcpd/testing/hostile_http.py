"""A hostile remote MCP server: streamable HTTP on a loopback port, raw asyncio, with faults that a
test switches on and off while it runs.

``python -m mcpd.testing.hostile_http --port P`` serves MCP at ``/mcp`` (tools ``echo`` and
``sleep``, JSON answers) and control at ``/ctl``: a POST of a JSON object sets the fault state
(``control`` below) and answers it with counters (``posts``, ``calls`` run, ``open``
connections, ``events`` of endless streams sent).
Faults apply to POSTs of requests whose method is in ``methods`` (every request if null), the next
``count`` of them (all if null), and to the tools in ``tools`` only if that is set:

    ok                 answer (the default)
    status:N           HTTP status N, a text body, nothing run (with ``Retry-After: arg`` if ``arg`` is set)
    hang               never answer (headers never come)
    endless_sse        an event stream of log notifications that never ends, no answer
    huge_json          a JSON answer whose text is ``arg`` bytes long
    wrong_ct           the answer as text/html
    bad_json           a 200 JSON answer cut in the middle
    ran_502            (tools/call) run, then a gateway's 502 (its upstream closed)
    sse_drop           (tools/call) run, its resumable event stream closed before the answer
    sse_error          (tools/call) the server's own -32000 error on an event stream, its JSON over
                       several data lines ended by ``arg`` (CR, LF or CRLF), sent a byte at a time
    sse_other          (tools/call) the same error as an event of another type than ``message``
                       (which a client ignores), then the stream closed
    sse_gzip           (tools/call) the same error as a ``message`` event, the stream gzipped
                       (``content-encoding: gzip``, as a gateway that compresses event streams sends it)

``get`` sets what the event stream (GET) does: ``ok`` (open, quiet), ``prime_close`` (an event with
an id, then closed: resumable), or a status ``"502"`` (refused and closed). ``resume`` is the status
that answers a GET resuming a stream (``Last-Event-ID``), ``"503"`` by default, or ``"error"``: an
event stream holding the server's -32000 error answering the call ``sse_drop`` cut, then closed.
``forget: true`` forgets every session (the next request with one gets a 404).
``--hang-connections`` accepts connections and never reads them (a hung handshake).
``endless_pages: true`` (or ``--endless-pages``) makes tools/list pages that never end.
Loopback only; for tests and benchmarks.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import uuid
import zlib
from typing import Any

import httpx2

STATE: dict[str, Any] = {
    "mode": "ok",
    "methods": None,
    "count": None,
    "arg": None,
    "get": "ok",
    "resume": "503",
    "tools": None,
    "endless_pages": False,
}
SESSIONS: set[str] = set()
DROPPED: dict[str, Any] = {}
"""The id of the call whose event stream ``sse_drop`` cut last (``id``), for a resume to answer."""
STATS = {"posts": 0, "calls": 0, "open": 0, "events": 0}
TOOLS = [
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "sleep", "inputSchema": {"type": "object", "properties": {"s": {"type": "number"}}}},
]
_REASONS = {200: "OK", 202: "Accepted", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found"}
_FORGOTTEN = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}'


def _head(status: int, ctype: str, extra: dict[str, str] | None = None, length: int | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", f"content-type: {ctype}"]
    if length is not None:
        lines.append(f"content-length: {length}")
    lines += [f"{k}: {v}" for k, v in (extra or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _answer(
    status: int, body: bytes, ctype: str = "application/json", extra: dict[str, str] | None = None
) -> bytes:
    return _head(status, ctype, extra, len(body)) + body


def _busy(request_id: object) -> dict[str, Any]:
    """The server's own JSON-RPC error, with the code the SDK also gives errors of its own making."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32000, "message": "busy"}}


def _result(message: dict[str, Any]) -> dict[str, Any]:
    method, params = message["method"], message.get("params") or {}
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}, "logging": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
        if STATE["endless_pages"]:  # each page the same tools, and a next cursor never given before
            result["nextCursor"] = str(int(params.get("cursor") or 0) + 1)
    elif method == "tools/call":
        text = str((params.get("arguments") or {}).get("text", "ok"))
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no such method"}}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def _fault(message: dict[str, Any]) -> str:
    if STATE["mode"] == "ok" or (STATE["methods"] is not None and message["method"] not in STATE["methods"]):
        return "ok"
    if STATE["tools"] is not None and (message.get("params") or {}).get("name") not in STATE["tools"]:
        return "ok"
    if STATE["count"] is not None:
        if STATE["count"] <= 0:
            return "ok"
        STATE["count"] -= 1
    return str(STATE["mode"])


async def _read(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], bytes]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    method, path, _ = head[0].split(" ", 2)
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:] if line)}
    body = b""
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            body += chunk[:-2]
    return method, path, headers, body


async def _event_stream(writer: asyncio.StreamWriter) -> None:
    writer.write(_head(200, "text/event-stream", {"cache-control": "no-cache", "connection": "close"}))
    await writer.drain()


class _Changes:
    """Wakes whoever waits for the fault state to change (an open event stream)."""

    event: asyncio.Event | None = None

    @classmethod
    async def wait(cls) -> None:
        cls.event = cls.event or asyncio.Event()
        await cls.event.wait()

    @classmethod
    def happened(cls) -> None:
        if cls.event is not None:
            cls.event.set()
            cls.event = None


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        method, path, headers, body = await _read(reader)
        sid = headers.get("mcp-session-id")
        if path.startswith("/ctl"):
            wish = json.loads(body or b"{}")
            if wish.pop("forget", False):
                SESSIONS.clear()
            STATE.update(wish)
            _Changes.happened()
            writer.write(_answer(200, json.dumps({"state": STATE, **STATS}).encode()))
        elif method == "DELETE":
            SESSIONS.discard(sid or "")
            writer.write(_answer(200, b""))
        elif method == "GET" and "last-event-id" in headers:
            STATS["resumes"] = STATS.get("resumes", 0) + 1
            if STATE["resume"] == "error":
                await _event_stream(writer)
                writer.write(f"id: 2\nevent: message\ndata: {json.dumps(_busy(DROPPED['id']))}\n\n".encode())
                await writer.drain()
                return
            code = int(STATE["resume"])
            writer.write(
                _answer(
                    code, _FORGOTTEN if code == 404 else b"unavailable", "text/plain", {"connection": "close"}
                )
            )
            await writer.drain()
            return
        elif method == "GET":
            await _get(sid, writer)
            return
        else:
            STATS["posts"] += 1
            message = json.loads(body)
            if message.get("method") != "initialize" and sid not in SESSIONS:
                writer.write(_answer(404, _FORGOTTEN))
            elif "id" not in message or "method" not in message:  # a notification or a response
                writer.write(_answer(202, b""))
            elif not await _request(message, reader, writer):
                return
        await writer.drain()


async def _get(sid: str | None, writer: asyncio.StreamWriter) -> None:
    """The event stream: open and quiet while ``get`` is ok, then closed; the connection ends."""
    if sid not in SESSIONS:
        writer.write(_answer(404, _FORGOTTEN, extra={"connection": "close"}))
    elif STATE["get"] == "prime_close":  # a resumable stream (events with ids) that a proxy closes
        STATS["gets"] = STATS.get("gets", 0) + 1
        await _event_stream(writer)
        writer.write(b"id: g1\nevent: message\ndata: \n\n")
    elif STATE["get"] != "ok":
        writer.write(_answer(int(STATE["get"]), b"bad gateway", "text/plain", {"connection": "close"}))
    else:
        await _event_stream(writer)
        while STATE["get"] == "ok":
            await _Changes.wait()
    await writer.drain()


def _session_headers(message: dict[str, Any], fault: str) -> dict[str, str]:
    """The headers of a new session, for an initialize that is answered."""
    if message["method"] != "initialize" or fault != "ok":
        return {}
    session = uuid.uuid4().hex
    SESSIONS.add(session)
    return {"mcp-session-id": session}


async def _run_call(message: dict[str, Any], fault: str, writer: asyncio.StreamWriter) -> bool | None:
    """Run a tool; what ``_request`` returns if this fault answered it already, else None."""
    STATS["calls"] += 1
    if fault == "ran_502":  # a gateway whose upstream ran the call, then reset: 502
        writer.write(_answer(502, b"upstream prematurely closed", "text/plain"))
        return True
    if fault == "sse_drop":  # the call runs; its event stream (resumable) drops before the answer
        DROPPED["id"] = message["id"]
        await _event_stream(writer)
        writer.write(b"id: 1\nevent: message\ndata: \n\n")
        await writer.drain()
        return False
    if fault == "sse_error":
        await _event_stream(writer)
        end = str(STATE["arg"] or "\n")
        error = json.dumps(_busy(message["id"]), indent=1)
        lines = ["event: message", *(f"data: {line}" for line in error.splitlines())]
        for byte in "".join(line + end for line in [*lines, ""]).encode():
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.001)  # each its own segment: every line end cut somewhere
        return False
    if fault == "sse_other":
        await _event_stream(writer)
        writer.write(f"event: other\ndata: {json.dumps(_busy(message['id']))}\n\n".encode())
        await writer.drain()
        return False
    if fault == "sse_gzip":
        head = {"cache-control": "no-cache", "connection": "close", "content-encoding": "gzip"}
        gzip = zlib.compressobj(wbits=31)
        event = f"event: message\ndata: {json.dumps(_busy(message['id']))}\n\n".encode()
        writer.write(_head(200, "text/event-stream", head) + gzip.compress(event) + gzip.flush())
        await writer.drain()
        return False
    if message["params"]["name"] == "sleep":
        await asyncio.sleep(float((message["params"].get("arguments") or {}).get("s", 1)))
    return None


async def _request(
    message: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> bool:
    """Answer one request as the fault state says; False when the connection is to close."""
    fault = _fault(message)
    extra = _session_headers(message, fault)
    STATS["m:" + message["method"]] = STATS.get("m:" + message["method"], 0) + 1
    if fault.startswith("status:"):
        STATS["refused"] = STATS.get("refused", 0) + 1
        wait = {"retry-after": str(STATE["arg"])} if STATE["arg"] is not None else None
        writer.write(_answer(int(fault.partition(":")[2]), b"refused", "text/plain", wait))
        return True
    if message["method"] == "tools/call":
        ran = await _run_call(message, fault, writer)
        if ran is not None:
            return ran
    answer = json.dumps(_result(message)).encode()
    if fault == "ok":
        writer.write(_answer(200, answer, extra=extra))
    elif fault == "hang":
        # Until the client closes the connection (noticed, so ``open`` drops at once), then close.
        while await reader.read(65536):
            pass
        return False
    elif fault == "endless_sse":
        await _event_stream(writer)
        for n in itertools.count():
            note = {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": "y" * 100 + str(n)},
            }
            writer.write(f"event: message\ndata: {json.dumps(note)}\n\n".encode())
            await writer.drain()
            STATS["events"] += 1
            if n % 50 == 0:
                await asyncio.sleep(0.001)
    elif fault == "huge_json":
        text = "z" * int(STATE["arg"] or 64 * 2**20)
        huge = {
            "jsonrpc": "2.0",
            "id": message["id"],
            "result": {"content": [{"type": "text", "text": text}]},
        }
        writer.write(_answer(200, json.dumps(huge).encode(), extra=extra))
    elif fault == "wrong_ct":
        writer.write(_answer(200, answer, "text/html", extra))
    elif fault == "bad_json":
        writer.write(_answer(200, answer[: len(answer) // 2], extra=extra))
    return True


async def _connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hang: bool) -> None:
    STATS["open"] += 1
    try:
        if hang:
            await asyncio.Event().wait()
        await _serve(reader, writer)
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        STATS["open"] -= 1
        writer.close()


async def _main(port: int, hang: bool) -> None:
    server = await asyncio.start_server(
        lambda r, w: _connection(r, w, hang), "127.0.0.1", port, reuse_address=True, limit=2**20
    )
    async with server:
        await server.serve_forever()


async def control(url: str, **wish: Any) -> dict[str, Any]:
    """Set the fault state of the hostile server at ``url`` (its ``/mcp`` URL); its state and counters."""
    async with httpx2.AsyncClient(timeout=10) as client:
        response = await client.post(url.replace("/mcp", "/ctl"), json=wish)
        answer: dict[str, Any] = response.json()
        return answer


def command(port: int, *flags: str) -> list[str]:
    """The command line that runs this server on ``port`` (for ``remote.running_http_server``)."""
    return [sys.executable, "-m", "mcpd.testing.hostile_http", "--port", str(port), *flags]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--hang-connections", action="store_true", help="accept connections, never read them")
    parser.add_argument("--endless-pages", action="store_true", help="tools/list pages that never end")
    args = parser.parse_args()
    STATE["endless_pages"] = args.endless_pages
    asyncio.run(_main(args.port, args.hang_connections))
