"""The memory probe on a GPU, its facts faked where they enter (torch.cuda's queries, the step's measured peak): it
runs in a Ray worker process that ends after it, empties its cache, packs trials against the memory free (not the
GPU's total), and finds the fraction of the GPU each packed trial worker is held to."""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace

import pytest
import ray
import torch

import model.training
from model.step_memory import CUDA_CONTEXT_BYTES
from tests.tuning.sweeps import SPACE
from tuning.search.recipe import TrainingRecipe
from tuning.search.resources import TrialPlan
from tuning.sweep import memory_probe
from tuning.sweep.memory_probe import ProbeResult, measure, memory_fraction, probe_task

GB = 2**30
RUN = TrainingRecipe.from_dict({**SPACE["run"], "train": {"device": "cuda"}}).to_dict()
DATA = SimpleNamespace(train_index=range(10_000))  # all measure reads of a Dataset once the step is faked


@pytest.fixture
def gpu(monkeypatch):
    """An 80 GB GPU with 20 GB free (another process holds the rest); a step's peak: 4 GB at batch 512, 40 GB at
    batch 4096. Returns what happened on it, in order."""
    happened = []
    monkeypatch.setattr(model.training, "resolve_device", lambda name: torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (20 * GB, 80 * GB))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100")
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: happened.append("empty_cache"))

    def peak(model_config, train_config, data):
        happened.append(f"step {train_config.batch_size} on {train_config.device}")
        return {512: 4 * GB, 4096: 40 * GB}[train_config.batch_size]

    monkeypatch.setattr(memory_probe, "step_peak_bytes", peak)
    return happened


def test_memory_probe_packs_auto_trials_against_the_memory_free_and_empties_its_cache_after_measuring(gpu):
    result = measure(RUN, DATA, (512, 4096), workers=1, budget_bytes=None, gpus_per_worker=1.0, packs=True)
    assert gpu == ["step 512 on cuda", "step 512 on cuda", "step 4096 on cuda", "empty_cache"]  # warm-up first
    assert (result.free_bytes, result.total_bytes) == (20 * GB, 80 * GB)
    assert result.budget_bytes == 20 * GB - CUDA_CONTEXT_BYTES and result.kept == (512,)
    assert result.per_gpu == 20 * GB // (4 * GB + CUDA_CONTEXT_BYTES) == 4  # against the total: 8
    assert result.memory_fraction == (5 * GB - CUDA_CONTEXT_BYTES) / (80 * GB)  # a quarter of the free, of the total


def test_memory_probe_takes_a_fixed_share_of_the_memory_free_and_holds_its_workers_to_it(gpu):
    result = measure(RUN, DATA, (512, 4096), workers=1, budget_bytes=None, gpus_per_worker=0.25)
    assert result.budget_bytes == 5 * GB - CUDA_CONTEXT_BYTES  # 0.25 x 20 GB free, not 0.25 x 80 GB
    assert result.memory_fraction == result.budget_bytes / (80 * GB)
    assert gpu[-1] == "empty_cache"


def test_memory_fraction_holds_only_workers_that_share_a_gpu():
    free, total = 60 * GB, 80 * GB
    assert memory_fraction(10 * GB, free, total, 0.25, per_gpu=None, packs=False) == 10 / 80
    assert memory_fraction(10 * GB, free, total, 0.2, per_gpu=3, packs=True) == (20 * GB - CUDA_CONTEXT_BYTES) / total
    assert memory_fraction(10 * GB, free, total, 1.0, per_gpu=1, packs=True) is None  # auto found room for one
    assert memory_fraction(10 * GB, free, total, 1.0, per_gpu=None, packs=False) is None  # a GPU a worker
    assert memory_fraction(10 * GB, free, total, 2.0, per_gpu=None, packs=False) is None
    assert memory_fraction(100 * GB, free, total, 0.5, per_gpu=None, packs=False) == 1.0  # --memory-budget: capped


def test_probe_result_keeps_free_total_and_fraction_in_sweep_json_and_reads_an_older_one():
    result = ProbeResult("NVIDIA H100", 5 * GB, "GPU share", {512: 4 * GB}, (512,), (), 4, 20 * GB, 80 * GB, 0.05)
    assert ProbeResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    assert result.describe() == ("memory probe on NVIDIA H100 (20,480 of 81,920 MB free), budget 5,120 MB a worker "
                                 "(GPU share): 512: 4,096 MB; all fit; 4 such worker(s) of batch 512 fit on one GPU; "
                                 "each worker held to 5.0% of the GPU's memory")
    older = {"device": "NVIDIA H100", "budget_bytes": 5 * GB, "budget_source": "GPU share", "peaks": {"512": 4 * GB},
             "kept": [512], "removed": [], "per_gpu": 4}  # a sweep.json written before: resumed as it ran, not held
    assert ProbeResult.from_dict(older) == ProbeResult("NVIDIA H100", 5 * GB, "GPU share", {512: 4 * GB}, (512,), (),
                                                       4, None, None, None)


def test_probe_task_asks_ray_for_a_worker_process_that_ends_after_it(monkeypatch):
    asked = {}

    class Remote:
        def __init__(self, function):
            self.function = function

        def options(self, **options):
            asked["options"] = options
            return self

    def remote(**options):
        asked["remote"] = options
        return Remote

    monkeypatch.setattr(ray, "remote", remote)
    task = probe_task(TrialPlan(workers=1, cpus_per_worker=2, gpus_per_worker=0.25, concurrency=4))
    assert task.function is measure and asked["remote"] == {"max_calls": 1}
    assert asked["options"] == {"num_cpus": 2, "num_gpus": 0.25, "resources": {}, "max_retries": 0}


def test_ray_remote_takes_max_calls_and_options_refuses_it():
    """Why probe_task gives it there: Ray refuses it in .options()."""
    with pytest.raises(ValueError, match=r"Setting 'max_calls' is not supported in '\.options\(\)'"):
        ray.remote(measure).options(num_gpus=1, max_calls=1)


@pytest.mark.integration  # a real local Ray
def test_probe_task_worker_process_ends_once_the_task_returns(monkeypatch):
    monkeypatch.setattr(memory_probe, "measure", lambda *args: os.getpid())  # the task's process, by value
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        pid = ray.get(probe_task(TrialPlan(workers=1, cpus_per_worker=1, gpus_per_worker=0, concurrency=1)).remote())
        deadline = time.monotonic() + 60  # an idle worker Ray would reuse stays up: this one must go
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not alive(pid), f"the probe's worker process {pid} is still running"
    finally:
        if started:
            ray.shutdown()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
