"""A trial's MLflow params (tuning/tracking/runs.py open_trial): each setting under its one dotted name."""

from __future__ import annotations

from pathlib import Path

from tests.cli import ROOT
from tuning.search.space import load_space
from tuning.tracking.runs import SweepTracking, open_trial


class Started:
    """A TrackingLog that keeps the params of the runs it is asked to start."""

    def __init__(self):
        self.params: dict[str, dict] = {}

    def start_run(self, key, name, parent=None, tags=None, params=None):
        self.params[key] = params


def test_a_trials_params_name_each_searched_setting_by_its_dotted_name_once():
    log = Started()
    tracking = SweepTracking(log, Path("staging"), load_space(ROOT / "search_spaces" / "smoke.yaml"), "smoke", "x",
                             None)
    open_trial(tracking, "t1", {"learning_rate": 1e-3, "weight_decay": 0.1, "batch_size": 64})
    params = log.params["t1"]
    assert (params["train.lr"], params["train.weight_decay"], params["train.batch_size"]) == (1e-3, 0.1, 64)
    assert not {"learning_rate", "weight_decay", "batch_size"} & set(params)  # one name for one setting in the UI
    assert params["model.d_model"] == 32 and params["train.epochs"] == 6
