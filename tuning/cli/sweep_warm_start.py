"""`sweep --warm-start OTHER [--warm-start-storage S]`: the other sweep read whole (its manifest, ledger and study) and
checked in the refusal phase, its warm start planned from what was read before anything is written, then its trials
and winner put in the new sweep's study before the manifest (which records where it was warm-started from) is written
and Ray Tune opens the study (tuning/sweep/warm_start.py). Adding that fails leaves nothing: the study it was adding to
is removed, so the same `sweep` can be run again."""

from __future__ import annotations

import argparse
import shutil
from typing import Any

from tuning.errors import UsageError
from tuning.sweep.warm_start import WarmSource, WarmStart, apply, plan, read_source, require_overlap, warm_start_storage
from tuning.sweep_files import STUDY, SweepPaths


def add_warm_start_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--warm-start", metavar="SWEEP",
                        help="start from what another sweep learned: on the same bars, its completed and pruned "
                        "trials join this study and its winner is the first trial; on other bars, only its winner "
                        "is tried first (a sweep in --storage, or in --warm-start-storage)")
    parser.add_argument("--warm-start-storage", metavar="DIR_OR_URI",
                        help="the storage the --warm-start sweep is in (default: --storage)")


def warm_source(args: argparse.Namespace, space: Any) -> WarmSource | None:
    """The sweep --warm-start names, read whole and checked against the space before anything is written (None
    without one)."""
    name, storage = getattr(args, "warm_start", None), getattr(args, "warm_start_storage", None)
    if name is None:
        if storage is not None:
            raise UsageError("--warm-start-storage says where the --warm-start sweep is; give --warm-start NAME too, "
                             "or leave it out")
        return None
    source = read_source(name, warm_start_storage(storage, args.storage))
    require_overlap(source, space)
    return source


def warm_plan(source: WarmSource | None, space: Any, bars_sha256: str, data: Any) -> WarmStart | None:
    """The warm start of the sweep over `space` (as it will run: after the memory probe) on the bars with SHA-256
    `bars_sha256` read as `data`: computed from what read_source read, before anything is written (None without
    --warm-start)."""
    if source is None:
        return None
    from model.training import data_identity

    return plan(source, space, bars_sha256, data_identity(data))


def add_warm_start(paths: SweepPaths, warm: WarmStart) -> None:
    """The warm start's trials added to the new sweep's study (same bars) and its winner enqueued first, and said;
    before the manifest is written. Should adding fail, the study is removed (its folder too, when made here)."""
    made = not paths.folder.exists()
    paths.folder.mkdir(parents=True, exist_ok=True)
    try:
        apply(warm, paths.study_url, paths.name)
    except BaseException:
        _remove_study(paths, made)
        raise
    for line in warm.lines():
        print(line, flush=True)


def _remove_study(paths: SweepPaths, made_folder: bool) -> None:
    """Undo a failed add: the new sweep's study deleted (check_new found none), and a folder made for it removed."""
    import optuna

    try:
        optuna.delete_study(study_name=paths.name, storage=paths.study_url)
    except Exception:  # noqa: BLE001 - never created, or its database unreachable: nothing more to undo there
        pass
    if paths.study is None:
        for leftover in paths.folder.glob(f"{STUDY}*"):  # the SQLite file and its journal
            leftover.unlink(missing_ok=True)
    if made_folder:
        shutil.rmtree(paths.folder, ignore_errors=True)
