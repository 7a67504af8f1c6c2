"""The worker count ``workers = auto`` stands for: one worker per CPU this process may use, less one for the
evaluator and the trainer on larger machines."""

from __future__ import annotations

import os

AUTO = "auto"
# Above this many CPUs one is left to the evaluator (greedy episodes every eval_interval) and the trainer
# (polling, logging, checkpoints); at or below it every CPU gets a worker: on 2 cores, 2 workers solved
# fastest (docs/results.md).
SPARE_CPU_ABOVE = 4


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask: ``taskset``, a container's cpuset), not the
    machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity mask on this platform (macOS)
        return os.cpu_count() or 1


def auto_workers(cpus: int) -> int:
    """Workers for ``cpus`` usable CPUs: one each, less one above ``SPARE_CPU_ABOVE``."""
    return cpus - 1 if cpus > SPARE_CPU_ABOVE else max(1, cpus)
