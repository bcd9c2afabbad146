"""A sweep's progress events reach an API caller's callback, and its bar counts the search trials."""

from __future__ import annotations

import pytest

from mamba_tune.progress import TrialBar, callback_for, events_to
from tuning.progress import EpochEnded, Note, TrialEnded, TrialStarted, publish
from tuning.search.ledger import TrialRecord


def record(trial_id: str, loss: float, stage: str = "search", reason: str = "completed") -> TrialRecord:
    return TrialRecord(trial_id, {"learning_rate": 1e-3}, reason, 6, loss, 4, 1.0, 0.9, 1.0, stage=stage)


def test_the_events_published_inside_reach_the_callback_and_none_after():
    seen = []
    events = [TrialStarted("t1", {"learning_rate": 1e-3}), EpochEnded("t1", 1, 0.5), Note("a line"),
              TrialEnded(record("t1", 0.4), 0, (record("t1", 0.4),), None)]
    with events_to(seen.append):
        for event in events:
            publish(event)
    publish(EpochEnded("t1", 2, 0.4))
    assert seen == events


def test_the_bar_counts_search_trials_ended_not_confirmation_runs(monkeypatch):
    bar = TrialBar(lambda: (3, 0))
    first, confirm = record("a", 0.4), record("c", 0.3, stage="confirm")
    bar(TrialStarted("a", {}))
    bar(TrialEnded(first, 1, (first,), None))
    bar(TrialEnded(confirm, 0, (first, confirm), None))
    assert (bar.bar.n, bar.bar.total) == (1, 3)
    assert "best 0.4000" in bar.bar.postfix and "1 confirmation run(s)" in bar.bar.postfix
    bar.close()


def test_progress_is_a_callable_the_bar_or_nothing():
    assert callback_for(print, lambda: (1, 0)) is print
    assert isinstance(callback_for("bar", lambda: (1, 0)), TrialBar)
    assert callback_for(False, lambda: (1, 0)) is None
    assert callback_for(None, lambda: (1, 0)) is None  # not a notebook: the CLI's lines show
    with pytest.raises(TypeError, match="progress='dots'"):
        callback_for("dots", lambda: (1, 0))


def test_a_resumed_sweeps_bar_starts_at_the_trials_already_ended():
    bar = TrialBar(lambda: (4, 2))
    bar(TrialStarted("c", {}))
    assert (bar.bar.n, bar.bar.total) == (2, 4)
    bar.close()


def test_a_callback_that_raises_is_warned_of_once_and_handed_nothing_more_and_the_sweep_goes_on():
    calls = []

    def broken(event):
        calls.append(event)
        raise ValueError("boom")

    with pytest.warns(RuntimeWarning, match="broken raised ValueError: boom") as warned, events_to(broken):
        publish(TrialStarted("t1", {}))  # raises nothing here, in the sweep's driver
        publish(EpochEnded("t1", 1, 0.5))
    assert len(calls) == 1 and len(warned) == 1


def test_a_bar_that_cannot_read_its_total_stops_and_the_sweep_goes_on():
    def unreadable():
        raise FileNotFoundError("manifest.json")

    bar = TrialBar(unreadable)
    with pytest.warns(RuntimeWarning, match="progress='bar' raised FileNotFoundError"), events_to(bar):
        publish(TrialStarted("t1", {}))
        publish(EpochEnded("t1", 1, 0.5))
    assert bar.bar is None


def test_the_bar_starts_at_a_trials_event_not_a_note():
    asked = []
    bar = TrialBar(lambda: asked.append(1) or (2, 0))
    bar(Note("a tracking write failed"))  # may come before the manifest is written
    assert asked == [] and bar.bar is None
    bar(TrialStarted("a", {}))
    assert asked == [1] and bar.bar.total == 2
    bar.close()
