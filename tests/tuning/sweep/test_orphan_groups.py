"""Worker placement groups left with no live actor are given back (tuning/sweep/orphan_groups.py): at once when
their actors have died, after a grace period when none ever lived there; on a real local Ray with a dashboard
(Ray's state API), as a cluster has one. Without one the watch never looks."""

from __future__ import annotations

import pytest
import ray
import ray.util.state
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from tuning.sweep.orphan_groups import GRACE_S, LOOK_EVERY_S, OrphanGroups, use_state_api

pytestmark = pytest.mark.faults  # actors died: their groups given back (a Ray with a dashboard for each test)


@ray.remote(num_cpus=1)
class Worker:
    def ping(self) -> str:
        return "pong"


@pytest.fixture()
def ray_with_dashboard():
    ray.init(num_cpus=2, include_dashboard=True, logging_level="ERROR", log_to_driver=False)
    use_state_api(True)
    yield
    ray.shutdown()


def states() -> dict[str, str]:
    return {g.placement_group_id: g.state for g in ray.util.state.list_placement_groups(limit=1000)}


def test_only_a_worker_group_no_actor_has_used_for_the_grace_period_is_given_back(ray_with_dashboard):
    orphan = placement_group([{"CPU": 1}])  # what a killed controller leaves: nobody will use it
    used = placement_group([{"CPU": 1}])
    head_memory = placement_group([{"memory": 2**20}])  # a Tune trial's own group: never a worker's
    ray.get([orphan.ready(), used.ready(), head_memory.ready()], timeout=60)
    worker = Worker.options(scheduling_strategy=PlacementGroupSchedulingStrategy(used)).remote()
    assert ray.get(worker.ping.remote(), timeout=60) == "pong"

    watch = OrphanGroups()
    assert watch.give_back(0.0) == []  # first seen unused: the grace period starts
    assert watch.give_back(LOOK_EVERY_S / 2) == []  # too soon to look again
    assert watch.give_back(GRACE_S) == [orphan.id.hex()]
    assert states()[orphan.id.hex()] == "REMOVED"
    assert states()[used.id.hex()] == "CREATED" and states()[head_memory.id.hex()] == "CREATED"
    assert watch.give_back(2 * GRACE_S + LOOK_EVERY_S) == []
    assert ray.get(worker.ping.remote(), timeout=60) == "pong"


def test_a_group_whose_actors_died_is_given_back_at_the_first_look(ray_with_dashboard):
    stopped = placement_group([{"CPU": 1}])  # a trial Tune stopped: its worker died, its group stayed
    running = placement_group([{"CPU": 1}])
    ray.get([stopped.ready(), running.ready()], timeout=60)
    dead = Worker.options(scheduling_strategy=PlacementGroupSchedulingStrategy(stopped)).remote()
    alive = Worker.options(scheduling_strategy=PlacementGroupSchedulingStrategy(running)).remote()
    assert ray.get([dead.ping.remote(), alive.ping.remote()], timeout=60) == ["pong", "pong"]
    ray.kill(dead)

    watch = OrphanGroups()
    assert watch.give_back(0.0) == [stopped.id.hex()]  # no grace period for it
    assert states()[stopped.id.hex()] == "REMOVED" and states()[running.id.hex()] == "CREATED"
    assert watch.give_back(LOOK_EVERY_S) == []
    assert ray.get(alive.ping.remote(), timeout=60) == "pong"


def test_without_a_state_api_the_watch_never_looks(ray_with_dashboard):
    orphan = placement_group([{"CPU": 1}])
    ray.get(orphan.ready(), timeout=60)
    use_state_api(False)  # a local Ray the sweep started has no dashboard
    try:
        assert OrphanGroups().give_back(2 * GRACE_S) == []
        assert states()[orphan.id.hex()] == "CREATED"
    finally:
        use_state_api(True)
