"""`mamba-tune best`: the sweep's winner as a configuration for `train --config`, or shipped to the Model Registry
as it was trained (`--register`: its trial's own best.pt, no training; tuning/sweep/ship_winner.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tuning.bars_file import require_same_bars
from tuning.cli.help import subcommand
from tuning.cli.listing import no_sweep_named
from tuning.cli.store_options import add_storage_option, add_tracking_uri_option
from tuning.cli.sweep_report import print_finalists, print_test_look
from tuning.errors import UsageError
from tuning.search.best_config import train_command, write_best_config
from tuning.search.finalists import Unconfirmed, seed_members, winner
from tuning.search.ledger import Ledger, TrialRecord
from tuning.search.recipe import TrainingRecipe
from tuning.search.space import SweepSpace, parse_space
from tuning.sweep.manifest import SweepManifest, read_manifest
from tuning.sweep_files import (
    LEDGER,
    MANIFEST,
    STUDY,
    is_uri,
    latest_look,
    storage_flag,
    sweep_paths,
)
from tuning.tracking.objective import title as objective_title
from tuning.tracking.store import TrackingStore, open_store, resolve_store

CHALLENGER = "challenger"  # the alias `best --register` gives by default


def add_command(commands: argparse._SubParsersAction) -> None:
    best = subcommand(commands, "best", "write the winner's configuration, or register its model",
                       ("mamba-tune best smoke --out best.yaml",
                        "mamba-tune best smoke --register mamba-forecaster  # its best.pt as @challenger, no training"),
                       "Write the sweep's winner (the confirmed finalist) as a configuration for `mamba-tune train "
                       "--config`, with its figures; with --register, ship the winner's own checkpoint to the MLflow "
                       "Model Registry without training it again.")
    best.add_argument("name", help="the sweep's name")
    add_storage_option(best, "where the sweep lives")
    best.add_argument("--out", type=Path, help="output YAML (default: best.yaml in the sweep's folder)")
    best.add_argument("--force", action="store_true", help="replace an existing --out file")
    best.add_argument("--register", metavar="MODEL", help="register the winner's own best.pt (its trial's checkpoint, "
                      "no training) as a new version of MODEL in the MLflow Model Registry")
    best.add_argument("--ensemble", action="store_true", help="with --register: ship the winner's seed ensemble, the "
                      "mean forecast of its runs on every confirm seed (the sweep printed its test loss beside the "
                      "winner's alone)")
    best.add_argument("--alias", help="the alias --register gives the new version, moved from any version it named "
                      "(default challenger)")
    best.add_argument("--unconfirmed", action="store_true", help="take the best finalist so far although some of its "
                      "confirmation runs have no result (interrupted or failed; `resume` runs them): its YAML, MLflow "
                      "tags and registered version say unconfirmed")
    best.add_argument("--no-look", action="store_true", help="with --register: ship a winner the sweep has not "
                      "scored on its test segment (`resume` takes that look); its version is tagged "
                      "mamba_tune.judged_by=none")
    add_tracking_uri_option(best)  # the store --register ships to
    best.add_argument("--experiment", metavar="NAME", help="MLflow experiment of the --register run (default "
                      "production)")
    best.set_defaults(run=cmd_best)


def cmd_best(args: argparse.Namespace) -> int:
    paths = sweep_paths(args.storage, args.name)
    if not is_uri(args.storage) and not (paths.folder / MANIFEST).is_file():  # a URI storage's records are fetched
        raise no_sweep_named(args.name, args.storage)
    manifest = read_manifest(paths)
    space = parse_space(manifest.space, str(paths.folder / MANIFEST), stored=True)
    records = list(Ledger(paths.folder / LEDGER).records.values())
    best = _winner(args, records, space)
    members = _ensemble(args, records, best)
    out = args.out or paths.folder / "best.yaml"
    if out.exists() and not args.force:
        raise UsageError(f"{out} exists and is never overwritten by default; pass --force or choose another --out")
    test = latest_look(paths.folder, best.trial_id)
    _require_look(args, space, best, test)
    store = _open_registry(args, manifest)  # before anything is written: an unreachable store fails in seconds
    if store is not None:  # the model ships with the bars it was tuned on, or not at all
        require_same_bars(manifest.data, manifest.bars_sha256, f"sweep {args.name!r}",
                          "restore the file the sweep ran on; nothing was registered")
    config = write_best_config(space, best, args.name, manifest.data, out, records, manifest.bars_sha256)
    print_finalists(records, space)
    unconfirmed = " UNCONFIRMED (best --unconfirmed)" if config.tuned.unconfirmed else ""
    print(f"wrote {out}{unconfirmed}: lr {config.train.lr:.3g}, weight decay {config.train.weight_decay:.3g}, "
          f"batch {config.train.batch_size}, {config.train.epochs} epochs (best validation "
          f"{objective_title(space.run.data.loss)} {best.best_val_loss:.4f})")
    print(f"train it: {train_command(manifest.data, out)}")
    from tuning.search.importance import load_importances

    study = manifest.study_url or (f"sqlite:///{paths.folder / STUDY}" if (paths.folder / STUDY).exists() else None)
    importances = load_importances(study, args.name) if study else None
    if importances is not None:
        print(importances.describe())
    if test is not None or not space.run.data.test_fraction:  # its verdict against HAR last
        print_test_look(test, paths.folder)
    else:
        print(f"test: no look yet at the test segment with trial {best.trial_id} (the sweep ended before it, or it "
              f"failed), so nothing says whether it beats HAR; take it with `{_resume(args)}`")
    return _register_winner(args, store, paths.folder, manifest, members, config, out) if store is not None else 0


def _winner(args: argparse.Namespace, records: list[TrialRecord], space: SweepSpace) -> TrialRecord:
    """The confirmed winner; with --unconfirmed, the best finalist on the runs it has. UsageError when there is
    none, or its confirmation is incomplete and --unconfirmed is not given."""
    try:
        best = winner(records, space.confirm, space.run.train.seed, unconfirmed=args.unconfirmed)
    except Unconfirmed as missing:
        raise UsageError(f"sweep {args.name!r} has no confirmed winner yet: {missing}; run them with `mamba-tune "
                         f"resume {args.name}{storage_flag(args.storage)}`, or pass --unconfirmed to take the best "
                         "finalist so far (marked unconfirmed)") from None
    if best is None:
        raise UsageError(f"sweep {args.name!r} has no completed trial yet ({len(records)} finished, none ran all "
                         f"{space.scheduler.max_epochs} epochs); resume it or widen the space")
    return best


def _resume(args: argparse.Namespace) -> str:
    return f"mamba-tune resume {args.name}{storage_flag(args.storage)}"


def _require_look(args: argparse.Namespace, space: SweepSpace, best: TrialRecord, test: dict | None) -> None:
    """--register ships a winner judged on the test segment, or one the user says is not (--no-look); a
    UsageError otherwise, or for --no-look without --register."""
    if args.register is None:
        if args.no_look:
            raise UsageError("--no-look says --register may ship a winner the sweep has not scored on its test "
                             "segment, and --register is not given; add --register MODEL or drop --no-look")
        return
    if test is not None or args.no_look:
        return
    if not space.run.data.test_fraction:
        raise UsageError(f"sweep {args.name!r} has no test segment (data.test_fraction 0), so nothing says "
                         f"whether trial {best.trial_id} beats HAR, and --register ships only a judged winner; pass "
                         "--no-look to register it unjudged (its version tagged mamba_tune.judged_by=none)")
    raise UsageError(f"sweep {args.name!r} has not looked at its test segment with trial {best.trial_id}, its winner "
                     f"(the sweep ended before it, or it failed), and --register ships only a judged winner; take the "
                     f"look with `{_resume(args)}`, or pass --no-look to register it unjudged (its version tagged "
                     "mamba_tune.judged_by=none)")


def _ensemble(args: argparse.Namespace, records: list[TrialRecord], best: TrialRecord) -> list[TrialRecord]:
    """What --register ships: the winner alone, or with --ensemble its seed ensemble (the winner first)."""
    if not args.ensemble:
        return [best]
    if args.register is None:
        raise UsageError("--ensemble says what --register ships, and --register is not given; add --register MODEL")
    members = seed_members(records, best)
    if len(members) < 2:
        raise UsageError(f"--ensemble: trial {best.trial_id} has no completed run on another seed to average with "
                         "(the space's confirm.seeds is empty, or those runs did not finish); drop --ensemble, or "
                         "add confirm.seeds to the space and sweep again")
    return members


def _open_registry(args: argparse.Namespace, manifest: SweepManifest) -> TrackingStore | None:
    """With --register: the model name and alias checked, the store opened; None without it."""
    if args.register is None:
        if any(value is not None for value in (args.alias, args.tracking_uri, args.experiment)):
            raise UsageError("--alias, --tracking-uri and --experiment say how --register ships the winner, and "
                             "--register is not given; add --register MODEL or drop them")
        return None
    from tuning.tracking.registry import DEFAULT_EXPERIMENT, check_alias, check_model_name

    check_model_name(args.register)
    args.alias = check_alias(args.alias or CHALLENGER)
    args.experiment = args.experiment or DEFAULT_EXPERIMENT
    store = resolve_store(args.tracking_uri or manifest.tracking_uri)
    open_store(store)
    return store


def _register_winner(args: argparse.Namespace, store: TrackingStore, folder: Path, manifest: SweepManifest,
                     members: list[TrialRecord], config: TrainingRecipe, config_file: Path) -> int:
    import tempfile

    from mlflow.exceptions import MlflowException

    from tuning.sweep.ship_winner import stage_winner
    from tuning.tracking.registry import JUDGED_TAG, NO_LOOK, register_model
    from tuning.tracking.store import first_line

    with tempfile.TemporaryDirectory(prefix="mamba-tune-ship-") as staging:
        best = members[0]
        shipment = stage_winner(folder, manifest, best, config, config_file, Path(staging), members,
                                config.tuned.unconfirmed)
        try:
            done = register_model(store, args.experiment, args.register, shipment, alias=args.alias)
        except (MlflowException, OSError) as exc:
            print(f"error: registering trial {best.trial_id} in {store.uri} failed ({first_line(exc)}); nothing "
                  f"was trained, run the same `mamba-tune best {args.name} --register ...` again once the store "
                  "works", file=sys.stderr)
            return 1
    what = (f"trial {best.trial_id}'s best.pt (epoch {best.best_epoch})" if len(members) == 1 else
            f"the seed ensemble of trial {best.trial_id} ({len(members)} runs' best.pt, their mean forecast)")
    if shipment.tags[JUDGED_TAG] == NO_LOOK:
        what += ", never scored on the test segment (--no-look)"
    print(f"registered {done.name} version {done.version} as @{args.alias}: {what}, no training "
          f"(run {done.run_id}, experiment {args.experiment}) in {store.describe()}")
    print(f'load it with: mlflow.set_tracking_uri("{store.uri}"); '
          f'mlflow.pyfunc.load_model("models:/{done.name}@{args.alias}")')
    return 0
