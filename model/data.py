"""From a Parquet file of bars to training and validation samples, without look-ahead.

parquet -> validated bars (model/bars.py) -> features and targets (model/features.py)
-> chronological split, scaling from the training part alone, baselines -> Dataset.

A sample ending at bar i reads the input window of bars i-window+1..i and predicts a
target over bars i+1..i+horizon. The split bar s cuts the series (80/20 by default):
a training sample's bars, inputs and target, all lie before s; a validation sample's
input window starts at s or later. The samples that would straddle s are dropped: that
is the gap. Windows are strided views of one contiguous feature array; the arrays are
plain numpy, so several trials share one copy (Ray's object store maps them).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from model.bars import FIELDS, DataError, read_bars
from model.features import FEATURE_NAMES, TARGETS, bar_features, target_and_persistence
from model.settings import known_settings, require_positive_ints

_STD_FLOOR = 1e-8  # below it a column counts as constant: centred, and divided by 1, not blown up


@dataclass(frozen=True)
class DataConfig:
    """How bars become samples."""

    window: int = 128  # bars in each input window (the model's seqlen)
    horizon: int = 12  # bars ahead the return and volatility targets look (close: always the next bar)
    target: str = "volatility"  # "return" | "volatility" | "close"
    val_fraction: float = 0.2  # the last part of the bars, chronologically
    min_val_samples: int = 32  # fewer validation samples than this is an error
    columns: dict[str, str] = field(default_factory=dict)  # our field -> the file's column, e.g. ts_event

    def __post_init__(self) -> None:
        require_positive_ints(self, ("window", "horizon", "min_val_samples"))
        if self.target not in TARGETS:
            raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {self.target!r}")
        if not (isinstance(self.val_fraction, (int, float)) and not isinstance(self.val_fraction, bool)
                and 0.01 <= self.val_fraction <= 0.99):
            raise ValueError(f"val_fraction must be a number between 0.01 and 0.99, got {self.val_fraction!r}")
        if not isinstance(self.columns, dict) or not all(
                k in FIELDS and isinstance(v, str) and v for k, v in self.columns.items()):
            raise ValueError(f"columns must map bar fields ({', '.join(FIELDS)}) to column names, "
                             f"got {self.columns!r}")

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> DataConfig:
        return cls(**known_settings(cls, values, "data"))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Scaler:
    """Standardisation fitted on the training part only."""

    feature_mean: np.ndarray  # (n_features,)
    feature_std: np.ndarray  # (n_features,)
    target_mean: float
    target_std: float

    def to_dict(self) -> dict[str, Any]:
        return {"feature_mean": self.feature_mean.tolist(), "feature_std": self.feature_std.tolist(),
                "target_mean": self.target_mean, "target_std": self.target_std}


@dataclass(frozen=True)
class Dataset:
    """Scaled arrays and sample indices; every loss and baseline is in scaled target units."""

    features: np.ndarray  # (n_bars, n_features) float32, scaled
    targets: np.ndarray  # (n_bars,) float32 scaled target of the sample ending at each bar (NaN: none)
    train_index: np.ndarray  # (n_train,) int64 last input bar of each training sample
    val_index: np.ndarray  # (n_val,) int64 last input bar of each validation sample
    window: int
    split_bar: int  # first bar of the validation part
    scaler: Scaler
    baselines: dict[str, float]  # validation MSE of "mean" (the train mean) and "persistence"
    summary: dict[str, Any]

    @property
    def n_features(self) -> int:
        return self.features.shape[1]

    def batch(self, index: np.ndarray | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Samples ending at bars `index` (batch,) -> inputs (batch, window, n_features), targets (batch, 1)."""
        index = torch.as_tensor(index, dtype=torch.int64)
        with warnings.catch_warnings():  # arrays from Ray's object store are read-only; nothing here writes
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            features, targets = torch.from_numpy(self.features), torch.from_numpy(self.targets)
        windows = features.unfold(0, self.window, 1).transpose(1, 2)  # (n_windows, window, n_features), a view
        inputs = windows[index - (self.window - 1)]  # the only copy: the batch itself
        return inputs, targets[index].unsqueeze(-1)


def load_dataset(path: str | Path, config: DataConfig = DataConfig()) -> Dataset:
    """Read, validate, featurise, split and scale; raises DataError on bad data."""
    bars = read_bars(path, config.columns)
    features = bar_features(bars)  # (n, f) float32, unscaled
    close = bars.close
    del bars  # the other columns are done with: free them before the targets (10M bars: 400 MB)
    pa.default_memory_pool().release_unused()  # they may live in Arrow's pool, which keeps freed pages
    target, persistence = target_and_persistence(close, features[:, 1], config.target, config.horizon)
    del close
    n, w, h = len(features), config.window, config.horizon

    split, train_index, val_index = _samples(n, config)
    if len(train_index) < 1 or len(val_index) < config.min_val_samples:
        raise DataError(f"{path}: {n} bars are too few, window {w} + horizon {h} + at least "
                        f"{config.min_val_samples} validation samples need {_bars_needed(config)} bars at "
                        f"val_fraction {config.val_fraction}; use more bars or a shorter window")

    # Scaling statistics from the training part alone: its input bars and its targets.
    train_rows = features[1:split - h]
    feature_mean = np.array([train_rows[:, j].mean(dtype=np.float64) for j in range(features.shape[1])], np.float32)
    feature_std = np.array([_scale(train_rows[:, j].std(dtype=np.float64))  # a column at a time: memory
                            for j in range(features.shape[1])], dtype=np.float32)
    train_targets = target[train_index]
    scaler = Scaler(feature_mean, feature_std, float(train_targets.mean()), _scale(train_targets.std()))
    features -= feature_mean
    features /= feature_std
    scaled_target = ((target - scaler.target_mean) / scaler.target_std).astype(np.float32)
    scaled_persistence = (persistence - scaler.target_mean) / scaler.target_std

    val_target = scaled_target[val_index].astype(np.float64)
    baselines = {
        "mean": float(np.mean(val_target**2)),  # the train mean is 0 in scaled units
        "persistence": float(np.mean((scaled_persistence[val_index] - val_target) ** 2)),
    }
    summary = {
        "path": str(path), "n_bars": n, "split_bar": split, "n_train": len(train_index), "n_val": len(val_index),
        "target": config.target, "horizon": h, "window": w, "features": list(FEATURE_NAMES),
    }
    return Dataset(features, scaled_target, train_index, val_index, w, split, scaler, baselines, summary)


def _samples(n: int, config: DataConfig) -> tuple[int, np.ndarray, np.ndarray]:
    """Split bar and the last input bar of every training and validation sample, for n bars.

    Training samples end by split-1-h (their targets too); validation windows start at split.
    Inputs start at bar 1 (bar 0 has no previous bar) and persistence needs h bars before.
    """
    w, h = config.window, config.horizon
    split = int(round(n * (1 - config.val_fraction)))
    first = max(w, h)
    train_index = np.arange(first, split - h, dtype=np.int64)
    val_index = np.arange(max(split + w - 1, first), n - h, dtype=np.int64)
    return split, train_index, val_index


def _bars_needed(config: DataConfig) -> int:
    """Smallest bar count that gives one training and min_val_samples validation samples (bisection)."""
    def enough(n: int) -> bool:
        _, train, val = _samples(n, config)
        return len(train) >= 1 and len(val) >= config.min_val_samples

    low, high = 1, config.window + config.horizon + config.min_val_samples
    while not enough(high):
        low, high = high, high * 2
    while low < high:
        middle = (low + high) // 2
        low, high = (middle + 1, high) if not enough(middle) else (low, middle)
    return high


def _scale(std: float) -> float:
    """A standard deviation to divide by: 1 for a (near-)constant column, which is then only centred."""
    return float(std) if std > _STD_FLOOR else 1.0
