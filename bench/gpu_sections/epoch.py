"""Section 4, epoch time of the original workload: fused and torch backends x fp32 and bf16.

The workload: 21,600 synthetic bars (model/synth.py) read by model.data.load_dataset with
search_spaces/default.yaml's data settings, its model and train settings (as a sweep trial gets them),
batch 512, three epochs of model.train.fit. Epoch 1 compiles (Triton's autotuning, cuDNN's choices), so
the figures are the median of epochs 2 and 3. fit's history records, per epoch, `epoch_s` (training and
the validation pass after it) and `samples_per_s` (training samples over the training time alone), so
training time = training samples / samples_per_s, validation time = epoch_s - training time: both from
fit's own clock, nothing timed twice. With --cpu-smoke the torch backend runs the tiny workload on CPU.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

from bench.gpu_sections.context import NO_CUDA, SectionContext, bars_file, cuda_available, first_line, workload

EPOCHS = 3
ANCHOR = "the original system: 1.86 min an epoch on an RTX 4090; the aim here: under 2 s on an H200"


def run(context: SectionContext) -> dict[str, Any]:
    from model.data import load_dataset

    work = workload(context)
    cuda = cuda_available()
    data = load_dataset(bars_file(context, work.bars), work.data)
    runs = {}
    for backend in ("mamba_ssm", "torch"):
        for precision in ("fp32", "bf16"):
            key = f"{backend}/{precision}"
            if backend == "mamba_ssm" and not cuda:
                runs[key] = NO_CUDA
                continue
            try:
                runs[key] = epoch_times(data, work, backend, "cuda" if cuda else "cpu", precision)
            except Exception as exc:  # one configuration's failure (e.g. the fused path) leaves the others' figures
                runs[key] = {"error": first_line(exc)}
    return {"workload": {"bars": work.bars, "train_samples": len(data.train_index),
                         "val_samples": len(data.val_index), "batch_size": work.batch_size,
                         "data": work.data.to_dict(), "model": work.model.to_dict(),
                         "cpu_threads": work.train.threads},
            "anchor": ANCHOR, "runs": runs}


def epoch_times(data, work, backend: str, device: str, precision: str) -> dict[str, Any]:
    """Three epochs; epoch 1's time apart, the median of epochs 2 and 3 for the rest."""
    from model.train import fit

    config = dataclasses.replace(work.train, epochs=EPOCHS, batch_size=work.batch_size, device=device,
                                 precision=precision)
    result = fit(config, dataclasses.replace(work.model, backend=backend), data)
    if result.status != "completed":
        return {"status": result.status, "stop_epoch": result.stop_epoch}
    epochs = [split_times(e, len(data.train_index)) for e in result.history[1:]]  # epochs 1..3 (0: before training)
    later = epochs[1:]
    return {"epoch_s": median(later, "epoch_s"), "train_s": median(later, "train_s"), "val_s": median(later, "val_s"),
            "samples_per_s": round(statistics.median(e["samples_per_s"] for e in later)),
            "first_epoch_s": round(epochs[0]["epoch_s"], 3), "e0_eval_s": round(result.history[0]["epoch_s"], 3),
            "val_loss": result.history[-1]["val_loss"], "peak_memory_mb": round(result.history[-1]["peak_memory_mb"])}


def split_times(metrics: dict[str, Any], n_train: int) -> dict[str, float]:
    """An epoch's record -> its total, training and validation seconds (training: n_train / samples_per_s)."""
    train_s = n_train / metrics["samples_per_s"]
    return {"epoch_s": metrics["epoch_s"], "train_s": train_s, "val_s": metrics["epoch_s"] - train_s,
            "samples_per_s": metrics["samples_per_s"]}


def median(epochs: list[dict[str, float]], key: str) -> float:
    return round(statistics.median(e[key] for e in epochs), 3)
