"""How many worker processes this machine can hold: file descriptors and memory, read from the OS.

Measured on the 2-core dev machine (CartPole, 2/8/16 workers): the trainer holds about 30 file descriptors
plus 2 per worker, and a worker forked from the forkserver about 48 MB of proportional memory (PSS; an Atari
worker more). The bounds below keep a margin over both.
"""

from __future__ import annotations

import resource
from pathlib import Path

FDS_BASE, FDS_PER_WORKER = 64, 4
WORKER_MEMORY = 64 * 2**20  # bytes
MEMINFO = Path("/proc/meminfo")


def available_memory() -> int | None:
    """The kernel's MemAvailable in bytes, or None where /proc/meminfo does not say (not Linux)."""
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def max_local_workers() -> tuple[int, str]:
    """The most worker processes this process can start, and the limit that sets it, in words."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    bounds = []
    if soft != resource.RLIM_INFINITY:
        bounds.append(((soft - FDS_BASE) // FDS_PER_WORKER, f"open files: ulimit -n {soft}"))
    memory = available_memory()
    if memory is not None:
        bounds.append(
            (memory // WORKER_MEMORY, f"memory: {memory / 2**30:.1f} GiB available, ~64 MiB a worker")
        )
    return min(bounds, default=(10**9, "no limit found"))
