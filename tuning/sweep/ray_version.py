"""The Ray a sweep's driver runs: one mamba-tune admits, and its cluster's very own.

ADMITTED_RAY is pyproject's range (tests/tuning/sweep/test_ray_version.py holds them equal). Its floor, Ray 2.56
(2026-06-29), is the oldest minor of the six months before the range was set that has what the public trial path
needs (Train V2 by default, launched from a Tune function trainable; UserCallback; Checkpoint and report as
mamba-tune uses them); the faults tier runs a sweep on it (tests/packaging/test_oldest_ray.py). Checked at the start
of the commands that start Ray, before anything of Ray Train is imported: an older Ray may not even import it.
"""

from __future__ import annotations

import re

from tuning.errors import UsageError

ADMITTED_RAY = ">=2.56,<2.61"  # pyproject's ray[default,train,tune] requirement
OLDEST_RAY = "2.56"
EXTRAS = "default,train,tune"


def minor(version: str) -> tuple[int, int]:
    """"2.56.1" (or "2.56", "3.0.0.dev0") -> (2, 56)."""
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None:
        raise ValueError(f"not a Ray version: {version!r}")
    return int(found[1]), int(found[2])


def check_ray_version(installed: str | None = None) -> None:
    """Refuse a Ray older than the oldest admitted (`installed`: ray.__version__)."""
    if installed is None:
        import ray

        installed = ray.__version__
    if minor(installed) < minor(OLDEST_RAY):
        raise UsageError(f"Ray {installed} is installed, older than Ray {OLDEST_RAY}, the oldest mamba-tune runs on "
                         f"(it admits ray{ADMITTED_RAY}); install an admitted one: "
                         f"pip install 'ray[{EXTRAS}]{ADMITTED_RAY}'")


def version_mismatch(exc: BaseException, where: str) -> UsageError | None:
    """Ray's refusal of a driver whose Ray (or Python) differs from the cluster's at `where`, as one line; None for
    any other error."""
    text = str(exc)
    rays, pythons = re.findall(r"Ray: (\S+)", text), re.findall(r"Python: (\S+)", text)
    if not text.startswith("Version mismatch") or len(rays) < 2 or len(pythons) < 2:
        return None
    return UsageError(f"{where}: the cluster runs Ray {rays[0]} on Python {pythons[0]}, this driver Ray {rays[1]} on "
                      f"Python {pythons[1]}, and a driver must match its cluster's exactly; install the cluster's here "
                      f"(pip install 'ray[{EXTRAS}]=={rays[0]}' on Python {pythons[0]}), or run the sweep on the "
                      "cluster (`ray job submit -- mamba-tune sweep ...`, docs/clusters.md)")
