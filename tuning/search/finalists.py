"""Finalists confirmed: the search's best configurations trained again over extra seeds and folds.

    confirm: {top_k: 3, seeds: [1, 2], folds: 2}

After the search, the top_k completed search trials (by best val_loss) are the finalists. Each is
trained again once for every (seed, fold) of (the run's seed + seeds) x (folds 1..F), except the pair
its search trial already is (the run's seed, fold 1). Fold 1 is the validation segment; fold f
validates on the segment just before fold f-1's and trains on every bar before it (model/data.py);
the test segment is never used. A finalist's score is the mean of the best val losses of all its
runs, its search trial included, with their standard deviation and count; the winner has the lowest
mean. Pure logic over ledger records: the sweep runs the runs (tuning/sweep/confirmation.py).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from model.settings import require_positive_ints
from tuning.search.ledger import TrialRecord, best_record

SEARCH, CONFIRM = "search", "confirm"  # a record's stage


@dataclass(frozen=True)
class ConfirmConfig:
    top_k: int = 3  # finalists: the best completed search trials
    seeds: tuple[int, ...] = ()  # extra seeds, besides the run's own (train.seed)
    folds: int = 1  # walk-forward folds; 1: the validation segment only

    def __post_init__(self) -> None:
        require_positive_ints(self, ("top_k", "folds"))
        seeds = self.seeds
        if not isinstance(seeds, (list, tuple)) or not all(isinstance(s, int) and not isinstance(s, bool)
                                                           for s in seeds):
            raise ValueError(f"seeds must be a list of integers, got {seeds!r}")
        repeated = sorted({s for s in seeds if list(seeds).count(s) > 1})
        if repeated:
            raise ValueError(f"seeds must differ from each other, {repeated[0]} is given twice; list each seed once")
        object.__setattr__(self, "seeds", tuple(seeds))

    @property
    def runs_per_finalist(self) -> int:
        """Confirmation runs of one finalist (its search trial not counted)."""
        return (1 + len(self.seeds)) * self.folds - 1


@dataclass(frozen=True)
class ConfirmRun:
    """One confirmation run to do: a finalist's configuration on another seed or fold."""

    finalist: str  # the search trial id
    params: dict[str, Any]  # the finalist's learning_rate, weight_decay, batch_size
    seed: int
    fold: int

    def config(self) -> dict[str, Any]:
        """The Tune trial's config: the searched parameters, and what makes it a confirmation run."""
        return {**self.params, "seed": self.seed, "fold": self.fold, "finalist": self.finalist}


@dataclass(frozen=True)
class FinalistScore:
    record: TrialRecord  # the finalist's search trial (the run's seed, fold 1): what `best` exports
    losses: tuple[float, ...]  # best val_loss of each of its runs, its search trial first

    @property
    def n(self) -> int:
        return len(self.losses)

    @property
    def mean(self) -> float:
        return math.fsum(self.losses) / self.n

    @property
    def std(self) -> float:
        """Sample standard deviation over its runs (0 for one run; inf when a run has no finite loss)."""
        if not all(math.isfinite(v) for v in self.losses):
            return math.inf
        return statistics.stdev(self.losses) if self.n > 1 else 0.0


def finalists(records: list[TrialRecord], top_k: int) -> list[TrialRecord]:
    """The top_k completed search trials by best val_loss, best first."""
    completed = [r for r in records if r.stage == SEARCH and r.stop_reason == "completed"
                 and math.isfinite(r.best_val_loss)]
    return sorted(completed, key=lambda r: r.best_val_loss)[:top_k]


def pending_runs(records: list[TrialRecord], confirm: ConfirmConfig, base_seed: int) -> list[ConfirmRun]:
    """The confirmation runs not yet in the ledger, finalist by finalist."""
    done = {(r.finalist, r.seed, r.fold) for r in records if r.stage == CONFIRM}
    runs = []
    for finalist in finalists(records, confirm.top_k):
        for seed in (base_seed, *confirm.seeds):
            for fold in range(1, confirm.folds + 1):
                if (seed, fold) != (base_seed, 1) and (finalist.trial_id, seed, fold) not in done:
                    runs.append(ConfirmRun(finalist.trial_id, dict(finalist.params), seed, fold))
    return runs


def finalist_scores(records: list[TrialRecord], confirm: ConfirmConfig) -> list[FinalistScore]:
    """Each finalist's losses over its search trial and its recorded confirmation runs, lowest mean first."""
    scores = []
    for finalist in finalists(records, confirm.top_k):
        runs = sorted((r for r in records if r.stage == CONFIRM and r.finalist == finalist.trial_id),
                      key=lambda r: (r.seed, r.fold))
        scores.append(FinalistScore(finalist, (finalist.best_val_loss, *(r.best_val_loss for r in runs))))
    return sorted(scores, key=lambda s: (s.mean, s.record.best_val_loss))


def seed_members(records: list[TrialRecord], chosen: TrialRecord) -> list[TrialRecord]:
    """The chosen trial's seed ensemble: its own run, then its completed confirmation runs on the validation
    segment (fold 1) on other seeds, by seed. Trained on the same samples and scaling, their forecasts can be
    averaged; [chosen] alone when it was not confirmed on another seed."""
    others = sorted((r for r in records if r.stage == CONFIRM and r.finalist == chosen.trial_id and r.fold == 1
                     and r.stop_reason == "completed" and math.isfinite(r.best_val_loss)), key=lambda r: r.seed)
    return [chosen, *others]


def winner(records: list[TrialRecord], confirm: ConfirmConfig | None) -> TrialRecord | None:
    """The configuration the sweep hands over: the finalist with the lowest mean when finalists were
    confirmed, else the completed search trial with the lowest val_loss (None when none completed)."""
    if confirm is not None and any(r.stage == CONFIRM for r in records):
        scores = finalist_scores(records, confirm)
        return scores[0].record if scores else None
    return best_record(records)
