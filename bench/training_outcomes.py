"""The training outcomes the test suite relies on, and their margins under this machine's CPU kernels.

Some tests assert what training does (a trial passes the gate, one trial beats another, a
learning rate diverges). Floating-point results differ between CPUs and kernel builds, so
each such outcome must hold with a margin no CPU difference can cross. This script trains
each case in-process (as a trial does: one torch thread, the test's own data and settings)
and prints, for each, the measured value, the test's limit and the relative margin. Run it
under other kernels to check that nothing moves:

    python bench/training_outcomes.py
    ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 python bench/training_outcomes.py
    ATEN_CPU_CAPABILITY=default python bench/training_outcomes.py

About a minute on 2 cores. JSON out: one record per outcome.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model.config import ModelConfig  # noqa: E402
from model.data import DataConfig, Dataset, load_dataset  # noqa: E402
from model.synth import synth_bars  # noqa: E402
from model.train import FitResult, TrainConfig, fit  # noqa: E402
from tests.reliability.test_load import LOAD_SPACE  # noqa: E402
from tests.reliability.test_trial_faults import DIVERGING, DIVERGING_LR, HEALTHY_LR  # noqa: E402
from tests.tuning.sweeps import SPACE, space_values  # noqa: E402
from tuning.search.space import parse_space, with_params  # noqa: E402


def trial(space: dict[str, Any], params: dict[str, Any], data: Dataset, epochs: int | None = None,
          threads: int = 1) -> FitResult:
    """fit() as a sweep's trial runs it: the space's settings with params, on CPU, `threads` torch threads."""
    parsed = parse_space(space, "space")
    run = with_params(parsed.run, params).replace("train", device="cpu", epochs=epochs or parsed.scheduler.max_epochs,
                                                  threads=threads)
    return fit(run.train, run.model, data)


def vals(result: FitResult) -> list[float]:
    return [m["val_loss"] for m in result.history]


def best_at(result: FitResult, epoch: int) -> float:
    return min(vals(result)[1: epoch + 1])


def outcome(test: str, what: str, value: float, limit: float, below: bool = True) -> dict[str, Any]:
    """One record: `value` must stay below `limit` (or above, when below=False); margin = relative distance."""
    margin = (limit - value) / abs(limit) if below else (value - limit) / abs(limit)
    return {"test": test, "what": what, "value": round(value, 6), "limit": limit,
            "holds": margin > 0, "margin": round(margin, 4)}


def session_sweep(data: Dataset) -> list[dict[str, Any]]:
    """tests/tuning/sweep/test_session.py: trial 1 passes the gate, trial 2 does not, trial 3 does, ASHA stops it."""
    test, gate = "tests/tuning/sweep/test_session.py (and every sweep whose initial point is trial 1)", SPACE["gate"]
    first, slow, third = (trial(SPACE, p, data) for p in SPACE["initial"])
    limit = gate["ratio_to_e0"]
    return [
        outcome(test, "trial 1: val/E0 at the gate", vals(first)[gate["epoch"]] / vals(first)[0], limit),
        outcome(test, "trial 2 (lr 1e-7): val/E0 at the gate", vals(slow)[gate["epoch"]] / vals(slow)[0], limit,
                below=False),
        outcome(test, "trial 3: val/E0 at the gate", vals(third)[gate["epoch"]] / vals(third)[0], limit),
        outcome(test, "trial 3 / trial 1, best val at ASHA's rung", best_at(third, 2) / best_at(first, 2), 1.0,
                below=False),
    ]


def reproduction(data: Dataset) -> list[dict[str, Any]]:
    """tests/tuning/sweep/test_session.py: `train --config best.yaml` (its threads pinned to the trial's one)
    reproduces the trial's val curve, every epoch within rtol 1e-6, in a process that had every core; and, for
    information, how far the curve drifts when the threads are not pinned (what the pinning prevents)."""
    params = SPACE["initial"][0]
    torch.set_num_threads(os.cpu_count() or 1)
    one, again = trial(SPACE, params, data, threads=1), trial(SPACE, params, data, threads=1)
    many = trial(SPACE, params, data, threads=os.cpu_count() or 1)
    drift = max(abs(a - b) / abs(b) for a, b in zip(vals(again), vals(one), strict=True))
    unpinned = max(abs(a - b) / abs(b) for a, b in zip(vals(many), vals(one), strict=True))
    return [outcome("tests/tuning/sweep/test_session.py", "val curve, pinned threads again: max relative difference",
                    drift, 1e-6),
            {**outcome("(information)", f"val curve, {os.cpu_count()} threads against 1: max relative difference",
                       unpinned, 1e-6), "holds": None}]


def worker_fault_trial(data: Dataset) -> list[dict[str, Any]]:
    """tests/reliability/test_worker_faults.py: trial 1 runs 40 epochs, passing the gate, never non-finite."""
    result = trial(SPACE, SPACE["initial"][0], data, epochs=40)
    finite = all(math.isfinite(v) for v in vals(result)) and result.status == "completed"
    return [outcome("tests/reliability/test_worker_faults.py", "40 epochs, every val finite (1 = yes)",
                    float(finite), 0.5, below=False),
            outcome("tests/reliability/test_worker_faults.py", "val/E0 at the gate", vals(result)[2] / vals(result)[0],
                    SPACE["gate"]["ratio_to_e0"])]


def diverging(data: Dataset) -> list[dict[str, Any]]:
    """tests/reliability/test_trial_faults.py: lr 0.5 is non-finite in epoch 1 (so is 0.25); lr 1e-4 stays finite."""
    test, space, out = "tests/reliability/test_trial_faults.py", space_values(**DIVERGING), []
    for lr in (DIVERGING_LR, DIVERGING_LR / 2):
        result = trial(space, {**DIVERGING["initial"][1], "learning_rate": lr}, data)
        diverged_at = result.stop_epoch if result.status == "nan" else 0
        out.append({"test": test, "what": f"lr {lr:g}: the epoch it diverged (0 = never), must be 1",
                    "value": diverged_at, "limit": 1, "holds": diverged_at == 1, "margin": None})
    healthy = trial(space, {**DIVERGING["initial"][0], "learning_rate": HEALTHY_LR}, data)
    out.append(outcome(test, f"lr {HEALTHY_LR:g}: last val/E0 (finite, learning)", vals(healthy)[-1] / vals(healthy)[0],
                       1.0))
    return out


def load_trials(data: Dataset) -> list[dict[str, Any]]:
    """tests/reliability/test_load.py: some of 64 trials pass the gate at epoch 1 (so one completes)."""
    space = space_values(**LOAD_SPACE)
    result = trial(space, {"learning_rate": 3e-3, "weight_decay": 1e-2, "batch_size": 64}, data)
    return [outcome("tests/reliability/test_load.py", "lr 3e-3: val/E0 at the gate (epoch 1)",
                    vals(result)[1] / vals(result)[0], space["gate"]["ratio_to_e0"])]


def short_fit(folder: Path) -> list[dict[str, Any]]:
    """tests/model/test_train.py: 3 epochs on 8,000 bars beat persistence."""
    from tests.model.test_train import SMALL_MODEL

    torch.set_num_threads(os.cpu_count() or 1)
    path = folder / "bars8000.parquet"
    pq.write_table(synth_bars(8000, seed=0), path)
    data = load_dataset(path, DataConfig(window=64, horizon=12))
    result = fit(TrainConfig(epochs=3, batch_size=128, lr=3e-3, weight_decay=0.01), SMALL_MODEL, data)
    return [outcome("tests/model/test_train.py", "best val / persistence", result.best_val_loss
                    / data.baselines["persistence"], 1.0)]


def precision_and_micro_batches(folder: Path) -> list[dict[str, Any]]:
    """tests/model/test_precision.py (bf16 within 10% of fp32, and learns) and test_train.py (micro-batches)."""
    from tests.model.test_train import SMALL_MODEL

    torch.set_num_threads(os.cpu_count() or 1)
    path = folder / "bars1500.parquet"
    pq.write_table(synth_bars(1500, seed=3), path)  # tests/model/conftest.py: small_data
    data = load_dataset(path, DataConfig(window=32, horizon=6))
    config = TrainConfig(epochs=2, batch_size=64, lr=3e-3, weight_decay=0.01, warmup_fraction=0.1, device="cpu")
    model = ModelConfig(d_model=16, n_layers=1, d_state=16, headdim=8, chunk_size=16)
    fp32 = fit(config, model, data)
    bf16 = fit(dataclasses.replace(config, precision="bf16"), model, data)
    whole = fit(TrainConfig(epochs=1, batch_size=64, micro_batch_size=64), SMALL_MODEL, data)
    split = fit(TrainConfig(epochs=1, batch_size=64, micro_batch_size=16), SMALL_MODEL, data)
    test = "tests/model/test_precision.py"
    return [outcome(test, "bf16 / fp32 last val, relative difference", abs(vals(bf16)[-1] / vals(fp32)[-1] - 1), 0.1),
            outcome(test, "bf16 last val / E0", vals(bf16)[-1] / vals(bf16)[0], 1.0),
            outcome("tests/model/test_train.py", "micro-batches 16 against 64: relative difference of val",
                    abs(vals(split)[-1] / vals(whole)[-1] - 1), 1e-4)]


def promotion(folder: Path) -> list[dict[str, Any]]:
    """tests/tuning/tracking/test_promote.py: on the later bars, the trained version (lr 3e-3) beats the barely
    trained one (lr 1e-7) as `promote` scores them (their pyfunc's forecasts, MSE on the second half)."""
    from types import SimpleNamespace

    from model.bars import read_bars
    from model.comparison import compare_forecasts
    from tests.tuning.tracking.test_promote import TINY, later_bars
    from tuning.search.recipe import TrainingRecipe
    from tuning.tracking.pyfunc_model import BarsForecaster
    from tuning.tracking.registry import bars_frame

    torch.set_num_threads(os.cpu_count() or 1)  # as `train` runs without --threads
    pq.write_table(synth_bars(1500, seed=0), folder / "promote.parquet")
    recipe = TrainingRecipe.from_dict(TINY)
    data = load_dataset(folder / "promote.parquet", recipe.data)
    new = read_bars(later_bars(folder / "later.parquet", 800, seed=5, days=60))
    forecasts = {}
    for name, lr in (("barely", 1e-7), ("trained", 3e-3)):
        out = folder / name
        out.mkdir()
        fit(dataclasses.replace(recipe.train, lr=lr), recipe.model, data, checkpoint_dir=out)
        model = BarsForecaster()
        model.load_context(SimpleNamespace(artifacts={"checkpoint": str(out / "best.pt")}))
        predicted = model.predict(None, bars_frame(new))
        forecasts[name] = (predicted["timestamp"].to_numpy().astype("datetime64[ns]").view("int64"),
                           predicted["prediction"].to_numpy("float64"))
    losses = compare_forecasts(new, recipe.data.target, recipe.data.horizon, forecasts).losses
    return [outcome("tests/tuning/tracking/test_promote.py", "trained MSE / barely trained MSE",
                    losses["trained"] / losses["barely"], 1.0)]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        bars = folder / "bars.parquet"
        pq.write_table(synth_bars(1500, seed=1), bars)  # tests/conftest.py: bars
        sweep_data = load_dataset(bars, DataConfig(**SPACE["run"]["data"]))
        load_data = load_dataset(bars, DataConfig(**space_values(**LOAD_SPACE)["run"]["data"]))
        records = [*session_sweep(sweep_data), *reproduction(sweep_data), *worker_fault_trial(sweep_data),
                   *diverging(sweep_data), *load_trials(load_data), *short_fit(folder),
                   *precision_and_micro_batches(folder), *promotion(folder)]
    kernels = {name: os.environ.get(name, "") for name in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")}
    print(json.dumps({"kernels": kernels, "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
                      "all_hold": all(r["holds"] is not False for r in records), "outcomes": records}, indent=1))


if __name__ == "__main__":
    main()
