"""Which way a sweep's trials run under Ray Train, decided once per sweep: fast where Ray's private hooks fit, the
public API elsewhere.

    fast        tuning/sweep/lean_trainer.py: the trial's Train controller in a host its Tune actor reuses, the
                barrier kept by that host, two of Ray Train's per-trial callbacks left out, no autoscaler asked
                on a Ray started here, no runtime environment per actor. It rests on private hooks of Ray
                (tuning/sweep/fast_hooks.py), checked against the Ray installed.
    public API  Ray Train's TorchTrainer as Ray documents it, launched from the Tune function trainable: its own
                controller actor per trial, its default callbacks, Tune's and Train's runtime environments, and on
                a Ray the sweep starts its dashboard (session.start_ray: Ray Train's placement-group cleaner needs it).

Both give the same reports (the sweep's relay, a public UserCallback), checkpoints, stop reasons, ledger, MLflow
runs, resume and fault handling; the public path costs more per trial (bench/sweep_overhead.py --paths both).
`resources.trial_path` (auto, fast, public) picks one: auto takes the fast path where every hook fits.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import ray

from tuning.errors import UsageError
from tuning.search.space import TRIAL_PATHS
from tuning.sweep.fast_hooks import misfits

AUTO, FAST, PUBLIC = TRIAL_PATHS


@dataclass(frozen=True)
class TrialPath:
    """The path a sweep's trials take."""

    fast: bool  # the fast path; else Ray's public API
    why: str  # why the public path: the setting, or the first hook that does not fit ("" on the fast path)

    def describe(self) -> str:
        """For the sweep's `trial path: ...` line."""
        return f"fast (Ray {ray.__version__})" if self.fast else f"public API (Ray {ray.__version__}: {self.why})"


@functools.cache
def trial_path(setting: str) -> TrialPath:
    """The path of this process's sweeps for `setting` (resources.trial_path); the hooks are checked once."""
    if setting == PUBLIC:
        return TrialPath(False, "resources.trial_path is public")
    found = misfits()
    if not found:
        return TrialPath(True, "")
    hook, what = next(iter(found.items()))
    if setting == FAST:
        raise UsageError(f"resources.trial_path is fast, but Ray {ray.__version__} does not have its {hook} hook "
                         f"({what}); leave it auto (or set public) to run on Ray's public API")
    return TrialPath(False, f"{hook} hook: {what}")
