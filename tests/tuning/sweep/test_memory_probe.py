"""The memory probe before a sweep: batch sizes that do not fit a trial worker's budget leave the space.

On CPU it runs against --memory-budget; on GPU the budget is the worker's share of its GPU, whose
arithmetic is tested here and whose measurement bench/gpu_check.py runs on a GPU.
"""

from __future__ import annotations

import json

import optuna
import pytest
from mlflow import MlflowClient

from model.step_memory import CUDA_CONTEXT_BYTES, MB
from tests.cli import assert_one_line_error, run_cli
from tests.tuning.sweeps import SPACE, ledger, write_space
from tuning.errors import UsageError
from tuning.search.resources import ResourceError
from tuning.search.space import parse_space
from tuning.sweep.memory_probe import (
    ProbeResult,
    candidate_batch_sizes,
    gpu_budget,
    pack_trials,
    peaks_until_over,
    restrict_space,
    trials_per_gpu,
    worker_batch,
)

# The whole batch at once (no micro-batches), so the peak grows with the batch as on a GPU.
WHOLE_BATCH = {"data": SPACE["run"]["data"], "model": SPACE["run"]["model"], "train": {"micro_batch_size": 4096}}


def probe(kept: tuple[int, ...], removed: tuple[int, ...]) -> ProbeResult:
    peaks = {b: b * MB // 10 for b in kept + removed}
    return ProbeResult("cpu", 50 * MB, "--memory-budget", peaks, kept, removed)


def test_restrict_space_drops_the_removed_batch_sizes_from_the_choices_and_the_initial_points():
    values = {**SPACE, "search": {**SPACE["search"], "batch_size": {"choices": [64, 128, 2048]}},
              "initial": [{"learning_rate": 1e-3, "batch_size": 2048}, {"learning_rate": 1e-3, "batch_size": 64}]}
    restricted = restrict_space(values, probe((64, 128), (2048,)))
    assert restricted["search"]["batch_size"] == {"choices": [64, 128]}
    assert restricted["initial"] == [{"learning_rate": 1e-3, "batch_size": 64}]
    assert values["search"]["batch_size"] == {"choices": [64, 128, 2048]}  # the caller's values untouched
    assert candidate_batch_sizes(parse_space(restricted, "s.yaml")) == (64, 128)


def test_restrict_space_refuses_when_no_batch_size_fits():
    with pytest.raises(UsageError, match=r"no batch size fits in a trial worker's memory: batch size 64 needs 6 MB, "
                                         r"the budget is 50 MB \(--memory-budget\)"):
        restrict_space(SPACE, probe((), (64, 128)))


def test_describe_names_each_peak_and_what_was_removed():
    assert probe((64,), (1024,)).describe() == ("memory probe on cpu, budget 50 MB a worker (--memory-budget): "
                                                "64: 6 MB, 1024: 102 MB; removed batch size(s) 1024")


def test_a_workers_gpu_budget_is_its_share_of_one_gpu_less_its_cuda_context():
    gpu = 80 * 2**30
    assert gpu_budget(gpu, 0.25) == 20 * 2**30 - CUDA_CONTEXT_BYTES  # four trials packed on one GPU
    assert gpu_budget(gpu, 1.0) == gpu_budget(gpu, 2.0) == gpu - CUDA_CONTEXT_BYTES  # it trains on one of its GPUs
    assert gpu_budget(2 * 2**30, 0.25) < 0  # nothing fits: the sweep is refused with the probe's figures


def test_a_worker_measures_its_share_of_the_batch():
    assert worker_batch(512, n_train=10_000, workers=1) == 512
    assert worker_batch(512, n_train=10_000, workers=3) == 171  # the largest share, rounded up
    assert worker_batch(4096, n_train=1_000, workers=2) == 500  # a batch beyond the data is all of it


def test_batch_sizes_are_measured_smallest_first_until_one_does_not_fit():
    measured = []

    def peak_of(batch):
        measured.append(batch)
        return None if batch >= 4096 else batch * MB

    assert peaks_until_over(peak_of, (512, 64, 1024, 4096), budget_bytes=600 * MB) == {64: 64 * MB, 512: 512 * MB,
                                                                                       1024: 1024 * MB}
    assert measured == [64, 512, 1024]  # 4096 is not tried: 1024 already did not fit
    assert peaks_until_over(peak_of, (64, 4096), budget_bytes=10**12) == {64: 64 * MB, 4096: None}  # out of memory


def test_trials_per_gpu_counts_each_workers_peak_and_cuda_context_within_bounds():
    gb = 2**30
    assert trials_per_gpu(141 * gb, 4 * gb) == 8  # 30 would fit; packing stops at MAX_PER_GPU
    assert trials_per_gpu(24 * gb, 4 * gb) == 5  # 24 GB / (4 GB + 600 MB)
    assert trials_per_gpu(24 * gb, 30 * gb) == 1  # never below one


def test_auto_packing_gives_each_worker_its_fraction_of_a_gpu():
    values = {**SPACE, "resources": {"workers": 1, "cpus_per_worker": 1, "gpus_per_trial": "auto"}}
    result = ProbeResult("NVIDIA H200", 140 * 1024 * MB, "GPU share", {512: 9 * 1024 * MB}, (512,), (), per_gpu=5)
    packed = pack_trials(values, result)
    assert packed["resources"] == {"workers": 1, "cpus_per_worker": 1, "gpus_per_trial": 0.2}  # 1/5 GPU a worker
    assert parse_space(packed, "s.yaml").resources.gpus_per_trial == 0.2
    assert result.describe().endswith("; all fit; 5 such worker(s) of batch 512 fit on one GPU")
    assert ProbeResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result  # as sweep.json keeps it
    with pytest.raises(ResourceError, match="gpus_per_trial auto needs the memory probe on a GPU, and it ran on cpu"):
        pack_trials(values, probe((64,), ()))


def test_describe_says_which_ran_out_of_memory_and_which_were_not_measured():
    result = ProbeResult("NVIDIA H200", 30 * 1024 * MB, "GPU share", {512: 9 * 1024 * MB, 2048: None},
                         (512,), (2048, 4096))
    assert result.describe() == ("memory probe on NVIDIA H200, budget 30,720 MB a worker (GPU share): 512: 9,216 MB, "
                                 "2048: out of memory; removed batch size(s) 2048, 4096 (4096 not measured: a "
                                 "smaller one did not fit)")


def test_a_fixed_batch_size_is_the_only_candidate():
    space = parse_space({**SPACE, "search": {"learning_rate": SPACE["search"]["learning_rate"]},
                         "initial": [], "run": {**SPACE["run"], "train": {"batch_size": 256}}}, "s.yaml")
    assert candidate_batch_sizes(space) == (256,)


@pytest.mark.faults  # memory limits
@pytest.mark.integration
def test_a_cpu_sweep_with_a_memory_budget_runs_only_the_batch_sizes_that_fit_in_bf16(bars, tmp_path):
    space = write_space(tmp_path, trials=2, initial=[], run=WHOLE_BATCH,
                        search={"batch_size": {"choices": [64, 1024]}}, scheduler={"max_epochs": 2},
                        gate={"epoch": 2, "ratio_to_e0": 10.0})  # every trial runs to its end
    storage, uri = tmp_path / "sweeps", f"sqlite:///{tmp_path / 'mlflow.db'}"
    done = run_cli("sweep", "--data", bars, "--space", space, "--storage", storage, "--tracking-uri", uri,
               "--memory-budget", "20", "--precision", "bf16")
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("memory probe on cpu"))
    assert line.startswith("memory probe on cpu, budget 20 MB a worker (--memory-budget): 64: ")
    assert line.endswith("; removed batch size(s) 1024")

    records = ledger(storage / "t")
    assert len(records) == 2 and all(r["params"]["batch_size"] == 64 for r in records.values())
    study = optuna.load_study(study_name="t", storage=f"sqlite:///{storage / 't' / 'optuna.db'}")
    assert all(t.distributions["batch_size"].choices == (64,) for t in study.trials)
    manifest = json.loads((storage / "t" / "sweep.json").read_text())  # resume runs the space as probed
    assert manifest["space"]["search"]["batch_size"] == {"choices": [64]}
    assert manifest["space"]["run"]["train"]["precision"] == "bf16"
    assert manifest["memory_probe"]["removed"] == [1024]

    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("t").experiment_id])
    parent = next(r for r in runs if r.data.tags.get("mamba_tune.role") == "sweep")
    assert parent.data.params["sweep.memory_probe"] == line
    assert all(r.data.params["train.precision"] == "bf16" for r in runs if r.info.run_id != parent.info.run_id)


@pytest.mark.faults  # bad input: a memory budget
@pytest.mark.integration
def test_a_memory_budget_no_batch_size_fits_is_one_clear_error(bars, tmp_path):
    space = write_space(tmp_path, run=WHOLE_BATCH)
    done = run_cli("sweep", "--data", bars, "--space", space, "--storage", tmp_path / "sweeps", "--memory-budget", "0.5")
    assert_one_line_error(done, "no batch size fits in a trial worker's memory: batch size 64 needs ")
    assert not (tmp_path / "sweeps" / "t").exists()  # nothing written


@pytest.mark.parametrize(("flag", "message"), [
    (["--memory-budget", "-5"], "--memory-budget must be a positive number of MB, got -5"),
    (["--precision", "fp16"], "--precision fp16: not one of its choices, fp32 or bf16"),
])
def test_sweep_refuses_a_bad_memory_budget_or_precision(bars, tmp_path, flag, message):
    done = run_cli("sweep", "--data", bars, "--space", write_space(tmp_path), "--storage", tmp_path / "s", *flag)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
