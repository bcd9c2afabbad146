"""The looks at the test segment on the sweep's MLflow run (tuning/tracking/runs.py log_test_look)."""

from __future__ import annotations

import torch

from tuning.sweep_files import TRAIN_LOOK
from tuning.tracking.log import SWEEP_KEY
from tuning.tracking.ops import LOOKS_MARKER
from tuning.tracking.runs import LOOK_TAG, log_test_look


class Recorded:
    """A TrackingLog that keeps what it is asked to write."""

    def __init__(self):
        self.epochs: list[tuple[str, int, dict[str, float]]] = []
        self.tags: dict[str, str] = {}

    def log_epoch(self, key, step, metrics, timestamp_ms=None):
        self.epochs.append((key, step, metrics))

    def set_tags(self, key, tags):
        self.tags.update(tags)


VS_HAR = {"test_loss": 0.6, "ratio": 0.8, "dm_stat": -2.5, "dm_pvalue": 0.01, "dm_lags": 0, "dm_fallback": 1.0,
          "dm_stat_wide": -2.0, "dm_pvalue_wide": 0.05, "dm_lags_wide": 0, "dm_fallback_wide": 1.0}


def test_log_test_look_counts_a_train_look_without_making_it_the_sweeps_headline():
    own = {"look": 1, "trial_id": "a", "test_loss": 0.48, "baseline_har": 0.6, "n_test": 113, "vs_har": VS_HAR}
    train = {"look": 2, "by": TRAIN_LOOK, "trial_id": "a", "test_loss": 0.9, "baseline_har": 0.6, "n_test": 113,
             "vs_har": {**VS_HAR, "ratio": 1.5, "dm_pvalue": 0.9}}
    log = Recorded()
    log_test_look(log, [own, train], None)
    (key0, step0, first), (key1, step1, second) = log.epochs
    assert (key0, step0, key1, step1) == (SWEEP_KEY, 0, SWEEP_KEY, 1)
    assert second == {LOOKS_MARKER: 2.0}  # counted (test.json's count), nothing else: test_loss stays the sweep's
    torch.testing.assert_close(first["test_loss"], 0.48)
    torch.testing.assert_close(first[LOOKS_MARKER], 1.0)
    assert {k: first[f"test_{k}_har"] for k in ("dm_lags", "dm_fallback", "dm_lags_wide", "dm_fallback_wide")} == \
        {"dm_lags": 0.0, "dm_fallback": 1.0, "dm_lags_wide": 0.0, "dm_fallback_wide": 1.0}  # 0 lags: fell back
    assert log.tags == {LOOK_TAG: "done"}
