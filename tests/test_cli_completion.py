"""`mcpd completion bash|zsh|fish`: scripts generated from the parser, run in the real shells."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcpd.cli.app import build_parser
from mcpd.cli.shells import tree

CASES = [
    (["mcpd", "st"], {"status", "start", "stop"}),
    (["mcpd", "service", ""], {"install", "uninstall", "status"}),
    (["mcpd", "config", ""], {"check"}),
    (["mcpd", "config", "check", "--con"], {"--config"}),
    (["mcpd", "serve", "--log-level", ""], {"debug", "info", "warning", "error"}),
    (["mcpd", "tools", "--li"], {"--limit"}),
    (["mcpd", "completion", ""], {"bash", "zsh", "fish"}),
]


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each shell's script, as `mcpd completion SHELL` prints it."""
    folder = tmp_path_factory.mktemp("completion")
    found = {}
    for shell in ("bash", "zsh", "fish"):
        result = subprocess.run(
            [sys.executable, "-m", "mcpd", "completion", shell],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        found[shell] = folder / f"mcpd.{shell}"
        found[shell].write_text(result.stdout)
    return found


def needs(shell: str) -> str:
    """The shell's path. Missing: a visible skip on a developer's machine, a failure where
    ``MCPD_REQUIRE_SHELLS=1`` (CI installs zsh and fish), so CI never tests less in silence."""
    found = shutil.which(shell)
    if found is None:
        if os.environ.get("MCPD_REQUIRE_SHELLS") == "1":
            pytest.fail(f"{shell} is not installed (.ci/run installs it)")
        pytest.skip(f"{shell} is not installed")
    return found


def bash_program(source: Path, words: list[str]) -> list[str]:
    quoted = " ".join(f"'{w}'" for w in words)
    body = f"source {source}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; _mcpd; "
    return ["-c", body + 'printf "%s\\n" "${COMPREPLY[@]}"']


def zsh_program(source: Path, words: list[str]) -> list[str]:
    # The completion builtins, stubbed to print the candidates they are given.
    quoted = " ".join(f"'{w}'" for w in words)
    stubs = 'compdef() { : }; compadd() { print -rl -- "${@:2}" }; _files() { print -r -- FILES }; '
    stubs += '_describe() { print -rl -- "${(@)${(P)4}%%:*}" }'
    return ["-f", "-c", f"{stubs}\nsource {source}\nwords=({quoted}); CURRENT={len(words)}; _mcpd"]


def fish_program(source: Path, words: list[str]) -> list[str]:
    return ["--no-config", "-c", f"source {source}; complete -C '{' '.join(words)}'"]


PROGRAMS = {"bash": bash_program, "zsh": zsh_program, "fish": fish_program}


@pytest.mark.parametrize("shell", sorted(PROGRAMS))
@pytest.mark.parametrize(("words", "expected"), CASES)
def test_each_shell_completes_commands_options_and_choices(
    scripts: dict[str, Path], shell: str, words: list[str], expected: set[str]
) -> None:
    """Sourced in bash, zsh and fish, the script offers the subcommands, options and choices that
    fit the words typed so far."""
    program = [needs(shell), *PROGRAMS[shell](scripts[shell], words)]
    result = subprocess.run(program, capture_output=True, text=True, timeout=30, check=True)
    offered = {entry.split("\t")[0] for entry in result.stdout.split()}
    assert expected <= offered


def test_bash_completes_paths_for_path_options(scripts: dict[str, Path], tmp_path: Path) -> None:
    """--socket and --config complete file names."""
    bash = needs("bash")
    source = scripts["bash"]
    (tmp_path / "my.sock").touch()
    words = f"mcpd status --socket {tmp_path}/my"
    program = f"source {source}; COMP_WORDS=({words}); COMP_CWORD=3; _mcpd; echo $COMPREPLY"
    result = subprocess.run([bash, "-c", program], capture_output=True, text=True, timeout=30, check=True)
    assert result.stdout.strip() == f"{tmp_path}/my.sock"


def test_scripts_hold_every_command_and_option_of_the_parser(scripts: dict[str, Path]) -> None:
    """Generated from the parser, the scripts cannot drift: each names every command and option."""
    parser: argparse.ArgumentParser = build_parser()
    root = tree(parser)
    words = {c.path.split()[-1] for c in root.walk()[1:]} | {
        f for c in root.walk() for o in c.options for f in o.flags
    }
    assert {"status", "top", "import", "completion", "check", "--raw", "--skip-existing"} <= words
    for shell in ("bash", "zsh", "fish"):
        text = scripts[shell].read_text()
        missing = {w for w in words if w.lstrip("-") not in text}
        assert not missing, (shell, missing)
