"""The fixture server in plain Python (the default) stands in for the one written with the SDK
(``--sdk``): most tests run the plain one, so where the two part, those tests no longer test what a
server built on the SDK does. Both are driven through one script of requests over stdio."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from subprocess import PIPE
from typing import Any

import pytest

from mcpd.testing import fixture_command

ANSWERS: dict[str, dict[str, Any]] = {
    "roots/list": {"roots": [{"uri": "file:///home/user/project", "name": "project"}]},
    "sampling/createMessage": {"model": "m", "content": {"type": "text", "text": "no role"}},
    "elicitation/create": {"action": "perhaps"},
}
"""The client's answer to each question the server asks: the roots well formed, the others not;
``ask_many``'s questions are left unanswered."""

SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("ping", {}),
    ("tools/list", {}),
    ("resources/list", {}),
    ("resources/templates/list", {}),
    ("prompts/list", {}),
    *[
        ("tools/call", {"name": name, "arguments": arguments})
        for name, arguments in [
            ("echo", {"text": "hi"}),
            ("echo", {"text": "h\u00e9 \u2603 \U0001d11e \x1b"}),
            ("tool_1", {"text": "x"}),
            ("tool_0", {}),
            ("fail", {"message": "kept to the server's log"}),
            ("refuse", {"code": -32001, "message": "no"}),
            ("meta_echo", {"text": "t"}),
            ("sleep", {"seconds": 0.01}),
            ("huge", {}),
            ("image", {"size": 12}),
            ("nosuch", {}),
            ("progress", {"steps": 2}),
            ("log", {"text": "hello", "level": "warning", "logger": "lg"}),
            ("add_tool", {"name": "added_one"}),
            ("add_prompt", {"name": "added_prompt", "description": "new"}),
            ("list_changed_storm", {"count": 2}),
            ("added_one", {"text": "z"}),
            ("get_weather", {"city": "Oslo"}),
            ("add_numbers", {"a": 2, "b": 3}),
            ("hostile_link", {}),
            ("ask", {"kind": "roots"}),
            ("ask", {"kind": "sampling"}),
            ("ask", {"kind": "elicitation"}),
            ("ask_many", {"kind": "elicitation", "count": 1, "wait": 0.2}),
            ("ask", {"kind": "sampling-tools"}),
        ]
    ],
    ("tools/call", {"name": "progress", "arguments": {"steps": 2}, "_meta": {"progressToken": "p"}}),
    *[
        ("tools/call", {"name": "progress", "arguments": {"steps": 1}, "_meta": {"progressToken": token}})
        for token in (1.5, True, None, "7")
    ],
    ("tools/call", {"name": "request_meta", "arguments": {}, "_meta": {"progressToken": 7, "a/b": 1}}),
    ("tools/list", {}),
    ("prompts/list", {}),
    ("prompts/get", {"name": "added_prompt"}),
    ("prompts/get", {"name": "unknown"}),
    ("resources/read", {"uri": "fixture://bytes/300"}),
    ("resources/read", {"uri": "fixture://hostile"}),
    ("resources/read", {"uri": "fixture://unknown"}),
    ("resources/read", {"uri": "fixture://bytes/abc"}),
    ("resources/read", {"uri": "fixture://bytes/-5"}),
    ("logging/setLevel", {"level": "error"}),
    ("tools/call", {"arguments": {}}),
    ("tools/call", {"name": "echo", "arguments": ["x"]}),
    ("tools/call", {"name": "echo", "arguments": {"text": "m"}, "_meta": 3}),
    ("resources/read", {}),
    ("prompts/get", {"name": 3}),
    ("tools/list", {"cursor": 5}),
    ("tools/list", {"cursor": "elsewhere"}),
    (
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": ""}},
    ),
]
"""Every tool and list of the fixture, besides those that end, block or flood the server; the
asking tools, for one question each, answered as ``ANSWERS`` says."""

DROPPED = [
    "not JSON",
    '[{"jsonrpc": "2.0", "id": 90, "method": "ping"}]',
    '{"id": 91, "method": "ping"}',
    '{"jsonrpc": "2.0", "id": 92, "method": "ping", "params": [1]}',
    '{"jsonrpc": "2.0", "id": true, "method": "ping"}',
    '{"jsonrpc": "2.0", "id": 93.5, "method": "ping"}',
]
"""Lines the SDK's server answers nothing to and lives on: not JSON, a batch, no "jsonrpc", params not
an object, an id neither string nor integer (read as a notification)."""


def _session(flags: tuple[str, ...]) -> list[tuple[dict[str, Any], int]]:
    """What the fixture server sent for ``SCRIPT``, in order, each with its line's length in bytes:
    answers, notifications and questions. Before it, ``DROPPED``, an ``initialize`` without the
    client's capabilities and info, and a request before a whole one; after it, a call cancelled
    while it runs."""
    argv = fixture_command("fx", "--tools", "2", "--poisoned", "--instructions", "Be kind.", *flags)
    argv += ("--hostile-text", "\x1b[2J")
    with subprocess.Popen(argv, stdin=PIPE, stdout=PIPE, stderr=subprocess.DEVNULL) as server:
        assert server.stdin is not None and server.stdout is not None
        seen: list[tuple[dict[str, Any], int]] = []

        def write(line: str) -> None:
            assert server.stdin is not None
            server.stdin.write(line.encode() + b"\n")
            server.stdin.flush()

        def send(message: dict[str, Any]) -> None:
            write(json.dumps({"jsonrpc": "2.0", **message}))

        def until_answered(request_id: int | str) -> None:
            assert server.stdout is not None
            while True:
                line = server.stdout.readline()
                message = json.loads(line)
                if "method" in message and "id" in message:  # a question: answered, id left out
                    asked = message.pop("id")
                    if not message.get("params", {}).get("message", "").startswith("question "):
                        send({"id": asked, "result": ANSWERS[message["method"]]})
                if message.get("method") == "notifications/cancelled":  # of a question: its id left out
                    del message["params"]["requestId"]
                seen.append((message, len(line)))
                if message.get("id") == request_id and "method" not in message:
                    return

        for line in DROPPED:
            write(line)
        send({"id": "bare", "method": "initialize", "params": {"protocolVersion": "2025-06-18"}})
        until_answered("bare")
        send({"id": "early", "method": "tools/list"})
        until_answered("early")
        capabilities: dict[str, Any] = {"roots": {}, "sampling": {}}
        send({"id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
              "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}}})  # fmt: skip
        send({"method": "notifications/initialized"})
        until_answered(0)
        for index, (method, params) in enumerate(SCRIPT, 1):
            send({"id": index, "method": method, "params": params})
            until_answered(index)
        for request_id, seconds in [("gone", 1.0), ("last", 1.5)]:
            send({"id": request_id, "method": "tools/call",
                  "params": {"name": "sleep", "arguments": {"seconds": seconds}}})  # fmt: skip
            if request_id == "gone":
                send({"method": "notifications/cancelled", "params": {"requestId": "gone"}})
        until_answered("last")
        server.terminate()
    return seen


@pytest.mark.timeout(60)
def test_the_plain_fixture_answers_as_the_sdk_one_does() -> None:
    """Same initialize, lists, schemas, results, errors, notifications and questions, message for
    message, each as many bytes on its line; nothing for a line the SDK drops or a cancelled call;
    only the wording of a validation error (pydantic's) and a pid may differ."""
    with ThreadPoolExecutor(2) as both:  # at once: the SDK's start is most of the time
        plain, sdk = both.map(_session, [(), ("--sdk",)])
    assert [m.get("id") for m, _ in plain] == [m.get("id") for m, _ in sdk]
    for ours, theirs in zip(plain, sdk, strict=True):
        assert ours == theirs
    assert len(plain) > len(SCRIPT) + 8  # notifications and a question came too


def test_the_plain_fixture_imports_no_sdk() -> None:
    """The point of the plain fixture: it starts without the SDK, whose import costs ~1 s of CPU."""
    probe = (
        "import sys, mcpd.testing.fixture_plain; print([m for m in sys.modules if m.split('.')[0] == 'mcp'])"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert found.stdout.strip() == "[]"
