"""An MCP server that fills every optional field MCP defines, for tests of what a relay keeps.

Run ``python -m mcpd.testing.fullserver [--transport stdio|http --port P]``. It speaks raw JSON-RPC
(no SDK, so nothing is dropped or added on its side): its tools, resources, templates and prompts
carry ``icons``, ``annotations``, ``_meta``, ``execution``, argument titles and a field of a later
revision (``x-later``, as do its results of calls, reads, prompts and completions); its answers and
notifications carry ``_meta``; some requests fail with its own JSON-RPC errors (code, message and
``data``). Over HTTP it has no standing event stream: it answers a POST with JSON, or, when it sent
notifications while handling it (progress, log messages, updates), with an event stream of those
and then the answer.

What a test can ask of it, besides the lists:

- tools ``progress`` (two progress notifications, integer and float, with ``_meta``), ``log`` (log
  messages whose data is an object, a number and a 10,000-character string; or one at each of
  ``levels``, a level MCP does not define too, its data the level), ``touch`` (a
  ``resources/updated`` of ``uri``, default ``full://r/0``, with ``_meta``, and an integer beyond 64 bits
  in it with ``big``), ``wait`` (answers after ``seconds``, or at once when
  cancelled), ``waiting`` (how many ``wait`` calls run now), ``cancellations``
  (the ``notifications/cancelled`` params it received so far, as JSON) and ``levels`` (the levels
  ``logging/setLevel`` asked for so far, as JSON); once a level is set, log messages below it are
  not sent;
- ``resources/read`` of ``full://fail`` fails with -32603 and ``data``; ``prompts/get`` of ``broken``
  fails with -32603, of ``greet`` without argument ``name`` with -32602; completing argument ``fail``
  fails with -32050; any tool called with argument ``error`` (``{code, message, data?}``) fails
  with that JSON-RPC error (-32000 too, which the SDK also uses for its own "connection closed");
- a read, prompt or completion whose request has ``_meta`` answers with it in the result's
  ``_meta``, under ``request``;
- ``resources/read`` of ``full://subscribed`` gives the URIs it is subscribed to (a JSON list), of
  ``full://held`` how many ``resources/(un)subscribe`` wait now: with ``--hold PATH`` each waits
  while the file PATH exists, then takes effect (even when cancelled meanwhile, as a server that
  treats cancellation as advice does) and is answered; with ``--refuse PATH`` each is refused
  (nothing taken) while the file PATH exists: with -32603, as a server not ready for them would,
  or with the code the file holds (-32002: the resource does not exist); ``full://asked`` gives
  how many ``resources/(un)subscribe`` it received so far, refused ones included.

``--plain-description TEXT`` gives ``plain`` a description, ``--plain-fields JSON`` the fields of that
object (wire names: ``{"annotations": {"readOnlyHint": true}}``): the same tool, changed (a rug pull).
``--tools N`` adds ``tool_0`` .. ``tool_{N-1}``, shaped as the SDK fixture's generic tools (``Generic
fixture tool number I of NAME.``, ``--name``): a large catalogue from a server that starts in a tenth
of the SDK's CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mcpd.model.mcp import LOG_LEVELS

ICONS = [
    {"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["16x16"], "theme": "light"}
]
ANNOTATIONS = {"audience": ["user"], "priority": 0.5, "lastModified": "2025-01-01T00:00:00Z"}
META = {"example.com/key": "value", "nested": {"n": [1, 2]}}
LATER = {"x-later": {"kept": True}}
"""A field no revision defines yet: a relay that passes what it does not model keeps it."""

TOOLS: list[dict[str, Any]] = [
    {
        "name": name,
        "title": f"The {name} tool",
        "description": f"Runs {name}.",
        "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
        "annotations": {"title": f"{name} hints", "readOnlyHint": True, "x-custom": "dropped"},
        "icons": ICONS,
        "execution": {"taskSupport": "forbidden"},
        "_meta": META,
        **LATER,
    }
    for name in ("progress", "log", "touch", "wait", "waiting", "cancellations", "levels")
] + [{"name": "plain", "inputSchema": {"type": "object"}}]
"""``plain`` has no description, title, annotations or anything optional."""

RESOURCES = [
    {
        "uri": f"full://r/{i}",
        "name": f"r{i}",
        "title": f"Resource {i}",
        "description": "a resource",
        "mimeType": "text/plain",
        "size": 5,
        "annotations": ANNOTATIONS,
        "icons": ICONS,
        "_meta": META,
        **LATER,
    }
    for i in range(2)
] + [{"uri": "full://fail", "name": "fail"}]
TEMPLATES = [
    {
        "uriTemplate": "full://t/{id}",
        "name": "t",
        "title": "Template",
        "description": "a template",
        "mimeType": "text/plain",
        "annotations": ANNOTATIONS,
        "icons": ICONS,
        "_meta": META,
        **LATER,
    }
]
PROMPTS = [
    {
        "name": "greet",
        "title": "Greet",
        "description": "says hello",
        "icons": ICONS,
        "_meta": META,
        "arguments": [
            {"name": "name", "title": "Name", "description": "whom to greet", "required": True, **LATER}
        ],
        **LATER,
    },
    {"name": "broken", "description": "always fails"},
    {"name": "bare"},
]
"""``bare`` and ``broken`` list no ``arguments`` at all."""


ECHOES_META = ("resources/read", "prompts/get", "completion/complete")
"""Requests whose result's ``_meta`` holds, under ``request``, the request's own ``_meta`` if it has one."""


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def described(plain: dict[str, Any]) -> list[dict[str, Any]]:
    """``TOOLS``, ``plain`` with the fields of ``plain`` (as it is without any)."""
    return [{**tool, **plain} if tool["name"] == "plain" else tool for tool in TOOLS]


def generic(name: str, count: int) -> list[dict[str, Any]]:
    """``count`` tools as the SDK fixture lists its generic ones (``mcpd.testing.fixture --tools``)."""
    schema = {
        "properties": {"text": {"default": "", "title": "Text", "type": "string"}},
        "type": "object",
        "title": "runArguments",
    }
    output = {
        "properties": {"result": {"title": "Result", "type": "string"}},
        "required": ["result"],
        "type": "object",
        "title": "runOutput",
    }
    return [
        {
            "name": f"tool_{index}",
            "description": f"Generic fixture tool number {index} of {name}.",
            "inputSchema": schema,
            "outputSchema": output,
        }
        for index in range(count)
    ]


class FullServer:
    def __init__(
        self,
        send: Any,
        name: str,
        tools: list[dict[str, Any]],
        hold: str | None = None,
        refuse: str | None = None,
    ) -> None:
        self._send = send
        """Writes one message to the client (over HTTP, into the answer to the POST being handled)."""
        self.name = name
        self.tools = tools
        self.cancellations: list[Any] = []
        self.levels: list[str] = []
        self._waits: dict[Any, threading.Event] = {}
        """The ``wait`` calls running, by request id: a cancellation ends one."""
        self._lock = threading.Lock()
        self._cancelled: set[Any] = set()
        """Requests cancelled before their ``wait`` began (each runs on a thread of its own)."""
        self.subscribed: set[str] = set()
        self._hold = hold
        self._held = 0
        """``resources/(un)subscribe`` requests waiting while the file ``hold`` exists."""
        self._asked = 0
        """``resources/(un)subscribe`` requests received."""
        self._refuse = refuse

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def handle(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The response to one message (None for a notification)."""
        method, params = message.get("method"), message.get("params") or {}
        if "id" not in message:
            if method == "notifications/cancelled":
                self.cancellations.append(params)
                with self._lock:
                    if (waiting := self._waits.get(params.get("requestId"))) is not None:
                        waiting.set()
                    else:
                        self._cancelled.add(params.get("requestId"))
            return None
        try:
            result = self._result(str(method), params, message["id"])
            if method in ECHOES_META and "_meta" in params:
                result = {**result, "_meta": {**result.get("_meta", {}), "request": params["_meta"]}}
            response: dict[str, Any] = {"result": result}
        except RpcError as exc:
            error: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                error["data"] = exc.data
            response = {"error": error}
        return {"jsonrpc": "2.0", "id": message["id"], **response}

    def _result(self, method: str, params: dict[str, Any], request_id: Any) -> dict[str, Any]:
        if method == "initialize":
            capabilities = {
                "tools": {},
                "resources": {"subscribe": True},
                "prompts": {},
                "completions": {},
                "logging": {},
            }
            return {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": capabilities,
                "serverInfo": {"name": self.name, "version": "1.0"},
            }
        if method == "logging/setLevel":
            if params.get("level") not in LOG_LEVELS:
                raise RpcError(-32602, "unknown level", {"level": params.get("level")})
            self.levels.append(params["level"])
            return {}
        if method in ("ping", "resources/subscribe", "resources/unsubscribe"):
            if method != "ping":
                self._subscription(method == "resources/subscribe", str(params.get("uri")))
            return {}
        lists = {
            "tools/list": ("tools", self.tools),
            "resources/list": ("resources", RESOURCES),
            "resources/templates/list": ("resourceTemplates", TEMPLATES),
            "prompts/list": ("prompts", PROMPTS),
        }
        if method in lists:
            key, items = lists[method]
            return {key: items, "_meta": META}
        if method == "resources/read":
            return self._read(str(params.get("uri")))
        if method == "prompts/get":
            return self._prompt(str(params.get("name")), params.get("arguments") or {})
        if method == "completion/complete":
            if params["argument"]["name"] == "fail":
                raise RpcError(-32050, "no completions today", {"why": "closed"})
            completion = {"values": ["v1", "v2"], "total": 2, "hasMore": False}
            return {"completion": completion, "_meta": META, **LATER}
        if method == "tools/call":
            if "error" in (asked := params.get("arguments") or {}):  # fail as told, whatever the tool
                raise RpcError(asked["error"]["code"], asked["error"]["message"], asked["error"].get("data"))
            return self._call(params, request_id)
        raise RpcError(-32601, f"method not found: {method}", {"method": method})

    def _subscription(self, subscribe: bool, uri: str) -> None:
        """Take or drop ``uri`` once the ``--hold`` file is gone; refused while the ``--refuse`` one is."""
        with self._lock:
            self._asked += 1
        held = self._hold is not None and os.path.exists(self._hold)
        if held:
            with self._lock:
                self._held += 1
            while os.path.exists(str(self._hold)):
                time.sleep(0.02)
        with self._lock:  # taken as it stops waiting: a test that saw it wait, then not, sees it
            self._held -= held
            if self._refuse is not None and (code := _refusal(self._refuse)) is not None:
                message = "Resource not found" if code == -32002 else "not taking subscriptions now"
                raise RpcError(code, message, {"uri": uri})
            if subscribe:
                self.subscribed.add(uri)
            else:
                self.subscribed.discard(uri)

    def _read(self, uri: str) -> dict[str, Any]:
        if uri in ("full://subscribed", "full://held", "full://asked"):
            with self._lock:
                counts = {"full://held": self._held, "full://asked": self._asked}
                told = sorted(self.subscribed) if uri == "full://subscribed" else counts[uri]
            return {"contents": [{"uri": uri, "text": json.dumps(told)}]}
        if uri == "full://fail":
            raise RpcError(-32603, "disk on fire", {"retryAfter": 5})
        if not uri.startswith(("full://r/", "full://t/")):
            raise RpcError(-32002, "Resource not found", {"uri": uri})
        contents = [
            {"uri": uri, "mimeType": "text/plain", "text": "hello", "_meta": META, **LATER},
            {"uri": f"{uri}#blob", "blob": "AAEC"},
        ]
        return {"contents": contents, "_meta": META, **LATER}

    def _prompt(self, name: str, arguments: dict[str, str]) -> dict[str, Any]:
        if name == "broken":
            raise RpcError(-32603, "prompt backend down", {"retryAfter": 5})
        if name == "greet" and "name" not in arguments:
            raise RpcError(-32602, "missing argument name", {"missing": ["name"]})
        text = f"Hello {arguments.get('name', 'you')}"
        return {
            "description": "a greeting",
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "_meta": META,
            **LATER,
        }

    def _call(self, params: dict[str, Any], request_id: Any) -> dict[str, Any]:
        name, arguments = params.get("name"), params.get("arguments") or {}
        token = (params.get("_meta") or {}).get("progressToken")
        if name == "progress" and token is not None:
            self.notify(
                "notifications/progress", {"progressToken": token, "progress": 1, "total": 4, "_meta": META}
            )
            self.notify(
                "notifications/progress", {"progressToken": token, "progress": 2.5, "message": "more"}
            )
        elif name == "log":
            messages: list[dict[str, Any]] = [
                {"level": "warning", "logger": "lg", "data": {"k": [1, 2]}, "_meta": META},
                {"level": "info", "data": 42},
                {"level": "error", "data": "y" * 10_000},
            ]
            if "levels" in arguments:  # levels of its choosing, MCP's or not, data their names
                messages = [{"level": level, "data": level} for level in arguments["levels"]]
            floor = LOG_LEVELS.index(self.levels[-1]) if self.levels else 0
            for message in messages:
                level = message["level"]
                if level not in LOG_LEVELS or LOG_LEVELS.index(level) >= floor:
                    self.notify("notifications/message", message)
        elif name == "touch":
            # ``big``: an integer msgpack cannot carry, which JSON can.
            meta = {**META, "big": 10**23} if arguments.get("big") else META
            self.notify(
                "notifications/resources/updated", {"uri": arguments.get("uri", "full://r/0"), "_meta": meta}
            )
        elif name == "wait":
            with self._lock:
                self._waits[request_id] = stop = threading.Event()
                if request_id in self._cancelled:
                    self._cancelled.discard(request_id)
                    stop.set()
            try:
                stop.wait(float(arguments.get("seconds", 1)))
            finally:
                del self._waits[request_id]
        elif name == "waiting":
            return {"content": [{"type": "text", "text": str(len(self._waits))}]}
        elif name == "cancellations":
            return {"content": [{"type": "text", "text": json.dumps(self.cancellations)}]}
        elif name == "levels":
            return {"content": [{"type": "text", "text": json.dumps(self.levels)}]}
        return {"content": [{"type": "text", "text": f"{name} done"}], "_meta": META, **LATER}


def _refusal(path: str) -> int | None:
    """The code to refuse with while the file ``path`` exists: the number it holds, else -32603."""
    try:
        with open(path) as file:
            text = file.read().strip()
    except FileNotFoundError:
        return None
    return int(text) if text else -32603


def serve_stdio(name: str, tools: list[dict[str, Any]], hold: str | None, refuse: str | None) -> None:
    lock = threading.Lock()

    def send(message: dict[str, Any]) -> None:
        with lock:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    server = FullServer(send, name, tools, hold, refuse)

    def work(message: dict[str, Any]) -> None:
        response = server.handle(message)
        if response is not None:
            send(response)

    for line in sys.stdin:
        message = json.loads(line)
        if "method" not in message:
            continue  # a reply: this server asks nothing
        if "id" in message:
            threading.Thread(target=work, args=(message,), daemon=True).start()
        else:
            server.handle(message)


def serve_http(
    port: int, name: str, tools: list[dict[str, Any]], hold: str | None, refuse: str | None
) -> None:
    during = threading.local()
    """What the server sent while handling the POST of this thread (each POST has a thread)."""

    def send(message: dict[str, Any]) -> None:
        sink = getattr(during, "sent", None)
        if sink is not None:
            sink.append(message)

    server = FullServer(send, name, tools, hold, refuse)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            during.sent = []
            try:
                response = server.handle(json.loads(body))
            finally:
                sent, during.sent = during.sent, None
            if response is None:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if sent:
                events = [*sent, response]
                data = b"".join(f"event: message\ndata: {json.dumps(m)}\n\n".encode() for m in events)
                content_type = "text/event-stream"
            else:
                data, content_type = json.dumps(response).encode(), "application/json"
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self.send_response(405)  # no event stream: the client does without one
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_DELETE(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mcpd.testing.fullserver", description=__doc__)
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--plain-description", default=None, metavar="TEXT")
    parser.add_argument("--plain-fields", type=json.loads, default={}, metavar="JSON")
    parser.add_argument("--name", default="full", help="serverInfo's name, and that of --tools'")
    parser.add_argument("--tools", type=int, default=0, metavar="N")
    parser.add_argument("--hold", default=None, metavar="PATH", help="(un)subscribes wait while PATH exists")
    parser.add_argument(
        "--refuse",
        default=None,
        metavar="PATH",
        help="(un)subscribes fail while PATH exists (with -32603, or the code PATH holds)",
    )
    args = parser.parse_args(argv)
    plain = args.plain_fields
    if args.plain_description is not None:
        plain["description"] = args.plain_description
    tools = described(plain) + generic(args.name, args.tools)
    if args.transport == "stdio":
        serve_stdio(args.name, tools, args.hold, args.refuse)
    else:
        serve_http(args.port, args.name, tools, args.hold, args.refuse)


if __name__ == "__main__":
    main()
