"""A packed trial worker held to its share of the GPU's memory: the memory probe's fraction goes from sweep.json
(tuning/sweep/session.py) through the trial (trainable.run_trial) into each worker (trial_worker.train_worker), which
gives it to torch.cuda.set_per_process_memory_fraction before training; the GPU's facts faked where they enter."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import ray.tune
import torch
from torch.cuda._utils import _get_device_index

from model.step_memory import MB
from tests.tuning.sweeps import SPACE
from tuning.search.recipe import TrainingRecipe
from tuning.search.resources import TrialPlan
from tuning.sweep import session, trainable, trial_worker
from tuning.sweep.memory_probe import ProbeResult
from tuning.sweep.trainable import TrialSetup, run_trial
from tuning.sweep.worker_entry import train_loop
from tuning.sweep_files import MANIFEST, SweepPaths

RUN = TrainingRecipe.from_dict({**SPACE["run"], "train": {"device": "cuda"}}).to_dict()


class Started(Exception):
    """The worker went on past the point under test."""


@pytest.fixture
def held(monkeypatch):
    """A machine with one CUDA GPU as torch sees it; the fractions the worker's allocator was held to, by device
    index, each argument checked as torch checks it (a float, an index: torch.device("cuda") alone is refused)."""
    fractions = []

    def set_fraction(fraction, device=None):
        assert isinstance(fraction, float), fraction
        fractions.append((fraction, _get_device_index(device)))

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", set_fraction)
    monkeypatch.setattr(trial_worker, "worker_dataset", lambda config, run: (_ for _ in ()).throw(Started()))
    return fractions


def test_train_loop_holds_a_packed_worker_to_its_fraction_before_it_trains(held):
    with pytest.raises(Started):
        train_loop({"run": RUN, "memory_fraction": 0.2})
    assert held == [(0.2, 0)]


@pytest.mark.parametrize("config", [{"run": RUN, "memory_fraction": None}, {"run": RUN},  # not packed; older sweep
                                    {"run": {**RUN, "train": {**RUN["train"], "device": "cpu"}}, "memory_fraction": 0.2}])
def test_train_loop_holds_no_worker_that_is_not_packed_or_not_on_cuda(held, config):
    with pytest.raises(Started):
        train_loop(config)
    assert held == []


@pytest.mark.parametrize(("gpus_per_worker", "given"), [(0.25, 0.2), (1.0, None), (0.0, None)])
def test_run_trial_gives_its_workers_the_fraction_only_where_they_share_a_gpu(monkeypatch, tmp_path,
                                                                            gpus_per_worker, given):
    handed = {}

    def trainer(loop, config, plan, run_config, fast):
        handed.update(config)
        return SimpleNamespace(fit=lambda: None)

    monkeypatch.setattr(ray.tune, "get_context", lambda: SimpleNamespace(get_trial_id=lambda: "t1"))
    monkeypatch.setattr(trainable, "trial_trainer", trainer)
    monkeypatch.setattr(trainable, "fit_reporting_to_tune", lambda fit, relay, trial_id, report: fit())
    plan = TrialPlan(workers=1, cpus_per_worker=1, gpus_per_worker=gpus_per_worker, concurrency=4)
    setup = TrialSetup(run=RUN, dataset=None, plan=plan, relay=None, storage=str(tmp_path), max_failures=0, fast=True,
                       memory_fraction=0.2)
    run_trial({}, setup)
    assert handed["memory_fraction"] == given


def test_session_reads_the_fraction_from_sweep_json_so_a_resumed_sweep_holds_its_trials_the_same(tmp_path):
    paths = SweepPaths("t", tmp_path, str(tmp_path / "ray"))
    assert session._memory_fraction(paths) is None  # no sweep.json
    probe = ProbeResult("NVIDIA H100", 4096 * MB, "GPU share", {64: MB}, (64,), (), 4, 20480 * MB, 81920 * MB, 0.05)
    (tmp_path / MANIFEST).write_text(json.dumps({"memory_probe": probe.to_dict()}))
    assert session._memory_fraction(paths) == 0.05
    older = {k: v for k, v in probe.to_dict().items() if k not in ("free_bytes", "total_bytes", "memory_fraction")}
    (tmp_path / MANIFEST).write_text(json.dumps({"memory_probe": older}))
    assert session._memory_fraction(paths) is None  # an older sweep's trials were not held: nor are they now
    (tmp_path / MANIFEST).write_text(json.dumps({"space": {}}))
    assert session._memory_fraction(paths) is None  # no probe ran
