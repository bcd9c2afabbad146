"""A trial's Ray Train trainer (tuning/sweep/trial_trainer.py) on either trial path: which trainer, which of Ray
Train's default callbacks, and, on the fast path (tuning/sweep/lean_trainer.py), no torch in the trial's Tune actor
or Train controller.

On the fast path the callbacks are left out, and the controller and workers started without a runtime environment
of their own, through private hooks of Ray Train: tests/tuning/sweep/test_fast_hooks.py fails naming the hook when a
Ray release changes one (the sweep then takes the public path); these tests check what the fast path does with them.
The public path is Ray Train's TorchTrainer as Ray documents it, every default callback kept.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys
import textwrap
import threading

import cloudpickle
import pytest
import ray.train
import yaml
from ray.train.v2._internal.callbacks import AcceleratorSetupCallback, BackendSetupCallback
from ray.train.v2._internal.callbacks.user_callback import UserCallbackHandler
from ray.train.v2._internal.execution.controller import TrainController
from ray.train.v2._internal.execution.worker_group import WorkerGroup
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

from tests.cli import ROOT, run_cli
from tests.tuning.sweeps import SPACE, ledger, space_values
from tuning.search.resources import TrialPlan
from tuning.sweep.lean_trainer import LEFT_OUT_CALLBACKS, SingleWorkerTrainer
from tuning.sweep.relay_callback import RelayReports
from tuning.sweep.trial_controller import TrialController, TrialWorkerGroup
from tuning.sweep.trial_trainer import trial_trainer


def loop(config: dict) -> None:
    """A train loop that is never run here."""


def trainer(workers: int, tmp_path, fast: bool = True) -> DataParallelTrainer:
    plan = TrialPlan(workers=workers, cpus_per_worker=1, gpus_per_worker=0, concurrency=1)
    return trial_trainer(loop, {}, plan, ray.train.RunConfig(name="t", storage_path=str(tmp_path),
                                                             callbacks=[RelayReports(None, "t", hosted=fast)]), fast=fast)


def test_the_fast_path_leaves_out_ray_trains_datasets_and_placement_group_cleaner_callbacks():
    """Ray Train's hook that makes them (DataParallelTrainer._create_default_callbacks) is checked by
    tuning/sweep/fast_hooks.py's LeanCallbacks (tests/tuning/sweep/test_fast_hooks.py)."""
    assert {cls.__name__ for cls in LEFT_OUT_CALLBACKS} == {"DatasetsCallback", "PlacementGroupCleanerCallback"}


def test_the_fast_paths_controller_is_ray_trains_with_the_trials_worker_group():
    """The hooks it rests on (the controller's runtime environment, the SIGINT handler, worker_group_cls,
    _get_worker_runtime_env) are checked by fast_hooks' ControllerHost and TrialWorkerGroup
    (tests/tuning/sweep/test_fast_hooks.py)."""
    assert issubclass(TrialController, TrainController) and TrialController.worker_group_cls is TrialWorkerGroup
    assert TrainController.worker_group_cls is WorkerGroup  # what TrialController replaces


def test_trial_workers_get_no_runtime_environment_where_ray_trains_would(monkeypatch):
    monkeypatch.setenv("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.5")  # as the sweep sets it (ray_env.RAY_ENV)
    assert WorkerGroup._get_worker_runtime_env({})["env_vars"] == {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.5"}
    assert TrialWorkerGroup._get_worker_runtime_env({}) == {}


RUNTIME_ENVS = textwrap.dedent("""
    import json, os, sys, tempfile
    import ray, ray.train, ray.tune
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer
    from tuning.search.resources import TRIAL_DRIVER_RESOURCES, TrialPlan
    from tuning.sweep import session
    from tuning.sweep.trial_trainer import trial_trainer

    STORE = sys.argv[1]  # the functions below run in Ray's processes, which see this value, not their own argv

    def seen():
        return {"runtime_env": ray.get_runtime_context().get_runtime_env_string(),
                "interval": os.environ.get("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S")}

    class Controller(ray.train.UserCallback):
        def __init__(self, path):
            self.path = path
        def after_report(self, run_context, metrics, checkpoint):
            with open(self.path, "w") as out:
                json.dump(seen(), out)

    def loop(config):  # Result.metrics are the latest checkpoint's
        folder = tempfile.mkdtemp()
        open(os.path.join(folder, "seen.json"), "w").write("{}")
        ray.train.report(seen(), checkpoint=ray.train.Checkpoint.from_directory(folder))

    def fit(trainer, name):
        return {"worker": trainer.fit().metrics, "controller": json.load(open(f"{STORE}/{name}.json"))}

    def run(name):
        return ray.train.RunConfig(name=name, storage_path=STORE,
                                   callbacks=[Controller(f"{STORE}/{name}.json")])

    def trial(config):  # a trial's Tune actor, as a sweep's
        plan = TrialPlan(workers=1, cpus_per_worker=1, gpus_per_worker=0, concurrency=1)
        ray.tune.report({"seen": json.dumps({"tune_actor": seen(), **fit(trial_trainer(loop, {}, plan, run("trial"),
                                                                                       fast=True), "trial")})})

    session.start_ray(None, trial_path_setting="fast")
    out = {"ray": fit(DataParallelTrainer(loop, scaling_config=ray.train.ScalingConfig(num_workers=1),
                                          run_config=run("ray")), "ray")}
    tuner = ray.tune.Tuner(ray.tune.with_resources(trial, TRIAL_DRIVER_RESOURCES),
                           run_config=ray.tune.RunConfig(storage_path=STORE, verbose=0))
    out["trial"] = json.loads(tuner.fit()[0].metrics["seen"])
    print(json.dumps(out))
""")


@pytest.mark.integration
@pytest.mark.faults  # a Ray Train run and a Tune trial on a Ray of their own (26 s): the faults tier, for time
def test_a_trials_processes_run_in_the_sweeps_environment_without_one_of_their_own(tmp_path):
    """On a local Ray started as a sweep starts it: Ray Train's own trainer, from the driver, gives its controller a
    runtime environment (then started through the runtime-env agent); a trial's Tune actor, its controller and its
    worker have none, and still see the sweep's settings, inherited from the driver."""
    done = subprocess.run([sys.executable, "-c", RUNTIME_ENVS, str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert json.loads(seen["ray"]["controller"]["runtime_env"])["env_vars"]  # Ray Train's own gives it one
    for process in ("tune_actor", "controller", "worker"):
        assert json.loads(seen["trial"][process]["runtime_env"]) == {}
        assert seen["trial"][process]["interval"] == "0.5"


def test_ray_train_would_start_both_callbacks_the_trial_leaves_out(tmp_path):
    plain = DataParallelTrainer(loop, scaling_config=ray.train.ScalingConfig(num_workers=1),
                                run_config=ray.train.RunConfig(name="t", storage_path=str(tmp_path)))
    kinds = {type(callback) for callback in plain._create_default_callbacks()}
    assert set(LEFT_OUT_CALLBACKS) <= kinds


@pytest.mark.parametrize("workers", [1, 2])
def test_a_fast_trial_keeps_every_other_callback_and_its_own(workers, tmp_path):
    callbacks = trainer(workers, tmp_path)._create_default_callbacks()
    kinds = {type(callback) for callback in callbacks}
    assert not kinds & set(LEFT_OUT_CALLBACKS)
    assert {AcceleratorSetupCallback, BackendSetupCallback, UserCallbackHandler} <= kinds
    (handler,) = [callback for callback in callbacks if isinstance(callback, UserCallbackHandler)]
    assert [type(callback) for callback in handler._user_callbacks] == [RelayReports]


def test_a_fast_trial_of_one_worker_runs_without_a_torch_process_group_and_of_two_with_one(tmp_path):
    single = trainer(1, tmp_path)
    assert type(single) is SingleWorkerTrainer and type(single.backend_config) is ray.train.BackendConfig
    several = trainer(2, tmp_path)
    from ray.train.torch import TorchConfig, TorchTrainer

    assert isinstance(several, TorchTrainer) and isinstance(several.backend_config, TorchConfig)
    assert several.scaling_config.num_workers == 2


@pytest.mark.parametrize("workers", [1, 2])
def test_a_public_trial_is_ray_trains_torch_trainer_with_every_default_callback(workers, tmp_path):
    """The public path: TorchTrainer as Ray documents it (a process group even for one worker), each of Ray Train's
    default callbacks kept (none left out), and the relay's callback told its controller is Ray Train's own."""
    from ray.train.torch import TorchConfig, TorchTrainer

    public = trainer(workers, tmp_path, fast=False)
    assert type(public) is TorchTrainer and type(public.backend_config) is TorchConfig
    assert public.scaling_config.num_workers == workers
    plain = TorchTrainer(loop, scaling_config=ray.train.ScalingConfig(num_workers=workers),
                         run_config=ray.train.RunConfig(name="t", storage_path=str(tmp_path),
                                                        callbacks=[RelayReports(None, "t", hosted=False)]))
    callbacks = public._create_default_callbacks()
    assert [type(callback) for callback in callbacks] == [type(callback) for callback in
                                                          plain._create_default_callbacks()]
    assert set(LEFT_OUT_CALLBACKS) <= {type(callback) for callback in callbacks}
    (handler,) = [callback for callback in callbacks if isinstance(callback, UserCallbackHandler)]
    (relay,) = handler._user_callbacks
    assert type(relay) is RelayReports and relay.hosted is False  # the relay kills Ray Train's controller to end it


def test_a_public_trial_never_imports_the_fast_paths_modules(tmp_path):
    """The fast path's modules import Ray's private modules the hooks check: a Ray they do not fit must not fail at
    their import. (Ray Tune's private class_cache, a hook of the fast path, cannot be told apart here: `import
    ray.tune` imports it; tests/tuning/sweep/test_ray_start.py checks that the public path leaves it untouched.)"""
    public_side = textwrap.dedent("""
        import sys, ray.train
        from tuning.search.resources import TrialPlan
        from tuning.sweep.trainable import run_trial, train_loop
        from tuning.sweep.trial_trainer import trial_trainer
        plan = TrialPlan(workers=1, cpus_per_worker=1, gpus_per_worker=0, concurrency=1)
        trial_trainer(train_loop, {}, plan, ray.train.RunConfig(name="t", storage_path=sys.argv[1]), fast=False)
        fast_path = {"tuning.sweep.lean_trainer", "tuning.sweep.controller_host", "tuning.sweep.host_barrier",
                     "tuning.sweep.trial_controller"}
        assert not fast_path & set(sys.modules), fast_path & set(sys.modules)
    """)
    subprocess.run([sys.executable, "-c", public_side, str(tmp_path)], cwd=ROOT, check=True)


def test_on_the_fast_path_the_trial_actor_and_the_controller_never_import_torch(tmp_path):
    """What the trial's Tune actor imports (the trainable) and what its Train controller's host imports and unpickles
    (the callbacks and the train function of a one-worker trial), each in a process of its own."""
    tune_side = textwrap.dedent("""
        import sys, cloudpickle, ray.train
        from tuning.search.resources import TrialPlan
        from tuning.sweep.relay_callback import RelayReports
        from tuning.sweep.trainable import run_trial, train_loop
        assert train_loop.__module__ == "tuning.sweep.worker_entry"
        from tuning.sweep.trial_trainer import trial_trainer
        plan = TrialPlan(workers=1, cpus_per_worker=1, gpus_per_worker=0, concurrency=1)
        trainer = trial_trainer(train_loop, {}, plan, ray.train.RunConfig(
            name="t", storage_path=sys.argv[1], callbacks=[RelayReports(None, "t")]), fast=True)
        sys.stdout.buffer.write(cloudpickle.dumps((trainer._create_default_callbacks(), trainer.backend_config,
                                                   train_loop)))
        assert "torch" not in sys.modules, "the Tune side imported torch"
    """)
    pickled = subprocess.run([sys.executable, "-c", tune_side, str(tmp_path)], cwd=ROOT, capture_output=True,
                             check=True).stdout
    controller_side = ("import sys, pickle, tuning.sweep.controller_host; pickle.load(sys.stdin.buffer); "
                       "assert 'torch' not in sys.modules")  # the host's process: its module, then what it unpickles
    subprocess.run([sys.executable, "-c", controller_side], cwd=ROOT, input=pickled, check=True)
    assert cloudpickle.loads(pickled)[2].__name__ == "train_loop"


def test_a_worker_finds_the_train_loop_without_importing_the_trials_tune_side():
    """Ray Train pickles the loop by reference: what its module imports, every worker of every trial imports."""
    from tuning.sweep.trainable import train_loop

    worker_side = ("import sys, pickle; pickle.load(sys.stdin.buffer); "
                   "assert not {'ray.tune', 'tuning.sweep.trial_trainer', 'tuning.sweep.lean_trainer', 'torch'} "
                   "& set(sys.modules), sys.modules")
    subprocess.run([sys.executable, "-c", worker_side], cwd=ROOT, input=cloudpickle.dumps(train_loop), check=True)


@pytest.mark.integration
@pytest.mark.faults  # a second real sweep, of several workers a trial (as on a cluster): its own tier, for time
def test_a_trial_of_two_workers_trains_under_ddp_and_reports_every_epoch(bars, tmp_path):
    """TorchTrainer's path end to end: two workers (a process group over gloo), rank 0's reports and checkpoints."""
    values = space_values(trials=1, initial=[SPACE["initial"][0]], scheduler={"max_epochs": 2, "grace_period": 1},
                          resources={"workers": 2, "cpus_per_worker": 1})
    values["gate"] = {"epoch": 2}  # no threshold: only the two workers' training is asked about
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(values))
    storage = tmp_path / "sweeps"
    done = run_cli("sweep", "--data", bars, "--space", space, "--storage", storage,
                   "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "1 trial(s) at once, each 2 worker(s) of 1 CPU" in done.stdout
    (record,) = ledger(storage / "t").values()
    assert (record["stop_reason"], record["stop_epoch"]) == ("completed", 2)
    assert len(record["val_curve"]) == 3  # E0 and both epochs, each once
    assert list((storage / "t" / "train" / record["trial_id"]).glob("checkpoint_*"))


class Recorded:
    """Stands for a controller host: `run.remote(kwargs)` gives back the controller's arguments."""

    class run:  # noqa: N801 - as a Ray actor's method
        @staticmethod
        def remote(kwargs: dict) -> dict:
            return kwargs


@pytest.mark.parametrize("started_here", [True, False])
def test_on_a_ray_started_here_a_trial_asks_no_autoscaler_for_its_workers(started_here, monkeypatch, tmp_path):
    """Ray Train's FixedScalingPolicy, with no request to the autoscaling coordinator where nothing scales the Ray;
    a cluster's trials keep Ray Train's own."""
    from ray.train.v2._internal.execution.scaling_policy import FixedScalingPolicy, create_scaling_policy

    from tuning.sweep import lean_trainer as module
    from tuning.sweep.ray_env import NO_AUTOSCALER, sweep_env

    assert (sweep_env(local=True).get(NO_AUTOSCALER), sweep_env(local=False).get(NO_AUTOSCALER)) == ("1", None)
    monkeypatch.setenv(NO_AUTOSCALER, "1") if started_here else monkeypatch.delenv(NO_AUTOSCALER, raising=False)
    monkeypatch.setattr(module.HOSTS, "take", lambda: Recorded)
    monkeypatch.setattr(module.HOSTS, "give_back", lambda host: None)
    monkeypatch.setattr(module.ray, "get", lambda kwargs: kwargs)
    single = trainer(1, tmp_path)
    policy = create_scaling_policy(single.scaling_config)
    assert type(policy) is FixedScalingPolicy  # what Ray Train hands its controller
    handed = []  # from a thread, as a Tune trial runs it: Ray Train registers a SIGINT handler in the main one
    thread = threading.Thread(target=lambda: handed.append(
        single._initialize_and_run_controller(scaling_policy=policy)["scaling_policy"]))
    thread.start()
    thread.join(30)
    (handed,) = handed
    assert type(handed) is (module.UnrequestedScaling if started_here else FixedScalingPolicy)
    assert handed.scaling_config is single.scaling_config


def test_a_trial_that_asks_no_autoscaler_never_reaches_the_coordinator_and_still_sizes_its_workers(monkeypatch,
                                                                                                    tmp_path):
    from ray.train.v2._internal.execution.scaling_policy import ResizeDecision, scaling_policy

    from tuning.sweep.lean_trainer import UnrequestedScaling

    def reached(*_: object) -> None:
        raise AssertionError("the autoscaling coordinator was asked")

    monkeypatch.setattr(scaling_policy, "TrainAutoscalingCoordinatorClient", reached)
    policy = UnrequestedScaling(trainer(1, tmp_path).scaling_config)
    policy.after_controller_start(None)
    decision = policy.make_decision_for_non_running_worker_group()
    assert isinstance(decision, ResizeDecision) and decision.num_workers == 1
    policy.make_decision_for_running_worker_group(None, None)
    policy.before_controller_abort()
    asyncio.run(policy.before_controller_shutdown())


def test_ray_trains_fixed_scaling_reaches_the_coordinator_only_through_what_the_trial_leaves_out():
    """Where Ray Train's policy touches the coordinator's client: the two methods UnrequestedScaling replaces, the
    calls they would make, and the cancel that returns at once without a client."""
    from ray.train.v2._internal.execution.scaling_policy import FixedScalingPolicy, ScalingPolicy

    def source(cls: type, name: str) -> str:
        return inspect.getsource(vars(cls)[name])

    touching = {name for name, member in vars(ScalingPolicy).items()
                if callable(member) and "_coordinator_client" in inspect.getsource(member)}
    assert touching == {"__init__", "after_controller_start", "_maybe_send_resource_request",
                        "_send_resource_request", "_cancel_resource_request"}
    assert "if self._coordinator_client is None:\n            return" in source(ScalingPolicy, "_cancel_resource_request")
    for hook in ("before_controller_shutdown", "before_controller_abort"):
        assert "self._cancel_resource_request()" in source(ScalingPolicy, hook)
    for decision in ("make_decision_for_non_running_worker_group", "make_decision_for_running_worker_group"):
        assert "self._maybe_send_resource_request()" in source(FixedScalingPolicy, decision)
