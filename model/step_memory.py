"""The peak memory of training at one batch size, measured by running it.

`step_peak_bytes` runs `fit` itself on one batch (one optimizer step, with the epoch-0 and
end-of-epoch evaluations of an evaluation batch), so what is measured is exactly the code a
trial runs: its micro-batching, precision and optimizer. The figure is the peak above what
the process held before the model was built:
  CUDA: the caching allocator's peak reserved bytes (what other processes cannot have);
  CPU:  the peak resident set (Linux VmHWM, reset through /proc/self/clear_refs).
"""

from __future__ import annotations

import ctypes
import dataclasses
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from model.config import ModelConfig
from model.data import Dataset
from model.train import TrainConfig, fit
from model.training import eval_batch_size, resolve_device

# What a CUDA process holds outside the allocator (context, kernels, cuBLAS workspace): counted
# once per trial worker on top of its measured peak. bench/gpu_check.py measures it on a GPU.
MB = 2**20
CUDA_CONTEXT_BYTES = 600 * MB


class MemoryProbeError(RuntimeError):
    """The peak cannot be measured on this machine."""


def step_peak_bytes(model_config: ModelConfig, train_config: TrainConfig, data: Dataset) -> int:
    """Peak bytes of training with `train_config` (its batch_size, device, precision) on `data`.

    A batch larger than the training set is measured as fit trains it: all of the training set at once."""
    device = resolve_device(train_config.device)
    one_batch = dataclasses.replace(data, train_index=data.train_index[: train_config.batch_size],
                                    val_index=data.val_index[: eval_batch_size(train_config, device)])
    one_step = dataclasses.replace(train_config, epochs=1, warmup_fraction=0.0)
    with peak_memory(device) as peak:
        fit(one_step, model_config, one_batch)
    return peak[0]


@contextmanager
def peak_memory(device: torch.device) -> Iterator[list[int]]:
    """Yields a one-element list that holds, on exit, the peak bytes the block used on `device`."""
    result = [0]
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_reserved(device)
        yield result
        torch.cuda.synchronize(device)
        result[0] = torch.cuda.max_memory_reserved(device) - before
        return
    _release_free_heap()
    before = _reset_peak_resident()
    yield result
    result[0] = max(0, _status_kib("VmHWM") - before) * 1024


def _release_free_heap() -> None:
    """Give the allocator's free pages back to the OS, so the block's peak is not hidden in them."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the figure may read low, never high
        pass


def _reset_peak_resident() -> int:
    """Reset the peak resident set to the current one (Linux >= 4.0); -> the current one in KiB."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError as exc:
        raise MemoryProbeError(f"cannot reset the peak resident set ({exc}); the CPU memory probe needs Linux "
                               "with /proc/self/clear_refs writable") from None
    return _status_kib("VmRSS")


def _status_kib(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB$", Path("/proc/self/status").read_text(), re.MULTILINE)
    if match is None:
        raise MemoryProbeError(f"/proc/self/status has no {field}: the CPU memory probe needs Linux")
    return int(match.group(1))
