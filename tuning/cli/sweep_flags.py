"""`sweep`'s flags for the settings people set most: each is the same as its --set, and is turned into that --set
pair before the space is read, so that the space validates it and its errors are the space's.

    --sampler NAME     --set sampler=NAME
    --trials N         --set trials=N
    --max-epochs N     --set scheduler.max_epochs=N
    --precision P      --set train.precision=P

Like any --set of a run setting, each is set where the space gives it (tuning/search/overrides.py: placed).
"""

from __future__ import annotations

import argparse
from typing import Any

from model.train_config import PRECISIONS
from tuning.errors import UsageError
from tuning.search.overrides import shown_key
from tuning.search.samplers import SAMPLERS
from tuning.search.searchable import setting_name


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """--sampler, --trials, --max-epochs and --precision, each described as the --set it stands for."""
    parser.add_argument("--sampler", choices=SAMPLERS,  # another is the flag's own error, argparse's, as --precision's
                        help=f"the Optuna sampler: {', '.join(SAMPLERS[:-1])} or {SAMPLERS[-1]}; the same as --set "
                             "sampler=NAME (default: the space's, else tpe)")
    parser.add_argument("--trials", type=int, metavar="N",
                        help="number of search trials; the same as --set trials=N (default: the space's)")
    parser.add_argument("--max-epochs", type=int, metavar="N",
                        help="epochs a trial that ASHA and the gate do not stop trains for; the same as --set "
                             "scheduler.max_epochs=N (default: the space's)")
    parser.add_argument("--precision", choices=PRECISIONS,  # another is the flag's own error, argparse's
                        help="fp32 or bf16 for every trial; the same as --set train.precision=VALUE (default: the "
                             "space's, else fp32; bf16: autocast, float32 parameters and SSM state)")


def flag_settings(args: argparse.Namespace) -> list[tuple[str, str, Any]]:
    """(flag, the setting's dotted name, value) of each setting flag given."""
    given = (("--sampler", "sampler", args.sampler), ("--trials", "trials", args.trials),
             ("--max-epochs", "scheduler.max_epochs", args.max_epochs),
             ("--precision", "train.precision", args.precision))
    return [(flag, key, value) for flag, key, value in given if value is not None]


def with_flag_sets(set_pairs: list[str], flags: list[tuple[str, str, Any]]) -> list[str]:
    """The --set pairs with each flag's pair after them. UsageError where a flag's setting is also given by --set:
    one setting, given twice, would leave which one holds to the order of the words."""
    for flag, key, _ in flags:
        for pair in set_pairs:
            set_key = pair.partition("=")[0]
            if setting_name(set_key) == setting_name(key):
                raise UsageError(f"{flag} and --set {shown_key(set_key)} both set {key}; {flag} is the same as --set "
                                 f"{key}=VALUE: give one of them")
    return [*set_pairs, *(f"{key}={value}" for _, key, value in flags)]


def described_with_flags(source: str, flags: list[tuple[str, str, Any]], set_pairs: list[str]) -> str:
    """How errors name the space read with flags and --set pairs: 'smoke.yaml (with --trials 0 --set a=...)'; a flag's
    value is shown (a number, or a sampler's or precision's name: no secret), a --set's is not."""
    words = [f"{flag} {value}" for flag, _, value in flags]
    words += [f"--set {shown_key(pair.partition('=')[0])}=..." for pair in set_pairs]
    return f"{source} (with {' '.join(words)})" if words else source

