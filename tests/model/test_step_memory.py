"""The measured peak memory of training at one batch size (CPU: the peak resident set)."""

from __future__ import annotations

import torch

from model.config import ModelConfig
from model.step_memory import peak_memory, step_peak_bytes
from model.train import TrainConfig

TINY = ModelConfig(d_model=16, n_layers=1, d_state=16, headdim=8, chunk_size=16)


def test_peak_memory_sees_a_block_that_allocates_and_frees():
    with peak_memory(torch.device("cpu")) as peak:
        block = torch.ones(25 * 2**20 // 4)  # 25 MiB, touched
        del block
    assert 24 * 2**20 <= peak[0] <= 40 * 2**20, peak[0] / 2**20


def test_the_peak_grows_with_the_batch_when_the_whole_batch_runs_at_once(small_data):
    def peak(batch: int) -> int:
        return step_peak_bytes(TINY, TrainConfig(batch_size=batch, device="cpu", micro_batch_size=4096), small_data)

    peak(64)  # lazy initialisation of torch's CPU kernels, once per process
    small, large = peak(64), peak(1024)
    assert large > 6 * small, (small, large)  # activations scale with the batch; the model is the same


def test_micro_batching_caps_the_peak(small_data):
    whole = step_peak_bytes(TINY, TrainConfig(batch_size=1024, device="cpu", micro_batch_size=1024), small_data)
    split = step_peak_bytes(TINY, TrainConfig(batch_size=1024, device="cpu", micro_batch_size=64), small_data)
    assert split < whole / 3, (split, whole)
