"""Forecasts compared on new bars: the models, HAR and persistence scored on the same samples, HAR fitted on
the samples before them only."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from model.bars import read_bars
from model.baselines import fit_har, har_forecast, har_lookbacks, past_quantities
from model.comparison import MIN_SCORED, compare_forecasts
from model.features import target_and_persistence
from model.synth import synth_bars

H = 6


@pytest.fixture(scope="module")
def bars(tmp_path_factory):
    path = tmp_path_factory.mktemp("bars") / "bars.parquet"
    pq.write_table(synth_bars(600, seed=3), path)
    return read_bars(path)


def actual_and_persistence(bars):
    log_range = np.log(bars.high) - np.log(bars.low)
    return target_and_persistence(bars.close, log_range, "volatility", H), log_range


def test_a_perfect_forecast_scores_zero_and_every_forecast_is_scored_on_the_same_later_samples(bars):
    (actual, persistence), log_range = actual_and_persistence(bars)
    made = np.arange(40, len(bars) - H)  # bars the models forecast at (a window of 40)
    perfect = (bars.timestamp[made], actual[made])
    shifted = (bars.timestamp[made[10:]], actual[made[10:]] + 0.5)  # starts later: the common samples start there
    found = compare_forecasts(bars, "volatility", H, {"perfect": perfect, "off": shifted})
    common = made[10:][np.isfinite(persistence[made[10:]])]
    assert found.scored[0] == common[len(common) // 2] and found.scored[-1] == common[-1]
    assert found.losses["perfect"] == 0.0
    torch.testing.assert_close(found.losses["off"], 0.25)
    torch.testing.assert_close(found.losses["persistence"],
                               float(np.mean((persistence[found.scored] - actual[found.scored]) ** 2)))
    # HAR: least squares on the samples of the first half whose targets end before the first scored sample
    fitted = common[: len(common) // 2]
    fitted = fitted[fitted + H < found.scored[0]]
    past = past_quantities(bars.close, log_range, "volatility", har_lookbacks(H))
    expected = har_forecast(past, fit_har(past, actual, fitted), found.scored)
    torch.testing.assert_close(found.forecasts["har"], expected)
    assert found.n_fit == len(fitted) and set(found.losses) == {"perfect", "off", "har", "persistence"}


def test_too_few_common_samples_are_refused(bars):
    (actual, _), _ = actual_and_persistence(bars)
    made = np.arange(40, 40 + 2 * MIN_SCORED - 1)
    with pytest.raises(ValueError, match="too few to fit HAR on 50% of them and score the rest"):
        compare_forecasts(bars, "volatility", H, {"m": (bars.timestamp[made], actual[made])})


@pytest.mark.parametrize("objective", ["qlike", "mse_var"])
def test_forecasts_are_compared_by_the_objective_with_har_fitted_for_it(bars, objective):
    from model.baselines import fit_har_for
    from model.objectives import ObjectiveScale, per_sample_loss

    (actual, persistence), log_range = actual_and_persistence(bars)
    made = np.arange(40, len(bars) - H)
    found = compare_forecasts(bars, "volatility", H, {"m": (bars.timestamp[made], actual[made] + 0.1)},
                              objective=objective)
    assert found.objective == objective and set(found.per_sample) == {"m", "har", "persistence"}
    for name, losses in found.per_sample.items():
        assert losses.shape == found.scored.shape
        torch.testing.assert_close(found.losses[name], float(losses.mean()))
    common = made[np.isfinite(persistence[made])]
    fitted = common[: len(common) // 2]
    fitted = fitted[fitted + H < found.scored[0]]
    scale = ObjectiveScale(0.0, 1.0, float(np.mean(np.exp(2 * actual[fitted]))))  # the target's own units
    past = past_quantities(bars.close, log_range, "volatility", har_lookbacks(H))
    har = fit_har_for(objective, past, actual, fitted, scale).forecast(past, found.scored, scale)
    torch.testing.assert_close(found.forecasts["har"], har)
    torch.testing.assert_close(found.per_sample["m"], per_sample_loss(objective, actual[found.scored] + 0.1,
                                                                       actual[found.scored], scale))


def test_an_objective_that_does_not_fit_the_target_is_refused_by_compare_forecasts(bars):
    with pytest.raises(ValueError, match=r"data.objective qlike: QLIKE ranks variance forecasts, and target return "):
        compare_forecasts(bars, "return", H, {}, objective="qlike")
