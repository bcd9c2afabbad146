"""The sweep's scheduler: the stopping rule `scheduler.kind` names, with the gate in front of it.

  asha       GatedASHA       (tuning/search/schedulers/asha.py; the default)
  hyperband  GatedHyperband  (schedulers/hyperband.py)
  median     GatedMedian     (schedulers/median.py)
  none       GatedFIFO       (schedulers/fifo.py)
Each rebuilds its state from the sweep's recorded curves when a Tune experiment starts or is restored
(schedulers/gated.py). GatedASHA is importable from here under the name older sweeps pickled it by.
"""

from __future__ import annotations

from tuning.search.curves import CurveSource
from tuning.search.gate import GateConfig
from tuning.search.scheduler_config import SchedulerConfig
from tuning.search.schedulers.asha import GatedASHA
from tuning.search.schedulers.fifo import GatedFIFO
from tuning.search.schedulers.gated import Gated
from tuning.search.schedulers.hyperband import GatedHyperband
from tuning.search.schedulers.median import GatedMedian

__all__ = ["SCHEDULERS", "GatedASHA", "GatedFIFO", "GatedHyperband", "GatedMedian", "make_scheduler"]

SCHEDULERS: dict[str, type[Gated]] = {"asha": GatedASHA, "hyperband": GatedHyperband, "median": GatedMedian,
                                      "none": GatedFIFO}


def make_scheduler(scheduler: SchedulerConfig, gate: GateConfig, curves: CurveSource | None = None) -> Gated:
    """The Ray Tune scheduler of `scheduler.kind`, the gate in front of it, its state rebuilt from `curves` (None:
    it starts empty)."""
    return SCHEDULERS[scheduler.kind](scheduler, gate, curves)  # type: ignore[call-arg]
