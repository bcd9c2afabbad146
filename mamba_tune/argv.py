"""An API call's keywords as the CLI's words: one parser for both, so the CLI's defaults are the API's.

A keyword is a command's argument by its argparse `dest` (tracking_uri for --tracking-uri). None (and False for an
on/off flag) leaves the argument out: the parser then gives the CLI's default. A repeatable argument (--set,
--column) takes a mapping ({"trials": 2}), a list of "KEY=VALUE" strings, or one such string.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from os import PathLike
from typing import Any

from tuning.cli.main import build_parser


def command_parser(command: tuple[str, ...]) -> argparse.ArgumentParser:
    """The parser of `command` (("sweep",), ("data", "import")), as `mamba-tune` builds it."""
    parser = build_parser()
    for word in command:
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = commands.choices[word]
    return parser


def arguments(command: tuple[str, ...]) -> dict[str, argparse.Action]:
    """The command's arguments by keyword (their dest), in the parser's order, --help left out."""
    return {action.dest: action for action in command_parser(command)._actions
            if not isinstance(action, argparse._HelpAction)}


def argv_for(command: tuple[str, ...], keywords: Mapping[str, Any]) -> list[str]:
    """The words `mamba-tune` would be given: the command, its positionals in order, then `--flag=value` for each
    keyword given (the `=` form keeps a value such as -05:00 a value). TypeError for a keyword the command does not
    take (a bug in the API, never the user's input)."""
    actions = arguments(command)
    unknown = sorted(set(keywords) - set(actions))
    if unknown:
        raise TypeError(f"mamba-tune {' '.join(command)} takes no argument {unknown[0]!r}")
    positionals: list[str] = []
    options: list[str] = []
    for dest, action in actions.items():
        value = keywords.get(dest)
        if not action.option_strings:
            if value is None:
                raise TypeError(f"mamba-tune {' '.join(command)}: {dest} is required")
            positionals.append(_word(value))
            continue
        flag = max(action.option_strings, key=len)  # --tracking-uri, not a short form
        if isinstance(action, argparse._StoreTrueAction):
            options += [flag] if value else []
        elif isinstance(action, argparse._AppendAction):
            options += [f"{flag}={pair}" for pair in pairs(value)]
        elif value is not None:
            options.append(f"{flag}={_word(value)}")
    return [*command, *positionals, *options]


def pairs(value: Any) -> list[str]:
    """A repeatable argument's values: {"scheduler.max_epochs": 3} -> ["scheduler.max_epochs=3"] (each value as YAML:
    a list [0.0, 1.0] as such, a string as it is), ["a=1"] or "a=1" as given; None: none."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [f"{key}={item if isinstance(item, str) else json.dumps(item)}" for key, item in value.items()]
    return [_word(item) for item in value]


def _word(value: Any) -> str:
    if isinstance(value, bool):
        raise TypeError(f"{value!r} is not a value of this argument (only on/off flags take True or False)")
    return str(value.__fspath__()) if isinstance(value, PathLike) else str(value)
