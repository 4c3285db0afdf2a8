"""Shell completion scripts (bash, zsh, fish) generated from the argument parser itself.

Generated, not written by hand, so a new command or option can never be missing from it. Each
script finds the command path typed so far (``mcpd service``, ``mcpd config check``), then offers
that command's subcommands, options and choices; options that take a path complete files, and
server arguments the names the daemon knows (from the hidden ``mcpd __servers``, silent when no
daemon runs), as systemctl completes unit names. (shtab covers bash and zsh but not fish, and a
generator over argparse is this small.)
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from mcpd.cli.completion import SERVERS_COMMAND

_PATH_DESTS = frozenset({"config", "socket", "file"})
_SERVER_DESTS = frozenset({"server", "name", "connect"})


@dataclass
class Option:
    flags: list[str]
    help: str
    takes_value: bool
    choices: list[str]
    path: bool
    servers: bool


@dataclass
class Command:
    """One node of the command tree: its own options, positional choices and subcommands."""

    path: str
    help: str = ""
    options: list[Option] = field(default_factory=list)
    choices: list[str] = field(default_factory=list)
    files: bool = False
    servers: bool = False
    """Its first positional argument is a server name."""
    children: dict[str, Command] = field(default_factory=dict)

    def walk(self) -> list[Command]:
        return [self, *(c for child in self.children.values() for c in child.walk())]


def tree(parser: argparse.ArgumentParser, path: str = "mcpd", help: str = "") -> Command:
    node = Command(path, help)
    positionals: list[argparse.Action] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                if not name.startswith("_"):
                    node.children[name] = tree(sub, f"{path} {name}", helps.get(name, ""))
        elif action.option_strings:
            if action.help == argparse.SUPPRESS:
                continue
            node.options.append(
                Option(
                    flags=list(action.option_strings),
                    help=action.help or "",
                    takes_value=action.nargs != 0,
                    choices=[str(c) for c in action.choices or ()],
                    path=action.dest in _PATH_DESTS,
                    servers=action.dest in _SERVER_DESTS,
                )
            )
        elif action.choices:
            node.choices += [str(c) for c in action.choices]
        elif action.dest in _PATH_DESTS:
            node.files = True
        elif action.dest in _SERVER_DESTS and not positionals:
            node.servers = True
        if not action.option_strings:
            positionals.append(action)
    return node


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    root = tree(parser)
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](root)


def _path_cases(root: Command, indent: str, sep: str = ")") -> str:
    """Shell ``case`` arms that extend the command path with a known subcommand word."""
    pairs = [f'"{child.path}"' for node in root.walk() for child in node.children.values()]
    return f"{indent}{'|'.join(pairs)}{sep}"


def _words(node: Command) -> str:
    return " ".join([*node.children, *node.choices, *(f for o in node.options for f in o.flags)])


def _value_arms(root: Command, action: Callable[[Option], str], arm: str) -> list[str]:
    """A ``case`` arm per option that takes a value: ``arm`` filled with its pattern and action."""
    return [
        arm.format(pattern="|".join(f'"{node.path}|{flag}"' for flag in option.flags), action=action(option))
        for node in root.walk()
        for option in node.options
        if option.takes_value
    ]


def _bash(root: Command) -> str:
    servers = f'$(compgen -W "$("${{COMP_WORDS[0]}}" {SERVERS_COMMAND} 2>/dev/null)" -- "$cur")'

    def action(option: Option) -> str:
        if option.path:
            return 'COMPREPLY=($(compgen -f -- "$cur"))'
        if option.choices:
            return f'COMPREPLY=($(compgen -W {shlex.quote(" ".join(option.choices))} -- "$cur"))'
        return f"COMPREPLY=({servers})" if option.servers else "COMPREPLY=()"

    value_arms = _value_arms(root, action, "        {pattern}) {action}; return ;;")
    word_arms = []
    for node in root.walk():
        extra = ' COMPREPLY+=($(compgen -f -- "$cur"));' if node.files else ""
        if node.servers:
            extra += f" ((rest == 0)) && COMPREPLY+=({servers});"
        words = shlex.quote(_words(node))
        word_arms.append(f'        "{node.path}") COMPREPLY=($(compgen -W {words} -- "$cur"));{extra} ;;')
    return "\n".join(
        [
            "# bash completion for mcpd (generated by `mcpd completion bash`)",
            "_mcpd() {",
            "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmdpath=mcpd i rest=0",
            "    for ((i = 1; i < COMP_CWORD; i++)); do",
            '        case "$cmdpath ${COMP_WORDS[i]}" in',
            _path_cases(root, "            ") + ' cmdpath="$cmdpath ${COMP_WORDS[i]}"; rest=0 ;;',
            "            *) [[ ${COMP_WORDS[i]} == -* ]] || ((rest++)) ;;",
            "        esac",
            "    done",
            '    case "$cmdpath|$prev" in',
            *value_arms,
            "    esac",
            '    case "$cmdpath" in',
            *word_arms,
            "    esac",
            "}",
            "complete -F _mcpd mcpd",
            "",
        ]
    )


def _zsh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _zsh(root: Command) -> str:
    servers = f'compadd -- ${{(f)"$(${{words[1]}} {SERVERS_COMMAND} 2>/dev/null)"}}'

    def action(option: Option) -> str:
        if option.path:
            return "_files"
        if option.choices:
            return "compadd -- " + " ".join(_zsh_quote(c) for c in option.choices)
        return servers if option.servers else ":"

    value_arms = _value_arms(root, action, "    ({pattern}) {action}; return ;;")
    word_arms = []
    for node in root.walk():
        described = [f"{_zsh_quote(f'{name}:{child.help}')}" for name, child in node.children.items()]
        options = [_zsh_quote(f"{flag}:{option.help}") for option in node.options for flag in option.flags]
        lines = [f'    ("{node.path}")']
        if described:
            lines.append(f"      local -a commands=({' '.join(described)})")
            lines.append("      _describe -t commands command commands")
        if node.choices:
            lines.append("      compadd -- " + " ".join(_zsh_quote(c) for c in node.choices))
        if node.files:
            lines.append("      _files")
        if node.servers:
            lines.append(f"      if ((rest == 0)); then {servers}; fi")
        lines.append(f"      local -a options=({' '.join(options)})")
        lines.append("      if [[ $cur == -* ]]; then _describe -t options option options; fi ;;")
        word_arms.append("\n".join(lines))
    return "\n".join(
        [
            "#compdef mcpd",
            "# zsh completion for mcpd (generated by `mcpd completion zsh`)",
            "_mcpd() {",
            "  local cur=${words[CURRENT]} prev=${words[CURRENT-1]} cmdpath=mcpd i rest=0",
            "  for ((i = 2; i < CURRENT; i++)); do",
            '    case "$cmdpath ${words[i]}" in',
            "      (" + _path_cases(root, "") + ' cmdpath="$cmdpath ${words[i]}"; rest=0 ;;',
            "      (*) [[ ${words[i]} == -* ]] || ((rest++)) ;;",
            "    esac",
            "  done",
            '  case "$cmdpath|$prev" in',
            *value_arms,
            "  esac",
            '  case "$cmdpath" in',
            *word_arms,
            "  esac",
            "  return 0",
            "}",
            'if [[ $zsh_eval_context[-1] == loadautofunc ]]; then _mcpd "$@"; else compdef _mcpd mcpd; fi',
            "",
        ]
    )


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish(root: Command) -> str:
    paths = " ".join(_fish_quote(c.path) for n in root.walk() for c in n.children.values())
    lines = [
        "# fish completion for mcpd (generated by `mcpd completion fish`)",
        "function __mcpd_path --description 'the mcpd command typed so far, then how many arguments follow'",
        "    set -l cmdpath mcpd",
        "    set -l rest 0",
        "    for word in (commandline -opc)[2..-1]",
        '        switch "$cmdpath $word"',
        f"            case {paths}",
        '                set cmdpath "$cmdpath $word"',
        "                set rest 0",
        "            case '*'",
        "                string match -q -- '-*' $word; or set rest (math $rest + 1)",
        "        end",
        "    end",
        '    echo "$cmdpath|$rest"',
        "end",
        "function __mcpd_servers",
        "    set -l mcpd (commandline -opc)[1]",
        f"    $mcpd {SERVERS_COMMAND} 2>/dev/null",
        "end",
        "complete -c mcpd -f",
    ]
    for node in root.walk():
        here = f"string match -q -- {shlex.quote(node.path + '|*')} (__mcpd_path)"
        when = f"-n {_fish_quote(here)}"
        for name, child in node.children.items():
            lines.append(f"complete -c mcpd {when} -a {_fish_quote(name)} -d {_fish_quote(child.help)}")
        for choice in node.choices:
            lines.append(f"complete -c mcpd {when} -a {_fish_quote(choice)}")
        if node.files:
            lines.append(f"complete -c mcpd {when} -F")
        if node.servers:
            first = f"test (__mcpd_path) = {shlex.quote(node.path + '|0')}"
            lines.append(f"complete -c mcpd -n {_fish_quote(first)} -a '(__mcpd_servers)'")
        for option in node.options:
            spec = " ".join(
                f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}" for flag in option.flags
            )
            if option.path:
                spec += " -r -F"
            elif option.choices:
                spec += f" -x -a {_fish_quote(' '.join(option.choices))}"
            elif option.servers:
                spec += " -x -a '(__mcpd_servers)'"
            elif option.takes_value:
                spec += " -x"
            lines.append(f"complete -c mcpd {when} {spec} -d {_fish_quote(option.help)}")
    return "\n".join([*lines, ""])
