"""From a Parquet file of bars to training, validation and test samples, without look-ahead.

parquet -> validated bars (model/bars.py) -> features and targets (model/features.py)
-> chronological split, scaling from the training part alone, baselines (model/baselines.py)
-> Dataset.

A sample ending at bar i reads the input window of bars i-window+1..i and predicts a
target over bars i+1..i+horizon. Two bars cut the series into three segments (70/20/10
by default): the split bar s starts the validation segment, the test bar t the test
segment. A training sample's bars, inputs and target, all lie before s; a validation
sample's input window starts at s or later and its target ends before t; a test sample's
input window starts at t or later. The samples that would straddle a cut are dropped:
those are the gaps. With align_window the samples are those a window of that many bars leaves (a sweep that
searches the window sets its longest: every trial is then scored on the same samples, scaled alike; the rule is
tuning/search/sample_alignment.py's), the model still reading `window` bars of each. Nothing in a sweep reads the
test segment. Windows are strided views of one contiguous feature array; the arrays are plain numpy, so
several trials share one copy (Ray's object store maps them).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from model.bars import FIELDS, Bars, read_bars
from model.bars_enough import require_enough_bars, sample_ends
from model.bars_enough import test_segment_start as test_segment_start  # bench/leverage_walk_forward.py's
from model.baselines import fit_har_for, har_lookbacks, past_quantities, scored_baselines
from model.features import TARGETS, bar_features, feature_names, target_and_persistence
from model.objectives import DEFAULT_OBJECTIVE, ObjectiveScale, mean_variance, resolve_objective
from model.settings import known_settings, require_positive_ints

if TYPE_CHECKING:  # torch is imported where a batch is made: the command line starts without it
    import torch

_STD_FLOOR = 1e-8  # below it a column counts as constant: centred, and divided by 1, not blown up
RESIDUAL_TO = ("har", "none")
LOOKBACK_SETTINGS = ("vol_lookbacks", "leverage_lookbacks")  # lists in YAML, tuples here, checked alike


@dataclass(frozen=True)
class DataConfig:
    """How bars become samples."""

    window: int = 128  # bars in each input window (the model's seqlen)
    horizon: int = 12  # bars ahead the return and volatility targets look (close: always the next bar)
    target: str = "volatility"  # "return" | "volatility" | "close"
    val_fraction: float = 0.2  # the part of the bars just before the test segment, chronologically
    test_fraction: float = 0.1  # the last part of the bars, which no sweep reads; 0: no test segment
    min_val_samples: int = 32  # fewer validation samples than this (or test samples, when any) is an error
    fold: int = 1  # walk-forward fold: f > 1 validates on the segment just before fold f-1's, trains on all before
    columns: dict[str, str] = field(default_factory=dict)  # our field -> the file's column, e.g. ts_event
    vol_lookbacks: tuple[int, ...] | None = None  # trailing volatility inputs in bars; None: HAR's that fit the window
    residual_to: str = "har"  # "har": the model forecasts a correction to HAR's forecast (an input); "none"
    leverage_lookbacks: tuple[int, ...] | None = None  # mean-fall inputs in bars; None: the volatility inputs'
    # Samples (training, validation, test) as a window of this many bars leaves them, at least `window`: a sweep that
    # searches data.window sets its longest, so every trial is scored on the same samples; None: the window's own
    align_window: int | None = None
    # The loss that trains, validates, compares and tests (model/objectives.py): volatility takes mse_log, mse_var or
    # qlike, return and close take mse; None: the target's default (volatility: mse_log, return and close: mse)
    objective: str | None = None

    def __post_init__(self) -> None:
        require_positive_ints(self, ("window", "horizon", "min_val_samples", "fold", "align_window"),
                              optional=("align_window",))
        if self.align_window is not None and self.align_window < self.window:
            raise ValueError(f"align_window {self.align_window} is shorter than the window of {self.window} bars, "
                             "and samples aligned to it would not leave the window room; use an align_window of at "
                             f"least {self.window}, or remove it")
        for name in LOOKBACK_SETTINGS:
            if isinstance(getattr(self, name), list):  # YAML and JSON give lists
                object.__setattr__(self, name, tuple(getattr(self, name)))
        self._check_inputs()
        if self.target not in TARGETS:
            raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {self.target!r}")
        resolve_objective(self.objective, self.target)  # one line naming the objective, the target and the fix
        if not (isinstance(self.val_fraction, (int, float)) and not isinstance(self.val_fraction, bool)
                and 0.01 <= self.val_fraction <= 0.99):
            raise ValueError(f"val_fraction must be a number between 0.01 and 0.99, got {self.val_fraction!r}")
        if not (isinstance(self.test_fraction, (int, float)) and not isinstance(self.test_fraction, bool)
                and 0 <= self.test_fraction <= 0.98):
            raise ValueError(f"test_fraction must be a number between 0 (no test segment) and 0.98, "
                             f"got {self.test_fraction!r}")
        if self.val_fraction + self.test_fraction > 0.99:
            raise ValueError(f"val_fraction + test_fraction must be at most 0.99 so that bars are left to train "
                             f"on, got {self.val_fraction} + {self.test_fraction}; lower one of them")
        if not isinstance(self.columns, dict) or not all(
                k in FIELDS and isinstance(v, str) and v for k, v in self.columns.items()):
            raise ValueError(f"columns must map bar fields ({', '.join(FIELDS)}) to column names, "
                             f"got {self.columns!r}")

    def _check_inputs(self) -> None:
        """vol_ and leverage_lookbacks: distinct positive ints, none longer than the window; residual_to: a known
        baseline."""
        for name in LOOKBACK_SETTINGS:
            if getattr(self, name) is not None:
                self._check_lookbacks(name, getattr(self, name))
        if self.residual_to not in RESIDUAL_TO:
            raise ValueError(f"residual_to must be one of {', '.join(RESIDUAL_TO)} (the baseline the model corrects, "
                             f"or none), got {self.residual_to!r}")

    def _check_lookbacks(self, name: str, lookbacks: Any) -> None:
        if not isinstance(lookbacks, tuple) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in lookbacks):
            raise ValueError(f"{name} must be a list of positive integers (bars), got {lookbacks!r}")
        if len(set(lookbacks)) != len(lookbacks):
            raise ValueError(f"{name} must not repeat a lookback, got {list(lookbacks)}")
        longest = max(lookbacks, default=0)
        if longest > self.window:
            raise ValueError(f"{name}: a lookback of {longest} bars is longer than the window of {self.window} "
                             f"bars, and a feature must not reach further back than the model reads; use lookbacks "
                             f"of at most {self.window} bars or a longer window")

    @property
    def residual(self) -> bool:
        """Whether the HAR forecast is the last input and the model forecasts a correction to it."""
        return self.residual_to == "har"

    @property
    def loss(self) -> str:
        """The objective's name: `objective`, or the target's default where it is None (model/objectives.py)."""
        return resolve_objective(self.objective, self.target)

    @property
    def sample_window(self) -> int:
        """The window the samples are cut for: align_window where set, else the window itself."""
        return self.window if self.align_window is None else self.align_window

    @property
    def input_lookbacks(self) -> tuple[int, ...]:
        """The volatility inputs' lookbacks: vol_lookbacks, or by default HAR's (1, h, 4h, 10h) that fit the window."""
        if self.vol_lookbacks is not None:
            return self.vol_lookbacks
        return tuple(length for length in har_lookbacks(self.horizon) if length <= self.window)

    @property
    def input_leverage_lookbacks(self) -> tuple[int, ...]:
        """The mean-fall inputs' lookbacks: leverage_lookbacks, or by default the volatility inputs'."""
        return self.input_lookbacks if self.leverage_lookbacks is None else self.leverage_lookbacks

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> DataConfig:
        return cls(**known_settings(cls, values, "data"))

    def to_dict(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        for name in LOOKBACK_SETTINGS:
            if values[name] is not None:
                values[name] = list(values[name])  # a list for YAML
        return values


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
    """Scaled arrays and sample indices; every loss and baseline is the objective's (summary["objective"], model/
    objectives.py) of forecasts and targets in scaled target units."""

    features: np.ndarray  # (n_bars, n_features) float32, scaled
    targets: np.ndarray  # (n_bars,) float32 scaled target of the sample ending at each bar (NaN: none)
    train_index: np.ndarray  # (n_train,) int64 last input bar of each training sample
    val_index: np.ndarray  # (n_val,) int64 last input bar of each validation sample
    test_index: np.ndarray  # (n_test,) int64 last input bar of each test sample; empty at test_fraction 0
    window: int
    split_bar: int  # first bar of the validation segment
    test_bar: int  # first bar of the test segment (n_bars when there is none)
    scaler: Scaler
    baselines: dict[str, float]  # validation loss (objective's) of "har", "persistence", "mean" (model/baselines.py)
    test_baselines: dict[str, float]  # the same on the test samples; empty when there are none
    summary: dict[str, Any]
    # (n_test,) float64 HAR's scaled forecast of each test sample (test_index), for a per-sample comparison on
    # the test segment (model/holdout.py); empty without a test segment
    test_har: np.ndarray = field(default_factory=lambda: np.empty(0))
    # v̄: the training targets' mean variance exp(2 log σ) in raw units (volatility; 1.0 for other targets), mse_var's
    # unit (model/objectives.py); from the training samples alone
    variance_mean: float = 1.0

    @property
    def n_features(self) -> int:
        return self.features.shape[1]

    @property
    def residual(self) -> bool:
        """Whether the last feature is the HAR forecast, which the model corrects (DataConfig.residual_to)."""
        return self.summary["residual_to"] == "har"

    @property
    def objective(self) -> str:
        """The objective every loss of these data is in (summary["objective"]; the target's default before it)."""
        return self.summary.get("objective") or DEFAULT_OBJECTIVE[self.summary["target"]]

    @property
    def objective_scale(self) -> ObjectiveScale:
        """What the objective's losses need besides forecasts and targets: the target's scaling and v̄."""
        return ObjectiveScale(self.scaler.target_mean, self.scaler.target_std, self.variance_mean)

    def baseline_metrics(self) -> dict[str, float]:
        """The validation baselines as every epoch's record names them: baseline_har, baseline_persistence, ..."""
        return {f"baseline_{name}": value for name, value in self.baselines.items()}

    def batch(self, index: np.ndarray | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Samples ending at bars `index` (batch,) -> inputs (batch, window, n_features), targets (batch, 1)."""
        import torch

        index = torch.as_tensor(index, dtype=torch.int64)
        with warnings.catch_warnings():  # arrays from Ray's object store are read-only; nothing here writes
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            features, targets = torch.from_numpy(self.features), torch.from_numpy(self.targets)
        windows = features.unfold(0, self.window, 1).transpose(1, 2)  # (n_windows, window, n_features), a view
        inputs = windows[index - (self.window - 1)]  # the only copy: the batch itself
        return inputs, targets[index].unsqueeze(-1)


def load_dataset(path: str | Path, config: DataConfig = DataConfig()) -> Dataset:
    """Read, validate, featurise, split and scale; raises DataError on bad data."""
    return dataset_from_bars(read_bars(path, config.columns), config, path)  # the bars are the callee's alone


def dataset_from_bars(bars: Bars, config: DataConfig, path: str | Path) -> Dataset:
    """Featurise, split and scale bars read from `path` (a sweep whose space searches data settings builds each
    trial's Dataset from the bars it read once); raises DataError on too few bars. Bars without volume give the
    features without volume_change (summary["features"] names the columns)."""
    names = feature_names(config.input_lookbacks, config.residual, config.input_leverage_lookbacks,
                          volume=bars.has_volume)
    features = bar_features(bars, config.input_lookbacks, config.residual,
                            config.input_leverage_lookbacks)  # (n, f) float32 in `names` order, unscaled; har 0
    log_range = features[:, names.index("range")]  # (n,) a view
    close, first_bar, last_bar, clock = bars.close, int(bars.timestamp[0]), int(bars.timestamp[-1]), bars.timezone
    del bars  # the other columns are done with: free them before the targets (10M bars: 400 MB)
    pa.default_memory_pool().release_unused()  # they may live in Arrow's pool, which keeps freed pages
    target, persistence = target_and_persistence(close, log_range, config.target, config.horizon)
    lookbacks = har_lookbacks(config.horizon)
    past = past_quantities(close, log_range, config.target, lookbacks)  # (n, n_lookbacks), HAR's inputs
    del close, log_range
    n, w, h = len(features), config.window, config.horizon

    require_enough_bars(path, n, config)
    split, test_bar, (train_index, val_index, test_index) = sample_ends(n, config)

    # Scaling statistics from the training part alone: its input bars and its targets. The har column
    # is already in scaled target units once filled, and is left as it is (mean 0, std 1).
    train_rows = features[1:split - h]
    scaled_columns = features.shape[1] - config.residual
    feature_mean = np.zeros(features.shape[1], np.float32)
    feature_std = np.ones(features.shape[1], np.float32)
    for j in range(scaled_columns):  # a column at a time: memory
        feature_mean[j] = train_rows[:, j].mean(dtype=np.float64)
        feature_std[j] = _scale(train_rows[:, j].std(dtype=np.float64))
    train_targets = target[train_index]
    scaler = Scaler(feature_mean, feature_std, float(train_targets.mean()), _scale(train_targets.std()))
    # mse_var's unit: the training targets' mean variance σ² = exp(2 log σ), never the validation or test ones'
    variance_mean = mean_variance(train_targets, config.target)
    objective, scale = config.loss, ObjectiveScale(scaler.target_mean, scaler.target_std, variance_mean)
    features -= feature_mean
    features /= feature_std
    scaled_target = ((target - scaler.target_mean) / scaler.target_std).astype(np.float32)
    scaled_persistence = (persistence - scaler.target_mean) / scaler.target_std

    har = fit_har_for(objective, past, scaled_target, train_index, scale)  # HAR as the objective fits it
    if config.residual:
        features[:, -1] = har.forecast(past, np.arange(n), scale)
    val_har, test_har = (har.forecast(past, index, scale) for index in (val_index, test_index))  # (n_val,), (n_test,)
    baselines, test_baselines = ({} if not len(i) else scored_baselines(scaled_target, scaled_persistence, forecast, i,
                                                                        objective, scale)
                                 for i, forecast in ((val_index, val_har), (test_index, test_har)))
    del past
    summary = {
        "path": str(path), "n_bars": n, "first_bar_ns": first_bar, "last_bar_ns": last_bar, "fold": config.fold,
        "timezone": clock,  # the bars' clock, which time-of-day features read (a served model reads bars with it)
        "split_bar": split, "test_bar": test_bar,
        "n_train": len(train_index),
        "n_val": len(val_index), "n_test": len(test_index), "target": config.target, "horizon": h, "window": w,
        "features": names,  # the model's inputs, in order: the checkpoint records them (model/checkpoint.py)
        "vol_lookbacks": list(config.input_lookbacks), "leverage_lookbacks": list(config.input_leverage_lookbacks),
        "residual_to": config.residual_to,
        "har": har.to_summary(lookbacks),  # as before objectives for mse_log and mse; with its "fit" for the others
        "objective": objective,  # the loss every loss and baseline of these data is in (model/objectives.py)
        "variance_mean": variance_mean,
        **({"align_window": config.align_window} if config.align_window is not None else {}),
    }
    return Dataset(features, scaled_target, train_index, val_index, test_index, w, split, test_bar, scaler,
                   baselines, test_baselines, summary, test_har, variance_mean)


def dataset_for(data: Dataset, built_with: DataConfig, config: DataConfig) -> Dataset:
    """`data` (built with `built_with`) when `config` is the same, else the bars it was read from, built with
    `config` (a trial of a sweep that searches data settings: its window, ...)."""
    return data if config == built_with else load_dataset(data.summary["path"], config)


def refit_dataset(data: Dataset) -> Dataset:
    """The training and validation segments as one training set, for a refit of a chosen configuration.

    Training samples: every sample from the first training one to the last validation one, the gap between
    the segments included. The validation samples stay, now seen in training: a refit has nothing to choose
    by, and its val_loss is in-sample. The scaling (from the training segment) and the test segment do not
    change.
    """
    train = np.arange(data.train_index[0], data.val_index[-1] + 1, dtype=np.int64)  # (n_train + gap + n_val,)
    train = train[np.isfinite(data.targets[train])]
    return dataclasses.replace(data, train_index=train, summary={**data.summary, "n_train": len(train)})


def _scale(std: float) -> float:
    """A standard deviation to divide by: 1 for a (near-)constant column, which is then only centred."""
    return float(std) if std > _STD_FLOOR else 1.0
