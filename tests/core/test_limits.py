"""The machine's bound on the worker count: open files and memory, whichever is lower, named in the error."""

from __future__ import annotations

import resource

import pytest

from a3c.core import limits
from tests.support.commands import call_a3c


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """Set this process's open-file limit and MemAvailable (kB) as the test says."""

    def set_limits(files: int, mem_kb: int | None) -> None:
        monkeypatch.setattr(limits.resource, "getrlimit", lambda kind: (files, resource.RLIM_INFINITY))
        meminfo = tmp_path / "meminfo"
        meminfo.write_text("MemTotal: 9 kB\n" + ("" if mem_kb is None else f"MemAvailable: {mem_kb} kB\n"))
        monkeypatch.setattr(limits, "MEMINFO", meminfo)

    return set_limits


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
