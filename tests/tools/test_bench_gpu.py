"""``a3c bench --gpu`` (a3c/tools/bench/gpu.py) without running it: the steady window read from metrics
rows, the return trend, pids named by role and memory summed by role, pytest's counts, the JSON it assembles
and the one line a machine without CUDA prints (every measurement replaced), and ``make bench-gpu``'s two
ways to run (dry runs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import a3c.tools.bench.gpu as gpu
from a3c.cli import main
from a3c.tools.bench.gpu import (
    GpuPlan,
    memory_by_role,
    pytest_counts,
    read_csv_rows,
    return_trend,
    role_of,
    run_gpu_bench,
    steady_window,
)
from tests.support import ROOT


def metrics(*rows: tuple[float, int, int]) -> list[tuple[float, ...]]:
    return [tuple(float(x) for x in row) for row in rows]


def test_the_steady_window_starts_once_every_worker_wrote_and_waits_for_its_end():
    # Worker 1 writes its first row at 4 s: the window is [4 + 1, 4 + 1 + 2] s of run time.
    rows = metrics((1, 100, 0), (2, 200, 0), (4, 300, 1), (5, 500, 0), (6, 900, 1), (7, 1300, 0))
    assert steady_window(rows[:2], workers=2, warmup_s=1, seconds=2) is None  # worker 1 has not started
    assert steady_window(rows[:5], workers=2, warmup_s=1, seconds=2) is None  # the rows stop at 6 s < 7 s
    window = steady_window(rows, workers=2, warmup_s=1, seconds=2)
    assert window == {"all_started_s": 4.0, "from_s": 5.0, "seconds": 2.0, "steps": 800, "steps_per_s": 400.0}


def test_a_line_not_yet_whole_is_left_out(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("wall_time,global_step,worker,x\n1.0,80,0,a\n2.0,160,1,b\n3.0,2")
    rows = read_csv_rows(path, ("wall_time", "global_step", "worker"))
    assert rows == [(1.0, 80.0, 0.0), (2.0, 160.0, 1.0)]
    assert read_csv_rows(tmp_path / "missing.csv", ("wall_time",)) == []


def test_the_return_trend_is_by_thirds_of_the_run():
    episodes = [(10.0, 1000, -21.0), (30.0, 3000, -20.0), (50.0, 5000, -19.0), (90.0, 9000, -17.0)]
    assert return_trend(episodes) == [
        {"until_s": 30.0, "until_step": 3000, "episodes": 2, "mean_return": -20.5},
        {"until_s": 60.0, "until_step": 5000, "episodes": 1, "mean_return": -19.0},
        {"until_s": 90.0, "until_step": 9000, "episodes": 1, "mean_return": -17.0},
    ]
    assert return_trend([]) == []


@pytest.mark.parametrize(
    ("pid", "comm", "role"),
    [
        (100, "python3", "trainer"),
        (101, "a3c-worker-12", "worker"),
        (102, "a3c-evaluator", "evaluator"),
        (103, "python3", "other:python3"),
        (104, None, "unknown"),
    ],
)
def test_a_pid_is_named_by_its_role(pid, comm, role):
    assert role_of(pid, trainer_pid=100, comm=comm) == role


def test_memory_is_the_peak_per_process_summed_up_by_role():
    samples = [
        {"apps": [(1, "trainer", 500), (2, "worker", 400), (3, "worker", 420)], "util": 40, "used_mib": 1400},
        # pid 3 has exited: /proc no longer names it, and its role stays the one seen before
        {"apps": [(1, "trainer", 600), (2, "worker", 410), (3, "unknown", 430), (4, "evaluator", 300)],
         "util": 60, "used_mib": 1800, "raw": [["1", "600"], ["2", "410"], ["3", "430"], ["4", "300"]]},
    ]  # fmt: skip
    memory = memory_by_role(samples)
    assert memory["per_role_mib"] == {
        "evaluator": {"processes": 1, "min": 300, "median": 300, "max": 300},
        "trainer": {"processes": 1, "min": 600, "median": 600, "max": 600},
        "worker": {"processes": 2, "min": 410, "median": 420, "max": 430},
    }
    assert memory["apps_total_peak_mib"] == 1740
    assert (memory["gpu_util_mean_pct"], memory["gpu_used_peak_mib"], memory["samples"]) == (50, 1800, 2)
    assert memory["raw_example"] == samples[1]["raw"]


def test_pytest_counts_are_read_from_its_last_summary_line():
    out = "..s.F\nFAILED test_x.py::t\n1 failed, 3 passed, 1 skipped, 950 deselected, 2 errors in 12.30s\n"
    assert pytest_counts(out) == {"failed": 1, "passed": 3, "skipped": 1, "deselected": 950, "error": 2}
    assert pytest_counts("no tests ran in 0.5s") == {}
    assert pytest_counts("Killed") == {}


def fake_run(workers: int, device: str, plan: GpuPlan, work: Path, learn=False, env_id="") -> dict:
    """A throughput_run that measures nothing: 100 steps/s a worker, a failure for Pong with 4 workers."""
    if workers == 4 and not env_id:
        raise RuntimeError("a3c train cpu-4w exited 1")
    run = {"workers": workers, "device": device, "all_started_s": 3.0, "from_s": 6.0, "seconds": 20.0,
           "steps": 2000 * workers, "steps_per_s": 100.0 * workers, "per_worker": 100.0}  # fmt: skip
    if learn:
        run["whole_run"] = dict(run, seconds=140.0)
        run["memory"] = memory_by_role([{"apps": [(7, "trainer", 520)], "util": 30, "used_mib": 600}])
        run["learning"] = {"episodes": 0, "return_by_thirds": [], "return_change": None, "evaluations": []}
    return run


@pytest.fixture
def measured_nothing(monkeypatch):
    monkeypatch.setattr(gpu, "throughput_run", fake_run)
    monkeypatch.setattr(gpu, "machine", lambda commit: {"cpus": 16, "torch": "2.11.0+cu130",
                        "torch_cuda": "13.0", "gpus": [], "git_commit": commit})  # fmt: skip
    tests = {"exit_code": 0, "counts": {"passed": 5, "deselected": 900}, "seconds": 30.0}
    monkeypatch.setattr(gpu, "cuda_tests", lambda timeout_s: tests)


def test_without_cuda_the_cpu_runs_are_made_and_one_line_says_what_was_skipped(
    tmp_path, monkeypatch, capsys, measured_nothing
):
    monkeypatch.setattr(gpu, "cuda_unavailable", lambda: "torch.cuda.is_available() is False")
    results = run_gpu_bench(GpuPlan(worker_counts=(1, 4, 15)), tmp_path, "abc123", log=lambda msg: None)
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("bench --gpu: skipped the CUDA tests, the GPU run") and "is False" in line
    saved = json.loads(Path(results["path"]).read_text())
    assert saved["skipped"] == line and saved["cuda_tests"] is None and saved["gpu"] is None
    assert saved["mlp"] == []  # a comparison with the GPU
    assert line not in saved["markdown"]  # printed once
    assert saved["machine"]["git_commit"] == "abc123"
    rates = [(r["workers"], r.get("steps_per_s")) for r in saved["cpu"]]
    assert rates == [(15, 1500.0), (1, 100.0), (4, None)]  # the GPU run's count first
    assert saved["cpu"][2] == {"workers": 4, "device": "cpu", "error": "a3c train cpu-4w exited 1"}
    assert "| ALE/Pong-v5 | cpu | 4 | failed |" in saved["markdown"]
    assert "| ALE/Pong-v5 | cpu | 15 | 1,500 |" in saved["markdown"]


def test_with_cuda_the_tests_and_the_gpu_run_come_first(tmp_path, monkeypatch, capsys, measured_nothing):
    monkeypatch.setattr(gpu, "cuda_unavailable", lambda: None)
    results = run_gpu_bench(GpuPlan(worker_counts=(2, 15)), tmp_path, None, log=lambda msg: None)
    assert capsys.readouterr().out == ""
    saved = json.loads(Path(results["path"]).read_text())
    assert saved["skipped"] is None and saved["cuda_tests"]["counts"]["passed"] == 5
    run = saved["gpu"]
    assert (run["device"], run["workers"], run["steps_per_s"]) == ("cuda", 15, 1500.0)
    assert saved["gpu"]["memory"]["per_role_mib"]["trainer"]["max"] == 520
    assert [r["workers"] for r in saved["cpu"]] == [15, 2]
    assert [(r["env_id"], r["device"], r["workers"]) for r in saved["mlp"]] == [
        ("CartPole-v1", "cuda", 4), ("CartPole-v1", "cpu", 4)
    ]  # fmt: skip
    assert "| CartPole-v1 | cuda | 4 | 400 |" in saved["markdown"]
    assert "| ALE/Pong-v5 | cuda | 15 | 1,500 |" in saved["markdown"]
    assert "trainer: 1 × 520 MiB" in saved["markdown"]


@pytest.mark.parametrize(
    ("args", "field"),
    [(["--env", "Pong"], "--gpu: not allowed"), (["--worker-counts", "1,0"], "--worker-counts: '1,0'")],
)
def test_bad_gpu_options_are_one_line(capsys, args, field):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--gpu", *args])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.startswith(f"error: {field}") and err.count("\n") == 1, err


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("wheels", [False, True])
def test_make_bench_gpu_runs_through_the_venv_or_the_wheels(tmp_path, wheels):
    # A calling make's flags and level (make test runs under .ci/run's make) would add its directory lines.
    ignored = {"WHEELS", "RESULTS", "ARGS", "MAKEFLAGS", "MAKELEVEL", "MFLAGS"}
    env = {k: v for k, v in os.environ.items() if k not in ignored}
    args = ["WHEELS=.whl", "RESULTS=/tmp/out"] if wheels else []
    done = subprocess.run(
        ["make", "-n", f"VENV={tmp_path / 'venv'}", f"PYTHON={sys.executable}", "bench-gpu", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    if wheels:  # no venv made: bench/gpu/run.sh installs the wheels for the machine's python
        assert str(tmp_path) not in done.stdout
        assert done.stdout.strip() == f"WHEELS=.whl PYTHON={sys.executable} bash bench/gpu/run.sh /tmp/out"
    else:
        assert f"{tmp_path}/venv/bin/a3c bench --gpu --out bench/results" in done.stdout
        assert "-m pip install --quiet -e '.[dev]'" in done.stdout
