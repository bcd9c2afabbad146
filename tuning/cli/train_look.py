"""The test segment in `train`: scored in the open, and a sweep's held-out one only as a look that sweep counts.

The test segment of a sweep's bars is what the sweep held out to judge its winner once (tuning/sweep/one_look.py).
`train --config best.yaml` (or `--refit`) on those very bars would score it again, unseen by the sweep; so there
it is scored only with `--look`, and each such scoring is added to the sweep's test.json as a look of its own
(`by: train`, the run's folder beside it) and said as `look k of n`. Without `--look` the run reports no test
figures and says how to take them. Other bars, or a configuration that is no sweep's winner: scored as always.

A look is kept as the sweep keeps its own (tuning/sweep/looks_kept.py): with a URI storage the sweep's records are
fetched first, and a stale folder refused (tuning/sweep/record_copies.py); a sweep being driven now (`sweep`,
`resume`) is refused, before training and again before the look is written, which holds the sweep's driver mark
while it is; once in test.json the look is logged to the sweep's MLflow run (counted in test_looks, never its
headline: tuning/tracking/runs.py) and the records copied to the storage. A store that does not answer loses
nothing: test.json holds the look, and the sweep's next `resume` logs it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from model.atomic import write_text_atomic
from model.data import Dataset
from tuning.bars_file import sha256_of
from tuning.cli.figures import one_look_line, verdict_line
from tuning.cli.store_options import storage_help
from tuning.errors import UsageError
from tuning.search.recipe import TrainingRecipe
from tuning.sweep_files import (
    MANIFEST,
    TEST_LOOK,
    TRACKING_SPOOL,
    TRAIN_LOOK,
    SweepPaths,
    append_look,
    default_storage,
    sweep_paths,
)

if TYPE_CHECKING:
    from tuning.sweep.manifest import SweepManifest


@dataclass(frozen=True)
class SweepLook:
    """The sweep whose test.json counts `train --look`'s look: where it lives and its manifest."""

    paths: SweepPaths
    manifest: SweepManifest

    @property
    def folder(self) -> Path:
        return self.paths.folder


def add_look_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--look", action="store_true",
                        help="score the test segment of the bars a sweep's winner (--config best.yaml) was tuned on, "
                             "as a look counted in that sweep's test.json (look k of n); without it such a run "
                             "reports no test figures")
    parser.add_argument("--storage", help=storage_help("where the sweep of --look lives"))


def held_out_by(args: argparse.Namespace, config: TrainingRecipe) -> str | None:
    """The sweep whose held-out test segment training `config` on --data would score: the sweep of its `tuned:`
    section when the file is the one the sweep ran on (a best.yaml that kept no hash: assumed so) and the
    configuration has a test segment; None otherwise."""
    tuned = config.tuned
    if tuned is None or not config.data.test_fraction:
        return None
    if tuned.data_sha256 is None or tuned.refit:  # a refit is refused on any other file
        return tuned.sweep
    return tuned.sweep if sha256_of(args.data) == tuned.data_sha256 else None


def look_folder(args: argparse.Namespace, config: TrainingRecipe, sweep: str | None) -> SweepLook | None:
    """With --look: the sweep `sweep` (held_out_by), whose test.json counts the run's look; None without it. With a
    URI --storage its records are fetched first (record_copies.fetch_records). UsageError for a --look with no
    sweep's test segment to look at, a sweep not in --storage, a stale folder (both generations named), a sweep
    being driven now, and --storage without --look."""
    if not args.look:
        if args.storage is not None:
            raise UsageError("--storage says where the sweep of --look lives, and --look is not given; add --look "
                             "or drop --storage")
        return None
    if sweep is None:
        tuned = config.tuned
        why = ("the configuration is no sweep's winner (no tuned: section)" if tuned is None else
               "its configuration has no test segment (test_fraction 0)" if not config.data.test_fraction else
               f"{args.data} is not the file sweep {tuned.sweep} ran on")
        raise UsageError(f"--look counts a look at the test segment a sweep held out, and {why}; drop --look (the "
                         "test segment of other bars is scored without it)")
    from tuning.sweep.manifest import SweepManifest
    from tuning.sweep.record_copies import fetch_records

    paths = sweep_paths(args.storage or default_storage(), sweep)
    fetch_records(paths)  # a URI storage: the records fetched where the folder is not here, a stale one refused
    if not (paths.folder / MANIFEST).is_file():
        raise UsageError(f"--look adds a look to sweep {sweep}'s {TEST_LOOK}, and {paths.folder} holds no sweep "
                         f"(no {MANIFEST}); pass --storage of the storage the sweep ran in")
    refuse_running(paths, "nothing was trained")
    try:
        manifest = SweepManifest.from_dict(json.loads((paths.folder / MANIFEST).read_text()))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise UsageError(f"--look adds a look to sweep {sweep}'s {TEST_LOOK}, and its {paths.folder / MANIFEST} is "
                         f"no sweep manifest ({exc!r}); restore it, or pass --storage of the storage the sweep ran "
                         "in") from None
    return SweepLook(paths, manifest)


def refuse_running(paths: SweepPaths, kept: str) -> None:
    """UsageError when a sweep driver (`sweep`, `resume`) is driving `paths`' sweep now: its end reads and writes
    test.json, and a look added meanwhile could be lost. `kept`: what the line says of this run's work."""
    from tuning.sweep.driver_mark import running_driver

    if driver := running_driver(paths.folder):
        raise UsageError(f"--look adds a look to sweep {paths.name}'s {TEST_LOOK}, and the sweep is running "
                         f"({driver}): a look is never added while a sweep driver may write {TEST_LOOK}; {kept}: run "
                         "the command again once the sweep has ended or been stopped")


def score_test_segment(args: argparse.Namespace, config: TrainingRecipe, data: Dataset, best_epoch: int,
                       sweep: str | None, looked: SweepLook | None) -> int:
    """Score --out's best.pt on the test segment into --out/test.json and print it; with `looked` (look_folder)
    add it to that sweep's test.json as a look and keep it (keep_look); on the test segment `sweep` held out
    (held_out_by) without --look, score nothing and say how to take the look."""
    out = args.out
    if not len(data.test_index):
        print("test           none (test_fraction 0): nothing scored on bars the run was not chosen on")
        return 0
    if sweep is not None and looked is None:
        print(f"test           not scored: the test segment of these bars is the one sweep {sweep} held out, and "
              f"scoring it is a look the sweep counts; take it with: {_look_command(args)} (with --storage where "
              f"the sweep is not in {default_storage()})")
        return 0
    from model.holdout import har_losses, losses_on_test_segment, score_losses
    from model.verdict import overlap, versus

    source = f"best.pt, epoch {best_epoch}"
    if looked is None:  # bars no sweep held out: in the open, as any run's
        scores = {"objective": data.objective,
                  **score_losses(losses_on_test_segment([out / "best.pt"], data), data)}
        write_text_atomic(out / "test.json", json.dumps(scores, indent=1))
        print(f"{one_look_line(scores, source)}; in {out}/test.json")
        return 0
    from tuning.sweep.driver_mark import driving
    from tuning.sweep.record_copies import refuse_stale_folder

    kept = f"the trained run is kept in {out}, its look not taken; take it with {_look_command(args)}"
    try:  # what may have changed while this run trained: a sweep resumed, a newer copy from another head
        refuse_running(looked.paths, kept)
        refuse_stale_folder(looked.paths)
    except UsageError as exc:
        print(f"error: {exc}" + ("" if kept in str(exc) else f"; {kept}"), file=sys.stderr)
        return 1
    with driving(looked.folder):  # no `resume` starts while the look is added and kept
        losses = losses_on_test_segment([out / "best.pt"], data)  # (n_test,)
        scores = {"objective": data.objective, **score_losses(losses, data)}  # losses: the objective's
        vs_har = versus(losses, har_losses(data), overlap(data.summary["target"], data.summary["horizon"]))
        look = append_look(looked.folder, {"by": TRAIN_LOOK, "refit": config.tuned.refit,
                                           "out": str(Path(out).resolve()), "trial_id": config.tuned.trial,
                                           "best_epoch": best_epoch, **scores, "vs_har": vs_har})
        write_text_atomic(out / "test.json", json.dumps(look, indent=1))  # counted first, then kept in --out
        print(f"look {look['look']} of {look['look']} at the test segment of sweep {sweep}: "
              f"{one_look_line(scores, source)}; in {looked.folder / TEST_LOOK} and {out}/test.json")
        print(verdict_line(scores["test_loss"], vs_har["test_loss"], vs_har["dm_pvalue"]))
        keep_look(looked)
    return 0


def keep_look(looked: SweepLook) -> None:
    """The look just added kept as the sweep keeps its own (tuning/sweep/looks_kept.py): logged to the sweep's
    MLflow run, where the store answers (waiting at most LOOK_SENT_S, then spooled for `resume`), and the records
    copied to a URI storage. A store that cannot be opened is said in one warning line: test.json holds the look,
    and the sweep's next `resume` logs it."""
    from tuning.sweep.looks_kept import LOOK_SENT_S, keep_looks
    from tuning.sweep.record_copies import copy_records_or_note
    from tuning.tracking.log import TrackingLog
    from tuning.tracking.store import first_line, open_store, resolve_store

    paths, manifest = looked.paths, looked.manifest
    store = resolve_store(manifest.tracking_uri)
    try:
        client = open_store(store)
        experiment = store.experiment_id(client, paths.name)
    except Exception as exc:  # noqa: BLE001 - unreachable, refused: the look is in test.json whatever the store says
        print(f"warning: the look is not in MLflow yet ({first_line(exc)}); {paths.folder / TEST_LOOK} holds it, "
              f"and the sweep's next `mamba-tune resume {paths.name}` logs it", file=sys.stderr)
        copy_records_or_note(paths)
        return
    log = TrackingLog(client, experiment, manifest.sweep_id, paths.folder / TRACKING_SPOOL)
    keep_looks(paths, log)  # logged, copied, sent (or spooled)
    log.close(timeout_s=LOOK_SENT_S)
    copy_records_or_note(paths)  # the spool as the look leaves it


def _look_command(args: argparse.Namespace) -> str:
    return shlex.join(["mamba-tune", "train", "--data", str(args.data), "--out", str(args.out), "--resume", "--look",
                       *(["--storage", args.storage] if args.storage is not None else [])])
