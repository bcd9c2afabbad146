"""Finalists confirmed: the search's best configurations trained again over extra seeds and folds.

    confirm: {top_k: 3, seeds: [1, 2], folds: 2}

After the search, the top_k completed search trials (by best val_loss) are the finalists. Each is
trained again once for every (seed, fold) of (the run's seed + seeds) x (folds 1..F), except the pair
its search trial already is (the run's seed, fold 1). Fold 1 is the validation segment; fold f
validates on the segment just before fold f-1's and trains on every bar before it (model/data.py);
the test segment is never used. A finalist's score is the mean of the best val losses of its fresh runs
alone (its confirmation runs), with their standard deviation and count: its search trial's loss is the
minimum of many, which made it a finalist, so it is biased low and kept beside the mean, never in it. The
winner has the lowest mean, and is chosen only once every finalist has a result for each of its planned
runs. A confirm section with no run to plan (no extra seed, one fold) confirms nothing: the winner is the
search's best. A diverged run is a result (inf: its finalist ranks last); a failed one (error) is not, and
is run again by `resume`.
Pure logic over ledger records: the sweep runs the runs (tuning/sweep/confirmation.py).
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
    losses: tuple[float, ...]  # the loss of each of its fresh runs with a result, by (seed, fold); diverged: inf
    planned: int  # its fresh runs in all (its search trial not counted): runs_per_finalist

    @property
    def n(self) -> int:
        return len(self.losses)

    @property
    def search_loss(self) -> float:
        """Its search trial's best val_loss: the minimum that made it a finalist, biased low; shown beside the
        mean, never in it."""
        return self.record.best_val_loss

    @property
    def complete(self) -> bool:
        """Every planned run has a result: only then is the finalist ranked."""
        return self.n >= self.planned

    @property
    def missing(self) -> int:
        return max(self.planned - self.n, 0)

    @property
    def mean(self) -> float:
        """The mean over its fresh runs; nan while none has a result (ranked after every finalist that has one)."""
        return math.fsum(self.losses) / self.n if self.n else math.nan

    @property
    def std(self) -> float:
        """Sample standard deviation over its fresh runs (0 for one run, nan for none; inf when a run has no finite
        loss)."""
        if not all(math.isfinite(v) for v in self.losses):
            return math.inf
        return statistics.stdev(self.losses) if self.n > 1 else 0.0 if self.n else math.nan

    def rank(self) -> tuple[float, float]:
        """What it is ranked by: its mean (none yet: last), then its search loss (a tie only)."""
        return (self.mean if self.n else math.inf, self.search_loss)


class Unconfirmed(Exception):
    """The winner was asked for before every finalist's planned runs had a result."""

    def __init__(self, scores: list[FinalistScore]) -> None:
        self.scores = [s for s in scores if not s.complete]  # the finalists with runs missing, best first
        super().__init__(describe_missing(self.scores))

    @property
    def missing(self) -> int:
        return sum(s.missing for s in self.scores)


def is_result(run: TrialRecord) -> bool:
    """Whether a confirmation run's record is a result: it trained to its end, or diverged (a NaN is an answer:
    its loss is inf). One that failed (a worker lost past max_failures, a storage error) is not: `resume` runs
    it again."""
    return run.stop_reason != "error"


def run_loss(run: TrialRecord) -> float:
    """What a result counts for in its finalist's mean: its best val_loss, or inf when it diverged."""
    return math.inf if run.stop_reason == "nan" else run.best_val_loss


def finalists(records: list[TrialRecord], top_k: int) -> list[TrialRecord]:
    """The top_k completed search trials by best val_loss, best first."""
    completed = [r for r in records if r.stage == SEARCH and r.stop_reason == "completed"
                 and math.isfinite(r.best_val_loss)]
    return sorted(completed, key=lambda r: r.best_val_loss)[:top_k]


def planned_runs(finalist: TrialRecord, confirm: ConfirmConfig, base_seed: int) -> list[ConfirmRun]:
    """Every confirmation run of a finalist: each (seed, fold) but its search trial's own (base_seed, 1)."""
    return [ConfirmRun(finalist.trial_id, dict(finalist.params), seed, fold)
            for seed in (base_seed, *confirm.seeds) for fold in range(1, confirm.folds + 1)
            if (seed, fold) != (base_seed, 1)]


def _results(records: list[TrialRecord], finalist: str) -> dict[tuple[int, int], TrialRecord]:
    """(seed, fold) -> the finalist's confirmation run there that has a result (the latest, were there two)."""
    return {(r.seed, r.fold): r for r in records if r.stage == CONFIRM and r.finalist == finalist and is_result(r)}


def pending_runs(records: list[TrialRecord], confirm: ConfirmConfig, base_seed: int) -> list[ConfirmRun]:
    """The confirmation runs with no result in the ledger yet (never run, interrupted, or failed), finalist by
    finalist."""
    runs = []
    for finalist in finalists(records, confirm.top_k):
        done = _results(records, finalist.trial_id)
        runs += [run for run in planned_runs(finalist, confirm, base_seed) if (run.seed, run.fold) not in done]
    return runs


def finalist_scores(records: list[TrialRecord], confirm: ConfirmConfig, base_seed: int) -> list[FinalistScore]:
    """Each finalist's losses over its recorded fresh runs (its search trial's is not one); the complete ones by
    lowest mean first, then those with runs missing (ranked by what they have, for the leaderboard alone). [] when
    the confirm section plans no run."""
    if not confirm.runs_per_finalist:
        return []
    scores = []
    for finalist in finalists(records, confirm.top_k):
        results = sorted(_results(records, finalist.trial_id).values(), key=lambda r: (r.seed, r.fold))
        scores.append(FinalistScore(finalist, tuple(map(run_loss, results)), confirm.runs_per_finalist))
    return sorted(scores, key=lambda s: (not s.complete, *s.rank()))


def seed_members(records: list[TrialRecord], chosen: TrialRecord) -> list[TrialRecord]:
    """The chosen trial's seed ensemble: its own run, then its completed confirmation runs on the validation
    segment (fold 1) on other seeds, by seed. Trained on the same samples and scaling, their forecasts can be
    averaged; [chosen] alone when it was not confirmed on another seed."""
    others = sorted((r for r in records if r.stage == CONFIRM and r.finalist == chosen.trial_id and r.fold == 1
                     and r.stop_reason == "completed" and math.isfinite(r.best_val_loss)), key=lambda r: r.seed)
    return [chosen, *others]


def winner(records: list[TrialRecord], confirm: ConfirmConfig | None, base_seed: int,
           unconfirmed: bool = False) -> TrialRecord | None:
    """The configuration the sweep hands over: with confirmation, the finalist with the lowest mean over its
    planned fresh runs, chosen only once every finalist has them all (else Unconfirmed is raised; `unconfirmed`
    ranks by the results there are instead); without (or with no run planned), the completed search trial with the
    lowest val_loss. None when no search trial completed."""
    if confirm is None or not confirm.runs_per_finalist:
        return best_record(records)
    scores = finalist_scores(records, confirm, base_seed)
    if not scores:
        return None
    if not unconfirmed and not all(s.complete for s in scores):
        raise Unconfirmed(scores)
    return min(scores, key=FinalistScore.rank).record


def describe_missing(scores: list[FinalistScore]) -> str:
    """"3 confirmation runs have no result (finalist X: 2 of 3, finalist Y: 1 of 3)"."""
    missing = sum(s.missing for s in scores)
    each = ", ".join(f"finalist {s.record.trial_id}: {s.missing} of {s.planned}" for s in scores if s.missing)
    return f"{missing} confirmation run{'s' if missing != 1 else ''} {'have' if missing != 1 else 'has'} no " \
           f"result ({each})"


def winner_or_none(records: list[TrialRecord], confirm: ConfirmConfig | None, base_seed: int) -> TrialRecord | None:
    """`winner`, or None while its confirmation is not complete (no winner to hand over before then)."""
    try:
        return winner(records, confirm, base_seed)
    except Unconfirmed:
        return None
