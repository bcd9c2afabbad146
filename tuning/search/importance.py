"""Which hyperparameter mattered: fANOVA importances from the sweep's Optuna study.

Completed and pruned trials both count: a pruned trial's value is the best val_loss it had
reached (the figure ASHA and the gate ranked it by), so the trials stopped early, usually most of
them, say as much about the space as the finished ones. Diverged and failed trials do not count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import optuna
from optuna.importance import FanovaImportanceEvaluator, get_param_importances
from optuna.trial import TrialState, create_trial

SEED = 0  # fANOVA's random forest: the same study gives the same importances


@dataclass(frozen=True)
class Importances:
    by_param: dict[str, float]  # parameter -> its share of the variance explained (summing to 1), largest first
    trials: int  # the completed and pruned trials they come from

    def describe(self) -> str:
        shares = ", ".join(f"{name} {share:.2f}" for name, share in self.by_param.items())
        return f"hyperparameter importance (fANOVA over {self.trials} completed and pruned trials): {shares}"

    def to_dict(self) -> dict[str, object]:
        return {"method": "fanova", "trials": self.trials, "importances": self.by_param}


def param_importances(study: optuna.Study) -> Importances | None:
    """The importances of the searched parameters; None with fewer than 2 scored trials or nothing varied."""
    scored = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        value = trial.value if trial.state == TrialState.COMPLETE else min(trial.intermediate_values.values(),
                                                                           default=None)
        if value is not None and math.isfinite(value):
            scored.append(create_trial(params=trial.params, distributions=trial.distributions, value=value))
    if len(scored) < 2:
        return None
    scores = optuna.create_study(direction=study.direction)
    scores.add_trials(scored)
    try:
        by_param = get_param_importances(scores, evaluator=FanovaImportanceEvaluator(seed=SEED))
    except (RuntimeError, ValueError):  # every trial has the same parameters, or a single value for each
        return None
    return Importances({name: float(share) for name, share in by_param.items()}, len(scored)) if by_param else None


def load_importances(study_url: str, name: str) -> Importances | None:
    """param_importances of the study `name` at `study_url` (None when it holds nothing to rank)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return param_importances(optuna.load_study(study_name=name, storage=study_url))
