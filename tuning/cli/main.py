"""`mamba-tune`: the command line. The only place that prints.

Exit codes: 0 success; 1 failure; 2 bad input, reported as one line
`error: <what>, <rule>, <fix>` on stderr, with no traceback; 130 interrupted; a command's own (`sweep --help`).
The commands are parsed and run by parse_command and run_command, which raise rather than print: `main` is the CLI's
shell over them, the Python API (mamba_tune/, docs/python-api.md) the other.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from model.errors import InputError
from tuning.cli import best, data, doctor, listing, promote, space, sweep, train, ui
from tuning.cli.flag_owners import invalid_choice, misplaced, unknown_hint
from tuning.cli.help import subcommand
from tuning.errors import UsageError
from tuning.search.overrides import hide_set_values, shown_key
from tuning.yaml_io import ConfigError, parse_yaml


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line instead of the usage block, and no value given is repeated in it (a
    value after a mistyped --notify or --set is a webhook URL, a secret): of arguments it does not know it names the
    options without their =values, and a value, there or quoted (an invalid choice, a number that is not one), only
    where it is a plain word. An option of another command given to this one says which command(s) have it, and an
    option's invalid choice is the flag's own error (tuning/cli/flag_owners.py).
    No option is taken by a prefix of its name (allow_abbrev off, in every subcommand's parser too): `--se KEY=URL`
    would be a --set that main's errors do not know to hide."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**kwargs, "allow_abbrev": False})
        self._words: list[str] = []  # the arguments parse_args was given: the command they name, for error()

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        self._words = list(sys.argv[1:] if args is None else args)
        return super().parse_args(args, namespace)

    def error(self, message: str) -> None:  # type: ignore[override]
        head, sep, unknown = message.partition("unrecognized arguments: ")
        if sep and (elsewhere := misplaced(self, self._words, unknown.split())):  # names flags, never a value
            raise UsageError(elsewhere)
        if sep:
            shown = [arg.partition("=")[0] if arg.startswith("-") else arg if _WORD.fullmatch(arg) else _NOT_REPEATED
                     for arg in unknown.split()]
            raise UsageError(f"{head}unrecognized arguments: {' '.join(shown)}"
                             f"{unknown_hint(self, self._words, unknown.split())}")
        message = _QUOTED.sub(lambda quoted: quoted[0] if _WORD.fullmatch(quoted[0][1:-1]) else _NOT_REPEATED, message)
        if choice := invalid_choice(message):  # its value shown as above: a plain word, or not at all
            raise UsageError(f"{choice}; see `{self.prog} --help`")
        raise UsageError(f"{message}; see `{self.prog} --help`")


# A value as argparse quotes it (repr: in '' or, holding a ', in ""), shown only where it is a plain word
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_WORD = re.compile(r"[\w.-]{1,32}")
_NOT_REPEATED = "<a value, not repeated>"


def _parse_overrides(pairs: Sequence[str]) -> dict[str, object]:
    """["model.d_model=64", "model.dt_limit=[0.0, 1.0]"] -> {"d_model": 64, "dt_limit": [0.0, 1.0]} (YAML values):
    each a model setting by its dotted name, as every command names it (run.model.d_model, the older spelling in a
    space, too); UsageError naming the nearest model setting for any other key, a bare d_model included."""
    from dataclasses import fields

    from model.config import ModelConfig
    from tuning.search.nearest_names import did_you_mean
    from tuning.search.searchable import setting_name

    names = [f"model.{field.name}" for field in fields(ModelConfig)]
    values: dict[str, object] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:  # without '=', all of it may be a value: not shown
            raise UsageError("a --set is not KEY=VALUE (its text is not repeated: it may be a value), "
                             "e.g. --set model.d_model=64")
        name = setting_name(key)
        if name not in names:
            raise UsageError(f"--set {shown_key(key)}: `model --set` takes model settings (model.d_model, ...); "
                             f"{did_you_mean(name, names)}")
        field = name.removeprefix("model.")
        if field in values:
            raise UsageError(f"--set {shown_key(key)} is given twice; give it once")
        try:
            values[field] = parse_yaml(raw, f"--set {shown_key(key)}")
        except ConfigError as exc:
            raise UsageError(str(exc).replace("invalid YAML", "the value is not valid YAML")) from None
    return values


def cmd_model(args: argparse.Namespace) -> int:
    """Print the Forecaster a configuration builds: dims, parameter counts, backend."""
    from model.backend import load_fused_kernel
    from model.config import ModelConfig
    from model.forecaster import Forecaster

    try:
        config = ModelConfig.from_dict(_parse_overrides(args.set))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"model setting: {exc}") from None
    model = Forecaster(config)
    count = sum(p.numel() for p in model.parameters())
    per_layer = sum(p.numel() for p in model.layers[0].parameters())
    _, why = load_fused_kernel()
    print(f"Forecaster: {config.n_layers} Mamba-2 layers, d_model {config.d_model}, d_inner {config.d_inner}, "
          f"{config.nheads} heads x {config.headdim}, d_state {config.d_state}, ngroups {config.ngroups}, "
          f"chunk {config.chunk_size}")
    print(f"inputs: {config.n_features} features per bar -> {config.n_targets} target(s) from the last bar")
    print(f"parameters: {count:,} ({per_layer:,} per layer)")
    backend = model.layers[0].mixer.active_backend()
    print(f"backend here: {backend}" + (f" (mamba_ssm kernels: {why})" if why else ""))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mamba-tune", description="Tune a Mamba-2 forecaster of market bars.",
                     epilog="start with: make demo; then mamba-tune COMMAND --help",
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"mamba-tune {_version()}",
                        help="print the version and exit")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    model = subcommand(commands, "model", "show the Forecaster a configuration builds",
                        ("mamba-tune model", "mamba-tune model --set model.d_model=128 --set model.n_layers=4"),
                        "Show the Forecaster a model configuration builds: its dimensions, parameter count and "
                        "the backend that runs here (mamba_ssm's CUDA kernels, or the reference torch code).")
    model.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="set a model setting by its dotted name, as `train --set` and `sweep --set` do, "
                       "e.g. --set model.d_model=64 (repeatable)")
    model.set_defaults(run=cmd_model)
    data.add_commands(commands)
    train.add_command(commands)
    sweep.add_commands(commands)
    space.add_commands(commands)
    best.add_command(commands)
    promote.add_command(commands)
    ui.add_command(commands)
    doctor.add_command(commands)
    listing.add_command(commands)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mamba-tune")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def parse_command(argv: Sequence[str]) -> argparse.Namespace:
    """The parsed arguments of `argv` (the words after `mamba-tune`). Raises InputError for bad ones, its message
    with no --set value in it (see run_command)."""
    with _no_set_values(argv):
        return build_parser().parse_args(list(argv))


def run_command(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run the command `args` (parse_command of `argv`) names: its exit code (0 success, 1 failure, 130 interrupted,
    or a command's own). Bad input is raised, never printed: InputError, its one line with no --set value of `argv`
    in it; so is KeyboardInterrupt. The CLI (main) and the Python API (mamba_tune/) both run commands here."""
    with _no_set_values(argv):
        return args.run(args)


@contextmanager
def _no_set_values(argv: Sequence[str]) -> Iterator[None]:
    """An InputError raised inside goes on with the value of every --set pair of `argv` hidden in its message (a
    --set value may be a webhook URL, a secret); model/errors.py: InputError."""
    try:
        yield
    except InputError as exc:
        shown = hide_set_values(str(exc), _set_pairs(argv))
        if shown != str(exc):
            exc.args = (shown,)
        raise


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    args = None
    try:
        args = parse_command(words)
        return run_command(args, words)
    except InputError as exc:  # every error a user can fix: model/errors.py; no --set value repeated
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path that cannot be written or read: say which, no traceback
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}, the file system refused; check the path, its permissions "
              "and free space", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # checkpoints are written atomically: the last one is intact
        hint = f"--resume --out {args.out}" if args is not None and args.command == "train" else None
        print(f"interrupted{f'; continue with {hint}' if hint else ''}", file=sys.stderr)
        return 130


def _set_pairs(argv: Sequence[str]) -> list[str]:
    """The KEY=VALUE of each --set in `argv` (--set PAIR or --set=PAIR), read from the words as given: the
    arguments may not have parsed."""
    words = list(argv)
    return [word.partition("=")[2] if word.startswith("--set=") else words[i + 1]
            for i, word in enumerate(words)
            if word.startswith("--set=") or (word == "--set" and i + 1 < len(words))]


if __name__ == "__main__":
    sys.exit(main())
