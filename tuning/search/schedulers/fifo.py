"""none: no early stopping rule. Ray's FIFOScheduler behind the gate: every trial the gate, a non-finite loss or a
refused combination does not stop runs to max_epochs. It keeps no state, so a resume has nothing to rebuild.
"""

from __future__ import annotations

from ray.tune.schedulers import FIFOScheduler

from tuning.search.curves import CurveSource
from tuning.search.gate import GateConfig
from tuning.search.scheduler_config import SchedulerConfig
from tuning.search.schedulers.gated import Gated


class GatedFIFO(Gated, FIFOScheduler):
    def __init__(self, scheduler: SchedulerConfig, gate: GateConfig, curves: CurveSource | None = None) -> None:
        super().__init__()
        self.gated(gate, curves)
