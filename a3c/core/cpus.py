"""The worker count ``workers = auto`` stands for: one worker per CPU this process may use, less one for the
evaluator and the trainer on larger machines."""

from __future__ import annotations

import math
import os
from pathlib import Path

AUTO = "auto"
# Above this many CPUs one is left to the evaluator (greedy episodes every eval_interval) and the trainer
# (polling, logging, checkpoints); at or below it every CPU gets a worker: on 2 cores, 2 workers solved
# fastest (docs/results.md).
SPARE_CPU_ABOVE = 4
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2: "QUOTA PERIOD", or "max PERIOD" for no limit


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask (``taskset``, a container's cpuset), capped by a
    cgroup CPU quota (``docker --cpus``, a Kubernetes limit); not the machine's count."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity mask on this platform (macOS)
        cpus = os.cpu_count() or 1
    quota = cpu_quota()
    return cpus if quota is None else max(1, min(cpus, quota))


def cpu_quota(path: Path = CGROUP_CPU_MAX) -> int | None:
    """The CPUs a cgroup v2 quota allows, rounded up (``200000 100000`` → 2); None without a quota."""
    try:
        quota, period = path.read_text().split()[:2]
        return None if quota == "max" else math.ceil(int(quota) / int(period))
    except (OSError, ValueError):
        return None


def auto_workers(cpus: int) -> int:
    """Workers for ``cpus`` usable CPUs: one each, less one above ``SPARE_CPU_ABOVE``."""
    return cpus - 1 if cpus > SPARE_CPU_ABOVE else max(1, cpus)
