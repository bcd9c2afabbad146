"""`mamba-tune train`: one training run, with progress, a summary, and its files in --out."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from model.atomic import atomic_path, write_text_atomic
from model.data import load_dataset, refit_dataset
from model.train_config import PRECISIONS
from tuning.bars_file import require_same_bars
from tuning.cli.data_common import add_column_option, add_data_option, inputs_line, parse_columns
from tuning.cli.figures import versus_baselines
from tuning.cli.help import subcommand
from tuning.cli.store_options import add_tracking_uri_option
from tuning.cli.train_look import add_look_options, held_out_by, look_folder, score_test_segment
from tuning.cluster.gpu_ready import require_gpu_ready
from tuning.errors import UsageError
from tuning.search.overrides import described, parse_sets, shown_key, with_sets
from tuning.search.recipe import TrainingRecipe
from tuning.search.searchable import setting_name
from tuning.tracking.objective import loss_units, title
from tuning.yaml_io import read_yaml

if TYPE_CHECKING:
    from model.train import FitResult
    from tuning.tracking.store import TrackingStore

RUN_FILES = ("config.yaml", "metrics.json", "best.pt", "last.pt", "test.json")  # what a run writes into --out
# flags that set train settings
OVERRIDES = ("epochs", "lr", "weight_decay", "batch_size", "device", "precision", "threads")


def add_command(commands: argparse._SubParsersAction) -> None:
    train = subcommand(commands, "train", "train one Forecaster (e.g. the best configuration of a sweep)",
                        ("mamba-tune train --data runs/demo/bars.parquet --out runs/train",
                         "mamba-tune train --data bars.parquet --config best.yaml --out runs/prod "
                         "--register mamba-forecaster"),
                        "Train one Forecaster with AdamW on a file of bars: every epoch's losses in metrics.json, "
                        "last.pt and best.pt in --out, the test segment scored once at the end (test.json); "
                        "--register logs the run to MLflow and registers its model. A sweep's best.yaml trains "
                        "under the schedule its winner was selected with (train.epochs' cosine), stopped at the "
                        "winner's best epoch; on the sweep's own bars its test segment is scored only with --look, "
                        "as a look the sweep counts.")
    add_data_option(train, "Parquet file of bars")
    train.add_argument("--config", type=Path, help="run configuration YAML (data, model, train sections)")
    train.add_argument("--epochs", type=int, help="epochs to train (default: the config's); with a sweep's best.yaml, "
                       "the epoch to stop at under its schedule (default: its best epoch)")
    train.add_argument("--lr", type=float, help="peak learning rate")
    train.add_argument("--weight-decay", type=float, help="AdamW's decoupled weight decay (default: the config's)")
    train.add_argument("--batch-size", type=int, help="samples per optimiser step (default: the config's)")
    train.add_argument("--device", choices=("auto", "cpu", "cuda"),
                       help="where to train (default: the config's; auto: cuda when there is a GPU)")
    train.add_argument("--precision", choices=PRECISIONS,
                       help="fp32 (default), or bf16: autocast with float32 parameters and SSM state (pays on CUDA)")
    train.add_argument("--threads", type=int,
                       help="torch CPU threads (default: the config's, else every core); a sweep's best.yaml pins "
                            "its trial's, so its numbers reproduce")
    add_column_option(train, " (over the --config's data.columns)")
    train.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="set a setting of the configuration by its dotted name, over the --config's, e.g. --set "
                       "model.d_model=64 --set train.warmup_fraction=0.1, the names `sweep --set` and `model --set` "
                       "take; learning_rate is train.lr (repeatable; config.yaml keeps the result)")
    train.add_argument("--out", type=Path, default=Path("runs/train"), help="output folder (default runs/train)")
    train.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    train.add_argument("--refit", action="store_true",
                       help="with a sweep's best.yaml: train on the training and validation segments together "
                            "under its schedule, stopped at its best epoch (--epochs to change it), no validation "
                            "to choose by; best.pt is the last epoch")
    add_look_options(train)
    train.add_argument("--register", metavar="MODEL",
                       help="log the finished run to MLflow and register its model as a new version of MODEL")
    add_tracking_uri_option(train)  # where --register logs the run
    train.add_argument("--experiment", metavar="NAME", help="MLflow experiment for --register (default production)")
    train.add_argument("--alias", help="an alias for the registered version, e.g. challenger (moved from any version "
                       "it named; default: none)")
    train.set_defaults(run=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    config = _recipe(args)
    if config.train.device != "cpu":  # a GPU here that torch cannot use, or kernels that do not load: one line
        require_gpu_ready(config.model.backend)
    held_by = held_out_by(args, config)  # the sweep whose held-out test segment this run would score, or None
    look = look_folder(args, config, held_by)
    store = _open_registry(args)  # before any work: an unreachable store fails in seconds, nothing trained
    from model.checkpoint import load_checkpoint  # training's modules: imported once the input is known good
    from model.train import fit

    data = load_dataset(args.data, config.data)
    schedule_samples = len(data.train_index)  # the trial's epoch: a refit's schedule counts its steps
    refit = config.tuned is not None and config.tuned.refit
    if refit:  # the validation segment joins the training samples
        data = refit_dataset(data)
    if not args.resume:
        config.write_yaml(args.out / "config.yaml", f"mamba-tune train --data {shlex.quote(str(args.data))} "
                                                     f"--config {shlex.quote(str(args.out / 'config.yaml'))}")
    over = "the next bar" if config.data.target == "close" else f"the next {config.data.horizon} bars"
    print(f"data: {data.summary['n_bars']:,} bars, {data.summary['n_train']:,} training, "
          f"{data.summary['n_val']:,} validation and {data.summary['n_test']:,} test samples, "
          f"target {config.data.target} over {over}")
    print(inputs_line(data.n_features, data.summary["features"]))
    print(f"baselines (validation {loss_units(data.objective)}): HAR {data.baselines['har']:.4f}, "
          f"persistence {data.baselines['persistence']:.4f}, train mean {data.baselines['mean']:.4f}")
    stop = config.tuned.last_epoch if config.tuned is not None else config.train.epochs
    if config.tuned is not None:
        at = f"its best epoch, {stop}" if config.tuned.stop_epoch is None else f"epoch {stop} (--epochs)"
        schedule = (f"under trial {config.tuned.trial}'s schedule ({config.train.epochs} epochs' warmup and cosine), "
                    f"stopped at {at}")
        if refit:
            print(f"refit: training on the training and validation segments together {schedule}; val_loss is "
                  "in-sample, best.pt the last epoch")
        else:
            print(f"winner of sweep {config.tuned.sweep}: training {schedule}; best.pt the best epoch by val_loss")
    if config.tuned is not None and config.tuned.unconfirmed:
        print(f"warning: trial {config.tuned.trial} is UNCONFIRMED (best --unconfirmed: sweep {config.tuned.sweep}'s "
              "confirmation runs were incomplete); its registered version says so", file=sys.stderr)
    bar = _ProgressBar(stop)
    # On resume, metrics.json restarts from the checkpoint's own history: exactly the epochs it holds.
    history: list[dict[str, Any]] = load_checkpoint(args.out / "last.pt")["history"] if args.resume else []

    def report(metrics: dict[str, Any], checkpoint: Path | None) -> None:
        history.append(metrics)
        write_text_atomic(args.out / "metrics.json", json.dumps(history, indent=1))
        bar.epoch_done(metrics)

    result = fit(config.train, config.model, data, report=report, checkpoint_dir=args.out, resume=args.resume,
                 progress=bar.batch_done, stop_epoch=stop, schedule_samples=schedule_samples)
    bar.close()
    if refit and result.status != "nan":  # nothing to choose by: the model shipped is the last epoch's
        result = _last_epoch_is_best(args.out, result)
    _print_summary(result, args.out, data.objective)
    if result.status == "nan":
        print(f"error: training diverged at epoch {result.stop_epoch} (a non-finite loss or gradient), "
              "nothing from that epoch was saved; lower --lr", file=sys.stderr)
        return 1
    if code := score_test_segment(args, config, data, result.best_epoch, held_by, look):
        return code
    return _register(args, store, config, result) if store is not None else 0


def _last_epoch_is_best(out: Path, result: FitResult) -> FitResult:
    """A refit's best.pt: a copy of last.pt (written atomically), and its result saying so."""
    with atomic_path(out / "best.pt") as tmp:
        shutil.copyfile(out / "last.pt", tmp)
    last = result.history[-1]
    return dataclasses.replace(result, best_epoch=int(last["epoch"]), best_val_loss=float(last["val_loss"]))


def _register(args: argparse.Namespace, store: TrackingStore, config: TrainingRecipe, result: FitResult) -> int:
    from mlflow.exceptions import MlflowException

    from tuning.tracking.registry import register_run
    from tuning.tracking.store import first_line

    try:
        done = register_run(store, args.experiment, args.register, config, args.data, args.out, result,
                            alias=args.alias)
    except (MlflowException, OSError) as exc:
        retry = ["mamba-tune", "train", "--data", str(args.data), "--out", str(args.out), "--resume",
                 "--register", args.register, "--experiment", args.experiment]
        retry += ["--tracking-uri", args.tracking_uri] if args.tracking_uri else []
        retry += ["--alias", args.alias] if args.alias else []
        print(f"error: registering the model in {store.uri} failed ({first_line(exc)}); the trained run is kept in "
              f"{args.out}, register it once the store works with: {shlex.join(retry)}", file=sys.stderr)
        return 1
    print(f"registered {done.name} version {done.version} (run {done.run_id}, experiment {args.experiment}) "
          f"in {store.describe()}")
    print(f'load it with: mlflow.set_tracking_uri("{store.uri}"); mlflow.pyfunc.load_model("{done.model_uri}")')
    return 0


def _open_registry(args: argparse.Namespace) -> TrackingStore | None:
    """With --register: the name checked and the tracking store opened; None without it."""
    if args.register is None:
        if args.tracking_uri is not None or args.experiment is not None or args.alias is not None:
            raise UsageError("--tracking-uri, --experiment and --alias say where and how --register logs the run, "
                             "and --register is not given; add --register MODEL or drop them")
        return None
    from tuning.tracking.registry import DEFAULT_EXPERIMENT, check_alias, check_model_name
    from tuning.tracking.store import open_store, resolve_store

    check_model_name(args.register)
    if args.alias is not None:
        check_alias(args.alias)
    args.experiment = args.experiment or DEFAULT_EXPERIMENT
    store = resolve_store(args.tracking_uri)
    open_store(store)
    return store


def _require_one_name(pairs: list[str], overrides: dict[str, object]) -> None:
    """UsageError where a flag (--lr) and a --set pair (train.lr, learning_rate) both set one setting."""
    given = {setting_name(shown_key(pair.partition("=")[0])): pair.partition("=")[0] for pair in pairs}
    for name in overrides:
        if f"train.{name}" in given:
            raise UsageError(f"--{name.replace('_', '-')} and --set {shown_key(given[f'train.{name}'])} both set "
                             f"train.{name}; give one of them")


def _recipe(args: argparse.Namespace) -> TrainingRecipe:
    """The configuration: --out's own on --resume, else --config (or defaults) plus overrides."""
    overrides = {name: getattr(args, name) for name in OVERRIDES if getattr(args, name) is not None}
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} is a file, the output must be a folder; choose another --out")
    if args.resume:
        if args.config or overrides or args.column or args.set or args.refit:
            raise UsageError("--resume continues the run exactly as configured in --out/config.yaml (a refit "
                             "included), so it takes no --config, --refit or overrides; drop them, or train into a "
                             "new --out")
        if not (args.out / "last.pt").exists():
            raise UsageError(f"{args.out} holds no checkpoint (last.pt) to resume; start a new run with another --out")
        return TrainingRecipe.from_yaml(args.out / "config.yaml")
    if any((args.out / name).exists() for name in RUN_FILES):
        raise UsageError(f"{args.out} already holds a training run, which is never overwritten; "
                         "pass --resume to continue it or choose another --out")
    config = TrainingRecipe.from_yaml(args.config) if args.config else TrainingRecipe()
    if args.set:  # over the file's values, validated as the file is
        _require_one_name(args.set, overrides)
        values = (read_yaml(args.config, "run configuration") or {}) if args.config else config.to_dict()
        config = TrainingRecipe.from_dict(with_sets(values, parse_sets(args.set)),
                                          described(str(args.config or "the default configuration"), args.set))
    if args.column:
        config = config.replace("data", columns={**config.data.columns, **parse_columns(args.column)})
    stop = overrides.pop("epochs", None) if config.tuned is not None else None  # a winner's: where it stops
    config = config.replace("train", **overrides) if overrides else config
    if args.refit:
        if config.tuned is None:
            raise UsageError("--refit trains a sweep's winner up to its best epoch, which its best.yaml names "
                             "(its tuned: section); pass --config of a best.yaml from `mamba-tune best`")
        config = dataclasses.replace(config, tuned=dataclasses.replace(config.tuned, refit=True))
        require_same_bars(args.data, config.tuned.data_sha256, f"trial {config.tuned.trial} of sweep "
                          f"{config.tuned.sweep}", "refit it with --data of the file the sweep ran on")
    if config.tuned is not None:
        config = _stopped(config, stop)
    from model.training import resolve_device

    try:
        resolve_device(config.train.device)  # before any work: no GPU for --device cuda is bad input
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return config


def _stopped(config: TrainingRecipe, stop: int | None) -> TrainingRecipe:
    """A sweep winner's configuration with where its run stops (`stop`, from --epochs; else its best epoch), under
    its schedule of train.epochs epochs; UsageError when that is past the schedule's end."""
    epochs = config.train.epochs
    if stop is not None and stop < 1:
        raise UsageError(f"--epochs {stop}: the epoch a sweep's winner stops at must be 1 to its schedule's "
                         f"{epochs}; pass one of them")
    tuned = dataclasses.replace(config.tuned, stop_epoch=stop or config.tuned.stop_epoch)
    if tuned.last_epoch > epochs:
        what = (f"--epochs {stop}" if stop else f"trial {tuned.trial}'s best epoch, {tuned.last_epoch},")
        raise UsageError(f"{what} is past the end of its schedule (train.epochs {epochs}): a sweep's winner trains "
                         f"under the schedule it was selected with and stops at its best epoch; pass --epochs "
                         f"{epochs} or fewer, or keep train.epochs at least {tuned.last_epoch}")
    return dataclasses.replace(config, tuned=tuned)


class _ProgressBar:
    """A bar for the batches of the running epoch (on a terminal), a line per finished epoch."""

    def __init__(self, epochs: int) -> None:
        self.epochs = epochs
        self.live = sys.stderr.isatty()

    def batch_done(self, epoch: int, done: int, total: int) -> None:
        if self.live:
            filled = round(30 * done / total)
            sys.stderr.write(f"\repoch {epoch}/{self.epochs} [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}")
            sys.stderr.flush()

    def epoch_done(self, m: dict[str, Any]) -> None:
        if self.live:
            sys.stderr.write("\r\033[K")
        speed = f"{m['samples_per_s']:,.0f} samples/s" if m["epoch"] else "before training (E0)"
        print(f"epoch {m['epoch']:>3}/{self.epochs}  train {m['train_loss']:.4f}  val {m['val_loss']:.4f}  "
              f"best {m['best_val_loss']:.4f}@{m['best_epoch']}  lr {m['lr']:.2e}  {speed}  {m['epoch_s']:.1f}s",
              flush=True)

    def close(self) -> None:
        if self.live:
            sys.stderr.write("\r\033[K")


def _print_summary(result: FitResult, out: Path, objective: str = "mse_log") -> None:
    history = result.history
    if not history:
        return
    e0 = history[0]["val_loss"]
    best = next(m for m in history if m["epoch"] == result.best_epoch)
    rows = [
        ("status", f"{result.status} at epoch {result.stop_epoch}"),
        ("best epoch", f"{result.best_epoch}" + ("  (the initialisation: nothing was learned)"
                                                 if result.best_epoch == 0 else "")),
        ("best val loss", f"{result.best_val_loss:.4f}  (E0 {e0:.4f}, {best['improvement_over_e0']:+.1%} better; "
                          f"{title(objective)})"),
        ("vs baselines", versus_baselines(result.best_val_loss, best)),
        ("overfit ratio", f"{best['overfit_ratio']:.2f} (val/train at the best epoch)"),
        ("files", f"{out}/config.yaml, metrics.json, best.pt, last.pt"),
    ]
    print()
    for label, value in rows:
        print(f"{label:<14} {value}")

