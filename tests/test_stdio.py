"""Spawning a stdio server: what exec would refuse is refused at spawn, with exec's reason, also
when the child is started through ``setpriv`` (which would otherwise turn it into an exit status)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mcpd.config.model import ServerConfig
from mcpd.supervisor.stdio import SpawnError, open_stdio_child

pytestmark = pytest.mark.anyio


async def test_a_missing_command_is_a_spawn_error(tmp_path: Path) -> None:
    """A path that does not exist and a bare name on no PATH entry: ENOENT, named."""
    for command in (str(tmp_path / "absent"), "mcpd-no-such-command"):
        with pytest.raises(SpawnError, match=r"No such file or directory .*absent|no-such-command"):
            async with open_stdio_child(ServerConfig(name="x", command=command)):
                pass


async def test_a_file_that_cannot_be_run_is_a_spawn_error(tmp_path: Path) -> None:
    """A file without the execute bit: EACCES, and no process."""
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    with pytest.raises(SpawnError, match="Permission denied"):
        async with open_stdio_child(ServerConfig(name="x", command=str(script))):
            pass


async def test_a_relative_command_runs_from_its_cwd(tmp_path: Path) -> None:
    """``./server`` with ``cwd`` is looked up in that directory, as exec with that cwd does."""
    script = tmp_path / "server"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write(sys.stdin.readline())\n")
    script.chmod(0o755)
    config = ServerConfig(name="x", command="./server", cwd=str(tmp_path), stop_grace=1.0)
    async with open_stdio_child(config) as (child, _read, _write):
        assert child.pid > 0
