"""The test segment in `train`: scored in the open, and a sweep's held-out one only as a look that sweep counts.

The test segment of a sweep's bars is what the sweep held out to judge its winner once (tuning/sweep/one_look.py).
`train --config best.yaml` (or `--refit`) on those very bars would score it again, unseen by the sweep; so there
it is scored only with `--look`, and each such scoring is added to the sweep's test.json as a look of its own
(`by: train`, the run's folder beside it) and said as `look k of n`. Without `--look` the run reports no test
figures and says how to take them. Other bars, or a configuration that is no sweep's winner: scored as always.
"""

from __future__ import annotations

import argparse
import json
import shlex
from datetime import datetime, timezone
from pathlib import Path

from model.atomic import write_text_atomic
from model.data import Dataset
from tuning.bars_file import sha256_of
from tuning.cli.figures import one_look_line, verdict_line
from tuning.errors import UsageError
from tuning.search.recipe import TrainingRecipe
from tuning.sweep_files import DEFAULT_STORAGE, MANIFEST, TEST_LOOK, TRAIN_LOOK, read_test_looks, sweep_paths


def add_look_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--look", action="store_true",
                        help="score the test segment of the bars a sweep's winner (--config best.yaml) was tuned on, "
                             "as a look counted in that sweep's test.json (look k of n); without it such a run "
                             "reports no test figures")
    parser.add_argument("--storage", help=f"where the sweep of --look lives (default {DEFAULT_STORAGE})")


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


def look_folder(args: argparse.Namespace, config: TrainingRecipe, sweep: str | None) -> Path | None:
    """With --look: the folder of `sweep` (held_out_by), whose test.json counts the run's look; None without it.
    UsageError for a --look with no sweep's test segment to look at, a sweep not in --storage, and --storage
    without --look."""
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
    paths = sweep_paths(args.storage or DEFAULT_STORAGE, sweep)
    if not (paths.folder / MANIFEST).is_file():
        raise UsageError(f"--look adds a look to sweep {sweep}'s {TEST_LOOK}, and {paths.folder} holds no sweep "
                         f"(no {MANIFEST}); pass --storage of the storage the sweep ran in")
    return paths.folder


def score_test_segment(args: argparse.Namespace, config: TrainingRecipe, data: Dataset, best_epoch: int,
                       sweep: str | None, folder: Path | None) -> None:
    """Score --out's best.pt on the test segment into --out/test.json and print it; with `folder` (look_folder)
    add it to that sweep's test.json as a look; on the test segment `sweep` held out (held_out_by) without
    --look, score nothing and say how to take the look."""
    out = args.out
    if not len(data.test_index):
        print("test           none (test_fraction 0): nothing scored on bars the run was not chosen on")
        return
    if sweep is not None and folder is None:
        take = shlex.join(["mamba-tune", "train", "--data", str(args.data), "--out", str(out), "--resume", "--look"])
        print(f"test           not scored: the test segment of these bars is the one sweep {sweep} held out, and "
              f"scoring it is a look the sweep counts; take it with: {take} (with --storage where the sweep is not "
              f"in {DEFAULT_STORAGE})")
        return
    from model.holdout import har_squared_errors, score_squared_errors, squared_errors_on_test_segment
    from model.verdict import versus

    errors = squared_errors_on_test_segment([out / "best.pt"], data)  # (n_test,)
    scores = score_squared_errors(errors, data)
    source = f"best.pt, epoch {best_epoch}"
    if folder is None:  # bars no sweep held out: in the open, as any run's
        write_text_atomic(out / "test.json", json.dumps(scores, indent=1))
        print(f"{one_look_line(scores, source)}; in {out}/test.json")
        return
    horizon = 1 if data.summary["target"] == "close" else data.summary["horizon"]  # bars each target overlaps
    looks = read_test_looks(folder)
    look = {"look": len(looks) + 1, "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "by": TRAIN_LOOK, "refit": config.tuned.refit, "out": str(Path(out).resolve()),
            "trial_id": config.tuned.trial, "best_epoch": best_epoch, **scores,
            "vs_har": versus(errors, har_squared_errors(data), horizon)}
    write_text_atomic(folder / TEST_LOOK, json.dumps([*looks, look], indent=1))  # counted first, then kept in --out
    write_text_atomic(out / "test.json", json.dumps(look, indent=1))
    print(f"look {look['look']} of {look['look']} at the test segment of sweep {sweep}: {one_look_line(scores, source)}"
          f"; in {folder / TEST_LOOK} and {out}/test.json")
    print(verdict_line(scores["test_loss"], look["vs_har"]["test_loss"], look["vs_har"]["dm_pvalue"]))
