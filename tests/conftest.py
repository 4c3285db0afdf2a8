"""Shared by every test module: the async backend, and the third-party npm servers."""

from __future__ import annotations

import ast
import functools
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

NPM_BIN = Path(__file__).resolve().parent.parent / ".ci" / "npm" / "node_modules" / ".bin"


def pytest_configure(config: pytest.Config) -> None:
    # A suite started in the background by a non-interactive shell (`.ci/run &`, nohup) inherits
    # SIGINT ignored, and so would every `mcpd` process the tests start: the tests of Ctrl-C would
    # then wait on a process that cannot be interrupted. Children of a handled SIGINT get the default.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # Likewise SIGHUP under nohup: a `mcpd check` that inherits it ignored keeps it so (as asked),
    # and the tests of a check ended by SIGHUP waited out their 20 s and failed.
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    # Every daemon a test starts keeps its usage store (pins, approvals, calls) in a directory of the
    # run's, never the user's own: a daemon started through a shell or a bridge's autostart inherits
    # this, where one started by `running_daemon` gets a directory of its own anyway. A test of
    # `mcpd serve` from a wrapper wrote to ~/.local/state/mcpd/usage.db.
    state = tempfile.mkdtemp(prefix="mcpd-tests-state-")
    os.environ["XDG_STATE_HOME"] = state
    config.add_cleanup(lambda: shutil.rmtree(state, ignore_errors=True))


class _ByTestUnlessShared(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no types
    """Hands out tests one at a time, but those of a module that use one of its fixtures of module
    scope (a daemon of ten thousand tools) together to one worker, so that fixture runs once.

    Whole modules (``--dist loadscope``), largest first by count, left a module of few long tests
    (test_orphans: 20 tests, a minute) to the end, one worker busy and the others done. xdist's own
    ``loadgroup`` would do this with marks, but it puts the group into ``item._nodeid``, which
    pytest 9 no longer reads: every mark is ignored. So the module's source says it (the scheduler
    sees test ids only). Fixtures in conftest.py are session-scoped: each worker runs them once."""

    def _split_scope(self, nodeid: str) -> str:
        return _work_unit(self.config.rootpath, nodeid)


def _work_unit(root: Path, nodeid: str) -> str:
    """The test's own id, or its module's for a test kept with the others of its module."""
    module, _, rest = nodeid.partition("::")
    sharing = _sharing(root / module)
    if sharing is None or (sharing is not _WHOLE and rest.split("[", 1)[0] not in sharing):
        return nodeid
    return module


_WHOLE = frozenset({"*"})
"""Every test of the module counts as a user: what the source says cannot be followed here."""


@functools.cache
def _sharing(path: Path) -> frozenset[str] | None:
    """The tests of the module that use a fixture of module, class or package scope, or one computed,
    directly or through the module's other fixtures; None when it has no such fixture."""
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError):
        return _WHOLE
    wide: set[str] = set()
    needs: dict[str, set[str]] = {}
    # A test class (its tests' ids carry it), a fixture renamed or used unasked: not followed.
    unclear = "usefixtures" in source or "getfixturevalue" in source
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            unclear |= node.name.startswith("Test")
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        needs[node.name] = {arg.arg for arg in [*node.args.args, *node.args.kwonlyargs]}
        for decorator in node.decorator_list:
            for keyword in decorator.keywords if isinstance(decorator, ast.Call) else ():
                value = keyword.value
                fixed = isinstance(value, ast.Constant) and value.value in ("function", "session")
                if keyword.arg == "scope" and not fixed:
                    wide.add(node.name)
                unclear |= keyword.arg in ("name", "autouse")
    if not wide:
        return None
    if unclear:
        return _WHOLE
    users, grew = set(wide), True
    while grew:
        more = {name for name, args in needs.items() if args & users} - users
        users |= more
        grew = bool(more)
    return frozenset(users)


def pytest_runtest_setup(item: pytest.Item) -> None:
    # The scheduler reads sources; a worker has pytest's own answer. A user of a wide fixture the
    # source hides (imported, assigned, or asked for by a fixture of conftest.py) was sent out alone:
    # its fixture would run again on each worker such a test lands on, at once. Said, not a flake.
    # On a worker (its --dist is "no"), ``loadgroup`` is what xdist keeps of the controller's.
    config = item.config
    if not (hasattr(config, "workerinput") and config.option.loadgroup):
        return
    if not isinstance(item, pytest.Function) or _work_unit(config.rootpath, item.nodeid) != item.nodeid:
        return
    wide = [
        name
        for name, defs in item._fixtureinfo.name2fixturedefs.items()
        if defs and defs[-1].scope in ("module", "class", "package")
    ]
    if wide:
        pytest.fail(f"uses {', '.join(wide)}, which tests/conftest.py's scheduler did not see", pytrace=False)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> _ByTestUnlessShared | None:
    # Only for `--dist loadgroup` (pyproject): any other --dist given on the command line is obeyed.
    return _ByTestUnlessShared(config, log) if config.getvalue("dist") == "loadgroup" else None


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    # The daemon is an asyncio program (its child processes use asyncio's subprocess machinery).
    # Session-wide, so module-scoped async fixtures (one daemon per module) can use it.
    return "asyncio"


@pytest.fixture(scope="session")
def npm_bin() -> Path:
    """The bin directory of the npm servers `.ci/run` installs (server-everything, server-filesystem).

    Missing: a visible skip on a developer's machine, a failure where ``MCPD_REQUIRE_NPM=1`` (CI), so
    CI can never silently test less.
    """
    if not (NPM_BIN / "mcp-server-everything").exists():
        reason = f"npm MCP servers not installed in {NPM_BIN} (run .ci/run, or npm install there)"
        if os.environ.get("MCPD_REQUIRE_NPM") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return NPM_BIN
