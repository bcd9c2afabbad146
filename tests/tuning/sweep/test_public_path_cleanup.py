"""On the public trial path, a trial the sweep stops leaves nothing of Ray Train's behind on a Ray the sweep starts.

Ray Train starts a PlacementGroupCleaner for each run (a detached actor, its own process), which watches the run's
controller through the dashboard's state API and, once the controller is dead, removes the run's placement group and
ends. The relay ends a stopped public trial by killing that controller (tuning/sweep/report_relay.py): without the
dashboard the cleaner could never see it dead, and would stay, idle, one per stopped trial. So a Ray started for a
public-path sweep starts with its dashboard (tuning/sweep/session.py's start_ray); integration: a real local Ray.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
import ray
import ray.train
from ray.util.placement_group import PlacementGroup, placement_group_table
from ray.util.state import list_actors

from tuning.search.resources import TrialPlan
from tuning.sweep import session
from tuning.sweep.ray_env import API_SERVER
from tuning.sweep.relay_callback import RelayReports
from tuning.sweep.report_relay import fit_reporting_to_tune, start_relay
from tuning.sweep.trial_trainer import trial_trainer

pytestmark = pytest.mark.integration

PLAN = TrialPlan(workers=1, cpus_per_worker=1, gpus_per_worker=0, concurrency=1)
CLEANERS_ALIVE = [("class_name", "=", "PlacementGroupCleaner"), ("state", "=", "ALIVE")]
CLEANER_GONE_WAIT_S = 60.0  # the cleaner looks at its controller every second or so, each look a state-API call


def reporting_forever(config: dict[str, Any]) -> None:
    """A run that reports, naming its placement group, until it is ended."""
    group = ray.util.get_current_placement_group()
    epoch = 0
    while True:
        ray.train.report({"epoch": epoch, "group": group.id.hex()})
        epoch += 1
        time.sleep(0.5)


@pytest.fixture()
def ray_of_a_public_sweep():
    """A local Ray started as a sweep on the public trial path starts it; this process's environment (where
    start_ray names that Ray's dashboard for its processes) as it was, afterwards."""
    assert not ray.is_initialized(), "a Ray of an earlier test is still up: this test must start its own"
    before = dict(os.environ)
    assert session.start_ray(None, trial_path_setting="public") is True
    yield
    session.ray.shutdown()
    os.environ.clear()
    os.environ.update(before)


def cleaners_alive() -> int:
    """Asked of this test's Ray (the dashboard start_ray named: another Ray on the machine would leave a client that
    names none unsure which)."""
    return len(list_actors(address=os.environ[API_SERVER], filters=CLEANERS_ALIVE))


def test_a_stopped_public_trial_leaves_no_placement_group_cleaner_and_no_placement_group(ray_of_a_public_sweep,
                                                                                          tmp_path):
    relay = start_relay()
    run = ray.train.RunConfig(name="t", storage_path=str(tmp_path), callbacks=[RelayReports(relay, "t", hosted=False)])
    trainer = trial_trainer(reporting_forever, {}, PLAN, run, fast=False)
    reported: list[dict[str, Any]] = []
    watched: list[int] = []

    def stopped_at_its_first_report(result: dict[str, Any]) -> None:
        reported.append(result)
        watched.append(cleaners_alive())  # the run's cleaner, watching its controller
        raise SystemExit(0)  # what ray.tune.report raises when Tune stops the trial

    with pytest.raises(SystemExit):
        fit_reporting_to_tune(trainer.fit, relay, "t", stopped_at_its_first_report)  # the relay kills the controller
    assert watched == [1]
    deadline = time.monotonic() + CLEANER_GONE_WAIT_S
    while cleaners_alive() and time.monotonic() < deadline:
        time.sleep(1.0)
    assert cleaners_alive() == 0, "Ray Train's PlacementGroupCleaner outlived the run it cleans up after"
    (first,) = reported
    group = PlacementGroup(ray.PlacementGroupID(bytes.fromhex(first["group"])))
    assert placement_group_table(group)["state"] == "REMOVED"
