"""The Ray backend on a real local Ray cluster (started and torn down by each command): it solves CartPole
with 2 worker actors, survives a killed worker actor, and its checkpoints resume on the local backend and
the other way round. Each test checks that no process of its command (Ray's own included) is left."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.conftest import (
    data_rows,
    end,
    left_behind,
    popen_a3c,
    processes_with_token,
    read_json,
    run_a3c,
    wait_until,
)

pytest.importorskip("ray", reason="the ray extra is not installed (make test installs it)")
pytestmark = pytest.mark.slow

RAY_SHUTDOWN_S = 30.0  # Ray's daemons (gcs_server, raylet, ...) exit after the driver's ray.shutdown()


def assert_no_ray_left(token: str) -> None:
    assert not left_behind(token, timeout=RAY_SHUTDOWN_S), "Ray processes outlived the command"


def test_ray_backend_solves_cartpole_with_two_worker_actors(tmp_path, token):
    run_dir = tmp_path / "run"
    result = run_a3c(
        "train", "--env", "CartPole-v1", "--backend", "ray", "--workers", "2", "--run-dir", str(run_dir),
        "--quiet", "--max-seconds", "240", timeout=400, token=token,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    summary = read_json(run_dir / "summary.json")
    assert summary["solved"] and summary["exit_reason"] == "solved"
    assert summary["best_mean_return"] >= 475.0
    assert read_json(run_dir / "config.json")["backend"] == "ray"
    for name in ("episodes.csv", "metrics.csv", "eval.csv", "checkpoints/last.pt", "checkpoints/best.pt"):
        assert (run_dir / name).exists(), name
    workers = {line.split(",")[2] for line in (run_dir / "metrics.csv").read_text().splitlines()[1:]}
    assert workers == {"0", "1"}
    evaluated = run_a3c("evaluate", str(run_dir), "--episodes", "20", "--json", timeout=120, token=token)
    assert evaluated.returncode == 0, evaluated.stderr
    assert '"mean_return"' in evaluated.stdout
    assert_no_ray_left(token)


def ray_worker_processes(token: str) -> set[int]:
    found = set()
    for pid in processes_with_token(token):
        try:
            if b"RayWorker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.add(pid)
        except OSError:
            continue
    return found


def test_a_killed_worker_actor_is_restarted_and_training_continues(tmp_path, token):
    run_dir = tmp_path / "run"
    proc = popen_a3c(
        "train", "--env", "CartPole-v1", "--backend", "ray", "--workers", "2", "--target-return", "1e9",
        "--max-seconds", "40", "--run-dir", str(run_dir), "--quiet", token=token,
    )  # fmt: skip
    try:
        wait_until(proc, lambda: data_rows(run_dir / "metrics.csv") >= 4, timeout=180)
        workers = ray_worker_processes(token)
        assert len(workers) == 2, workers
        os.kill(min(workers), signal.SIGKILL)
        rows_at_kill = data_rows(run_dir / "metrics.csv")
        wait_until(proc, lambda: ray_worker_processes(token) - workers, timeout=120)  # a new worker process
        wait_until(proc, lambda: data_rows(run_dir / "metrics.csv") >= rows_at_kill + 6, timeout=120)
        out, err = proc.communicate(timeout=240)
    finally:
        end(proc)
    assert proc.returncode == 0, err[-3000:]
    summary = read_json(run_dir / "summary.json")
    assert summary["exit_reason"] == "max_seconds" and summary["restarts"] >= 1
    assert_no_ray_left(token)


def train(token: str, run_dir: Path, *args: str) -> dict:
    result = run_a3c("train", *args, "--quiet", timeout=400, token=token)
    assert result.returncode == 0, result.stderr[-3000:]
    return read_json(run_dir / "summary.json")


@pytest.mark.parametrize(("first", "then"), [("ray", "local"), ("local", "ray")])
def test_a_checkpoint_resumes_on_the_other_backend(tmp_path, token, first, then):
    from a3c.resume import load_resume_checkpoint

    run_dir = tmp_path / "run"
    common = ("--target-return", "1e9", "--max-seconds", "300")
    train(token, run_dir, "--env", "CartPole-v1", "--backend", first, "--max-steps", "20000",
          "--run-dir", str(run_dir), *common)  # fmt: skip
    before = load_resume_checkpoint(run_dir)
    assert before["config"]["backend"] == first and before["global_step"] >= 20_000
    summary = train(token, run_dir, "--resume", str(run_dir), "--backend", then,
                    "--max-steps", str(before["global_step"] + 20_000), *common)  # fmt: skip
    after = load_resume_checkpoint(run_dir)
    assert after["config"]["backend"] == then and after["resumes"] == 1
    assert after["global_step"] == summary["total_steps"] >= before["global_step"] + 20_000
    assert after["updates"] > before["updates"]
    step_before = before["optimizer_state"]["state"][0]["step"]
    assert after["optimizer_state"]["state"][0]["step"] > step_before  # the optimizer state went on, too
    steps = [int(line.split(",")[1]) for line in (run_dir / "episodes.csv").read_text().splitlines()[1:]]
    assert steps == sorted(steps) and steps[-1] > before["global_step"]
    assert_no_ray_left(token)
