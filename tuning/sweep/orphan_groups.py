"""Worker placement groups no trial's run has given back, found and given back by the sweep's driver.

A Ray Train controller that dies without ending its run (killed with the Tune actor that owns it) leaves its
worker group's placement group behind: it lives as long as the sweep driver's job and keeps its CPUs (or
GPUs), and on a small cluster the trials left would wait for them forever. Ray Train starts a cleaner actor
per trial for this; mamba-tune leaves it out on the fast trial path (a process per trial,
tuning/sweep/lean_trainer.py; the public path keeps it). The
sweep's relay removes a trial's group as soon as Tune has ended the trial (tuning/sweep/report_relay.py).
This watch, one per sweep driver (so once per sweep and again on `resume`), gives back what that misses:
a group whose first worker died before naming it, or one a controller created just before it was killed,
while it restarted its worker group.

`OrphanGroups.give_back(now)` is called as the sweep runs (tuning/sweep/trial_lifecycle.py), and looks at
most every LOOK_EVERY_S seconds. It removes a placement group of this job that reserves CPUs or GPUs and in
which no actor lives, when:
- an actor has lived in it (its worker group has ended: a controller that ended normally has removed it
  already): at once;
- no actor has lived in it for GRACE_S seconds (a worker group's actors are placed within seconds of it).
Groups of other jobs are never touched. It needs Ray's state API, which a cluster's dashboard serves; a local Ray
started by the sweep has no dashboard (`use_state_api(False)`), and there the relay alone gives groups back.
"""

from __future__ import annotations

from typing import Any

import ray
from ray.util.placement_group import PlacementGroup

GRACE_S = 60.0  # never used this long, seen by two looks or more: orphaned
LOOK_EVERY_S = 15.0
# Whether this driver's Ray serves the state API, set by tuning/sweep/session.py's start_ray. The driver's, not a
# watch's: Tune restores a resumed sweep's callback (and its watch) as an earlier driver pickled it. Without a
# dashboard a look would not fail fast: Ray's state API retries finding one for 40 s.
_STATE_API = [True]


def use_state_api(available: bool) -> None:
    """Whether the watch may look: False where no dashboard serves Ray's state API (each look would time out)."""
    _STATE_API[0] = available


class OrphanGroups:
    """The sweep driver's watch over its job's worker placement groups (a new one in each driver)."""

    def __init__(self) -> None:
        self.unused_since: dict[str, float] = {}  # placement group id (hex) -> when a look first found it never used
        self.looked = -LOOK_EVERY_S

    def give_back(self, now: float) -> list[str]:
        """Remove the orphaned groups; -> their ids. Looks at most every LOOK_EVERY_S seconds; without Ray's state API
        (no dashboard), gives nothing back."""
        if not _STATE_API[0] or now - self.looked < LOOK_EVERY_S:
            return []
        self.looked = now
        try:
            ended, never_used = _unused_worker_groups(ray.get_runtime_context().get_job_id())
        except Exception:  # noqa: BLE001 - the state API unreachable: the sweep runs on as Ray left it
            return []
        self.unused_since = {group: self.unused_since.get(group, now) for group in never_used}
        orphans = ended + [group for group, since in self.unused_since.items() if now - since >= GRACE_S]
        for group in orphans:
            ray.util.remove_placement_group(PlacementGroup(ray.PlacementGroupID(bytes.fromhex(group))))
            self.unused_since.pop(group, None)
        return orphans


def _unused_worker_groups(job_id: str) -> tuple[list[str], set[str]]:
    """This job's created placement groups that reserve CPUs or GPUs and hold no actor that is not dead:
    (those some actor has lived in, sorted; those none has)."""
    from ray.util.state import list_actors, list_placement_groups

    groups = list_placement_groups(filters=[("state", "=", "CREATED"), ("creator_job_id", "=", job_id)],
                                   detail=True, limit=10_000, raise_on_missing_output=False)
    candidates = {group.placement_group_id for group in groups if _reserves_workers(group.bundles)}
    if not candidates:
        return [], set()
    # Only this job's actors can live in its groups: on a shared cluster the others are not listed.
    actors = list_actors(filters=[("job_id", "=", job_id)], detail=True, limit=10_000, raise_on_missing_output=False)
    live = {actor.placement_group_id for actor in actors if actor.placement_group_id and actor.state != "DEAD"}
    lived = {actor.placement_group_id for actor in actors if actor.placement_group_id}
    unused = candidates - live
    return sorted(unused & lived), unused - lived


def _reserves_workers(bundles: list[dict[str, Any]]) -> bool:
    """Whether a group's bundles reserve CPUs or GPUs (a Tune trial's own group reserves head memory only)."""
    return any(bundle.get("unit_resources", {}).get(kind, 0) > 0 for bundle in bundles for kind in ("CPU", "GPU"))
