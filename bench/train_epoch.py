"""Epoch time of `fit` on the original system's workload, on this machine's CPU.

Run by hand:  .venv/bin/python bench/train_epoch.py [--epochs 1]
21,600 synthetic ES-like bars, 80/20 chronological split, batch 512, the default model
(window 128). Prints JSON: E0 evaluation time, epoch time, samples/s; and, measured side
by side on the same batches, training steps at batch 512 run whole against the default
64-sample micro-batches (the same gradient, accumulated). For scale: the original system
reports 1.86 minutes per epoch on an RTX 4090.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow.parquet as pq  # noqa: E402
import torch  # noqa: E402

from model.config import ModelConfig  # noqa: E402
from model.data import DataConfig, load_dataset  # noqa: E402
from model.forecaster import Forecaster  # noqa: E402
from model.synth import synth_bars  # noqa: E402
from model.train import TrainConfig, fit  # noqa: E402


def step_seconds(data, micro: int, batch: int = 512, repeats: int = 3) -> list[float]:
    """Seconds per optimizer-free forward+backward of one batch, split into `micro` parts."""
    torch.manual_seed(0)
    model = Forecaster(ModelConfig(n_features=data.n_features)).train()
    index = torch.as_tensor(data.train_index[:batch])
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model.zero_grad(set_to_none=True)
        for part in index.split(micro):
            inputs, targets = data.batch(part)
            (torch.nn.functional.mse_loss(model(inputs), targets, reduction="sum") / batch).backward()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bars.parquet"
        pq.write_table(synth_bars(21_600, seed=0), path)
        data = load_dataset(path, DataConfig(test_fraction=0))  # the original 80/20 split

    whole, micro = [], []
    for _ in range(2):  # alternate, so the machine's noise hits both alike
        whole += step_seconds(data, micro=512, repeats=2)
        micro += step_seconds(data, micro=64, repeats=2)

    epochs = []
    result = fit(TrainConfig(epochs=args.epochs, device="cpu"), ModelConfig(), data,
                 report=lambda m, c: epochs.append(m))
    trained = [m for m in epochs if m["epoch"] > 0]
    print(json.dumps({
        "bars": data.summary["n_bars"], "train_samples": data.summary["n_train"], "val_samples": data.summary["n_val"],
        "batch_size": 512, "threads": torch.get_num_threads(), "status": result.status,
        "e0_eval_s": round(epochs[0]["epoch_s"], 1),
        "epoch_s": [round(m["epoch_s"], 1) for m in trained],
        "train_samples_per_s": [round(m["samples_per_s"], 1) for m in trained],
        "peak_rss_mb": round(trained[-1]["peak_memory_mb"]),
        "step_s_batch512_whole_median": round(statistics.median(whole), 2),
        "step_s_batch512_micro64_median": round(statistics.median(micro), 2),
        "micro_batching_speedup": round(statistics.median(whole) / statistics.median(micro), 2),
        "original_system_rtx4090_epoch_s": 111.6,
    }, indent=2))


if __name__ == "__main__":
    main()
