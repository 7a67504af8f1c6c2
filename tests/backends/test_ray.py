"""The Ray backend on a real local Ray cluster (started and torn down by each command): it solves CartPole
with 2 worker actors, survives a killed worker actor (the restarted one trains on), restarts a hung evaluator
actor, fails cleanly (exit 1, naming it) on a hung parameter server, and its checkpoints resume on the local
backend and the other way round. Hangs are injected with ``A3C_TEST_HANG`` (ray/actors.py). Each test
checks that no process of its command (Ray's own included) is left."""

from __future__ import annotations

import csv
import os
import re
import signal
import time
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

__import__("tests.conftest", fromlist=["*"]).require_extra("ray", "ray")  # skips, or fails in CI
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


def metrics_rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_a_killed_worker_actor_is_restarted_and_training_continues(tmp_path, token):
    run_dir = tmp_path / "run"
    # 120 s: Ray's start-up alone has taken 40 s on a loaded 2-core machine.
    proc = popen_a3c(
        "train", "--env", "CartPole-v1", "--backend", "ray", "--workers", "2", "--target-return", "1e9",
        "--max-seconds", "120", "--run-dir", str(run_dir), "--quiet", token=token,
    )  # fmt: skip
    try:
        wait_until(proc, lambda: data_rows(run_dir / "metrics.csv") >= 4, timeout=180)
        workers = ray_worker_processes(token)
        assert len(workers) == 2, workers
        os.kill(min(workers), signal.SIGKILL)
        rows_at_kill = data_rows(run_dir / "metrics.csv")
        wait_until(proc, lambda: ray_worker_processes(token) - workers, timeout=120)  # a new worker process
        restarted_at = time.time()  # the killed worker's records from before this are all older
        wait_until(proc, lambda: data_rows(run_dir / "metrics.csv") >= rows_at_kill + 6, timeout=120)
        out, err = proc.communicate(timeout=240)
    finally:
        end(proc)
    assert proc.returncode == 0, err[-3000:]
    summary = read_json(run_dir / "summary.json")
    assert summary["exit_reason"] == "max_seconds" and summary["restarts"] >= 1
    # The restarted worker trained: metrics rows of its worker id stamped after its new process existed.
    crashed = re.findall(r"warning: worker (\d+) crashed", err)
    assert len(crashed) == 1, err[-3000:]
    after = restarted_at - summary["start_unix"]
    rows = [r for r in metrics_rows(run_dir) if r["worker"] == crashed[0] and float(r["wall_time"]) > after]
    assert len(rows) >= 2 and sum(int(r["updates"]) for r in rows) > 0, (crashed, after, rows)
    assert_no_ray_left(token)


def test_a_hung_evaluator_actor_is_killed_restarted_and_the_run_goes_on(tmp_path, token, monkeypatch):
    run_dir = tmp_path / "run"
    monkeypatch.setenv("A3C_TEST_HANG", "evaluator")  # its first incarnation blocks in play (ray/actors.py)
    result = run_a3c(
        "train", "--env", "CartPole-v1", "--backend", "ray", "--workers", "2", "--target-return", "1e9",
        "--max-seconds", "90", "--set", "hang_timeout=5", "--run-dir", str(run_dir), "--quiet",
        timeout=300, token=token,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the evaluator actor hung" in result.stderr and "restarting it (1/3)" in result.stderr
    summary = read_json(run_dir / "summary.json")
    assert summary["exit_reason"] == "max_seconds" and summary["restarts"] >= 1
    assert data_rows(run_dir / "eval.csv") >= 1  # the restarted actor evaluated
    assert_no_ray_left(token)


def test_a_hung_parameter_server_fails_the_run_naming_it(tmp_path, token, monkeypatch):
    from a3c.run.resume import load_resume_checkpoint

    run_dir = tmp_path / "run"
    monkeypatch.setenv("A3C_TEST_HANG", "server")  # it blocks in drain once a checkpoint holds updates
    result = run_a3c(
        "train", "--env", "CartPole-v1", "--backend", "ray", "--workers", "2", "--target-return", "1e9",
        "--max-seconds", "600", "--set", "hang_timeout=5", "--set", "checkpoint_interval=1",
        "--run-dir", str(run_dir), "--quiet", timeout=240, token=token,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    assert "error: parameter server failed" in result.stderr
    assert "the parameter server did not answer" in result.stderr and "within 5 s (hung)" in result.stderr
    assert f"continue with `a3c train --resume {run_dir}`" in result.stderr
    summary = read_json(run_dir / "summary.json")
    assert summary["exit_reason"] == "failed: parameter server"
    # last.pt holds the last sync (a checkpoint before the hang): weights and counters of one instant.
    saved = load_resume_checkpoint(run_dir)
    assert 0 < saved["global_step"] == summary["total_steps"]
    assert int(saved["worker_steps"].sum()) == saved["global_step"]
    assert_no_ray_left(token)


def train(token: str, run_dir: Path, *args: str) -> dict:
    result = run_a3c("train", *args, "--quiet", timeout=400, token=token)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "starts afresh" not in result.stderr  # no statistics lost at a resume
    return read_json(run_dir / "summary.json")


@pytest.mark.parametrize(("first", "then"), [("ray", "local"), ("local", "ray")])
def test_a_checkpoint_resumes_on_the_other_backend(tmp_path, token, first, then):
    from a3c.run.resume import load_resume_checkpoint

    run_dir = tmp_path / "run"
    common = ("--target-return", "1e9", "--max-seconds", "300")
    # Pendulum's preset: shared observation statistics and reward scaling, which must cross backends too.
    train(token, run_dir, "--env", "Pendulum-v1", "--backend", first, "--max-steps", "20000",
          "--run-dir", str(run_dir), *common)  # fmt: skip
    before = load_resume_checkpoint(run_dir)
    assert before["config"]["backend"] == first and before["global_step"] >= 20_000
    assert before["config"]["obs_norm"] and before["config"]["reward_scale"]
    # Every observation and discounted return of every worker reached the checkpoint.
    assert before["obs_norm"]["count"] >= before["global_step"] and before["reward_stats"]["count"] >= 20_000
    summary = train(token, run_dir, "--resume", str(run_dir), "--backend", then,
                    "--max-steps", str(before["global_step"] + 20_000), *common)  # fmt: skip
    after = load_resume_checkpoint(run_dir)
    assert after["config"]["backend"] == then and after["resumes"] == 1
    assert after["global_step"] == summary["total_steps"] >= before["global_step"] + 20_000
    assert after["updates"] > before["updates"]
    step_before = before["optimizer_state"]["state"][0]["step"]
    assert after["optimizer_state"]["state"][0]["step"] > step_before  # the optimizer state went on, too
    # The statistics went on from the checkpoint's, not afresh: their counts hold both segments.
    for key in ("obs_norm", "reward_stats"):
        assert after[key]["count"] >= before[key]["count"] + 20_000, key
    steps = [int(line.split(",")[1]) for line in (run_dir / "episodes.csv").read_text().splitlines()[1:]]
    assert steps == sorted(steps) and steps[-1] > before["global_step"]
    assert_no_ray_left(token)
