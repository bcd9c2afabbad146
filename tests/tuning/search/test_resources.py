"""Trial planning over the cluster's nodes: concurrency, per-worker resources, fail-fast refusals."""

from __future__ import annotations

import pytest

from tuning.search.resources import (
    HEAD_RESOURCE,
    TRIAL_DRIVER_MEMORY_MB,
    TRIAL_DRIVER_RESOURCES,
    ResourceError,
    TrialPlan,
    gpus_on,
    plan_trials,
)
from tuning.search.space import ResourceConfig

LAPTOP = [{"CPU": 2.0}]
GPU_NODES = [{"CPU": 8.0, "GPU": 1.0}, {"CPU": 32.0, "GPU": 4.0}]


def test_plan_trials_fills_the_cpus_of_a_laptop():
    assert plan_trials(ResourceConfig(workers=1, cpus_per_worker=1), LAPTOP) == TrialPlan(1, 1.0, 0.0, 2)


def test_plan_trials_caps_concurrency_at_max_concurrent():
    assert plan_trials(ResourceConfig(max_concurrent=1), LAPTOP).concurrency == 1


def test_plan_trials_packs_fractional_gpus():
    plan = plan_trials(ResourceConfig(workers=1, cpus_per_worker=1, gpus_per_trial=0.25), GPU_NODES)
    assert (plan.gpus_per_worker, plan.concurrency) == (0.25, 20)  # 4 per GPU, 5 GPUs
    assert plan.worker_resources() == {"CPU": 1.0, "GPU": 0.25}


def test_plan_trials_gives_auto_a_whole_gpu_a_worker_until_the_probe_packs_them():
    plan = plan_trials(ResourceConfig(workers=1, gpus_per_trial="auto"), GPU_NODES)
    assert (plan.gpus_per_worker, plan.concurrency) == (1.0, 5)  # one a GPU (auto packs one worker a trial)
    with pytest.raises(ResourceError, match=r"1 worker\(s\) of 1 CPU and 1 GPU each.*0 GPU\) can hold 0"):
        plan_trials(ResourceConfig(gpus_per_trial="auto"), LAPTOP)  # auto on a machine without GPUs


def test_plan_trials_splits_a_trials_gpus_over_its_workers():
    plan = plan_trials(ResourceConfig(workers=4, cpus_per_worker=2, gpus_per_trial=4), GPU_NODES)
    assert (plan.gpus_per_worker, plan.concurrency) == (1.0, 1)  # 5 one-GPU bundles hold one 4-worker trial


def test_plan_trials_places_workers_only_on_nodes_with_their_custom_resource():
    nodes = [{"CPU": 8.0, "node:__internal_head__": 1.0}, {"CPU": 2.0, "trial_slot": 2.0}]
    plan = plan_trials(ResourceConfig(cpus_per_worker=1, custom={"trial_slot": 1}), nodes)
    assert plan.concurrency == 2 and plan.worker_resources() == {"CPU": 1.0, "trial_slot": 1.0}
    assert plan.describe() == "2 trial(s) at once, each 1 worker(s) of 1 CPU + 1 trial_slot"
    with pytest.raises(ResourceError, match=r"1 worker\(s\) of 1 CPU and 1 a100 each, the cluster "
                                            r"\(2 node\(s\), 10 CPU, 0 GPU, 0 a100\) can hold 0"):
        plan_trials(ResourceConfig(custom={"a100": 1}), nodes)


@pytest.mark.parametrize(
    ("config", "match"),
    [
        (ResourceConfig(cpus_per_worker=4), r"a trial asks for 1 worker\(s\) of 4 CPU each, the cluster "
                                            r"\(1 node\(s\), 2 CPU, 0 GPU\) can hold 0"),
        (ResourceConfig(gpus_per_trial=1), r"1 worker\(s\) of 1 CPU and 1 GPU each.*0 GPU\) can hold 0"),
        (ResourceConfig(workers=3), r"3 worker\(s\) of 1 CPU each.*can hold 2"),
    ],
)
def test_plan_trials_refuses_what_the_cluster_can_never_hold(config, match):
    with pytest.raises(ResourceError, match=match):
        plan_trials(config, LAPTOP)


def test_plan_trials_refuses_a_fraction_above_one_gpu_per_worker():
    with pytest.raises(ResourceError, match=r"1.5 GPU a worker.*whole GPUs"):
        plan_trials(ResourceConfig(workers=2, gpus_per_trial=3), GPU_NODES)


def test_gpus_on_counts_the_gpus_of_the_fullest_view_of_the_cluster():
    assert gpus_on([LAPTOP]) == 0 and gpus_on([]) == 0
    assert gpus_on([LAPTOP, GPU_NODES]) == gpus_on([GPU_NODES]) == sum(n.get("GPU", 0) for n in GPU_NODES) > 0


def test_plan_trials_runs_no_more_trials_than_the_heads_memory_holds_drivers_for():
    head = {"CPU": 8.0, HEAD_RESOURCE: 1.0, "memory": 4.5 * TRIAL_DRIVER_RESOURCES["memory"]}
    gpu_nodes = [{"CPU": 4.0, "GPU": 1.0}] * 8
    plan = plan_trials(ResourceConfig(gpus_per_trial=0.25), [head, *gpu_nodes])  # the workers hold 32
    assert (plan.concurrency, plan.head_bound) == (4, True)
    assert plan.describe() == ("4 trial(s) at once, each 1 worker(s) of 1 CPU + 0.25 GPU (as many as the head's "
                               f"memory holds, {TRIAL_DRIVER_MEMORY_MB} MB a trial; a larger head runs more)")
    plan = plan_trials(ResourceConfig(gpus_per_trial=1), [head, *gpu_nodes[:2]])  # the workers hold 2
    assert (plan.concurrency, plan.head_bound) == (2, False) and "head" not in plan.describe()
    with pytest.raises(ResourceError, match=r"the head node has 512 MB of memory for Ray's tasks and a trial's "
                                            rf"driver needs {TRIAL_DRIVER_MEMORY_MB} MB there"):
        plan_trials(ResourceConfig(), [{**head, "memory": 512 * 2**20}, *gpu_nodes])
