"""How many worker processes, and how large a network, this machine can hold: file descriptors and memory,
read from the OS. Memory is the lower of the kernel's MemAvailable and what this process's memory cgroup
still allows (a container's ``docker --memory``, a Kubernetes limit, a Slurm job's cgroup), since that
cgroup's limit, not the host's free memory, is where the OOM killer steps in.

Measured on the 2-core dev machine (CartPole, 2/8/16 workers): the trainer holds about 30 file descriptors
plus 2 per worker, and a worker forked from the forkserver about 48 MB of proportional memory (PSS; an Atari
worker more). The bounds below keep a margin over both.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path

FDS_BASE, FDS_PER_WORKER = 64, 4
WORKER_MEMORY = 64 * 2**20  # bytes
MEMINFO = Path("/proc/meminfo")
CGROUP_ROOT = Path("/sys/fs/cgroup")  # v2's unified mount; v1 mounts the memory controller at memory/
SELF_CGROUP = Path("/proc/self/cgroup")  # "0::/path" (v2), "N:memory:/path" (v1)
# cgroup v1 writes "no limit" as the largest page-aligned long (9223372036854771712): anything this large.
V1_NO_LIMIT = 2**62
PARAMETER_BYTES = 4  # float32
MOMENTS = {"adam": 2, "rmsprop": 1, "rmsprop_tf": 1}  # the shared optimizer's per-parameter state


@dataclass(frozen=True)
class Memory:
    """Bytes this process may still use, and where that bound was read, in words."""

    available: int
    source: str

    def words(self) -> str:
        """``"2.0 GiB available"`` (and, for a cgroup's bound, which limit said so)."""
        return f"{self.available / 2**30:.1f} GiB available{self.source}"


def meminfo_available(meminfo: Path = MEMINFO) -> int | None:
    """The kernel's MemAvailable in bytes, or None where ``meminfo`` does not say (not Linux)."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def cgroup_memory_free(root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> tuple[int, str] | None:
    """What this process's memory cgroup still allows, in bytes, and the limit file that says so; None
    without a limit (or without cgroups).

    The allowance is the limit less the working set (usage less the inactive file cache, which the kernel
    reclaims before it kills: the working set the kubelet and ``docker stats`` report). cgroup v2: the
    tightest ``memory.max`` of the process's own cgroup and its ancestors; cgroup v1: the memory
    controller's ``hierarchical_memory_limit`` (ancestors included), else ``memory.limit_in_bytes``. Inside a
    container the cgroup's path may not exist under the mount (no cgroup namespace): the mount's root is
    the container's own cgroup then."""
    v2_path, v1_path = _own_cgroups(self_cgroup)
    found = [free for free in (_v2_free(root, v2_path), _v1_free(root / "memory", v1_path)) if free]
    return min(found, default=None)


def available_memory(
    meminfo: Path | None = None, root: Path | None = None, self_cgroup: Path | None = None
) -> Memory | None:
    """The memory this process may still use: the lower of MemAvailable and its cgroup's allowance (paths
    default to the machine's own); None where neither is known."""
    host = meminfo_available(meminfo or MEMINFO)
    cgroup = cgroup_memory_free(root or CGROUP_ROOT, self_cgroup or SELF_CGROUP)
    if cgroup is not None and (host is None or cgroup[0] < host):
        return Memory(max(0, cgroup[0]), f" ({cgroup[1]})")
    return None if host is None else Memory(host, "")


def max_local_workers(memory: Memory | None = None) -> tuple[int, str]:
    """The most worker processes this process can start, and the limit that sets it, in words; ``memory``:
    ``available_memory()`` unless given."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    bounds = []
    if soft != resource.RLIM_INFINITY:
        bounds.append(((soft - FDS_BASE) // FDS_PER_WORKER, f"open files: ulimit -n {soft}"))
    memory = memory or available_memory()
    if memory is not None:
        bounds.append((memory.available // WORKER_MEMORY, f"memory: {memory.words()}, ~64 MiB a worker"))
    return min(bounds, default=(10**9, "no limit found"))


def model_memory(parameters: int, optimizer: str, workers: int) -> int:
    """Bytes a run's network takes in memory, for ``parameters`` float32 parameters: the shared weights and
    the shared optimizer's moments (``MOMENTS``), the trainer's checkpoint snapshot of both, and per worker
    and for the evaluator a local copy of the weights and one of the gradients."""
    shared = (1 + MOMENTS.get(optimizer, 2)) * parameters
    return PARAMETER_BYTES * (2 * shared + 2 * (workers + 1) * parameters)


def _own_cgroups(self_cgroup: Path) -> tuple[str | None, str | None]:
    """This process's cgroup v2 path and its v1 memory controller's path (``/proc/self/cgroup``)."""
    v2 = v1 = None
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return None, None
    for line in lines:
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if number == "0" and controllers == "":
            v2 = path
        elif "memory" in controllers.split(","):
            v1 = path
    return v2, v1


def _inside(mount: Path, path: str | None) -> Path:
    """The folder of cgroup ``path`` under ``mount``, or the mount's root where it is not there (or the path
    leads above the mount: a cgroup namespace's view of a process outside it)."""
    relative = Path((path or "/").lstrip("/"))
    folder = mount / relative
    return folder if ".." not in relative.parts and folder.is_dir() else mount


def _v2_free(root: Path, path: str | None) -> tuple[int, str] | None:
    """The tightest allowance of the v2 cgroup ``path`` and its ancestors under ``root``."""
    if path is None or not (root / "cgroup.controllers").exists():
        return None
    folder, found = _inside(root, path), []
    for level in (folder, *folder.parents):
        limit = _read_int(level / "memory.max")
        usage = _read_int(level / "memory.current")
        if limit is not None and usage is not None:
            working_set = usage - _stat(level / "memory.stat", "inactive_file")
            found.append((limit - working_set, f"cgroup memory.max {limit / 2**30:.1f} GiB"))
        if level == root:
            break
    return min(found, default=None)


def _v1_free(mount: Path, path: str | None) -> tuple[int, str] | None:
    """The allowance of the v1 memory cgroup ``path`` under ``mount`` (its ancestors' limits included)."""
    if path is None:
        return None
    folder = _inside(mount, path)
    limit = _stat(folder / "memory.stat", "hierarchical_memory_limit") or _read_int(
        folder / "memory.limit_in_bytes"
    )
    usage = _read_int(folder / "memory.usage_in_bytes")
    if limit is None or limit >= V1_NO_LIMIT or usage is None:
        return None
    working_set = usage - _stat(folder / "memory.stat", "total_inactive_file")
    return limit - working_set, f"cgroup memory.limit_in_bytes {limit / 2**30:.1f} GiB"


def _read_int(path: Path) -> int | None:
    """The integer a cgroup file holds; None for ``max`` (no limit), a missing or unreadable file."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _stat(path: Path, key: str) -> int:
    """The value of ``key`` in a cgroup's ``memory.stat``; 0 when not there."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        return 0
    return 0
