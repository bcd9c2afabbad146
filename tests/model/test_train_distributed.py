"""fit() across processes (torch.distributed, as Ray Train's workers run it) trains as one process does."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from model.config import ModelConfig
from model.data import DataConfig, load_dataset
from model.train import TrainConfig, fit
from tests.bars import write_bars
from tests.cli import free_port

SMALL_MODEL = ModelConfig(d_model=16, n_layers=1, d_state=16, headdim=8, chunk_size=16)
CONFIG = TrainConfig(epochs=2, batch_size=50, lr=3e-3, weight_decay=0.01, micro_batch_size=8)


def _worker(rank: int, world: int, port: int, path: str, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        data = load_dataset(path, DataConfig(window=16, horizon=4))
        result = fit(CONFIG, SMALL_MODEL, data)
        if rank == 0:
            torch.save([[m["train_loss"], m["val_loss"]] for m in result.history], out)
        dist.barrier()  # neither process tears gloo down while the other still uses it
    finally:
        dist.destroy_process_group()


def test_fit_on_two_processes_matches_one_process(tmp_path):
    path = tmp_path / "bars.parquet"
    write_bars(path, 800, seed=5)
    torch.set_num_threads(1)
    single = fit(CONFIG, SMALL_MODEL, load_dataset(path, DataConfig(window=16, horizon=4)))
    expected = torch.tensor([[m["train_loss"], m["val_loss"]] for m in single.history], dtype=torch.float64)
    out = tmp_path / "two.pt"
    mp.spawn(_worker, args=(2, free_port(), str(path), str(out)), nprocs=2, join=True)
    # 620 training samples in batches of 50: the last, smaller batch splits over both processes too
    torch.testing.assert_close(torch.tensor(torch.load(out), dtype=torch.float64), expected, rtol=1e-4, atol=1e-6)
