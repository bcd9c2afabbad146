"""A sweep: Ray Tune runs trials of tuning/sweep/trainable.py, Optuna's TPE picks their parameters,
ASHA and the gate stop the poor ones; resumable after an interruption.

The sweep folder, <storage>/<name>/:
  sweep.json   what was asked (data, space, trials): `resume` reads it
  trials.json  every finished trial and why it ended (tuning/search/ledger.py)
  optuna.db    the Optuna study (SQLite), for optuna-dashboard
  tune/        Ray Tune's experiment (its state is synced as a whole, so ours lives beside it)
  tune-confirm/  the confirmation stage's experiment (tuning/sweep/confirmation.py), after the search
  test.json    the winner's look at the test segment (tuning/sweep/one_look.py), once confirmed; one per winner
  driver.json  the process driving it, while `sweep` or `resume` runs (tuning/sweep/driver_mark.py)
  ray.log      Ray's own messages (raylet warnings, worker lines), out of the progress output
  train/       Ray Train's checkpoints, one folder per trial
  tracking-pending.jsonl  MLflow writes not yet sent (a write-ahead log; sent on resume)
  folders.json the folders the sweep has been kept in, with a URI storage (tuning/sweep/record_copies.py)
  generation.json  which copy of the records this folder holds, with a URI storage: a stale one is never copied
With a URI storage the folder is the head's own, <storage>/<name>/ holds tune/ and train/, and a copy of the
records (sweep.json, trials.json, test.json, the spool) is kept there too, so another head can resume it.
Every trial is logged to MLflow (tuning/tracking/runs.py) as the sweep runs, by the callback of
tuning/sweep/trial_lifecycle.py.
Its progress (trial started, epoch, trial ended) goes out as typed events (tuning/progress.py);
the CLI turns them into lines. Nothing here prints.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import ray
import ray.tune

from model.atomic import write_text_atomic
from model.bars import read_bars
from model.data import Dataset
from model.training import data_identity
from tuning.bars_file import bars_identity
from tuning.cluster.autoscaler import launchable_nodes
from tuning.cluster.ray_address import ray_address
from tuning.errors import UsageError
from tuning.search.finalists import SEARCH, seed_members, winner
from tuning.search.importance import Importances, load_importances
from tuning.search.ledger import Ledger, TrialRecord
from tuning.search.resources import HEAD_RESOURCE, TRIAL_DRIVER_RESOURCES, TrialPlan, fullest_plan
from tuning.search.scheduler import make_scheduler
from tuning.search.searcher import fail_lost_trials, make_searcher
from tuning.search.space import SweepSpace, parse_space, searches_data
from tuning.sweep import orphan_groups
from tuning.sweep.confirmation import confirmation_runs, record_in_study, run_confirmation
from tuning.sweep.looks_kept import keep_looks
from tuning.sweep.manifest import SweepManifest
from tuning.sweep.memory_probe import ProbeResult
from tuning.sweep.one_look import initial_trial, look_at_test_segment, look_due
from tuning.sweep.ray_env import hand_nothing_on, local_dashboard, sweep_env, tune_actors_get_their_env
from tuning.sweep.ray_version import version_mismatch
from tuning.sweep.record_copies import copy_records_or_note, earlier_folders, follow_move
from tuning.sweep.report_relay import start_relay
from tuning.sweep.sweep_data import data_of, data_settings, resumed_data
from tuning.sweep.trainable import TrialSetup, run_trial
from tuning.sweep.trial_files import SweepCurves, remove_best_snapshots, storage_filesystem
from tuning.sweep.trial_lifecycle import ACTIVE, SweepCallback, active_key
from tuning.sweep.trial_path import AUTO, trial_path
from tuning.sweep_files import (
    LEDGER,
    MANIFEST,
    STUDY,
    TRACKING_SPOOL,
    TRACKING_STAGING,
    TUNE_DIR,
    SweepPaths,
    is_uri,
    read_test_looks,
    storage_holds,
)
from tuning.tracking.log import SWEEP_KEY, TrackingLog, note
from tuning.tracking.runs import SweepTracking, close_sweep, open_sweep
from tuning.tracking.store import TrackingStore, first_line, open_store


@dataclass
class SweepOutcome:
    paths: SweepPaths
    trials: int  # asked for
    records: list[TrialRecord]  # finished trials
    plan: TrialPlan
    wall_s: float
    tracking_unsent: int  # MLflow writes saved to the spool because the store did not answer
    complete: bool  # every search trial ended and every confirmation run has a result
    test: dict[str, Any] | None = None  # the winner on the test segment (tuning/sweep/one_look.py), once complete
    look_failure: str | None = None  # why the look at the test segment failed (`resume` tries it again)

    @property
    def interrupted(self) -> bool:
        return not self.complete


@dataclass(frozen=True)
class FinishedSweep:
    """What `finish` did to a sweep whose trials had all ended."""

    test: dict[str, Any] | None  # the look taken now
    look_failure: str | None  # why it failed
    looked: bool  # a look was due, and tried
    tracking_unsent: int


def write_manifest(paths: SweepPaths, data_path: str | Path, space_values: dict[str, Any], trials: int,
                   data: Dataset, tracking_uri: str, memory_probe: ProbeResult | None = None,
                   webhook_set: bool = False, bars: dict[str, Any] | None = None,
                   warm_start: dict[str, Any] | None = None) -> SweepManifest:
    """What `resume` needs to continue the sweep exactly as it was asked, and log to the same MLflow runs.

    `space_values`: the space as run (without the batch sizes the memory probe removed; its notify section, a
    secret, is not kept: `webhook_set` says only that the sweep notifies). `bars`: the bars file's
    tuning/bars_file.py bars_identity, when the caller has it already (else read here: it hashes the file);
    `warm_start`: where the sweep was warm-started from (tuning/sweep/warm_start.py's WarmStart.to_dict())."""
    manifest = SweepManifest.new(paths.name, data_path, space_values, trials, paths.ray_storage, tracking_uri,
                                 data_identity(data), memory_probe.to_dict() if memory_probe else None, paths.study,
                                 bars if bars is not None else bars_identity(data_path, data.summary),
                                 webhook_set=webhook_set, warm_start=warm_start)
    write_text_atomic(paths.folder / MANIFEST, json.dumps(manifest.to_dict(), indent=1))
    copy_records_or_note(paths)
    return manifest


def extend(paths: SweepPaths, manifest: SweepManifest, trials: int) -> SweepManifest:
    """The sweep asked for `trials` search trials from now on, kept in sweep.json before anything runs (so an
    interrupted extension resumes as one)."""
    extended = manifest.extended(trials)
    write_text_atomic(paths.folder / MANIFEST, json.dumps(extended.to_dict(), indent=1))
    copy_records_or_note(paths)
    return extended


def drop_legacy_webhook(paths: SweepPaths, manifest: SweepManifest) -> None:
    """sweep.json (here and its storage copy) written again without the webhook URL an older version kept in it."""
    write_text_atomic(paths.folder / MANIFEST, json.dumps(manifest.to_dict(), indent=1))  # to_dict never holds it
    copy_records_or_note(paths)


def load_for_resume(paths: SweepPaths, manifest: SweepManifest) -> tuple[SweepPaths, SweepSpace, Dataset]:
    """The sweep's paths (where it ran), the space as it was, and the same data (refused if the file changed).

    A sweep whose folder was on another head (tuning/sweep/record_copies.py) continues in this one's. One whose
    SQLite study is not here is refused: Ray Tune's saved searcher would report to trials no study holds. That is
    another machine's folder, or this very folder fetched anew from the storage (a Kubernetes head's new volume at
    the same path: folders.json then names no earlier folder)."""
    paths = SweepPaths(paths.name, paths.folder, manifest.ray_storage, manifest.study_url)  # e.g. s3://...
    earlier = earlier_folders(paths)
    if study_lost(paths, manifest):
        where = (earlier[-1] if earlier else paths.folder) / STUDY
        raise UsageError(f"sweep {paths.name!r}'s Optuna study is SQLite in {where}, on the machine (or the volume) "
                         f"that ran it last, and not here; resume it there (or put that file back at "
                         f"{paths.folder / STUDY}), and give sweeps that must outlive their head --study-url "
                         "postgresql://HOST/DB")
    if earlier:
        follow_move(paths)
    space = parse_space(manifest.space, str(paths.folder / MANIFEST), stored=True)
    return paths, space, resumed_data(paths.name, manifest, space.run.data)  # refused when its samples changed


def study_lost(paths: SweepPaths, manifest: SweepManifest) -> bool:
    """Whether the sweep's study was SQLite in a folder whose records came back from a URI storage without it, while
    the sweep had trials the study held: finished ones in the ledger (copied at each trial's end), or Ray Tune's
    state there, whose searcher reports to the study (Tune saves it only now and then: either may come first).
    Stopped before either: nothing to lose, and the sweep starts its study anew."""
    if manifest.study_url is not None or not is_uri(manifest.ray_storage) or (paths.folder / STUDY).exists():
        return False
    return bool(Ledger(paths.folder / LEDGER).records) or storage_holds(paths.experiment)


def start_ray(address: str | None, dashboard: bool = False, trial_path_setting: str = AUTO) -> bool:
    """Join the cluster at `address` ("auto", HOST:PORT) or start a local one; True when started here.

    Without `address`, RAY_ADDRESS names the cluster (`ray job submit` sets it for its entrypoint);
    without either, a new local Ray is started, even where `ray start` left one running.
    `dashboard`: a local Ray starts with its dashboard (`sweep --dashboard`), and collects what it shows.
    `trial_path_setting`: the sweep's resources.trial_path (tuning/sweep/trial_path.py). On the public path a local
    Ray starts with its dashboard, as Ray's default is: Ray Train's placement-group cleaner, one per trial there,
    watches its controller through the dashboard's state API, and never ends without it.
    A cluster whose Ray differs from this driver's is refused in one line.
    """
    if ray.is_initialized():
        return False
    fast = trial_path(trial_path_setting).fast
    address, source = ray_address(address)
    started = address in (None, "local")
    # No dashboard for a Ray started here unless asked for or on the public path: nothing of a local sweep on the
    # fast path needs it (the sweep's report relay gives back a stopped trial's placement group,
    # tuning/sweep/report_relay.py), and it costs seconds of CPU to start and run. Started, it also serves the state
    # API the orphaned groups' watch uses, as on a cluster.
    found, local = {}, {}  # the variables naming its dashboard, and ray.init's arguments, for a Ray started here
    if started:
        found, local = local_dashboard() if dashboard or not fast else ({}, {"include_dashboard": False})
    env = sweep_env(local=started, dashboard=dashboard) | found
    os.environ.update(env)  # this process is Tune's driver; a Ray started here inherits it, in every process
    if fast:
        tune_actors_get_their_env(own=not started)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("ray.tune").setLevel(logging.ERROR)  # its interruption and restore hints name its API, not ours
    logging.getLogger("ray._private.authentication").setLevel(logging.ERROR)  # "token auth is on": nothing to do
    try:
        # A cluster's processes get the settings as the job's runtime environment. A Ray started here has them
        # already, and a runtime environment would cost every process of every trial (tuning/sweep/ray_env.py).
        context = ray.init(address="local" if started else address, log_to_driver=False,
                           logging_level=logging.WARNING,
                           **({} if started else {"runtime_env": {"env_vars": env}}), **local)
    except ConnectionError as exc:
        raise UsageError(f"{source} {address}: no Ray cluster answers there ({exc}); start one with "
                         "`ray start --head` or check the address") from None
    except RuntimeError as exc:
        if (mismatch := version_mismatch(exc, f"{source} {address}")) is not None:
            raise mismatch from None
        raise
    if started and fast:
        hand_nothing_on(env)
    orphan_groups.use_state_api(bool(context.dashboard_url))  # a cluster's dashboard serves it
    return started


def dashboard_url() -> str | None:
    """http://HOST:PORT of the dashboard of the Ray start_ray started or joined; None where it has none."""
    from ray._private.worker import get_dashboard_url  # what ray.init's context gives, for the Ray joined

    url = get_dashboard_url()
    return f"http://{url}" if url and "://" not in url else url or None


def cluster_plan(space: SweepSpace) -> TrialPlan:
    """Concurrency and per-worker resources for this cluster (raises ResourceError).

    On a cluster with an autoscaler, the plan is for the nodes it may launch too, not only those up now
    (GPU nodes that scale from zero are not up yet): tuning/cluster/autoscaler.py reads its node types.
    """
    return fullest_plan(space.resources, cluster_views())


def cluster_views() -> list[list[dict[str, float]]]:
    """The cluster's nodes (their resources) as they are now and, where its autoscaler's node types are found,
    fully scaled."""
    alive = [node["Resources"] for node in ray.nodes() if node["Alive"]]
    launchable = launchable_nodes()
    if not launchable:
        return [alive]
    heads = [node for node in alive if HEAD_RESOURCE in node]
    return [alive, heads + launchable]


def open_tracking(store: TrackingStore, client: Any, paths: SweepPaths, manifest: SweepManifest,
                  space: SweepSpace, data: Dataset, plan: TrialPlan) -> SweepTracking:
    """The sweep's MLflow experiment and parent run (reopened on resume); writes unsent earlier go first."""
    log = TrackingLog(client, store.experiment_id(client, paths.name), manifest.sweep_id,
                      paths.folder / TRACKING_SPOOL)
    settings = {"trials": manifest.trials, "concurrency": plan.concurrency, "workers_per_trial": plan.workers,
                "storage": paths.sweep_storage, "sweep_id": manifest.sweep_id,
                **({"memory_probe": ProbeResult.from_dict(manifest.memory_probe).describe()}
                   if manifest.memory_probe else {})}
    logged = {k: v for k, v in manifest.space.items() if k != "notify"}  # a webhook URL is a secret: not in MLflow
    return open_sweep(log, paths.folder / TRACKING_STAGING, paths.name, logged, space, manifest.data,
                      data.summary, data.baselines, settings, manifest.bars_sha256)


def finish(store: TrackingStore, paths: SweepPaths, manifest: SweepManifest, space: SweepSpace,
           data: Dataset) -> FinishedSweep:
    """A sweep whose trials and confirmation runs have all ended, finished without Ray: its driver stopped before
    the sweep's own end. The one look at the test segment it has not taken (its driver was killed first, or the
    look failed) is taken now, once; MLflow writes it saved are sent, runs still open ended. Every look test.json
    holds is logged to MLflow, which skips those it has: `resume` leaves MLflow with test.json's looks."""
    records = list(Ledger(paths.folder / LEDGER).records.values())
    chosen = winner(records, space.confirm, space.run.train.seed)
    due = chosen is not None and look_due(paths.folder, chosen, data)
    spooled = (paths.folder / TRACKING_SPOOL).exists()
    if not due and not spooled and not read_test_looks(paths.folder):
        return FinishedSweep(None, None, False, 0)
    client = open_store(store)  # only now: a finished sweep with nothing to do and no look needs no store
    log = TrackingLog(client, store.experiment_id(client, paths.name), manifest.sweep_id,
                      paths.folder / TRACKING_SPOOL)
    test, failure = _one_look(paths, space, data, manifest.trials) if due else (None, None)
    keep_looks(paths, log, failure)  # every look of test.json in MLflow, on every resume: a repeat costs nothing
    if due or spooled:
        log.end_lost_runs([r.trial_id for r in records])
        log.end_run(SWEEP_KEY, "FINISHED")
    unsent = log.close(timeout_s=60)
    copy_records_or_note(paths)
    return FinishedSweep(test, failure, due, unsent)


def run(paths: SweepPaths, space: SweepSpace, data: Dataset, trials: int, plan: TrialPlan,
        tracking: SweepTracking, resume: bool = False, stages: tuple[int, ...] | None = None) -> SweepOutcome:
    """Run (or continue) the sweep until every trial has ended or it is interrupted; log it all to MLflow.

    `stages`: the cumulative trials of the first Tune experiment and of each extension (`resume --trials`),
    each run (or restored) in turn; (trials,) by default."""
    start, complete, test, failure = time.perf_counter(), False, None, None
    ACTIVE[active_key(paths.folder / LEDGER)] = tracking
    try:
        setup = _trial_setup(paths, space, data, plan)
        complete = _search(paths, space, setup, stages or (trials,), plan, resume)
        if complete:
            end_lost_trials(paths)
            run_confirmation(paths.folder / LEDGER, space, setup, plan, data.summary["path"], paths.sweep_storage,
                             paths.ray_storage)
            complete = not confirmation_runs(paths.folder / LEDGER, space)  # a failed run is no result: resume
        if complete:
            _record_finalists(paths, space)
            test, failure = _one_look(paths, space, data, trials)
            keep_looks(paths, tracking.log, failure)  # before anything else the sweep's end does
    finally:
        records = list(Ledger(paths.folder / LEDGER).records.values())
        _remove_snapshots(paths, records)
        unsent = close_sweep(tracking, records, interrupted=not complete, looks=read_test_looks(paths.folder),
                             look_failure=failure, importances=_importances(paths))
        ACTIVE.pop(active_key(paths.folder / LEDGER), None)
        copy_records_or_note(paths)  # the spool as the sweep leaves it, and the test look
    return SweepOutcome(paths, trials, records, plan, time.perf_counter() - start, unsent, complete, test, failure)


def _record_finalists(paths: SweepPaths, space: SweepSpace) -> None:
    try:
        record_in_study(paths.folder / LEDGER, space, paths.study_url, paths.name)
    except Exception as exc:  # noqa: BLE001 - the ledger holds them; the study is only behind
        note(f"optuna: could not record the finalists' confirmed scores ({first_line(exc)})")


def _importances(paths: SweepPaths) -> Importances | None:
    try:
        return load_importances(paths.study_url, paths.name)
    except Exception as exc:  # noqa: BLE001 - an insight, not a result: the sweep stands without it
        note(f"optuna: could not rank the hyperparameters' importance ({first_line(exc)})")
        return None


def _one_look(paths: SweepPaths, space: SweepSpace, data: Dataset,
              trials: int) -> tuple[dict[str, Any] | None, str | None]:
    """(the confirmed winner's look at the test segment, None) once taken or read back; (None, None) with no
    winner or no test segment; (None, why) when the look failed (the CLI says so, MLflow tags it, and `resume`
    tries again)."""
    records = list(Ledger(paths.folder / LEDGER).records.values())
    chosen = winner(records, space.confirm, space.run.train.seed)
    if chosen is None:
        return None, None
    try:
        initial = initial_trial(records, space)
        winners = data_of(space, data, chosen.params)
        own_data = initial is not None and data_settings(space, initial.params) != data_settings(space, chosen.params)
        return look_at_test_segment(paths.folder, paths.ray_storage, f"{paths.sweep_storage}/train", chosen, winners,
                                    seed_members(records, chosen), initial, trials,
                                    initial_data=data_of(space, data, initial.params) if own_data else None), None
    except Exception as exc:  # noqa: BLE001 - the sweep's results stand without it; say why it is missing
        return None, f"could not score trial {chosen.trial_id} there ({first_line(exc)})"


def _remove_snapshots(paths: SweepPaths, records: list[TrialRecord]) -> None:
    """The best.pt snapshots a recorded trial wrote after its record (it ran on until Tune killed it)."""
    fs, train = storage_filesystem(paths.ray_storage), f"{paths.sweep_storage}/train"
    for record in records:
        remove_best_snapshots(fs, train, record.trial_id)


def end_lost_trials(paths: SweepPaths) -> None:
    """Once every trial has ended: Optuna trials a killed driver left RUNNING end as lost (search/searcher.py)."""
    try:
        fail_lost_trials(paths.study_url, paths.name)
    except Exception as exc:  # noqa: BLE001 - the sweep's results stand; the study is only behind
        note(f"optuna: could not end the trials a killed driver left running ({first_line(exc)})")


def _trial_setup(paths: SweepPaths, space: SweepSpace, data: Dataset, plan: TrialPlan) -> TrialSetup:
    """What every trial shares, the data put in the object store once."""
    bars = ray.put(read_bars(data.summary["path"], space.run.data.columns)) if searches_data(space) else None
    return TrialSetup(run=space.run.to_dict(), dataset=ray.put(data), plan=plan, relay=start_relay(),
                      storage=f"{paths.sweep_storage}/train", bars=bars,
                      max_failures=space.resources.max_failures, fast=trial_path(space.resources.trial_path).fast,
                      finished={k: r.final_result() for k, r in Ledger(paths.folder / LEDGER).records.items()},
                      memory_fraction=_memory_fraction(paths))


def _memory_fraction(paths: SweepPaths) -> float | None:
    """The share of its GPU's memory each packed trial worker is held to, as the sweep's memory probe found it: read
    from sweep.json, so a resumed sweep holds its trials as the first run did. None: no probe ran on a GPU, or the
    sweep.json is older than the share (its trials are not held, as they were not then)."""
    manifest = paths.folder / MANIFEST  # written before trials start (resume: the first run's)
    probe = json.loads(manifest.read_text()).get("memory_probe") if manifest.exists() else None
    return ProbeResult.from_dict(probe).memory_fraction if probe else None


def _search(paths: SweepPaths, space: SweepSpace, setup: TrialSetup, stages: tuple[int, ...], plan: TrialPlan,
            resume: bool) -> bool:
    """The search's Tune experiments in turn: `tune/` for the first stage's trials, `tune-to-N/` for the trials an
    extension to N adds (the same study, ledger and scheduler's rungs); True when every trial of each has ended."""
    done = 0
    for stage, target in enumerate(stages):
        name = TUNE_DIR if stage == 0 else f"{TUNE_DIR}-to-{target}"
        results = _fit(paths, space, setup, name, target - done, plan, resume=resume, first=stage == 0)
        if not (len(results) >= target - done and results.num_terminated + results.num_errors == len(results)):
            return False
        # Interrupted, Tune ends the trials still running as TERMINATED (after saving them as they were): only the
        # ledger, which holds each trial that really ended, tells an interrupted search from a finished one.
        if sum(r.stage == SEARCH for r in Ledger(paths.folder / LEDGER).records.values()) < target:
            return False
        done = target
    return True


def _fit(paths: SweepPaths, space: SweepSpace, setup: TrialSetup, name: str, trials: int, plan: TrialPlan,
         resume: bool, first: bool) -> ray.tune.ResultGrid:
    """Run the Tune experiment `name` of `trials` search trials, or restore it and run what is left: the first
    experiment on resume, an extension's (not `first`) whenever it was started before. An extension starts
    without the space's initial points, which the first one evaluated. Started or restored, its scheduler
    starts from the state (rungs, results) of every search trial the ledger holds and, restored, of each of its
    own trials that was running, so the stopping rule decides as one uninterrupted one would
    (tuning/search/schedulers/)."""
    trainable = ray.tune.with_resources(ray.tune.with_parameters(run_trial, setup=setup), TRIAL_DRIVER_RESOURCES)
    experiment = f"{paths.sweep_storage}/{name}"
    if resume if first else ray.tune.Tuner.can_restore(experiment):
        if not ray.tune.Tuner.can_restore(experiment):
            raise UsageError(f"sweep {paths.name!r} was stopped before Ray Tune saved its state, so there is "
                             f"nothing to resume; remove {paths.folder} and start it again")
        tuner = ray.tune.Tuner.restore(experiment, trainable, resume_unfinished=True, resume_errored=False)
    else:
        tuner = ray.tune.Tuner(
            trainable,
            tune_config=ray.tune.TuneConfig(
                search_alg=make_searcher(space, paths.study_url, paths.name, initial=first),
                scheduler=make_scheduler(space.scheduler, space.gate, SweepCurves(
                    paths.folder / LEDGER, paths.ray_storage, f"{paths.sweep_storage}/train")),
                num_samples=trials,
                max_concurrent_trials=plan.concurrency,
                # A Tune actor (a process) serves trial after trial; a stopped trial's run is aborted first
                # (tuning/sweep/report_relay.py).
                reuse_actors=True),
            run_config=ray.tune.RunConfig(
                name=name, storage_path=paths.sweep_storage, verbose=0,
                callbacks=[SweepCallback(paths.folder / LEDGER, space, paths.ray_storage)]),
        )
    return tuner.fit()
