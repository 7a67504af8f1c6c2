"""The Ray backend on a real Ray cluster: the shared loopback head (``ray_head``, in
tests/backends/conftest.py), which every run joins with ``--ray-address`` (the one run that starts its own
cluster is test_ray_cluster.py's): a checkpoint resumes on the local backend and the other way round,
observation statistics and reward scaling included. (Node mode's faults, a hung evaluator actor among them:
test_ray_nodes.py; the learning itself, solving CartPole in time: tests/learning/test_ray_learning.py.)
The test checks that no process of its runs, their actors included, is left."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import read_json, run_a3c
from tests.ray_head import (
    assert_no_ray_left,
)

__import__("tests.helpers", fromlist=["*"]).require_extra("ray", "ray")  # skips, or fails in CI
pytestmark = pytest.mark.slow

CAP_S = 600  # --max-seconds and --hang-timeout: caps, never reached (step budgets end every segment)
SEGMENT_STEPS = 5_000  # each segment's step budget: 25 Pendulum episodes


def train(token: str, run_dir: Path, *args: str) -> dict:
    result = run_a3c("train", *args, "--quiet", timeout=CAP_S, token=token)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "starts afresh" not in result.stderr  # no statistics lost at a resume
    return read_json(run_dir / "summary.json")


def test_a_checkpoint_resumes_on_the_other_backend_both_ways(tmp_path, token, ray_address):
    """One run that changes backend at each resume, local → ray → local: both directions in three segments."""
    from a3c.rundir.resume import load_resume_checkpoint

    run_dir = tmp_path / "run"
    # Step budgets end every segment; the target, --max-seconds and --hang-timeout are out of reach.
    common = ("--target-return", "1e9", "--max-seconds", str(CAP_S), "--hang-timeout", str(CAP_S))
    common += ("--ray-address", ray_address, "--workers", "2")  # one node group of 2 on the head
    # Pendulum's preset: shared observation statistics and reward scaling, which must cross backends too.
    train(token, run_dir, "--env", "Pendulum-v1", "--backend", "local", "--max-steps", str(SEGMENT_STEPS),
          "--run-dir", str(run_dir), *common)  # fmt: skip
    before = load_resume_checkpoint(run_dir)
    assert before["config"]["backend"] == "local" and before["global_step"] >= SEGMENT_STEPS
    assert before["config"]["obs_norm"] and before["config"]["reward_scale"]
    # Every observation and discounted return of every worker reached the checkpoint.
    assert (
        before["obs_norm"]["count"] >= before["global_step"]
        and before["reward_stats"]["count"] >= SEGMENT_STEPS
    )
    for resumes, backend in enumerate(("ray", "local"), start=1):
        summary = train(token, run_dir, "--resume", str(run_dir), "--backend", backend,
                        "--max-steps", str(before["global_step"] + SEGMENT_STEPS), *common)  # fmt: skip
        after = load_resume_checkpoint(run_dir)
        assert after["config"]["backend"] == backend and after["resumes"] == resumes
        assert summary["exit_reason"] == "max_steps"
        assert after["global_step"] == summary["total_steps"] >= before["global_step"] + SEGMENT_STEPS
        assert after["updates"] > before["updates"]
        step_before = before["optimizer_state"]["state"][0]["step"]
        assert after["optimizer_state"]["state"][0]["step"] > step_before  # the optimizer state went on, too
        # The statistics went on from the checkpoint's, not afresh: their counts hold every segment.
        for key in ("obs_norm", "reward_stats"):
            assert after[key]["count"] >= before[key]["count"] + SEGMENT_STEPS, (backend, key)
        steps = [int(line.split(",")[1]) for line in (run_dir / "episodes.csv").read_text().splitlines()[1:]]
        assert steps == sorted(steps) and steps[-1] > before["global_step"], backend
        before = after
    assert_no_ray_left(token)
