"""The sweep's figures as the CLI prints them: the leaderboard, the finalists, the one look at the test segment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuning.cli.figures import finite, one_look_line, ratio, verdict_line
from tuning.search.finalists import finalist_scores
from tuning.search.ledger import TrialRecord, leaderboard
from tuning.search.param_text import column, other_params_text, params_text
from tuning.sweep_files import TEST_LOOK, read_test_looks, sweep_looks
from tuning.tracking.objective import loss_units


def print_leaderboard(records: list[TrialRecord], objective: str | None = None) -> None:
    """Every finished trial, best first; with `objective`, a line naming the units of its losses first. vs HAR and vs
    pers. are the best val over HAR's and persistence's validation loss, both the objective's."""
    if not records:
        print("no trial has finished")
        return
    if objective is not None:
        print(f"losses: validation {loss_units(objective)}; vs HAR, vs pers.: over HAR's and persistence's, by the "
              "same objective")
    print(f"{'rank':<5}{'trial':<14}{'lr':>9}{'wd':>9}{'batch':>7}  {'ended':<14}{'best val':>9}{'@':>4}"
          f"{'vs E0':>8}{'vs HAR':>8}{'vs pers.':>9}")
    for rank, r in enumerate(leaderboard(records), start=1):
        p = r.params
        gain = f"{1 - r.best_val_loss / r.e0_val_loss:+.1%}" if finite(r.best_val_loss, r.e0_val_loss) else "n/a"
        har, pers = (ratio(r.best_val_loss, baseline) for baseline in (r.baseline_har, r.baseline_persistence))
        ended = f"{r.stop_reason}@{r.stop_epoch}"
        print(f"{rank:<5}{short(r.trial_id):<14}{column(p, 'learning_rate', '.2e', 9)}"
              f"{column(p, 'weight_decay', '.2e', 9)}{column(p, 'batch_size', '', 7)}  "
              f"{ended:<14}{r.best_val_loss:>9.4f}{r.best_epoch:>4}{gain:>8}{har:>8}{pers:>9}"
              + (f"  {other}" if (other := other_params_text(p)) else ""))


def short(trial_id: str) -> str:
    return trial_id[-12:]


def print_finalists(records: list[TrialRecord], space: Any) -> None:
    """Each finalist's mean best val_loss over its fresh runs (its other seeds and folds), the winner first, its
    search trial's loss beside it (nothing without confirm)."""
    scores = finalist_scores(records, space.confirm, space.run.train.seed) if space.confirm is not None else []
    if not scores:
        return
    seeds = ", ".join(str(s) for s in (space.run.train.seed, *space.confirm.seeds))
    print(f"\nfinalists (confirm: top {space.confirm.top_k}; seeds {seeds}; {space.confirm.folds} fold(s)): val over "
          "its fresh runs only; search alone (the minimum that made it a finalist) is biased low, never in it")
    for rank, s in enumerate(scores, start=1):
        p = s.record.params
        runs = f"runs {s.n}/{s.planned}" + ("" if s.complete else " unconfirmed")
        spread = f" +- {s.std:.4f}" if s.n > 1 else ""  # one run has no spread to show
        val = f"val {s.mean:.4f}{spread}" if s.n else "val -"
        print(f"{rank:<3}{short(s.record.trial_id):<14}{params_text(p)}  "
              f"{val} ({runs})  search alone {s.search_loss:.4f}")


def print_test_look(test: dict[str, Any] | None, folder: Path) -> None:
    """The winner's look at the test segment, how many looks the sweep took, and the verdict against HAR (and the
    untuned configuration); or why there is none."""
    if test is None:
        print("test: none (the data have no test segment)")
        return
    kept = read_test_looks(folder)
    looks = len(kept)
    by_train = looks - len(sweep_looks(kept))  # `train --look`'s: counted, never the sweep's
    scored = f"trial {test['trial_id']}, best.pt of epoch {test['best_epoch']}"
    why = ([] if looks - by_train == 1 else ["each extension whose winner changed looked again"]) + \
        ([f"{by_train} by `train --look`"] if by_train else [])
    counted = "looked at once, after the winner was chosen" if looks == 1 else \
        f"look {test.get('look', looks)} of {looks}: {'; '.join(why)}"
    print(f"test: {one_look_line(test, scored)}; in {folder / TEST_LOOK} ({counted})")
    ensemble = test.get("ensemble")
    if ensemble:
        members = ", ".join(f"{loss:.4f}" for loss in ensemble["member_test_losses"])
        source = f"seed ensemble: the mean forecast of {ensemble['n_members']} runs"
        line = one_look_line({**test, "test_loss": ensemble["test_loss"]}, source)
        print(f"test: {line}; its runs alone {members}; ship it with `best --register MODEL --ensemble`")
    initial = test.get("vs_initial")
    if initial:
        own = "n_test" in initial  # trained on other data settings: on the test samples both forecast
        line = verdict_line(initial["ratio"] * initial["test_loss"] if own else test["test_loss"],
                            initial["test_loss"], initial["dm_pvalue"], "the untuned configuration")
        common = f" (on the {initial['n_test']} test samples both forecast, each on its own data settings)" \
            if own else ""
        print(f"{line}{common}; the untuned configuration is trial {initial['trial_id']}, the space's first initial "
              "point, for reference: it chooses nothing")
    if "vs_har" in test:
        print(verdict_line(test["test_loss"], test["vs_har"]["test_loss"], test["vs_har"]["dm_pvalue"]))
