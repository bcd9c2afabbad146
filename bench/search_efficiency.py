"""Search efficiency: the epochs each stopping rule plus the gate spend against running every trial to the end.

Run by hand:  .venv/bin/python bench/search_efficiency.py [--configs 16] [--max-epochs 20]
One fixed set of configurations (the space's initial point, then seeded random samples)
is trained to max epochs once with fit(), recording every epoch's val_loss and seconds
(--save-curves FILE keeps them; --curves FILE replays them again without training).
The same curves are then replayed through the sweep's own scheduler of each scheduler.kind
(tuning/search/scheduler.py: asha, hyperband, median and none, each behind the gate, with the
space's settings, those a kind does not take at their defaults), trials starting in order as
`concurrency` slots free up, in the recorded seconds. Prints one JSON: per scheduler, the epochs
spent against the full budget, and the regret of the chosen trial (the best val_loss among the
trials that ran to max epochs, what the sweep's finalists come from) against the full-budget best.

With --seeds 3 each configuration is also trained on seeds 1 and 2 (what `confirm` does), and:
  selection_stability  over every subset of --finalists configurations and every single seed:
                       how often the winner by that seed's best val_loss is also the winner by
                       the mean over the seeds
  test_regret          the test loss (model/holdout.py, each run's best.pt) of the configuration
                       chosen by the mean over seeds, and of the one chosen by seed 0 alone, against
                       the configuration whose seed-0 run is best on the test segment
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
import itertools
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import optuna  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from ray.tune.schedulers import TrialScheduler  # noqa: E402

from model.data import load_dataset  # noqa: E402
from model.holdout import score_on_test_segment  # noqa: E402
from model.synth import synth_bars  # noqa: E402
from model.train import fit  # noqa: E402
from tuning.search.scheduler import make_scheduler  # noqa: E402
from tuning.search.scheduler_config import KINDS  # noqa: E402
from tuning.search.searcher import optuna_space  # noqa: E402
from tuning.search.space import load_space, with_params  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass
class _Trial:  # what the scheduler reads of a Tune trial
    trial_id: str


def sample_configs(space, count: int, seed: int) -> list[dict]:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    distributions = optuna_space(space)
    configs = [dict(p) for p in space.initial]
    while len(configs) < count:
        configs.append(study.ask(distributions).params)
    return configs[:count]


def replay(curves: list[list[dict]], scheduler: TrialScheduler, concurrency: int) -> list[int]:
    """The epoch each trial ends at under `scheduler`, with `concurrency` trials running at once."""
    stop = [len(c) - 1 for c in curves]
    events: list[tuple[float, int, int]] = []  # (time, trial, epoch) when that epoch's result arrives
    waiting = list(range(len(curves)))

    def start(trial: int, now: float) -> None:
        scheduler.on_trial_add(None, _Trial(str(trial)))
        heapq.heappush(events, (now + curves[trial][0]["epoch_s"], trial, 0))

    for _ in range(min(concurrency, len(waiting))):
        start(waiting.pop(0), 0.0)
    while events:
        now, trial, epoch = heapq.heappop(events)
        result = curves[trial][epoch]
        decision = scheduler.on_trial_result(None, _Trial(str(trial)), result)
        if decision == TrialScheduler.STOP or epoch == len(curves[trial]) - 1:
            stop[trial] = epoch
            scheduler.on_trial_complete(None, _Trial(str(trial)), result)
            if waiting:
                start(waiting.pop(0), now)
        else:
            heapq.heappush(events, (now + curves[trial][epoch + 1]["epoch_s"], trial, epoch + 1))
    return stop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", type=Path, default=ROOT / "search_spaces/smoke.yaml")
    parser.add_argument("--configs", type=int, default=16)
    parser.add_argument("--max-epochs", type=int, default=20)
    parser.add_argument("--bars", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1, help="train seeds per configuration (3: the trust figures)")
    parser.add_argument("--finalists", type=int, default=4, help="configurations per subset for selection stability")
    parser.add_argument("--save-curves", type=Path, help="write the trained curves to this JSON file")
    parser.add_argument("--curves", type=Path, help="replay the curves a --save-curves run wrote, without training")
    args = parser.parse_args()
    space = load_space(args.space)
    space = dataclasses.replace(space, scheduler=dataclasses.replace(space.scheduler, max_epochs=args.max_epochs))
    figures = {}
    if args.curves:
        curves = json.loads(args.curves.read_text())
    else:
        curves, figures = train_curves(space, args)
        if args.save_curves:
            args.save_curves.write_text(json.dumps(curves))
    full_best = min(c[-1]["best_val_loss"] for c in curves)
    print(json.dumps({
        "configs": len(curves), "max_epochs": args.max_epochs, "concurrency": args.concurrency,
        "gate": dataclasses.asdict(space.gate), "epochs_full_budget": len(curves) * args.max_epochs,
        "best_val_loss_full_budget": round(full_best, 5),
        "schedulers": {kind: efficiency(curves, dataclasses.replace(space.scheduler, kind=kind), space.gate,
                                        args.concurrency, full_best) for kind in KINDS},
        "targets": {"epoch_fraction": 0.35, "regret": 0.02}, **figures,
    }, indent=2))


def train_curves(space, args) -> tuple[list[list[dict]], dict]:
    """Each configuration's seed-0 history (every epoch's figures) and, with --seeds > 1, the trust figures."""
    with tempfile.TemporaryDirectory() as folder:
        bars = Path(folder) / "bars.parquet"
        pq.write_table(synth_bars(args.bars, seed=0), bars)
        data = load_dataset(bars, space.run.data)
    configs = sample_configs(space, args.configs, args.seed)
    curves, best_val, test_loss = [], [], []  # [config] -> seed 0's history; [config][seed] -> figures
    for params in configs:
        best_val.append([])
        test_loss.append([])
        for seed in range(args.seeds):
            run = with_params(space.run, {**params, "seed": seed}).replace("train", epochs=args.max_epochs)
            with tempfile.TemporaryDirectory() as out:
                result = fit(run.train, run.model, data, checkpoint_dir=out)
                test = score_on_test_segment(Path(out) / "best.pt", data)["test_loss"] if result.history else math.inf
            if seed == 0:
                curves.append(result.history)  # a diverged trial's curve ends at its last finite epoch
            best_val[-1].append(result.best_val_loss)
            test_loss[-1].append(test)
    return curves, trust_figures(best_val, test_loss, args.finalists, data) if args.seeds > 1 else {}


def efficiency(curves: list[list[dict]], scheduler, gate, concurrency: int, full_best: float) -> dict:
    """One scheduler's figures on the curves: the epoch each trial ended at, the epochs spent (of the full
    budget), the trials that ran to max epochs, the chosen one among them and its regret against the best."""
    stop = replay(curves, make_scheduler(scheduler, gate), concurrency)
    completed = [i for i, c in enumerate(curves) if stop[i] == scheduler.max_epochs]
    chosen = min(completed, key=lambda i: curves[i][-1]["best_val_loss"], default=None)
    kept_best = curves[chosen][-1]["best_val_loss"] if chosen is not None else float("inf")
    return {
        "scheduler": scheduler.to_dict(), "epochs_with_stopping": sum(stop),
        "epoch_fraction": round(sum(stop) / (len(curves) * scheduler.max_epochs), 3), "stop_epochs": stop,
        "completed": len(completed), "chosen_trial": chosen, "best_val_loss_with_stopping": round(kept_best, 5),
        "regret": round(kept_best / full_best - 1, 4),
    }


def trust_figures(best_val: list[list[float]], test_loss: list[list[float]], finalists: int, data) -> dict:
    """Selection stability of one seed against the mean over seeds, and the test-loss regret of each choice."""
    mean_val = [statistics.fmean(v) for v in best_val]
    subsets = list(itertools.combinations(range(len(best_val)), min(finalists, len(best_val))))
    agree = [min(s, key=lambda i: best_val[i][seed]) == min(s, key=lambda i: mean_val[i])
             for s in subsets for seed in range(len(best_val[0]))]
    seed0_test = [t[0] for t in test_loss]
    best_test = min(seed0_test)
    by_mean, by_one = min(range(len(mean_val)), key=mean_val.__getitem__), min(
        range(len(best_val)), key=lambda i: best_val[i][0])
    return {
        "seeds": len(best_val[0]), "finalists_per_subset": finalists, "subsets": len(subsets),
        "selection_stability": round(sum(agree) / len(agree), 3),
        "test_loss_chosen_by_mean": round(seed0_test[by_mean], 5), "test_loss_chosen_by_seed_0": round(
            seed0_test[by_one], 5), "test_loss_best_on_test": round(best_test, 5),
        "test_regret_by_mean": round(seed0_test[by_mean] / best_test - 1, 4),
        "test_regret_by_seed_0": round(seed0_test[by_one] / best_test - 1, 4),
        "test_baselines": {k: round(v, 5) for k, v in data.test_baselines.items()},
    }


if __name__ == "__main__":
    main()
