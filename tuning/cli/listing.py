"""`mamba-tune list`: the sweeps in a storage folder, their state, progress and figures."""

from __future__ import annotations

import argparse
import math
from functools import partial
from pathlib import Path

from model.errors import InputError
from tuning.cli.help import subcommand
from tuning.cli.store_options import add_storage_option
from tuning.errors import UsageError
from tuning.sweep_files import MANIFEST, default_storage, default_storage_help, is_uri, storage_flag
from tuning.uri_secrets import STORAGE_CREDENTIALS, refuse_credentials

DEMO_STORAGE = "runs/demo/sweeps"  # where `make demo` sweeps smoke
SWEEPS_SHOWN = 8  # a refusal names at most this many of the sweeps it found


def add_command(commands: argparse._SubParsersAction) -> None:
    listing = subcommand(commands, "list", "list the sweeps in a storage folder: state, trials, best and test loss",
                         ("mamba-tune list", "mamba-tune list --storage /shared/sweeps",
                          "mamba-tune list --storage s3://bucket/sweeps"),
                         "List the sweeps in a storage folder, oldest first: running (its driver is alive), "
                         "finished, or interrupted (continue it with `mamba-tune resume NAME`); the search trials "
                         "finished of those asked for; the winner's best validation loss and its test loss, in the "
                         "units of the sweep's objective (the objective column: mse_log, mse_var, qlike or mse). "
                         "With a "
                         "URI storage, the sweeps whose records are copied there; one this machine does not keep "
                         "and that is not finished is 'not finished (stored)': another head may be running it, "
                         "or its head was lost (`mamba-tune resume NAME --storage URI` continues it here).")
    add_storage_option(listing, "where the sweeps were started (their --storage)")
    listing.set_defaults(run=cmd_list)


def cmd_list(args: argparse.Namespace) -> int:
    from tuning.sweep.listing import summarise
    from tuning.sweep.stored_listing import stored_sweeps, summarise_stored

    if is_uri(args.storage):
        refuse_credentials("--storage", args.storage, STORAGE_CREDENTIALS)
        names = stored_sweeps(args.storage)
        sweeps = {name: partial(summarise_stored, args.storage, name) for name in names}
    else:
        storage = Path(args.storage)
        if not storage.is_dir():
            raise UsageError(f"--storage {storage}: no such folder; pass the --storage the sweeps were started "
                             f"with ({default_storage_help()})")
        sweeps = {p.parent.name: partial(summarise, p.parent) for p in sorted(storage.glob("*/sweep.json"))}
    if not sweeps:
        print(f"no sweeps in {args.storage}; start one with `mamba-tune sweep --storage {args.storage} ...`")
        return 0
    rows = []
    for name, summary in sweeps.items():
        try:
            s = summary()
        except (OSError, ValueError, KeyError, TypeError, InputError) as exc:
            rows.append(("", name, f"unreadable ({str(exc).splitlines()[0]})", "", "", "", ""))
            continue
        state = f"{s.state} ({s.driver})" if s.driver else s.state
        rows.append((s.started, s.name, state, f"{s.finished}/{s.trials}", _loss(s.best_val_loss),
                     _loss(s.test_loss), s.objective))
    print(f"{'name':<20} {'state':<24} {'trials':>7} {'best val':>9} {'test':>9}  {'objective':<9}  started (UTC)")
    for started, name, state, trials, val, test, objective in sorted(rows):  # losses in their objective's units
        print(f"{name:<20} {state:<24} {trials:>7} {val:>9} {test:>9}  {objective:<9}  "
              f"{started.replace('T', ' ')[:19]}")
    return 0


def no_sweep_named(name: str, storage: str) -> UsageError:
    """The refusal of a sweep name not in `storage`: the sweeps there are in the storages this machine has (the
    asked one, the default one and the demo's), each with the --storage that names it, and how to name another."""
    found = [(sweep, where) for where in _local_storages(storage) for sweep in sweeps_in(where)]
    asked = Path(storage).expanduser().resolve() if not is_uri(storage) else storage
    if not found:
        others = "".join(f" or in {where}" for where in _local_storages(storage)[1:])
        return UsageError(f"no sweep named {name!r} in {asked}, nor any sweep there{others}; start one with "
                          f"`mamba-tune sweep` (`make demo` sweeps smoke into {DEMO_STORAGE}), or pass --storage DIR, "
                          "the folder the sweep was started with")
    shown = ", ".join(f"{sweep} ({where}{':' + flag if (flag := storage_flag(where)) else ', the default'})"
                      for sweep, where in found[:SWEEPS_SHOWN])
    more = f" and {len(found) - SWEEPS_SHOWN} more (`mamba-tune list --storage DIR`)" \
        if len(found) > SWEEPS_SHOWN else ""
    return UsageError(f"no sweep named {name!r} in {asked}; sweeps found: {shown}{more}; name one, or pass "
                      "--storage DIR, the folder the sweep was started with")


def sweeps_in(storage: str | Path) -> list[str]:
    """The names of the sweeps in a storage folder (each a folder with a sweep.json), sorted; [] where there is none."""
    return sorted(path.parent.name for path in Path(storage).expanduser().glob(f"*/{MANIFEST}"))


def _local_storages(storage: str) -> list[str]:
    """The storage folders a lost sweep is looked for in: `storage` (not a URI), the default one and the demo's,
    each once, as given."""
    folders: dict[Path, str] = {}
    for where in (storage, default_storage(), DEMO_STORAGE):
        if not is_uri(where):
            folders.setdefault(Path(where).expanduser().resolve(), where)
    return list(folders.values())


def _loss(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.4f}"
