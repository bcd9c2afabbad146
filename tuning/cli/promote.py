"""`mamba-tune promote MODEL --data BARS`: challenger against champion on new bars (tuning/tracking/promotion.py)."""

from __future__ import annotations

import argparse
from typing import Any

from tuning.cli.data_common import add_column_option, add_data_option, parse_columns
from tuning.cli.help import subcommand
from tuning.cli.store_options import add_tracking_uri_option
from tuning.tracking.objective import title


def add_command(commands: argparse._SubParsersAction) -> None:
    promote = subcommand(
        commands, "promote", "make the better of MODEL@challenger and MODEL@champion the champion",
        ("mamba-tune promote mamba-forecaster --data runs/new-bars.parquet",
         "mamba-tune promote mamba-forecaster --data new.parquet --tracking-uri http://mlflow:5000"),
        "Score MODEL@challenger and MODEL@champion on bars that came after the data of both, next to HAR and "
        "persistence on the same samples, by the challenger's objective (QLIKE, MSE of variance or of log volatility: "
        "what its sweep ranked by), with a Diebold-Mariano test of the challenger against each model and "
        "HAR; move @champion to the challenger when its loss is lower (with --alpha A: lower with p < A), or when "
        "there is no champion yet; record the comparison as a run of the experiment production. Exit 0 whichever "
        "wins.")
    promote.add_argument("model", help="the registered model's name")
    add_data_option(promote, "Parquet file of bars after those both versions trained on")
    add_column_option(promote)
    add_tracking_uri_option(promote)  # the store of the registry
    promote.add_argument("--experiment", metavar="NAME", help="MLflow experiment of the comparison run (default "
                         "production)")
    promote.add_argument("--alpha", type=float, metavar="A",
                         help="promote only when the challenger's loss is lower with a Diebold-Mariano p-value "
                              "against the champion below A (0 < A < 1, e.g. 0.05; default: a lower loss promotes)")
    promote.set_defaults(run=cmd_promote)


def cmd_promote(args: argparse.Namespace) -> int:
    from model.bars import read_bars
    from tuning.tracking.promotion import CHALLENGER, CHAMPION, check_alpha, promote, verdict_line
    from tuning.tracking.registry import DEFAULT_EXPERIMENT, check_model_name
    from tuning.tracking.store import open_store, resolve_store

    check_model_name(args.model)
    check_alpha(args.alpha)
    bars = read_bars(args.data, parse_columns(args.column))
    store = resolve_store(args.tracking_uri)
    open_store(store)
    verdict = promote(store, args.model, bars, args.experiment or DEFAULT_EXPERIMENT, args.alpha)
    losses, c = verdict.comparison.losses, verdict.comparison
    print(f"{args.model} on {len(c.scored):,} samples of {args.data} (HAR fitted on the {c.n_fit:,} before them), "
          f"{_losses_in(verdict)}:")
    versions = {CHALLENGER: verdict.challenger, CHAMPION: verdict.champion}
    for label in (CHALLENGER, CHAMPION, "har", "persistence"):
        if label in losses:
            which = f" (version {versions[label].version})" if label in versions else ""
            print(f"  {label + which:<26} {losses[label]:.6g}")
    for label, test in verdict.versus.items():  # negative: the challenger's errors are the smaller
        print(f"  challenger vs {'HAR' if label == 'har' else label:<12} Diebold-Mariano stat {test.stat:+.3f}, "
              f"p {test.pvalue:.3g}")
    print(verdict_line(verdict, args.model))
    print(f"recorded: run {verdict.run_id} (experiment {args.experiment or DEFAULT_EXPERIMENT}) in {store.describe()}")
    return 0


def _losses_in(verdict: Any) -> str:
    """What the printed losses are: "MSE of log volatility (mse_log)", in the target's units where squared errors."""
    objective = verdict.objective
    units = f" in {verdict.challenger.target} units" if objective in ("mse_log", "mse") else ""
    champion = verdict.champion
    other = f"; the champion was chosen by {title(champion.objective)}" if champion is not None and \
        champion.objective != objective else ""
    return f"{title(objective)} ({objective}, the challenger's objective){units}{other}"
