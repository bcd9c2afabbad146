"""How far the model's own inputs take a linear forecast past HAR, chosen as a sweep chooses: on validation.

Run by hand:  .venv/bin/python bench/linear_reference.py [--data FILE.parquet ...] [--space search_spaces/sp500.yaml]
              (default data: the S&P 500 and NASDAQ Composite daily bars of `mamba-tune data sp500 | nasdaq`)

The reference for bench/forecast_quality.py's figures. For each bars file, loaded with the space's data
settings (the same features, scaling, segments and HAR as a sweep), a ridge regression of the target on
the scaled input features at a set of lags (the window's last bar, and bars lag earlier) is fitted on the
training samples for each (lags, ridge penalty) of a small grid. Prints JSON, one entry per file:
  har_val, har_test          HAR's loss on the validation and the test samples
  chosen                     the grid point best on validation (as a sweep chooses): its lags, penalty,
                             val and test loss and their ratios to HAR, and test_ratio_interval, a 90%
                             moving-block bootstrap interval of the test ratio (blocks of `horizon`
                             samples: the targets of neighbouring samples overlap)
  best_on_test               the grid point best on the test segment: what choosing there would claim
  n_val, n_test, horizon     samples; neighbouring targets share horizon-1 bars, so the independent
                             observations are about n / horizon
All losses are mean squared errors in scaled target units. Seconds on 2 cores; no training, no Ray.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.forecast_quality import bars_file  # noqa: E402
from model.data import Dataset, load_dataset  # noqa: E402
from tuning.search.space import load_space  # noqa: E402

LAGS = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48)  # bars before the window's last; those inside the window are used
PENALTIES = (1e-3, 1.0, 10.0, 100.0, 1000.0)
BOOTSTRAP_DRAWS = 2000


def lagged_design(features: np.ndarray, index: np.ndarray, lags: tuple[int, ...]) -> np.ndarray:
    """(n, 1 + len(lags) * n_features) float64: an intercept, then the rows index - lag (n,) of features
    (n_bars, n_features) float64."""
    return np.column_stack([np.ones(len(index)), *(features[index - lag] for lag in lags)])


def ridge(design: np.ndarray, target: np.ndarray, penalty: float) -> np.ndarray:
    """(n_columns,) coefficients minimising squared error + penalty * |w|^2 (the intercept penalised alike)."""
    return np.linalg.solve(design.T @ design + penalty * np.eye(design.shape[1]), design.T @ target)


def block_bootstrap_ratio(model: np.ndarray, baseline: np.ndarray, block: int, seed: int = 0) -> list[float]:
    """90% interval of sum(model) / sum(baseline) over moving blocks of `block` samples; model, baseline: (n,)
    squared errors of the same samples in time order."""
    rng = np.random.default_rng(seed)
    n = len(model)
    starts = rng.integers(0, n - block + 1, size=(BOOTSTRAP_DRAWS, -(-n // block)))
    rows = (starts[:, :, None] + np.arange(block)).reshape(BOOTSTRAP_DRAWS, -1)[:, :n]  # (draws, n)
    ratios = model[rows].sum(axis=1) / baseline[rows].sum(axis=1)
    return [round(float(q), 4) for q in np.quantile(ratios, [0.05, 0.95])]


def reference(data: Dataset, horizon: int) -> dict:
    """The ridge grid on one Dataset (residual to HAR: its last input is HAR's forecast) -> its JSON entry."""
    features, target = data.features.astype(np.float64), data.targets.astype(np.float64)
    usable = [lag for lag in LAGS if lag < data.window]
    lag_sets = {f"{k} lag(s), up to {usable[k - 1]} bars back": tuple(usable[:k]) for k in (1, 5, len(usable))}
    har_val, har_test = data.baselines["har"], data.test_baselines["har"]
    points = []
    for name, lags in lag_sets.items():
        train = lagged_design(features, data.train_index, lags)
        for penalty in PENALTIES:
            weights = ridge(train, target[data.train_index], penalty)
            errors = {split: (lagged_design(features, index, lags) @ weights - target[index]) ** 2
                      for split, index in (("val", data.val_index), ("test", data.test_index))}
            points.append({"lags": name, "penalty": penalty, "val": float(errors["val"].mean()),
                           "test": float(errors["test"].mean()), "test_errors": errors["test"]})
    chosen = min(points, key=lambda p: p["val"])
    oracle = min(points, key=lambda p: p["test"])
    har_errors = (data.features[data.test_index, -1] - target[data.test_index]) ** 2  # the har input: HAR itself
    assert np.isclose(har_errors.mean(), har_test), (har_errors.mean(), har_test)
    return {"har_val": round(har_val, 4), "har_test": round(har_test, 4),
            "chosen": {**_shown(chosen, har_val, har_test),
                       "test_ratio_interval": block_bootstrap_ratio(chosen["test_errors"], har_errors, horizon)},
            "best_on_test": _shown(oracle, har_val, har_test),
            "n_val": len(data.val_index), "n_test": len(data.test_index), "horizon": horizon}


def _shown(point: dict, har_val: float, har_test: float) -> dict:
    return {"lags": point["lags"], "penalty": point["penalty"], "val": round(point["val"], 4),
            "test": round(point["test"], 4), "val_ratio_to_har": round(point["val"] / har_val, 4),
            "test_ratio_to_har": round(point["test"] / har_test, 4)}


def add_data_and_space(parser: argparse.ArgumentParser) -> None:
    """--data (bars files; default the two indices') and --space (whose data settings), as these benches take them."""
    parser.add_argument("--data", nargs="+", type=Path, help="Parquet bars files (default: the S&P 500 and NASDAQ "
                        "Composite daily bars, written by `mamba-tune data` to a temporary folder)")
    parser.add_argument("--space", type=Path, default=ROOT / "search_spaces" / "sp500.yaml",
                        help="the search space whose data settings to use (default search_spaces/sp500.yaml)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_and_space(parser)
    args = parser.parse_args()
    settings = load_space(args.space).run.data
    if not settings.residual:
        raise SystemExit(f"error: {args.space}: data.residual_to is none; the reference reads HAR's forecasts from "
                         "the har input, so use a space with residual_to: har (the default)")
    with tempfile.TemporaryDirectory() as folder:
        files = args.data or [bars_file(index, Path(folder)) for index in ("sp500", "nasdaq")]
        results = {path.name: reference(load_dataset(path, settings), settings.horizon) for path in files}
    print(json.dumps({"space": str(args.space), "results": results}, indent=1))


if __name__ == "__main__":
    main()
