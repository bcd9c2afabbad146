"""The commands as Python functions: each takes the CLI's arguments as keywords (by their argparse names: --tracking-uri
is tracking_uri; None leaves one to the CLI's default), runs the command as `mamba-tune` does (mamba_tune/running.py)
and returns what it wrote, read back (mamba_tune/results.py). docs/python-api.md documents each."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from os import PathLike
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from mamba_tune.errors import CommandError, NoWinner, error_for
from mamba_tune.progress import BAR, Progress, callback_for, events_to, in_notebook
from mamba_tune.results import BarsResult, BestResult, PromoteResult, RegisteredModel, SweepResult, TrainResult
from mamba_tune.running import Ran, raise_for, run
from mamba_tune.sweep_result import har_verdict, no_winner_answer, read_sweep
from tuning.sweep_files import MANIFEST, latest_look, sweep_paths

PathText = str | PathLike
Sets = Mapping[str, Any] | Sequence[str] | str | None  # {"trials": 2}, ["trials=2"] or "trials=2"
# The API's own keywords, beside each command's CLI arguments (tests/api: every other keyword is a CLI argument)
API_ONLY = ("progress", "quiet")


def sweep(data: PathText, space: PathText, *, name: str | None = None, name_from_ray_job: bool = False,
          sampler: str | None = None, trials: int | None = None, max_epochs: int | None = None,
          precision: str | None = None, memory_budget: float | None = None, study_url: str | None = None,
          column: Sets = None, set: Sets = None, warm_start: str | None = None,
          warm_start_storage: PathText | None = None, storage: PathText | None = None, address: str | None = None,
          tracking_uri: str | None = None, dashboard: bool = False, notify: str | None = None,
          progress: Progress = None, quiet: bool | None = None) -> SweepResult:
    """`mamba-tune sweep`: tune the space on the bars; its SweepResult. Raises InputError (nothing written),
    NoWinner, Interrupted or CommandFailed (each with `.result`, the sweep as far as it got)."""
    keywords = _cli_keywords(locals())
    return _sweep_command(("sweep",), keywords, progress, quiet)


def resume(name: str, *, trials: int | None = None, storage: PathText | None = None, address: str | None = None,
           tracking_uri: str | None = None, dashboard: bool = False, notify: str | None = None,
           progress: Progress = None, quiet: bool | None = None) -> SweepResult:
    """`mamba-tune resume`: continue the sweep, or extend it to `trials` search trials; its SweepResult."""
    keywords = _cli_keywords(locals())
    return _sweep_command(("resume",), keywords, progress, quiet)


def best(name: str, *, storage: PathText | None = None, out: PathText | None = None, force: bool = False,
         register: str | None = None, ensemble: bool = False, alias: str | None = None, unconfirmed: bool = False,
         no_look: bool = False, tracking_uri: str | None = None, experiment: str | None = None,
         quiet: bool = False) -> BestResult:
    """`mamba-tune best`: write the winner's configuration (and register its model with `register=`)."""
    ran = run(("best",), _cli_keywords(locals()), quiet=quiet)
    raise_for(ran)
    args = ran.args
    path = args.out or sweep_paths(args.storage, args.name).folder / "best.yaml"
    config = yaml.safe_load(Path(path).read_text())
    tuned = config["tuned"]
    look = latest_look(sweep_paths(args.storage, args.name).folder, tuned["trial"])
    return BestResult(args.name, Path(path), config, tuned["trial"], float(tuned["best_val_loss"]), har_verdict(look),
                      _registered(args) if args.register else None)


def train(data: PathText, *, config: PathText | None = None, epochs: int | None = None, lr: float | None = None,
          weight_decay: float | None = None, batch_size: int | None = None, device: str | None = None,
          precision: str | None = None, threads: int | None = None, column: Sets = None, set: Sets = None,
          out: PathText | None = None, resume: bool = False, refit: bool = False, look: bool = False,
          storage: PathText | None = None, register: str | None = None, tracking_uri: str | None = None,
          experiment: str | None = None, alias: str | None = None, quiet: bool = False) -> TrainResult:
    """`mamba-tune train`: one training run into `out`; its TrainResult."""
    ran = run(("train",), _cli_keywords(locals()), quiet=quiet)
    raise_for(ran)
    out_dir = Path(ran.args.out)
    recipe = yaml.safe_load((out_dir / "config.yaml").read_text())
    history = pd.DataFrame(json.loads((out_dir / "metrics.json").read_text()))
    last = history.iloc[-1]
    refit = bool((recipe.get("tuned") or {}).get("refit"))  # best.pt is the last epoch: nothing to choose by
    best_epoch, best_loss = (last["epoch"], last["val_loss"]) if refit else (last["best_epoch"], last["best_val_loss"])
    test_file = out_dir / "test.json"
    return TrainResult(out_dir, recipe, history, int(best_epoch), float(best_loss), out_dir / "best.pt",
                       out_dir / "last.pt", json.loads(test_file.read_text()) if test_file.exists() else None,
                       _registered(ran.args) if ran.args.register else None)


def promote(model: str, data: PathText, *, column: Sets = None, tracking_uri: str | None = None,
            experiment: str | None = None, alpha: float | None = None, quiet: bool = False) -> PromoteResult:
    """`mamba-tune promote`: challenger against champion on new bars; the comparison run it recorded."""
    ran = run(("promote",), _cli_keywords(locals()), quiet=quiet)
    raise_for(ran)
    return _promotion(ran.args)


def import_bars(source: PathText, out: PathText, *, column: Sets = None, symbol: str | None = None,
                sort: bool = False, epoch_unit: str | None = None, timezone: str | None = None,
                time_format: str | None = None, decimal: str | None = None, force: bool = False,
                quiet: bool = False) -> BarsResult:
    """`mamba-tune data import`: your own bars (CSV or Parquet, any layout) into the canonical Parquet file."""
    ran = run(("data", "import"), _cli_keywords(locals()), quiet=quiet)
    raise_for(ran)
    return _bars(ran.args.out)


def synth_bars(out: PathText, *, bars: int | None = None, seed: int | None = None, bars_per_day: int | None = None,
               after: PathText | None = None, force: bool = False, quiet: bool = False) -> BarsResult:
    """`mamba-tune data synth`: synthetic ES-like 5-minute futures bars into a Parquet file."""
    ran = run(("data", "synth"), _cli_keywords(locals()), quiet=quiet)
    raise_for(ran)
    return _bars(ran.args.out)


def _cli_keywords(given: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in given.items() if key not in API_ONLY}


def _sweep_command(command: tuple[str, ...], keywords: dict[str, Any], progress: Progress,
                   quiet: bool | None) -> SweepResult:
    """Run `sweep` or `resume` with its progress to `progress`; read the sweep back from its files, under the name the
    command settled (settled_name)."""

    def around(args: Any) -> AbstractContextManager[Any]:
        return events_to(callback_for(progress, lambda: _trials(args)))  # asked at a first trial: name settled

    bar = progress == BAR or (progress is None and in_notebook())
    ran = run(command, keywords, quiet=bar if quiet is None else quiet, around=around)
    storage, name = ran.args.storage, settled_name(ran.args)
    if ran.code == 0:
        return read_sweep(storage, name)
    message = no_winner_answer(storage, name) if ran.code == NoWinner.exit_code and name is not None else None
    raise error_for(ran.code, message or _message(ran), _readable_sweep(storage, name))


def settled_name(args: Any) -> str | None:
    """The name the sweep runs under, as the command settled it: resume's is the one given; sweep's (--name, the Ray
    job's, or the space's own after --set, else its file's) is the one cmd_sweep keeps on its arguments. None: the
    command stopped before it settled one."""
    return args.name if args.command == "resume" else getattr(args, "sweep_name", None)


def _trials(args: Any) -> tuple[int, int]:
    """(search trials the sweep asks for, those its ledger holds as ended), from its manifest (written before the
    first trial starts, and by `resume --trials N` extended before it goes on) and ledger."""
    from tuning.search.finalists import SEARCH
    from tuning.search.ledger import Ledger
    from tuning.sweep.manifest import read_manifest
    from tuning.sweep_files import LEDGER

    paths = sweep_paths(args.storage, settled_name(args))
    ended = sum(r.stage == SEARCH for r in Ledger(paths.folder / LEDGER).records.values())
    return read_manifest(paths).trials, ended


def _readable_sweep(storage: str | None, name: str | None) -> SweepResult | None:
    """The sweep as far as it got, for an error's `result`; None where it never wrote its manifest."""
    if storage is None or name is None or not (sweep_paths(storage, name).folder / MANIFEST).is_file():
        return None
    try:
        return read_sweep(storage, name)
    except Exception:  # noqa: BLE001 - the error raised says what went wrong; this is its extra
        return None


def _message(ran: Ran) -> str:
    return ran.error or f"mamba-tune {ran.args.command} exited with code {ran.code}"


def _registered(args: Any) -> RegisteredModel | None:
    """The version `--register` made: the one its alias names, else the newest of the model."""
    from tuning.tracking.store import resolve_store

    store = resolve_store(args.tracking_uri or _sweep_tracking_uri(args))
    client = store.client()
    if args.alias:
        version = client.get_model_version_by_alias(args.register, args.alias)
    else:
        version = max(client.search_model_versions(f"name = '{args.register}'"), key=lambda v: int(v.version))
    return RegisteredModel(args.register, str(version.version), args.alias, version.run_id, store.uri)


def _sweep_tracking_uri(args: Any) -> str | None:
    """`best --register`'s default store: the one the sweep logged to."""
    if args.command != "best":
        return None
    from tuning.sweep.manifest import read_manifest

    return read_manifest(sweep_paths(args.storage, args.name)).tracking_uri


def _promotion(args: Any) -> PromoteResult:
    """The promote run `promote` just recorded for the model (the newest of its experiment), read back."""
    from tuning.tracking.registry import DEFAULT_EXPERIMENT
    from tuning.tracking.store import resolve_store

    store = resolve_store(args.tracking_uri)
    client = store.client()
    experiment = client.get_experiment_by_name(args.experiment or DEFAULT_EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id], f"tags.`mamba_tune.role` = 'promote' and "
                              f"tags.`mamba_tune.model` = '{args.model}'", order_by=["attributes.start_time DESC"],
                              max_results=1)
    if not runs:
        raise CommandError(f"promote {args.model}: the comparison run it recorded is not in {store.uri}")
    found = runs[0]
    params, tags = found.data.params, found.data.tags
    champion = params.get("champion_version")
    return PromoteResult(args.model, tags.get("mamba_tune.promoted") == "True", params["challenger_version"],
                         None if champion in (None, "none") else champion, dict(found.data.metrics),
                         tags.get("mlflow.note.content", ""), found.info.run_id, store.uri)


def _bars(out: Path) -> BarsResult:
    import pyarrow.parquet as pq

    from tuning.bars_import.canonical import provenance_of

    return BarsResult(Path(out), pq.read_metadata(out).num_rows, provenance_of(out))
