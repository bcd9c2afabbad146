"""What every section is given: the mode, a scratch folder shared by the sections, and the workload.

The workload is the original system's (21,600 synthetic bars, search_spaces/default.yaml's data, model
and train settings read through the project's own space loader, batch 512); --cpu-smoke replaces it by a
tiny one that runs the same code paths on CPU in seconds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from model.backend import first_line  # noqa: F401  (the sections' one way to say an error: imports no torch)

if TYPE_CHECKING:  # the runner imports this module without torch; sections import what they use
    from model.config import ModelConfig
    from model.data import DataConfig
    from model.train_config import TrainConfig

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SPACE = ROOT / "search_spaces" / "default.yaml"
NO_CUDA = "skipped: no CUDA"


class Skipped(Exception):
    """A section (or a part of one) that cannot run here; its message is the reason, 'skipped: ...'."""


@dataclass(frozen=True)
class SectionContext:
    smoke: bool  # --cpu-smoke: the tiny workload, on CPU
    workdir: Path  # scratch shared by the sections of one run (the bars file is written once)
    timeout_s: float  # this section's own limit; a section that runs a subprocess gives it less


@dataclass(frozen=True)
class Workload:
    bars: int  # synthetic bars (model/synth.py)
    data: DataConfig
    model: ModelConfig  # backend "auto"; each section sets the one it runs
    train: TrainConfig  # the space's train settings as a sweep pins them (device, threads from its resources)
    batch_size: int  # the original system's 512
    memory_batches: tuple[int, ...]  # the batch sizes the memory section measures
    space: Path  # the space file the sweep section starts from


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def require_cuda() -> None:
    """Raises Skipped("skipped: no CUDA") where torch sees no CUDA device."""
    if not cuda_available():
        raise Skipped(NO_CUDA)


def workload(context: SectionContext) -> Workload:
    """The original workload from search_spaces/default.yaml (load_space: as a sweep reads it), or the smoke one."""
    from tuning.search.space import load_space

    run = load_space(DEFAULT_SPACE).run  # its data, model and train settings, validated as a sweep's
    if not context.smoke:
        return Workload(21_600, run.data, run.model, run.train, 512, (128, 256, 512, 1024), DEFAULT_SPACE)
    from model.config import ModelConfig

    tiny = ModelConfig(d_model=16, n_layers=1, d_state=16, headdim=8, chunk_size=16)
    data = dataclasses.replace(run.data, window=32, align_window=None, vol_lookbacks=None, leverage_lookbacks=None)
    return Workload(1_500, data, tiny, dataclasses.replace(run.train, threads=1), 64, (16, 32), DEFAULT_SPACE)


def bars_file(context: SectionContext, n_bars: int) -> Path:
    """A Parquet file of `n_bars` synthetic bars (seed 0) in the scratch folder, written by the first section
    that asks for it."""
    import pyarrow.parquet as pq

    from model.atomic import atomic_path
    from model.synth import synth_bars

    path = context.workdir / f"bars-{n_bars}.parquet"
    if not path.exists():
        with atomic_path(path) as tmp:
            pq.write_table(synth_bars(n_bars, seed=0), tmp)
    return path
