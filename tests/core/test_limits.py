"""The machine's bound on the worker count and the network's size: open files and memory (MemAvailable or the
process's memory cgroup, the lower), whichever is lower, named in the error."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from a3c.core import limits
from a3c.core.errors import BadInput
from tests.support.commands import call_a3c


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """Set this process's open-file limit and MemAvailable (kB) as the test says."""

    def set_limits(files: int, mem_kb: int | None) -> None:
        monkeypatch.setattr(limits.resource, "getrlimit", lambda kind: (files, resource.RLIM_INFINITY))
        meminfo = tmp_path / "meminfo"
        meminfo.write_text("MemTotal: 9 kB\n" + ("" if mem_kb is None else f"MemAvailable: {mem_kb} kB\n"))
        monkeypatch.setattr(limits, "MEMINFO", meminfo)
        # no cgroup limit here, whatever the machine running the tests has (fake_cgroup sets one)
        monkeypatch.setattr(limits, "CGROUP_ROOT", tmp_path / "no-cgroup", raising=False)
        monkeypatch.setattr(limits, "SELF_CGROUP", tmp_path / "no-self-cgroup", raising=False)

    return set_limits


def fake_cgroup(root: Path, own: str, files: dict[str, str]) -> Path:
    """A cgroup mount under ``root`` with ``files`` (relative path: content) and this process in ``own``
    (a /proc/self/cgroup line); the /proc/self/cgroup file's path."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / own.split(":")[2].lstrip("/")).mkdir(parents=True, exist_ok=True)
    self_cgroup = root.parent / f"{root.name}-self"
    self_cgroup.write_text(own + "\n")
    return self_cgroup


def test_the_lower_of_open_files_and_memory_bounds_the_workers(machine):
    machine(1024, 16 * 2**20)  # 16 GiB: 256 workers; 1024 files: (1024 - 64) // 4 = 240
    assert limits.max_local_workers() == (240, "open files: ulimit -n 1024")
    machine(1_000_000, 2 * 2**20)  # 2 GiB: 32 workers
    assert limits.max_local_workers() == (32, "memory: 2.0 GiB available, ~64 MiB a worker")
    machine(1_000_000, None)
    assert limits.max_local_workers()[0] == (1_000_000 - 64) // 4


def test_more_workers_than_the_machine_holds_is_one_error_line(machine, tmp_path):
    machine(1_000_000, 2 * 2**20)
    result = call_a3c("train", "--env", "CartPole-v1", "--workers", "33", "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 2 and not (tmp_path / "run").exists()
    assert result.stderr == (
        "error: workers: 33 is not allowed on this machine; expected at most 32 (memory: 2.0 GiB available, "
        "~64 MiB a worker)\n"
    )


def test_a_cgroup_v2_limit_the_tightest_of_the_own_cgroup_and_its_ancestors_counts(tmp_path):
    # A Slurm job's or a systemd slice's memory.max above the process's own cgroup; usage less the inactive
    # file cache is what the limit holds (the working set).
    root = tmp_path / "cgroup"
    gib = 2**30
    self_cgroup = fake_cgroup(
        root,
        "0::/slice/job",
        {
            "cgroup.controllers": "cpu memory\n",
            "slice/memory.max": f"{4 * gib}\n",
            "slice/memory.current": f"{3 * gib}\n",
            "slice/memory.stat": f"anon 1\ninactive_file {gib}\n",
            "slice/job/memory.max": "max\n",
            "slice/job/memory.current": "1000\n",
        },
    )
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(f"MemAvailable: {64 * 2**20} kB\n")  # 64 GiB on the host
    memory = limits.available_memory(meminfo, root, self_cgroup)
    assert memory == limits.Memory(2 * gib, " (cgroup memory.max 4.0 GiB)")  # 4 - (3 - 1) GiB
    assert limits.max_local_workers(memory)[1] == (
        "memory: 2.0 GiB available (cgroup memory.max 4.0 GiB), ~64 MiB a worker"
    )
    (root / "slice" / "memory.max").write_text("max\n")
    assert limits.available_memory(meminfo, root, self_cgroup) == limits.Memory(64 * gib, "")


def test_a_cgroup_v1_limit_counts_and_its_no_limit_value_does_not(tmp_path):
    # Docker without a cgroup namespace: /proc/self/cgroup names /docker/ID, the mount is the container's own.
    root = tmp_path / "cgroup"
    self_cgroup = fake_cgroup(
        root,
        "4:memory:/docker/abc",
        {
            "memory/memory.limit_in_bytes": f"{2**30}\n",
            "memory/memory.usage_in_bytes": f"{2**29}\n",
            "memory/memory.stat": "total_inactive_file 0\n",
        },
    )
    assert limits.cgroup_memory_free(root, self_cgroup) == (2**29, "cgroup memory.limit_in_bytes 1.0 GiB")
    (root / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "no limit"
    assert limits.cgroup_memory_free(root, self_cgroup) is None
    assert limits.cgroup_memory_free(root, tmp_path / "missing") is None


def setup_for(tmp_path, workers: int, **values):
    """``a3c train --env CartPole-v1 --workers N --set ...`` up to the point where it would start."""
    from a3c.training.options import train_setup

    return train_setup(
        "CartPole-v1",
        {"workers": workers},
        values,
        run_dir=tmp_path / "run",
        force=False,
        resume=None,
        serial=False,
    )


def test_a_network_that_does_not_fit_the_memory_is_one_line_naming_its_field(machine, tmp_path):
    machine(1_000_000, 2 * 2**20)  # 2 GiB
    assert setup_for(tmp_path, 2, hidden_sizes=(256, 256)).config.hidden_sizes == (256, 256)
    with pytest.raises(BadInput) as bad:  # two bodies (policy, value) of 3 layers of 4096: 67M parameters
        setup_for(tmp_path, 2, hidden_sizes=(4096,) * 3)
    assert str(bad.value) == (
        "hidden_sizes: 4096,4096,4096 is not allowed on this machine; the network has 67,178,499 parameters, "
        "whose weights, adam moments, checkpoint snapshot and 2 workers' and the evaluator's copies need "
        "~3.0 GiB beside ~64 MiB a worker, and memory has 2.0 GiB available; expected a smaller network or "
        "fewer workers"
    )
    assert not (tmp_path / "run").exists()


def test_the_ray_backend_starting_its_own_cluster_checks_this_machine(machine, tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    machine(1_000_000, 2 * 2**20)
    with pytest.raises(BadInput, match=r"^workers: 40 is not allowed on this machine; expected at most 32 "):
        setup_for(tmp_path, 40, backend="ray")
    with pytest.raises(BadInput, match=r"^hidden_sizes: 4096,4096,4096,4096 is not allowed on this machine"):
        setup_for(tmp_path, 2, backend="ray", hidden_sizes=(4096,) * 4)
