"""Does the tuned model beat HAR year after year? A configuration retrained and scored walked forward over the bars.

Run by hand:  .venv/bin/python bench/model_walk_forward.py [--config best.yaml] [--data FILE.parquet ...]
              [--space search_spaces/sp500.yaml] [--seeds 0 1] [--first 2500] [--block 250] [--val-bars 500]
              (default data: the S&P 500 and NASDAQ Composite daily bars of `mamba-tune data sp500 | nasdaq`;
              default configuration: the space's run with its first initial point; `mamba-tune best` writes a
              sweep winner's configuration to pass as --config)

One test segment of two years holds about 36 independent 12-day targets: too few to tell a 5% edge over
HAR from luck. This bench scores the same configuration on many more. For each block of `--block` bars
from bar `--first` on, the bars up to the block's last target are loaded as a sweep loads them
(model/data.py: features, scaling and HAR from the training segment alone) with the block as the test
segment and the `--val-bars` bars before it as the validation segment; a model is trained per seed on
the training segment (model/train.py: the configuration's epochs, best.pt chosen on validation) and
scored on the block, alone (the first seed) and as the seeds' ensemble (model/holdout.py). Prints JSON,
one entry per file: per block its first date, n_test, target_std (of its training segment), the HAR,
persistence, model and ensemble losses, the ratios to HAR, and where the block lies in the
configuration's own split of the whole file (a sweep's split, for its best.yaml), by its last sample:
`before_validation`, `validation` (what a sweep chooses on; fold 1's segment: a sweep with
confirm.folds > 1 also validated on the folds before it) or `test_segment` (on a file the sweep did not
run on, the same share of the bars: the same calendar years for daily files of one span). Then over the
blocks the median ratio, the blocks where the model beats HAR, and the pooled ratio (squared errors
summed in the target's own units over HAR's: each block's losses are in its own training segment's
scaled units), over all blocks and over the blocks before the validation segment.
Minutes: one training per block and seed (about 20 s each on 2 cores for sp500.yaml).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.forecast_quality import bars_file  # noqa: E402
from bench.linear_reference import add_data_and_space  # noqa: E402
from model.bars import read_bars  # noqa: E402
from model.data import DataConfig, Dataset, load_dataset  # noqa: E402
from model.errors import InputError  # noqa: E402
from model.holdout import score_ensemble  # noqa: E402
from model.train import fit  # noqa: E402
from tuning.search.recipe import TrainingRecipe  # noqa: E402
from tuning.search.space import load_space, with_params  # noqa: E402


class WalkForwardError(InputError, ValueError):
    """--first, --block or --val-bars that leave a block without enough samples, or no block at all."""


def block_starts(settings: DataConfig, n: int, first: int, block: int, val_bars: int, source: str) -> range:
    """The first sample's last input bar of each block in the n bars of `source`; raises WalkForwardError when a
    segment would be too small or no block fits."""
    w, h, least = settings.window, settings.horizon, settings.min_val_samples
    if block < least:
        raise WalkForwardError(f"--block {block}: a block must hold at least data.min_val_samples ({least}) "
                               f"samples; use --block {least} or more")
    if val_bars < w + h - 1 + least:
        raise WalkForwardError(f"--val-bars {val_bars}: the validation segment needs window + horizon - 1 + "
                               f"data.min_val_samples = {w + h - 1 + least} bars; use at least that")
    lowest = max(w, h) + w + val_bars + h  # one training sample before the validation segment (model/data.py)
    starts = range(max(first, lowest), n - h - max(block // 2 + 1, least) + 1, block)  # the last: half a block
    if not starts:
        raise WalkForwardError(f"{source}: {n} bars leave no block of {block} bars from bar {max(first, lowest)} "
                               f"(window {w}, horizon {h}, --val-bars {val_bars}); use more bars, an earlier --first "
                               "or a smaller --block or --val-bars")
    return starts


def block_data(table: pa.Table, settings: DataConfig, begin: int, block: int, val_bars: int, folder: Path) -> Dataset:
    """The bars of `table` (a bars file, read once) up to the last target of the samples ending at bars
    begin..begin+block-1, split so that exactly those samples are the test segment and the val_bars bars
    before its first window the validation segment."""
    w, h = settings.window, settings.horizon
    end = min(begin + block, table.num_rows - h) + h  # bars kept: the last test target ends at bar end-1
    test_bar = begin - w + 1  # the first test window starts here, so the first test sample ends at `begin`
    truncated = folder / f"bars-{begin}.parquet"
    pq.write_table(table.slice(0, end), truncated)
    try:
        split = dataclasses.replace(settings, fold=1, test_fraction=(end - test_bar) / end, val_fraction=val_bars / end)
    except ValueError as exc:  # e.g. val_fraction under 0.01 on a long file
        raise WalkForwardError(f"--val-bars {val_bars} of the {end} bars up to the block at bar {begin}: {exc}; "
                               "use a larger --val-bars") from None
    data = load_dataset(truncated, split)
    if (data.test_bar, data.split_bar) != (test_bar, test_bar - val_bars):
        raise AssertionError(f"block at {begin}: segments at {data.split_bar}, {data.test_bar}")
    return data


def score_block(recipe: TrainingRecipe, data: Dataset, seeds: list[int], folder: Path) -> dict:
    """Train one model per seed on data's training segment -> the losses on its test segment."""
    checkpoints = []
    for seed in seeds:
        run_dir = folder / f"seed-{seed}"
        fit(dataclasses.replace(recipe.train, seed=seed), recipe.model, data, checkpoint_dir=run_dir)
        checkpoints.append(run_dir / "best.pt")
    scored = score_ensemble(checkpoints, data)
    har = data.test_baselines["har"]
    alone = scored["member_test_losses"][0]  # the first seed's model
    return {"n_test": len(data.test_index), "target_std": data.scaler.target_std, "har": har,
            "persistence": data.test_baselines["persistence"], "model": alone, "ensemble": scored["test_loss"],
            "ratio": round(alone / har, 4), "ensemble_ratio": round(scored["test_loss"] / har, 4)}


def summary(blocks: list[dict]) -> dict:
    """Medians, wins and pooled ratios of the model and the ensemble over `blocks`.

    Each block's losses are in its own scaled units (its training segment's target_std); pooled ratios sum
    squared errors in the target's own units: n_test * target_std^2 * loss.
    """
    if not blocks:
        return {}
    har = np.array([b["har"] for b in blocks])  # (n_blocks,)
    weights = np.array([b["n_test"] * b["target_std"] ** 2 for b in blocks])  # (n_blocks,)
    out = {"blocks": len(blocks)}
    for name in ("model", "ensemble"):
        losses = np.array([b[name] for b in blocks])  # (n_blocks,)
        ratios = losses / har
        out[name] = {"median_ratio": round(float(np.median(ratios)), 4),
                     "blocks_beating_har": int((ratios < 1).sum()),
                     "pooled_ratio": round(float(losses @ weights / (har @ weights)), 4)}
    return out


def walk(path: Path, recipe: TrainingRecipe, seeds: list[int], first: int, block: int, val_bars: int) -> dict:
    """The walk-forward over one bars file -> its JSON entry."""
    settings = recipe.data
    timestamps = read_bars(path, settings.columns).timestamp  # (n,) ns since the epoch; validates the file
    table = pq.read_table(path)  # each block's bars are a slice of it
    starts = block_starts(settings, len(timestamps), first, block, val_bars, str(path))
    whole = load_dataset(path, settings)  # the configuration's own split: where a sweep validates (fold 1) and tests
    blocks = []
    with tempfile.TemporaryDirectory() as scratch:
        for begin in starts:
            folder = Path(scratch) / str(begin)
            folder.mkdir()
            data = block_data(table, settings, begin, block, val_bars, folder)
            last = int(data.test_index[-1])
            where = ("test_segment" if last >= whole.test_bar else
                     "validation" if last >= whole.split_bar else "before_validation")
            blocks.append({"from": str(np.datetime64(int(timestamps[begin]), "ns"))[:10], "where": where,
                           **score_block(recipe, data, seeds, folder)})
            print(json.dumps(blocks[-1]), file=sys.stderr)  # progress: each block as it ends
    return {"blocks": blocks, "all": summary(blocks),
            "before_validation": summary([b for b in blocks if b["where"] == "before_validation"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_and_space(parser)
    parser.add_argument("--config", type=Path, help="run configuration YAML, e.g. a sweep's best.yaml (default: the "
                        "space's run with its first initial point)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="a model per seed (default 0 1)")
    parser.add_argument("--first", type=int, default=2500, help="the first scored bar (default 2500: ten years of "
                        "daily bars before it)")
    parser.add_argument("--block", type=int, default=250, help="bars per scored block (default 250: a year)")
    parser.add_argument("--val-bars", type=int, default=500, help="validation bars before each block (default 500)")
    args = parser.parse_args()
    try:
        space = load_space(args.space)
        first_point = space.initial[0] if space.initial else {}
        recipe = TrainingRecipe.from_yaml(args.config) if args.config else with_params(space.run, first_point)
        with tempfile.TemporaryDirectory() as folder:
            files = args.data or [bars_file(index, Path(folder)) for index in ("sp500", "nasdaq")]
            results = {path.name: walk(path, recipe, args.seeds, args.first, args.block, args.val_bars)
                       for path in files}
    except InputError as exc:  # a bad --config, --space or bars file: the CLI's one line and exit code
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print(json.dumps({"config": str(args.config or args.space), "train": recipe.train.to_dict(),
                      "data": recipe.data.to_dict(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
