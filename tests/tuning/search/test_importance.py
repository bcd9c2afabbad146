"""Hyperparameter importances: fANOVA over the completed and the pruned trials of a study."""

from __future__ import annotations

import math

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from tuning.search.importance import param_importances

DISTRIBUTIONS = {"learning_rate": FloatDistribution(1e-5, 1e-1, log=True),
                 "weight_decay": FloatDistribution(1e-5, 1e-1, log=True),
                 "batch_size": CategoricalDistribution([64, 128])}


def study_where_only_the_learning_rate_matters(pruned_share: int) -> optuna.Study:
    """24 trials: val_loss = (log10 lr + 3)^2 + 1; every `pruned_share`-th trial pruned with that value as its
    best intermediate value (its last one higher), one trial diverged (FAIL)."""
    study = optuna.create_study(direction="minimize")
    for i in range(24):
        lr, wd, batch = 10 ** (-5 + 4 * ((i * 7) % 24) / 23), 10 ** (-5 + 4 * ((i * 11) % 24) / 23), (64, 128)[i % 2]
        value = (math.log10(lr) + 3) ** 2 + 1
        params = {"learning_rate": lr, "weight_decay": wd, "batch_size": batch}
        if i % pruned_share == 0:
            study.add_trial(create_trial(params=params, distributions=DISTRIBUTIONS, state=TrialState.PRUNED,
                                         intermediate_values={1: value + 1, 2: value, 3: value + 0.5}))
        else:
            study.add_trial(create_trial(params=params, distributions=DISTRIBUTIONS, value=value))
    study.add_trial(create_trial(params=params, distributions=DISTRIBUTIONS, state=TrialState.FAIL))
    return study


def test_the_parameter_the_loss_depends_on_comes_first_and_pruned_trials_count():
    found = param_importances(study_where_only_the_learning_rate_matters(pruned_share=3))
    assert found.trials == 24  # 16 completed + 8 pruned; the failed one left out
    assert list(found.by_param)[0] == "learning_rate" and found.by_param["learning_rate"] > 0.8
    assert math.isclose(sum(found.by_param.values()), 1.0)
    assert found.describe().startswith("hyperparameter importance (fANOVA over 24 completed and pruned trials): "
                                       "learning_rate 0.")


def test_fewer_than_two_scored_trials_rank_nothing():
    study = optuna.create_study()
    study.add_trial(create_trial(params={"learning_rate": 1e-3},
                                 distributions={"learning_rate": DISTRIBUTIONS["learning_rate"]}, value=1.0))
    assert param_importances(study) is None
