"""`cutover completion bash|zsh`: a shell completion script, written from the parser itself, so that a command
or an option added there completes without anyone editing a script (docs/commands.md).

bash reads it with `source <(cutover completion bash)`; zsh through its bash emulation (bashcompinit). The
script completes commands, each command's own options and the global ones, the choices of an option that has
them, and file names after the options that take a file; after an option that takes another value (a backend, a
context) it offers nothing rather than something wrong.
"""

from __future__ import annotations

import argparse
import shlex

FILES = ("--plan", "--kubeconfig", "--file")  # options whose value is a path


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script for `shell` (bash or zsh)."""
    body = _bash(parser)
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + body
    return body


def _bash(parser: argparse.ArgumentParser) -> str:
    commands = _commands(parser)
    top = sorted({*_flags(parser), *commands})
    valued = sorted({option for sub in [parser, *commands.values()] for option in _valued(sub)})
    choices = {option: values for sub in [parser, *commands.values()] for option, values in _choices(sub).items()}
    lines = [
        "# cutover's completion for bash (and zsh's bashcompinit): written by `cutover completion`",
        "_cutover() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" command="" i word',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        word="${COMP_WORDS[i]}"',
        '        case "$word" in',
        f"            {'|'.join(valued)}) ((i++)); continue ;;  # the option's value is no command",
        f"            {'|'.join(commands)}) command=\"$word\"; break ;;",
        "        esac",
        "    done",
        '    case "$prev" in',
        f'        {"|".join(FILES)}) COMPREPLY=($(compgen -f -- "$cur")); return ;;',
        *(f'        {option}) COMPREPLY=($(compgen -W {shlex.quote(" ".join(values))} -- "$cur")); return ;;'
          for option, values in sorted(choices.items())),
        f"        {'|'.join(option for option in valued if option not in FILES and option not in choices)}) "
        "return ;;",
        "    esac",
        '    case "$command" in',
        f'        "") COMPREPLY=($(compgen -W {shlex.quote(" ".join(top))} -- "$cur")) ;;',
        *(f'        {name}) COMPREPLY=($(compgen -W {shlex.quote(" ".join(sorted(_words(sub))))} -- "$cur")) ;;'
          for name, sub in commands.items()),
        "    esac",
        "}",
        "complete -o default -F _cutover cutover",
        "",
    ]
    return "\n".join(lines)


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return dict(found.choices)


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    return [option for action in parser._actions for option in action.option_strings if option.startswith("--")]


def _words(parser: argparse.ArgumentParser) -> list[str]:
    """A command's options and the values its positional arguments may take (`completion bash`)."""
    positional = [str(choice) for action in parser._actions if not action.option_strings and action.choices
                  for choice in action.choices]
    return _flags(parser) + positional


def _valued(parser: argparse.ArgumentParser) -> list[str]:
    """The options that take a value (the word after them is that value)."""
    return [option for action in parser._actions if action.option_strings and action.nargs != 0
            for option in action.option_strings if option.startswith("--")]


def _choices(parser: argparse.ArgumentParser) -> dict[str, tuple[str, ...]]:
    return {option: tuple(str(choice) for choice in action.choices) for action in parser._actions
            if action.choices and action.option_strings for option in action.option_strings}
