"""Which commands have an option: what a usage error says of a flag given to a command that lacks it
("--epoch-unit is an option of `mamba-tune data import`, not of `mamba-tune sweep`"), and of a flag's invalid
choice ("--precision fp16: not one of its choices, fp32 or bf16")."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterator, Sequence

# A flag of one command that is a setting a space's --set gives on the commands that read a space (sweep, space show)
SPACE_SETTING_OF_FLAG = {"--lr": "train.lr", "--weight-decay": "train.weight_decay",
                         "--batch-size": "train.batch_size", "--epochs": "scheduler.max_epochs",
                         "--precision": "train.precision", "--trials": "trials", "--sampler": "sampler"}
SPACE_COMMANDS = ("sweep", "space show")  # the commands whose --set sets a search space's settings
_INVALID_CHOICE = re.compile(r"argument (?P<flag>--[\w-]+)(?:/[\w-]+)?: invalid choice: (?P<value>.+) "
                             r"\(choose from (?P<choices>.*)\)")


def commands_of(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """('mamba-tune data import', its parser) for `parser` and every subcommand under it, depth first."""
    yield parser.prog, parser
    for action in parser._actions:  # the subcommands' parsers: argparse gives no public way to them
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from commands_of(sub)


def command_given(parser: argparse.ArgumentParser, words: Sequence[str]) -> argparse.ArgumentParser:
    """The (sub)command `words` name: at each level, the first word that is one of its subcommands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for i, word in enumerate(words):
                if word in action.choices:
                    return command_given(action.choices[word], words[i + 1:])
    return parser


def misplaced(parser: argparse.ArgumentParser, words: Sequence[str], unknown: Sequence[str]) -> str | None:
    """For the `unknown` words of `words` (argv) that are options of other commands: 'FLAG is an option of
    `COMMAND`[, ...], not of `GIVEN`' for each, and where the flag is a setting this command sets by --set, 'here:
    --set SETTING=VALUE', joined by '; '; None where none is."""
    given = command_given(parser, words)
    owners: dict[str, list[str]] = {}
    for prog, command in commands_of(parser):
        for flag in command._option_string_actions:
            owners.setdefault(flag, []).append(prog)
    flags = dict.fromkeys(word.partition("=")[0] for word in unknown if word.startswith("--"))
    said = [f"{flag} is an option of {_listed(owners[flag])}, not of `{given.prog}`" + _here(given, flag)
            for flag in flags if flag in owners and given.prog not in owners[flag]]
    if not said:
        return None
    return "; ".join(said) + f"; see `{given.prog} --help`"


def unknown_hint(parser: argparse.ArgumentParser, words: Sequence[str], unknown: Sequence[str]) -> str:
    """What follows argparse's 'unrecognized arguments: ...': where the given command's help is, then the option of
    that command nearest to each unknown one ('; see `mamba-tune sweep --help`; did you mean --storage?')."""
    given = command_given(parser, words)
    options = [flag for flag in given._option_string_actions if flag.startswith("--")]
    near = [match for word in unknown if word.startswith("--")
            for match in difflib.get_close_matches(word.partition("=")[0], options, n=1, cutoff=0.75)]
    return f"; see `{given.prog} --help`" + (f"; did you mean {' or '.join(dict.fromkeys(near))}?" if near else "")


def invalid_choice(message: str) -> str | None:
    """argparse's "argument --precision: invalid choice: 'fp16' (choose from 'fp32', 'bf16')" as the flag's own
    error, '--precision 'fp16': not one of its choices, fp32 or bf16; give one of them'; None for any other
    message (a subcommand's invalid choice keeps argparse's words)."""
    found = _INVALID_CHOICE.fullmatch(message)
    if found is None:
        return None
    choices = [choice.strip().strip("'\"") for choice in found["choices"].split(",")]
    either = f"{', '.join(choices[:-1])} or {choices[-1]}" if len(choices) > 1 else choices[0]
    value = found["value"].strip("'\"")  # quoted by argparse; a value that is no plain word is not repeated
    return f"{found['flag']} {value}: not one of its choices, {either}; give one of them"


def _here(given: argparse.ArgumentParser, flag: str) -> str:
    """'; here: --set train.lr=VALUE' where `flag` is a setting that the given command sets by --set, else ''."""
    reads_space = given.prog.partition(" ")[2] in SPACE_COMMANDS and "--set" in given._option_string_actions
    return f"; here: --set {SPACE_SETTING_OF_FLAG[flag]}=VALUE" if reads_space and flag in SPACE_SETTING_OF_FLAG else ""


def _listed(progs: list[str]) -> str:
    quoted = [f"`{prog}`" for prog in progs]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"
