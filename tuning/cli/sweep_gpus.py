"""gpus_per_trial against the cluster's GPUs, before a sweep plans its trials: `auto` settled where there are none."""

from __future__ import annotations

import sys
from typing import Any

from tuning.errors import UsageError
from tuning.search.space import AUTO, parse_space


def settle_gpus(values: dict[str, Any], space: Any, gpus: float, source: str,
                local: bool = True) -> tuple[dict[str, Any], Any]:
    """The space's values and space, with gpus_per_trial auto settled where the cluster has no GPU and can launch
    none: on a Ray this sweep started (`local`, a laptop) made 0, said in a line; on a cluster it joined, refused
    (UsageError): its GPUs may come from an autoscaler the sweep cannot read, and a sweep on CPUs would be silent.
    A sweep that asks for no GPU where there are GPUs is warned, in one line."""
    asked = space.resources.gpus_per_trial
    if asked == AUTO and not gpus and not local:
        raise UsageError("resources: gpus_per_trial auto, and no node of this cluster has a GPU nor does its "
                         "autoscaler (if any) say it can launch one; auto trains on GPUs on a cluster; set "
                         "resources.gpus_per_trial: 0 (or --set resources.gpus_per_trial=0) to train on CPUs, or "
                         "give the autoscaler a GPU node group (`mamba-tune doctor` shows what the sweep sees)")
    if asked == AUTO and not gpus:
        print("resources: gpus_per_trial auto, and no node of this cluster has a GPU or can launch one: "
              "trials run on CPUs", flush=True)
        values = {**values, "resources": {**values["resources"], "gpus_per_trial": 0}}
        return values, parse_space(values, source)
    if asked == 0 and gpus:
        print(f"warning: resources.gpus_per_trial is 0 and this cluster has {gpus:g} GPU(s) or can launch them: "
              "trials run on CPUs and leave the GPUs idle; set gpus_per_trial to auto (or a number) to train on "
              "them", file=sys.stderr, flush=True)
    return values, space
