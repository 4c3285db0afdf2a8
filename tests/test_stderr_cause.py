"""The line of a dead server's stderr that `last_error` quotes (``mcpd.supervisor.stderr_cause``):
on what Node, npx and Python really print when a server dies at start, and end to end through a
real Node process."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from mcpd.config.model import ServerConfig
from mcpd.supervisor.stderr_cause import cause_line
from mcpd.supervisor.stdio import StderrLog, open_stdio_child

NODE_MISSING_MODULE = """\
node:internal/modules/cjs/loader:1210
  throw err;
  ^

Error: Cannot find module '/srv/mcp/dist/index.js'
    at Module._resolveFilename (node:internal/modules/cjs/loader:1207:15)
    at Module._load (node:internal/modules/cjs/loader:1038:27)
    at Function.executeUserEntryPoint [as runMain] (node:internal/modules/run_main:164:12)
    at node:internal/main/run_main_module:28:49 {
  code: 'MODULE_NOT_FOUND',
  requireStack: []
}

Node.js v20.20.2"""

NODE_REJECTION = """\
file:///srv/mcp/index.mjs:1
await Promise.reject(new TypeError('Invalid URL'))
                     ^

TypeError: Invalid URL
    at file:///srv/mcp/index.mjs:1:22
    at ModuleJob.run (node:internal/modules/esm/module_job:325:25)
    at async ModuleLoader.eval (node:internal/modules/esm/loader:245:24)

Node.js v20.20.2"""

NPX_MISSPELT_PACKAGE = """\
npm error code E404
npm error 404 Not Found - GET https://registry.npmjs.org/@modelcontextprotocol%2fserver-memroy - Not found
npm error 404
npm error 404  '@modelcontextprotocol/server-memroy@*' is not in this registry.
npm error 404
npm error 404 Note that you can also install from a
npm error 404 tarball, folder, http url, or git url.
npm error A complete log of this run can be found in: /home/me/.npm/_logs/2026-11-28T04_20_47Z-debug-0.log"""

PYTHON_EXCEPTION_GROUP = """\
  +-+---------------- 1 ----------------
    | Traceback (most recent call last):
    |   File "/srv/mcp/server.py", line 3, in serve
    | ConnectionRefusedError: could not reach db at 127.0.0.1:5432
    +------------------------------------"""


@pytest.mark.parametrize(
    ("stderr", "cause"),
    [
        (NODE_MISSING_MODULE, "Error: Cannot find module '/srv/mcp/dist/index.js'"),
        (NODE_REJECTION, "TypeError: Invalid URL"),
        (
            NPX_MISSPELT_PACKAGE,
            "npm error 404 Not Found - GET https://registry.npmjs.org/@modelcontextprotocol%2fserver-memroy"
            " - Not found",
        ),
        (PYTHON_EXCEPTION_GROUP, "ConnectionRefusedError: could not reach db at 127.0.0.1:5432"),
        ("Error: BRAVE_API_KEY environment variable is required", None),
        ("Traceback (most recent call last):\n  File 'x.py', line 1\nKeyError: 'TOKEN'", None),
        ("Knowledge Graph MCP Server running on stdio\n\n", "Knowledge Graph MCP Server running on stdio"),
    ],
    ids=["node-module", "node-rejection", "npx-404", "python-group", "plain", "python", "blank-after"],
)
def test_the_error_above_a_runtimes_trailers_is_quoted(stderr: str, cause: str | None) -> None:
    """What a runtime or launcher prints below the error (Node's stack, the error's properties and
    its version line, npm's E404 lines and log path, the bottom of a Python exception group, blank
    lines) is passed over to the error itself; a last line that is the error is kept. Before, the
    last line was quoted: `last stderr: Node.js v20.20.2`, `npm error A complete log of this run
    can be found in: ...`, `+------------------------------------`."""
    lines = stderr.splitlines()
    assert cause_line(lines) == (cause or lines[-1])


def test_a_stack_longer_than_the_tail_quotes_its_last_line() -> None:
    """A Node stack whose message fell out of the kept tail: the last line is quoted, as before,
    never a frame picked as if it were the error; nothing at all for a stderr of blank lines."""
    frames = [f"    at f{i} (file:///srv/mcp/index.js:{i}:1)" for i in range(20)]
    assert cause_line(frames) == frames[-1]
    assert cause_line(["", "  "]) is None


@pytest.mark.anyio
@pytest.mark.usefixtures("npm_bin")
async def test_a_node_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    """A real Node asked to run a file that is not there (a `node path/index.js` entry whose build
    is missing): the exit reason quotes Node's error, not its version line."""
    config = ServerConfig(name="built", command="node", args=(str(tmp_path / "dist" / "index.js"),))
    trailer = anyio.Event()  # Node's last line read: the stderr is all in

    def seen(line: str) -> None:
        if line.startswith("Node.js v"):
            trailer.set()

    async with open_stdio_child(config, StderrLog("built", on_line=seen)) as (child, _lines):
        with anyio.fail_after(20):
            await child.exited.wait()
            await trailer.wait()
        reason = child.exit_reason()
    assert reason.startswith("exited with code 1; last stderr: Error: Cannot find module "), reason


@pytest.mark.anyio
async def test_a_run_that_wrote_nothing_quotes_no_earlier_runs_error() -> None:
    """A server's stderr log spans its runs (its tail in `mcpd status`), but the reason a run ended
    quotes only what that run's process wrote: the first run's error, then a second run killed by
    SIGKILL having written nothing, says `killed by SIGKILL` alone. Before, it quoted the first
    run's error, as if that were why the second died."""
    said = anyio.Event()
    stderr = StderrLog("flaky", on_line=lambda _line: said.set())
    first = ServerConfig(name="flaky", command="sh", args=("-c", "echo 'Error: no database' >&2; exit 1"))
    async with open_stdio_child(first, stderr) as (child, _lines):
        with anyio.fail_after(20):
            await child.exited.wait()
            await said.wait()
        assert child.exit_reason() == "exited with code 1; last stderr: Error: no database"
    second = ServerConfig(name="flaky", command="sleep", args=("300",), stop_grace=0.2)
    async with open_stdio_child(second, stderr) as (child, _lines):
        child.process.kill()
        with anyio.fail_after(20):
            await child.exited.wait()
        assert child.exit_reason() == "killed by SIGKILL"
    assert list(stderr.tail) == ["Error: no database"]
