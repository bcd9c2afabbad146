"""A searched width and state size whose conv channels (expand*d_model + 2*ngroups*d_state) the fused kernels cannot
take (model/config.py): the space loads, and such a trial ends as `invalid`, with the reason, before any worker
starts, on any machine."""

from __future__ import annotations

from types import SimpleNamespace

import ray.tune

from tuning.search.gate import INVALID
from tuning.search.resources import TrialPlan
from tuning.search.space import parse_space
from tuning.sweep import trainable
from tuning.sweep.trainable import TrialSetup, run_trial

# 2*d_model + 2*d_state: (34, 18) 104 and (36, 16) 104 are multiples of 8, (34, 16) 100 and (36, 18) 108 are not.
# headdim 4 divides both inner widths (68, 72).
SEARCH = {"model.d_model": {"choices": [34, 36]}, "model.d_state": {"choices": [16, 18]}}


def test_run_trial_ends_a_combination_the_fused_conv_cannot_take_as_invalid_with_the_reason(monkeypatch, tmp_path):
    space = parse_space({"scheduler": {"max_epochs": 4, "grace_period": 1}, "gate": {"epoch": 2, "ratio_to_e0": 0.9},
                         "search": SEARCH, "model": {"headdim": 4}}, "s.yaml")  # each value is taken by some
    reported, started = [], []
    monkeypatch.setattr(ray.tune, "get_context", lambda: SimpleNamespace(get_trial_id=lambda: "t1"))
    monkeypatch.setattr(ray.tune, "report", reported.append)
    monkeypatch.setattr(trainable, "trial_trainer", lambda *args, **kwargs: started.append(args) or SimpleNamespace(fit=None))
    monkeypatch.setattr(trainable, "fit_reporting_to_tune", lambda *args: None)
    setup = TrialSetup(run=space.run.to_dict(), dataset=None, plan=TrialPlan(1, 1, 0, 1), relay=None,
                       storage=str(tmp_path), max_failures=0, fast=True)
    run_trial({"model.d_model": 36, "model.d_state": 16}, setup)
    assert len(started) == 1 and reported == []  # a combination the kernels take trains
    started.clear()
    run_trial({"model.d_model": 36, "model.d_state": 18}, setup)
    (result,) = reported
    assert result[INVALID].endswith("model: the conv channels expand*d_model + 2*ngroups*d_state must be a multiple "
                                    "of 8 for the fused kernels (backend auto), got 2*36 + 2*1*18 = 108; choose "
                                    "d_model and d_state that make it one (multiples of 8 always do), or set "
                                    "model.backend=torch")
    assert (result["epoch"], result["val_loss"], started) == (0, float("inf"), [])  # no worker started
