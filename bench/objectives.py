"""Objectives: which loss should rank volatility forecasts? A sweep per objective, each winner scored under all three.

Run by hand:  .venv/bin/python bench/objectives.py [--data sp500 synthetic] [--trials 6] [--max-epochs 6]
              [--out runs/bench-objectives]

For each bars file (the S&P 500 daily bars of `mamba-tune data sp500`; synthetic 5-minute bars of `mamba-tune data
synth`, whose true volatility is known) and each objective (data.objective: mse_log, mse_var, qlike), a real sweep
of search_spaces/smoke.yaml runs (`mamba-tune sweep`, --trials and --max-epochs as given, no confirmation runs: the
winner is the best completed search trial). Where no trial beats HAR at the gate the sweep is run once more with the
gate relaxed (gate.ratio_to_baseline 1.2), and the entry says so. Each winner's best.pt then forecasts the test
segment (on the Dataset of its own objective: its HAR input is that objective's HAR), and the forecasts are scored
under all three objectives (model/objectives.py's per_sample_loss) against that objective's HAR, with the
Diebold-Mariano verdict of the per-sample losses (model/verdict.py's versus).

On the synthetic bars the same forecasts are also scored against the TRUE variance of each target (the mean of
the generator's per-bar return variance over the target's bars, times the one constant that puts it in the
Parkinson proxy's units, fitted on the training samples): Patton (2011) says only mse_var and qlike rank forecasts
under the noisy proxy as they rank under the truth. `rankings` gives, per bars file and per loss, the mean loss of
every candidate (the winners, winner_<objective>, and HAR as each objective fits it, har_<objective>), best first,
against the proxy (vs_proxy) and, on the synthetic bars, against the truth (vs_truth), and whether the two orders
are the same (same_order).

Prints JSON to stdout; each sweep's entry goes to stderr as it ends. A sweep is one run: rerun to see its spread.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from model.data import DataConfig, Dataset, load_dataset
from model.holdout import checkpoint_forecasts
from model.objectives import per_sample_loss, scaled_log_volatility, variance_of
from model.synth import BARS_PER_DAY, _ar1, _intraday_profile, _to_tick
from model.verdict import overlap, versus
from tuning.search.gate_verdict import NO_WINNER_EXIT
from tuning.search.ledger import Ledger
from tuning.sweep.trial_files import stage_record_best, storage_filesystem
from tuning.sweep_files import LEDGER, MANIFEST, read_test_looks, sweep_paths

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "tuning.cli"]
SPACE = ROOT / "search_spaces" / "smoke.yaml"
OBJECTIVES = ("mse_log", "mse_var", "qlike")
SYNTH_BARS, SYNTH_SEED = 5000, 0  # about the S&P 500 file's 5,031 bars
RELAXED_GATE = 1.2  # gate.ratio_to_baseline of the second try, where no trial beat HAR at the gate


def bars_file(kind: str, folder: Path) -> Path:
    """The bars of `kind` (sp500 | synthetic), written by `mamba-tune data` once."""
    path = folder / f"{kind}.parquet"
    if not path.exists():
        args = ["synth", "--out", path, "--bars", SYNTH_BARS, "--seed", SYNTH_SEED] if kind == "synthetic" else \
            [kind, "--out", path]
        subprocess.run([*CLI, "data", *map(str, args)], cwd=ROOT, check=True, capture_output=True)
    return path


def sweep(bars: Path, objective: str, name: str, out: Path, trials: int, max_epochs: int) -> dict:
    """Run the sweep (again with a relaxed gate where nothing beat HAR); -> {exit, sweep_s, gate, storage}."""
    tried = []
    for gate in (None, RELAXED_GATE):
        storage = out / f"sweeps-{int(time.time())}"
        args = ["sweep", "--data", bars, "--space", SPACE, "--name", name, "--storage", storage,
                "--tracking-uri", f"sqlite:///{out / 'mlflow.db'}", "--trials", trials,
                "--set", f"scheduler.max_epochs={max_epochs}", "--set", "confirm=null",
                "--set", f"data.objective={objective}",
                *(["--set", f"gate.ratio_to_baseline={gate}"] if gate else [])]
        started = time.monotonic()
        done = subprocess.run([*CLI, *map(str, args)], cwd=ROOT, capture_output=True, text=True)
        tried.append({"exit": done.returncode, "sweep_s": round(time.monotonic() - started, 1),
                      "gate": "smoke's (ratio_to_baseline 1.0 at epoch 2)" if gate is None else
                      f"relaxed: ratio_to_baseline {gate} at epoch 2 (no trial beat HAR at smoke's)",
                      "storage": storage, "said": _last_lines(done)})
        if done.returncode != NO_WINNER_EXIT:  # a winner, or an error: no second try
            break
    return {**tried[-1], "tries": len(tried)}


def _last_lines(done: subprocess.CompletedProcess) -> str:
    return " | ".join((done.stdout.strip().splitlines() + done.stderr.strip().splitlines())[-3:])


def winner_forecasts(storage: Path, name: str) -> tuple[dict, DataConfig, Dataset, np.ndarray] | None:
    """(the sweep's look, its data settings, its Dataset, the winner's scaled test forecasts (n_test,)); None
    without a look."""
    paths = sweep_paths(str(storage), name)
    looks = read_test_looks(paths.folder)
    if not looks:
        return None
    look = looks[-1]
    manifest = json.loads((paths.folder / MANIFEST).read_text())
    config = DataConfig.from_dict(manifest["space"]["data"])
    data = load_dataset(manifest["data"], config)
    record = Ledger(paths.folder / LEDGER).records[look["trial_id"]]
    with tempfile.TemporaryDirectory(prefix="bench-objectives-") as tmp:
        best = stage_record_best(storage_filesystem(paths.ray_storage), f"{paths.sweep_storage}/train", record,
                                 Path(tmp) / "best.pt")
        forecasts = checkpoint_forecasts(best, data, data.test_index)  # (n_test,)
    return look, config, data, forecasts


def scored(forecasts: np.ndarray, target: np.ndarray, hars: dict[str, np.ndarray], data: Dataset) -> dict:
    """Under each objective: the forecasts' (n_test,) mean loss against target (n_test,) and the verdict against
    that objective's HAR forecasts (n_test,) on the same target."""
    scale, horizon = data.objective_scale, overlap(data.summary["target"], data.summary["horizon"])
    out = {}
    for name in OBJECTIVES:
        mine = per_sample_loss(name, forecasts, target, scale)  # (n_test,)
        har = per_sample_loss(name, hars[name], target, scale)  # (n_test,)
        judged = versus(mine, har, horizon)
        out[name] = {"model": float(np.mean(mine)), "har": judged["test_loss"], "ratio": judged["ratio"],
                     "dm_stat": judged["dm_stat"], "dm_pvalue": judged["dm_pvalue"]}
    return out


def true_variance(data: Dataset) -> np.ndarray:
    """(n_test,) the synthetic bars' true variance of each test target, in scaled log-volatility units: the mean of
    the generator's per-bar return variance over bars i+1..i+h, times the constant (fitted on the training samples)
    that puts it in the Parkinson proxy's units. The generator is re-run from its seed (model/synth.py draws the
    volatility path first) and checked against the file's closes."""
    n, h = data.summary["n_bars"], data.summary["horizon"]
    rng = np.random.default_rng(SYNTH_SEED)
    log_vol = _ar1(rng.standard_normal(n) * 0.04, phi=0.995)
    sigma = 6e-4 * np.exp(log_vol - 0.08) * _intraday_profile(np.arange(n) % BARS_PER_DAY, BARS_PER_DAY)  # (n,)
    _check_replayed(rng, sigma, data)
    ahead = np.full(n, np.nan)  # [i]: mean variance of bars i+1..i+h
    sums = np.concatenate([[0.0], np.cumsum(sigma**2)])
    ahead[: n - h] = (sums[h + 1:] - sums[1: n - h + 1]) / h
    proxy = variance_of(data.targets[data.train_index].astype(np.float64), data.objective_scale)  # (n_train,)
    units = float(np.mean(proxy) / np.mean(ahead[data.train_index]))  # Parkinson's range: c times the variance
    return scaled_log_volatility(units * ahead[data.test_index], data.objective_scale)


def _check_replayed(rng: np.random.Generator, sigma: np.ndarray, data: Dataset) -> None:
    """The closes the replayed generator gives are the file's: the volatility path is the one the bars came from."""
    from model.bars import read_bars

    n = len(sigma)
    slot = np.arange(n) % BARS_PER_DAY
    returns = sigma * rng.standard_t(4, n) / np.sqrt(2.0)
    overnight = (slot == 0) * rng.standard_normal(n) * 4e-3
    close = _to_tick(np.exp(np.log(5000.0) + np.cumsum(returns + overnight)))
    if not np.array_equal(close, read_bars(data.summary["path"]).close):
        raise SystemExit("error: model/synth.py's generator changed: the replayed volatility path is not the one "
                         "the synthetic bars came from; update bench/objectives.py's true_variance")


def losses_by_candidate(candidates: dict[str, np.ndarray], target: np.ndarray, data: Dataset) -> dict:
    """Per loss: each candidate's mean loss, forecasts (n_test,) against target (n_test,), best first."""
    table = {}
    for name in OBJECTIVES:
        scores = {who: float(np.mean(per_sample_loss(name, f, target, data.objective_scale)))
                  for who, f in candidates.items()}
        table[name] = dict(sorted(scores.items(), key=lambda item: item[1]))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", default=["sp500", "synthetic"], choices=["sp500", "synthetic"])
    parser.add_argument("--objectives", nargs="+", default=list(OBJECTIVES), choices=list(OBJECTIVES))
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--max-epochs", type=int, default=6)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench-objectives")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    results, by_data = [], {}
    for kind in args.data:
        bars = bars_file(kind, out)
        candidates: dict[str, np.ndarray] = {}  # winner_<objective> and har_<objective>: test forecasts (n_test,)
        data = None
        for objective in args.objectives:
            entry, found = swept_and_scored(kind, bars, objective, out, args)
            results.append(entry)
            print(json.dumps(finite(entry)), file=sys.stderr, flush=True)
            if found is not None:
                data, candidates[f"winner_{objective}"], hars = found
                candidates.update({f"har_{name}": har for name, har in hars.items()})
        if data is not None:
            proxy = losses_by_candidate(candidates, data.targets[data.test_index].astype(np.float64), data)
            by_data[kind] = {"n_test": len(data.test_index), "vs_proxy": proxy}
            if kind == "synthetic":
                truth = losses_by_candidate(candidates, true_variance(data), data)
                by_data[kind] |= {"vs_truth": truth, "same_order": {name: list(proxy[name]) == list(truth[name])
                                                                    for name in OBJECTIVES}}
    print(json.dumps(finite({"space": "smoke", "trials": args.trials, "max_epochs": args.max_epochs,
                             "confirm": "none (the winner is the best completed search trial)",
                             "results": results, "rankings": by_data}), indent=1))


def swept_and_scored(kind: str, bars: Path, objective: str, out: Path, args: argparse.Namespace) -> tuple:
    """One sweep and its winner's scores -> (its JSON entry, (its Dataset, its test forecasts (n_test,), each
    objective's HAR test forecasts {objective: (n_test,)}) or None without a winner)."""
    name = f"{kind}_{objective}"
    ran = sweep(bars, objective, name, out, args.trials, args.max_epochs)
    entry = {"data": kind, "objective": objective, "exit": ran["exit"], "sweep_s": ran["sweep_s"],
             "gate": ran["gate"], "tries": ran["tries"]}
    found = winner_forecasts(ran["storage"], name)
    if found is None:
        return {**entry, "winner": None, "said": ran["said"]}, None
    look, config, data, forecasts = found
    hars = {other: load_dataset(bars, replace(config, objective=other)).test_har for other in OBJECTIVES}
    target = data.targets[data.test_index].astype(np.float64)  # (n_test,) the same under every objective
    entry |= {"winner": look["trial_id"], "best_epoch": look["best_epoch"], "n_test": look["n_test"],
              "look_test_loss": look["test_loss"], "vs_proxy": scored(forecasts, target, hars, data)}
    if kind == "synthetic":
        entry["vs_truth"] = scored(forecasts, true_variance(data), hars, data)
    return entry, (data, forecasts, hars)


def finite(value):
    """`value` with every non-finite float in it None: JSON has no NaN."""
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return None if isinstance(value, float) and not math.isfinite(value) else value


if __name__ == "__main__":
    main()
