"""`mamba-tune sweep` and `resume`: run a sweep, continue it (`best`, its winner, is tuning/cli/best.py).

Ray, Tune and Optuna are imported only by the commands that use them.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from typing import Any

from tuning.cli.data_common import add_column_option, add_data_option, inputs_line, parse_columns, require_bars_file
from tuning.cli.help import subcommand
from tuning.cli.store_options import add_storage_option, add_tracking_uri_option
from tuning.cli.sweep_end import incomplete, no_winner
from tuning.cli.sweep_eta import SweepClock
from tuning.cli.sweep_flags import add_setting_flags, described_with_flags, flag_settings, with_flag_sets
from tuning.cli.sweep_gpus import settle_gpus
from tuning.cli.sweep_name import ray_job_name
from tuning.cli.sweep_notify import add_notify_option, notified, notify_url, resume_notify_url
from tuning.cli.sweep_progress import SweepProgress
from tuning.cli.sweep_report import print_finalists, print_leaderboard, print_test_look
from tuning.cli.sweep_signals import handle_sigterm_as_ctrl_c, stops_as_ctrl_c_on_sigterm
from tuning.cli.sweep_warm_start import (
    add_warm_start,
    add_warm_start_options,
    warm_plan,
    warm_source,
)
from tuning.cluster.ray_address import ray_address
from tuning.errors import UsageError
from tuning.search.eta import SweepBudget, confirm_runs
from tuning.search.finalists import CONFIRM, SEARCH, winner
from tuning.search.gate_verdict import NO_WINNER_EXIT, gate_verdict
from tuning.search.ledger import Ledger
from tuning.search.overrides import parse_sets, placed, with_sets
from tuning.search.resources import fullest_plan, gpus_on
from tuning.search.shipped_spaces import space_path
from tuning.search.space import AUTO, default_name, parse_space
from tuning.search.study_store import check_study_url
from tuning.sweep.manifest import SweepManifest, check_new, read_manifest
from tuning.sweep.ray_version import check_ray_version
from tuning.sweep_files import (
    LEDGER,
    RAY_LOG,
    SweepPaths,
    is_uri,
    storage_flag,
    sweep_paths,
    unwritable_reason,
    valid_name,
)
from tuning.tracking.objective import loss_units
from tuning.tracking.store import open_store, resolve_store
from tuning.yaml_io import read_yaml

# What `sweep` and `resume` exit with, listed in their --help (docs/sweeps.md says the same)
EXIT_CODES = ((0, "the sweep ended with a winner (its look at the test segment taken)"),
              (1, "it ended without one for a failure: every trial failed, a confirmation run or the look at the test "
                  "segment failed (the error line says why; `resume` tries again)"),
              (2, "bad input: the line says what, the rule and the fix; nothing was written"),
              (NO_WINNER_EXIT, "no trial passed the gate: every trial ran, none beat it, so there is no winner; the "
                               "sweep says how the best did against HAR at the gate's epoch, and what may change it"),
              (130, "interrupted (Ctrl-C, SIGTERM): `mamba-tune resume NAME` continues it"))


def add_commands(commands: argparse._SubParsersAction) -> None:
    sweep = subcommand(commands, "sweep", "tune learning rate, weight decay, batch size or any setting with Ray Tune",
                        ("mamba-tune sweep --data runs/demo/bars.parquet --space search_spaces/smoke.yaml",
                         "mamba-tune sweep --data bars.parquet --space search_spaces/default.yaml --address auto "
                         "--storage s3://bucket/sweeps --tracking-uri http://mlflow:5000",
                         "mamba-tune sweep --data bars.parquet --space default --name wider --warm-start smoke  "
                         "# from what sweep smoke learned"),
                        "Tune the settings the space searches (learning rate, weight decay, batch size, and any "
                        "model, data or train setting by its dotted name): Ray Tune runs each trial under Ray Train, "
                        "Optuna's sampler (TPE unless the space names another) picks the parameters, the stopping "
                        "rule (ASHA unless scheduler.kind names another) and the epoch gate stop poor trials, the "
                        "best are confirmed over seeds and folds, and the winner is scored once on the test segment. "
                        "Every trial is logged to MLflow.", EXIT_CODES)
    add_data_option(sweep, "Parquet file of bars")
    sweep.add_argument("--space", required=True, type=space_path,
                       help="search space: a shipped one by name (e.g. smoke) or a YAML file (e.g. my-space.yaml)")
    names = sweep.add_mutually_exclusive_group()
    names.add_argument("--name", help="the sweep's name (default: the space's name)")
    names.add_argument("--name-from-ray-job", action="store_true",
                       help="name the sweep after the Ray job that runs it, its submission id (a RayJob's: its "
                       "name and a suffix KubeRay adds), so that each submission of one entrypoint is a sweep of "
                       "its own")
    add_setting_flags(sweep)  # --sampler, --trials, --max-epochs, --precision: each the same as its --set
    sweep.add_argument("--memory-budget", type=float, metavar="MB",
                       help="memory a trial worker may use for training: batch sizes whose measured peak exceeds it "
                       "are dropped before the sweep (default on GPU: the worker's share of its GPU; on CPU: no probe)")
    sweep.add_argument("--study-url", metavar="URL",
                       help="the Optuna study's database, postgresql://HOST[:PORT]/DB (password from PGPASSWORD or "
                       "~/.pgpass): a sweep on a cluster then outlives its head (default: SQLite in the sweep folder)")
    add_column_option(sweep, ": sets data.columns in the space (a file of another layout: `data import`)")
    sweep.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="set a setting of the space by its dotted name, over the file's, e.g. --set "
                       "scheduler.max_epochs=20 --set search.learning_rate.high=3e-3 (repeatable; the manifest and "
                       "MLflow keep the space as run)")
    add_warm_start_options(sweep)  # --warm-start, --warm-start-storage
    _storage_and_address(sweep)
    sweep.set_defaults(run=cmd_sweep)

    resume = subcommand(commands, "resume", "continue an interrupted sweep, or extend one by more trials",
                         ("mamba-tune resume smoke", "mamba-tune resume smoke --storage /shared/sweeps",
                          "mamba-tune resume smoke --trials 12  # 12 search trials in all"),
                         "Continue an interrupted sweep where it stopped: finished trials are kept, interrupted "
                         "ones resume from their last checkpoint, the same Optuna study and MLflow runs go on. "
                         "With --trials N, a sweep (finished or not) goes on to N search trials: TPE learns from "
                         "every trial the study holds, ASHA's rungs hold every trial run so far.", EXIT_CODES)
    resume.add_argument("name", help="the sweep's name")
    resume.add_argument("--trials", type=int, metavar="N", help="search trials in all, more than the sweep has "
                        "asked for (default: those it asked for)")
    _storage_and_address(resume)
    resume.set_defaults(run=cmd_resume)


def _storage_and_address(parser: argparse.ArgumentParser) -> None:
    add_storage_option(parser, "where the sweep keeps its results and checkpoints")
    parser.add_argument("--address", help="join a running Ray cluster (auto or HOST:PORT; default: RAY_ADDRESS, which "
                        "`ray job submit` sets, else a local Ray)")
    add_tracking_uri_option(parser)
    parser.add_argument("--dashboard", action="store_true",
                        help="start the local Ray with its dashboard, http://127.0.0.1:8265 (off by default: it "
                        "costs CPU; a cluster's dashboard is its own)")
    add_notify_option(parser)


@stops_as_ctrl_c_on_sigterm  # `kill`, `ray job stop`: interrupted, resumable, exit 130
def cmd_sweep(args: argparse.Namespace) -> int:
    flags = flag_settings(args)  # --trials N and the like: the --set pairs they stand for
    space_values = with_sets(read_yaml(args.space, "search space"), parse_sets(with_flag_sets(args.set, flags)))
    space_values = _with_columns(space_values, parse_columns(args.column))
    space = parse_space(space_values, described_with_flags(str(args.space), flags, args.set),  # all before Ray
                        name=default_name(args.space))
    notify = notify_url(args.notify, space)
    # the webhook URL is a secret: from here on in no space, so in no file, Ray Tune state or MLflow run
    space_values, space = {k: v for k, v in space_values.items() if k != "notify"}, replace(space, notify=None)
    name = args.sweep_name = ray_job_name() if args.name_from_ray_job else args.name or space.name  # the API reads it
    if not valid_name(name):
        raise UsageError(f"--name {name!r}: use letters, digits, '-' or '_'")
    trials = space.trials  # --trials is the space's trials (the space checks it against confirm.top_k)
    if args.memory_budget is not None and not (args.memory_budget > 0 and math.isfinite(args.memory_budget)):
        raise UsageError(f"--memory-budget must be a positive number of MB, got {args.memory_budget:g}")
    require_bars_file(args.data)  # a path, or an s3:// or gs:// object: asked for before anything starts
    if args.study_url is not None:
        check_study_url(args.study_url)  # before anything is imported or written
    paths = replace(sweep_paths(args.storage, name), study=args.study_url)
    check_new(paths)
    warm = warm_source(args, space)  # a sweep that is not there, or searched nothing this one does: refused now
    ray_address(args.address)  # an address no Ray answers at: refused before the bars are read

    from model.bars_enough import TooFewBars, require_enough_bars
    from model.data import load_dataset
    from tuning.cli.spaces_for_bars import with_spaces_that_fit

    # Bad bars are refused first: reading them needs neither Ray nor MLflow (seconds sooner).
    try:
        data = load_dataset(args.data, space.run.data)
        if space.confirm is not None and space.confirm.folds > 1:  # the earliest fold trains on the fewest bars
            require_enough_bars(args.data, data.summary["n_bars"], replace(space.run.data, fold=space.confirm.folds))
    except TooFewBars as exc:  # the changes that fit, and the shipped spaces these bars are enough for (as data check)
        raise with_spaces_that_fit(exc) from None
    check_ray_version()  # a Ray older than mamba-tune admits: before anything of Ray Train is imported

    from tuning.bars_file import bars_identity
    from tuning.cluster.shared_storage import check_shared
    from tuning.sweep import session
    from tuning.sweep.backend_choice import check_backend_at_start
    from tuning.sweep.memory_probe import pack_trials, restrict_space, run_probe

    if reason := unwritable_reason(paths.folder):
        raise UsageError(f"--storage {args.storage}: {reason}; choose another --storage")
    store = resolve_store(args.tracking_uri)
    client = open_store(store)  # an unreachable tracking server fails here, in seconds, before Ray starts
    warn_if_only_here(paths)
    started = session.start_ray(args.address, dashboard=args.dashboard,
                                trial_path_setting=space.resources.trial_path)
    handle_sigterm_as_ctrl_c()  # ray.init's own handler would end the sweep at once
    _say_dashboard(session, started, args.dashboard)
    try:
        views = session.cluster_views()  # the nodes now and, with an autoscaler, fully scaled: read once
        space_values, space = settle_gpus(space_values, space, gpus_on(views), str(args.space), local=started)
        plan = fullest_plan(space.resources, views)
        check_backend_at_start(space.run.model.backend, plan.gpus_per_worker > 0)  # GPU here: torch, kernels
        check_shared(paths.ray_storage)  # a node-local folder on a cluster: refused before anything is written
        probe = run_probe(space, data, plan, args.memory_budget)
        if probe is not None:
            print(probe.describe(), flush=True)
            space_values = restrict_space(space_values, probe)  # raises when no batch size fits
            if space.resources.gpus_per_trial == AUTO:
                space_values = pack_trials(space_values, probe)
            space = parse_space(space_values, str(args.space))
            plan = fullest_plan(space.resources, views)
        bars = bars_identity(args.data, data.summary)  # the bars file hashed once, for the warm start and manifest
        warm_start = warm_plan(warm, space, bars["sha256"], data)  # planned from what was read: nothing written yet
        if warm_start is not None:
            add_warm_start(paths, warm_start)  # into the new study; a failed add leaves nothing
        manifest = session.write_manifest(paths, args.data, space_values, trials, data, store.uri, probe,
                                          webhook_set=notify is not None, bars=bars,
                                          warm_start=warm_start.to_dict() if warm_start is not None else None)
        return notified(notify, lambda: _run(session, paths, space, data, manifest, plan, (store, client), args.storage,
                                             resume=False), paths, trials, store, manifest.sweep_id,
                        _resume_hint(paths, args.storage), space.run.data.loss)
    finally:
        if started:
            session.ray.shutdown()


@stops_as_ctrl_c_on_sigterm
def cmd_resume(args: argparse.Namespace) -> int:
    from tuning.cli.listing import no_sweep_named
    from tuning.sweep.driver_mark import running_driver
    from tuning.sweep_files import MANIFEST

    paths = sweep_paths(args.storage, args.name)
    if not is_uri(args.storage) and not (paths.folder / MANIFEST).is_file():  # a URI storage's records are fetched
        raise no_sweep_named(args.name, args.storage)  # as `best` and `ui`: the sweeps found, and their --storage
    manifest = read_manifest(paths)  # what can be refused is, before Ray, MLflow and torch are imported
    if driver := running_driver(paths.folder):
        raise UsageError(f"sweep {args.name!r} is running ({driver}); wait for it to end, or stop it, then resume")
    if args.trials is not None and args.trials < manifest.trials:
        raise UsageError(f"--trials {args.trials} is fewer than the {manifest.trials} trials sweep {args.name!r} has "
                         "asked for; a sweep is extended, never cut: give more, or leave --trials out")

    check_ray_version()  # a Ray older than mamba-tune admits: before anything of Ray Train is imported

    from tuning.cluster.shared_storage import check_shared
    from tuning.sweep import session
    from tuning.sweep.backend_choice import check_backend_at_start
    from tuning.sweep.confirmation import confirmation_runs

    paths, space, data = session.load_for_resume(paths, manifest)
    notify = resume_notify_url(args.notify, manifest)
    if manifest.legacy_webhook is not None:  # an older version kept the URL: told this once, kept no more
        session.drop_legacy_webhook(paths, manifest)
    if args.trials is not None and args.trials > manifest.trials:
        manifest = session.extend(paths, manifest, args.trials)  # kept before anything runs
    store = resolve_store(args.tracking_uri or manifest.tracking_uri)
    finished = Ledger(paths.folder / LEDGER).records
    searched_all = sum(r.stage == SEARCH for r in finished.values()) >= manifest.trials
    if searched_all and not confirmation_runs(paths.folder / LEDGER, space):
        return notified(notify, lambda: _finish(session, store, paths, manifest, space, data, list(finished.values()),
                                                args.storage), paths, manifest.trials, store, manifest.sweep_id,
                        _resume_hint(paths, args.storage), space.run.data.loss)
    client = open_store(store)  # an unreachable tracking server fails here, before Ray starts
    started = session.start_ray(args.address, dashboard=args.dashboard,
                                trial_path_setting=space.resources.trial_path)
    handle_sigterm_as_ctrl_c()  # ray.init's own handler would end the sweep at once
    _say_dashboard(session, started, args.dashboard)
    try:
        plan = session.cluster_plan(space)
        check_backend_at_start(space.run.model.backend, plan.gpus_per_worker > 0)
        check_shared(paths.ray_storage)
        return notified(notify, lambda: _run(session, paths, space, data, manifest, plan, (store, client), args.storage,
                                             resume=True), paths, manifest.trials, store, manifest.sweep_id,
                        _resume_hint(paths, args.storage), space.run.data.loss)
    finally:
        if started:
            session.ray.shutdown()


def _finish(session: Any, store: Any, paths: SweepPaths, manifest: SweepManifest, space: Any, data: Any,
            records: list, storage: str) -> int:
    """`resume` of a sweep whose trials and confirmation runs have all ended: only what its driver left undone
    (the look at the test segment, MLflow writes it saved), without Ray."""
    session.end_lost_trials(paths)
    done = session.finish(store, paths, manifest, space, data)
    _unsent(done.tracking_unsent)
    print_leaderboard(records, data.objective)
    print_finalists(records, space)
    if not done.looked:
        print(f"sweep {paths.name} has finished all {manifest.trials} trials and its confirmation runs; "
              "nothing to resume")
        verdict = gate_verdict(records, space.gate, space.scheduler.max_epochs)
        if verdict is not None:  # said again
            return no_winner(records, verdict, space, paths.folder, (store, paths.name, manifest.sweep_id))
        return 0
    if done.look_failure:
        print(f"error: test segment: {done.look_failure}; `mamba-tune resume {paths.name}{storage_flag(storage)}` "
              "tries again", file=sys.stderr)
        return 1
    print(f"sweep {paths.name} had finished its trials and confirmation runs but not its look at the test segment: "
          "taken now")
    print_test_look(done.test, paths.folder)
    return 0


def warn_if_only_here(paths: SweepPaths) -> None:
    """One warning line when the sweep's storage is a URI, which outlives this machine, and its study is SQLite on
    it, which does not: only this machine could resume the sweep (tuning/sweep/record_copies.py)."""
    if is_uri(paths.ray_storage) and paths.study is None:
        print(f"warning: the Optuna study is SQLite in {paths.folder}, on this machine, and --storage is a URI: "
              "if this machine is lost, no other can resume the sweep; give --study-url postgresql://HOST/DB for "
              "one that can", file=sys.stderr, flush=True)


def _with_columns(values: Any, columns: dict[str, str]) -> Any:
    """The space's values with --column's pairs in data.columns (over the space's own), where the space gives that
    setting (run.data.columns in a space that writes it under `run:`; tuning/search/overrides.py: placed): the
    manifest keeps them, so `resume` reads the bars the same."""
    if not columns or not isinstance(values, dict):
        return values  # parse_space says what is wrong with the YAML
    where = placed(values, ("data", "columns"))
    given: Any = values
    for name in where:
        given = given.get(name) if isinstance(given, dict) else None
    mapped = {**given, **columns} if isinstance(given, dict) else columns
    return with_sets(values, [(where, mapped)])


def _run(session: Any, paths: Any, space: Any, data: Any, manifest: SweepManifest, plan: Any, tracking: tuple,
         storage: str, resume: bool) -> int:
    """Run (or resume) the sweep and print its outcome; Ctrl-C at any point says how to resume it."""
    from tuning.cli.ray_output import ray_output_to
    from tuning.sweep.driver_mark import driving

    resume_hint = _resume_hint(paths, storage)
    try:
        # `mamba-tune list` says running while this process drives it; Ray's own lines go to ray.log
        with driving(paths.folder), ray_output_to(paths.folder / RAY_LOG):
            return _run_sweep(session, paths, space, data, manifest, plan, tracking, storage, resume, resume_hint)
    except KeyboardInterrupt:  # before the sweep could say how many trials finished
        print(f"interrupted; continue with {resume_hint}", file=sys.stderr)
        return 130


def _run_sweep(session: Any, paths: Any, space: Any, data: Any, manifest: SweepManifest, plan: Any, tracking: tuple,
               storage: str, resume: bool, resume_hint: str) -> int:
    from tuning.sweep.backend_choice import backend_line
    from tuning.sweep.trial_path import trial_path

    trials, (store, client) = manifest.trials, tracking
    summary = data.summary
    print(f"sweep {paths.name}: {trials} trials, {plan.describe()}")
    print(f"data: {summary['n_bars']:,} bars, {summary['n_train']:,} training / {summary['n_val']:,} validation / "
          f"{summary['n_test']:,} test samples (the sweep never reads the test segment)")
    print(inputs_line(data.n_features, summary["features"]))
    print(f"baselines (validation {loss_units(data.objective)}): HAR {data.baselines['har']:.4f}, "
          f"persistence {data.baselines['persistence']:.4f}, train mean {data.baselines['mean']:.4f}")
    print(f"stopping: {space.scheduler.describe()}, gate at epoch {space.gate.epoch}")
    print(f"trial path: {trial_path(space.resources.trial_path).describe()}")
    print(backend_line(space.run.model.backend, plan.gpus_per_worker > 0))  # which Mamba-2 path, and why
    print(f"results: {paths.folder} (trials.json; Ray Tune experiment {paths.experiment})")
    print(f"study:   {paths.study_url}  (browse: optuna-dashboard {paths.study_url})")
    print(f"mlflow:  experiment {paths.name} in {store.describe()}")
    print(f"ray:     its own messages go to {paths.folder / RAY_LOG}", flush=True)
    progress = SweepProgress(trials, _clock(paths, space, plan, trials))
    handler = progress.attach()
    try:
        opened = session.open_tracking(store, client, paths, manifest, space, data, plan)
        outcome = session.run(paths, space, data, trials, plan, opened, resume=resume, stages=manifest.trial_stages)
    finally:
        progress.detach(handler)
    _unsent(outcome.tracking_unsent)
    records = outcome.records
    print()
    print_leaderboard(records, data.objective)
    print_finalists(records, space)
    if outcome.interrupted:
        return incomplete(records, space, trials, resume_hint)
    best = winner(records, space.confirm, space.run.train.seed)
    if best is None:
        return no_winner(records, gate_verdict(records, space.gate, space.scheduler.max_epochs), space, paths.folder,
                         (store, paths.name, manifest.sweep_id))
    confirmed = " (the confirmed winner)" if space.confirm else ""
    print(f"\nbest: trial {best.trial_id}{confirmed}; export it with `mamba-tune best {paths.name}"
          f"{storage_flag(storage)}`")
    if outcome.look_failure:
        print(f"error: test segment: {outcome.look_failure}; `{resume_hint}` tries again", file=sys.stderr)
        return 1
    print_test_look(outcome.test, paths.folder)
    return 0


def _clock(paths: SweepPaths, space: Any, plan: Any, trials: int) -> SweepClock:
    """The sweep's clock for the ETA, counting the runs the ledger holds as ended (a resumed sweep's)."""
    ended = list(Ledger(paths.folder / LEDGER).records.values())
    budget = SweepBudget(space.scheduler, plan.concurrency, confirm_runs(space.confirm))
    return SweepClock(budget, trials, searched=sum(r.stage == SEARCH for r in ended),
                      confirmed=sum(r.stage == CONFIRM for r in ended))


def _resume_hint(paths: SweepPaths, storage: str) -> str:
    return f"mamba-tune resume {paths.name}{storage_flag(storage)}"


def _say_dashboard(session: Any, started: bool, asked: bool) -> None:
    """Where Ray's dashboard is: the local Ray's with --dashboard, a cluster's where Ray reports one; else that a
    local Ray has it off, and how to have it."""
    url = session.dashboard_url()
    if url:
        print(f"Ray dashboard: {url}", flush=True)
    elif started and not asked:
        print("Ray dashboard: off (a local Ray starts without it, to spare its CPU); --dashboard starts it",
              flush=True)


def _unsent(count: int) -> None:
    if count:
        print(f"warning: {count} MLflow write(s) could not be sent and wait in the sweep's folder; "
              "they are sent by the next `mamba-tune resume` of this sweep, once the store answers", file=sys.stderr)
