"""Worker placement groups Ray Train leaves behind when Ray Tune stops a trial, given back by the sweep.

To stop a trial, Tune kills its driver; Ray then stops the trial's Ray Train controller (SIGTERM, during
which its event loop still runs) and the controller's workers. A controller that sees its workers die in
that moment restarts its worker group (resources.max_failures allows it) and creates a placement group just
before it is killed. Ray Train's placement-group cleaner knows only the group registered before, and the
new one, whose lifetime is the sweep driver's job, keeps its CPUs (or GPUs) until the sweep ends: on a small
cluster the trials left wait for them forever (seen on 2 cores, 2 trials of the 64 of `make test-load`).

`OrphanGroups.give_back(now)`, called as the sweep runs (tuning/sweep/trial_lifecycle.py), removes a
placement group of this job that reserves CPUs or GPUs and in which no actor has lived for GRACE_S seconds:
a worker group's actors are placed within seconds of its group. Groups of other jobs are never touched.
"""

from __future__ import annotations

from typing import Any

import ray
from ray.util.placement_group import PlacementGroup

GRACE_S = 60.0  # unused this long, seen by two looks or more: orphaned
LOOK_EVERY_S = 15.0


class OrphanGroups:
    """The sweep driver's watch over its job's worker placement groups (a new one in each driver)."""

    def __init__(self) -> None:
        self.unused_since: dict[str, float] = {}  # placement group id (hex) -> when a look first found it unused
        self.looked = -LOOK_EVERY_S

    def give_back(self, now: float) -> list[str]:
        """Remove the groups unused for GRACE_S seconds; -> their ids. Looks at most every LOOK_EVERY_S seconds;
        without Ray's state API (no dashboard), gives nothing back."""
        if now - self.looked < LOOK_EVERY_S:
            return []
        self.looked = now
        try:
            unused = _unused_worker_groups(ray.get_runtime_context().get_job_id())
        except Exception:  # noqa: BLE001 - the state API unreachable: the sweep runs on as Ray left it
            return []
        self.unused_since = {group: self.unused_since.get(group, now) for group in unused}
        orphans = [group for group, since in self.unused_since.items() if now - since >= GRACE_S]
        for group in orphans:
            ray.util.remove_placement_group(PlacementGroup(ray.PlacementGroupID(bytes.fromhex(group))))
            del self.unused_since[group]
        return orphans


def _unused_worker_groups(job_id: str) -> set[str]:
    """This job's created placement groups that reserve CPUs or GPUs and hold no actor that is not dead."""
    from ray.util.state import list_actors, list_placement_groups

    groups = list_placement_groups(filters=[("state", "=", "CREATED"), ("creator_job_id", "=", job_id)],
                                   detail=True, limit=10_000, raise_on_missing_output=False)
    candidates = {group.placement_group_id for group in groups if _reserves_workers(group.bundles)}
    if not candidates:
        return set()
    # Only this job's actors can live in its groups: on a shared cluster the others are not listed.
    actors = list_actors(filters=[("state", "!=", "DEAD"), ("job_id", "=", job_id)], detail=True, limit=10_000,
                         raise_on_missing_output=False)
    return candidates - {actor.placement_group_id for actor in actors if actor.placement_group_id}


def _reserves_workers(bundles: list[dict[str, Any]]) -> bool:
    """Whether a group's bundles reserve CPUs or GPUs (a Tune trial's own group reserves head memory only)."""
    return any(bundle.get("unit_resources", {}).get(kind, 0) > 0 for bundle in bundles for kind in ("CPU", "GPU"))
