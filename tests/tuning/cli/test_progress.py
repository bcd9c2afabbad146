"""The sweep's progress events (tuning/progress.py) and the lines `mamba-tune sweep` prints for them."""

import logging
import math

from tuning.cli.sweep_progress import SweepProgress
from tuning.progress import LOGGER, EpochEnded, Note, TrialEnded, TrialStarted, event_of, publish
from tuning.search.ledger import TrialRecord


def record(trial_id: str, reason: str, epoch: int, best: float) -> TrialRecord:
    return TrialRecord(trial_id=trial_id, params={"learning_rate": 1e-3}, stop_reason=reason, stop_epoch=epoch,
                       best_val_loss=best, best_epoch=epoch, e0_val_loss=1.0, baseline_persistence=1.0, train_s=1.0)


def test_progress_prints_a_line_per_trial_started_and_ended_and_each_note(capsys):
    progress = SweepProgress(trials=2)
    handler = progress.attach()
    try:
        publish(TrialStarted("trial_a", {"learning_rate": 3e-3, "weight_decay": 1e-2, "batch_size": 64}))
        publish(EpochEnded("trial_a", 1, 0.5))  # not a terminal: no live status line
        first = record("trial_a", "completed", 4, 0.25)
        publish(TrialEnded(first, running=1, finished=(first,), error=None))
        second = record("trial_b", "error", 1, math.inf)
        publish(TrialEnded(second, running=0, finished=(first, second), error="RuntimeError: boom"))
        publish(Note("tracking: the server answers again"))
    finally:
        progress.detach(handler)
    assert logging.getLogger(LOGGER).propagate  # as it was: other handlers (pytest's caplog) see events again
    assert capsys.readouterr().out.splitlines() == [
        "trial trial_a started: lr 3.00e-03, wd 1.00e-02, batch 64",
        "trial trial_a ended completed at epoch 4, best val 0.2500@4 | running 1, finished 1/2 (1 completed, "
        "0 stopped) | best 0.2500 (trial_a)",
        "trial trial_b ended error at epoch 1: RuntimeError: boom, best val inf@1 | running 0, finished 2/2 "
        "(1 completed, 1 stopped) | best 0.2500 (trial_a)",
        "tracking: the server answers again",
    ]


def test_event_of_is_none_for_any_other_log_record():
    plain = logging.LogRecord(LOGGER, logging.INFO, __file__, 1, "text", None, None)
    assert event_of(plain) is None
    plain.sweep_event = {"kind": "note", "text": "a dict, as older code sent"}
    assert event_of(plain) is None
