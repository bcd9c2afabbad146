"""Do the fall inputs pay, year after year? HAR against HAR with the mean falls, walked forward over the bars.

Run by hand:  .venv/bin/python bench/leverage_walk_forward.py [--data FILE.parquet ...] [--space FILE.yaml]
              (default data: the S&P 500 and NASDAQ Composite daily bars of `mamba-tune data sp500 | nasdaq`;
              default space: search_spaces/sp500.yaml, whose horizon, window and lookbacks it uses)

The evidence for model/features.py's fall inputs, and for where one test segment stands among many. The
target is the space's (log Parkinson volatility of the next `horizon` bars); for each block of `--block`
bars from bar `--first` on, two least-squares regressions are fitted on every sample before the block
(its target ending before the block starts) and scored on the block's samples:
  har          an intercept and HAR's inputs (model/baselines.py)
  har+falls    the same and the mean fall over each of the space's leverage lookbacks (model/features.py)
Prints JSON, one entry per file: per block its first date, the ratio har+falls / har of mean squared
error, and whether the block overlaps the space's test segment; the median ratio, the blocks where the
falls help, and the median over the blocks before the test segment. No training, no Ray; seconds.
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
from bench.linear_reference import add_data_and_space  # noqa: E402
from model.bars import read_bars  # noqa: E402
from model.baselines import fit_har, har_forecast, har_lookbacks, past_quantities  # noqa: E402
from model.data import DataConfig, test_segment_start  # noqa: E402
from model.features import bar_features, target_and_persistence, trailing_mean_fall  # noqa: E402
from tuning.search.space import load_space  # noqa: E402


def block_ratios(path: Path, settings: DataConfig, first: int, block: int) -> dict:
    """The walk-forward over one bars file -> its JSON entry."""
    bars = read_bars(path, settings.columns)
    single = bar_features(bars)  # (n, 8): log return and log range are columns 0 and 1
    h, n = settings.horizon, len(bars)
    target, _ = target_and_persistence(bars.close, single[:, 1], settings.target, h)  # (n,) NaN at the end
    har_inputs = past_quantities(bars.close, single[:, 1], settings.target, har_lookbacks(h))  # (n, 4)
    falls = trailing_mean_fall(single[:, 0], settings.input_leverage_lookbacks)  # (n, n_leverage_lookbacks)
    regressors = {"har": har_inputs, "har+falls": np.column_stack([har_inputs, falls])}
    test_bar = test_segment_start(n, settings)
    blocks = []
    for begin in range(max(first, settings.window + block), n - h - block // 2, block):
        train = np.arange(settings.window, begin - h)  # every sample whose target ends before the block
        scored = np.arange(begin, min(begin + block, n - h))
        errors = {name: float(np.mean((har_forecast(inputs, fit_har(inputs, target, train), scored)
                                       - target[scored]) ** 2))
                  for name, inputs in regressors.items()}  # least squares with an intercept, as HAR is fitted
        blocks.append({"from": str(np.datetime64(int(bars.timestamp[begin]), "ns"))[:10],
                       "ratio": round(errors["har+falls"] / errors["har"], 4),
                       "test_segment": bool(scored[-1] >= test_bar)})
    ratios = np.array([b["ratio"] for b in blocks])
    before_test = np.array([b["ratio"] for b in blocks if not b["test_segment"]])
    return {"leverage_lookbacks": list(settings.input_leverage_lookbacks), "blocks": blocks,
            "median_ratio": round(float(np.median(ratios)), 4),
            "blocks_where_falls_help": f"{int((ratios < 1).sum())} of {len(ratios)}",
            "median_ratio_before_test_segment": round(float(np.median(before_test)), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_and_space(parser)
    parser.add_argument("--first", type=int, default=1500, help="the first scored bar (default 1500: six years "
                        "of daily bars to fit on)")
    parser.add_argument("--block", type=int, default=250, help="bars per scored block (default 250: a year)")
    args = parser.parse_args()
    settings = load_space(args.space).run.data
    with tempfile.TemporaryDirectory() as folder:
        files = args.data or [bars_file(index, Path(folder)) for index in ("sp500", "nasdaq")]
        results = {path.name: block_ratios(path, settings, args.first, args.block) for path in files}
    print(json.dumps({"space": str(args.space), "horizon": settings.horizon, "results": results}, indent=1))


if __name__ == "__main__":
    main()
