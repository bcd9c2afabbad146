"""The machine's busy CPU time, which the benchmarks of Ray's costs measure: a Ray actor's process is the raylet's
child, not the benchmark's, so only the whole machine's time counts every process."""

from __future__ import annotations

import psutil


def busy_cpu_s() -> float:
    """CPU seconds every core of this machine has spent busy (user, nice, system) since boot."""
    times = psutil.cpu_times()
    return times.user + times.nice + times.system
