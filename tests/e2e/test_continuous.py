"""Box actions end to end: Pendulum-v1 learns with the Gaussian preset; observation statistics are saved in
checkpoints, continued by a resume and used by ``a3c evaluate``."""

from __future__ import annotations

import pytest
import torch

from tests.helpers import call_a3c, read_json, run_a3c

pytestmark = pytest.mark.slow


def test_pendulum_learns_serially_within_a_step_budget(run_dir, token):
    # The preset (4 envs x t_max 8, target confirmed on 100 more episodes), one learner, seeded: the run is
    # bit-reproducible, so it solves at the same step on any machine. The bar is -600: well clear of random
    # (about -1200; no 10-episode evaluation in the first 100k steps scored above -935, seeds 0-9), as the
    # preset's -200 takes 200k to over 400k steps serially. Measured (eval every 10k steps, 2026-12-02):
    # seeds 0-9 solve at -600 at 360k, 200k, 180k, 340k, 220k, 290k, 340k, 220k, 320k, 390k steps (median
    # 305k); budget 600k, 1.5x the slowest. Seed 2 runs here: it solves at 180k (best -435.8), about 18 s on
    # a quiet core; seed 0 would take twice that. The run is bit-reproducible on one CPU model, not across
    # them (float kernels differ): on an AVX-512 Xeon the same command solves at 260k (best -342.2, 48 s).
    # The preset with 2 Hogwild workers reaching -200 within 300 s is
    # tests/learning/test_continuous_learning.py's (not in CI).
    args = ["train", "--env", "Pendulum-v1", "--serial", "--seed", "2", "--target-return", "-600"]
    args += ["--max-steps", "600000", "--set", "eval_interval_steps=10000", "--max-seconds", "300", "--quiet"]
    result = run_a3c(*args, "--run-dir", str(run_dir), timeout=420, token=token)
    assert result.returncode == 0, result.stderr
    summary = read_json(run_dir / "summary.json")
    assert summary["solved"] is True and summary["steps_to_solve"] <= 600_000, summary
    assert summary["best_mean_return"] >= -600, summary


def test_obs_stats_are_checkpointed_resumed_and_evaluated(run_dir, token):
    first = run_a3c(
        *["train", "--env", "Pendulum-v1", "--max-steps", "3000", "--quiet"],
        "--run-dir",
        str(run_dir),
        token=token,
    )
    assert first.returncode == 0, first.stderr
    saved = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=False)
    count = float(saved["obs_norm"]["count"])
    assert count >= 3000 and saved["obs_norm"]["mean"].shape == (3,)
    assert saved["spaces"]["continuous"] and saved["spaces"]["action_high"] == [2.0]

    refused = call_a3c("train", "--resume", str(run_dir), "--set", "obs_norm=false")
    assert refused.returncode == 2 and "obs_norm" in refused.stderr

    resumed = run_a3c("train", "--resume", str(run_dir), "--max-steps", "6000", "--quiet", token=token)
    assert resumed.returncode == 0, resumed.stderr
    again = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=False)
    assert float(again["obs_norm"]["count"]) >= count + 2900  # continued, not restarted
    assert read_json(run_dir / "config.json")["resumes"] == 1

    played = call_a3c("evaluate", str(run_dir), "--episodes", "2", "--json")
    assert played.returncode == 0, played.stderr
    best = torch.load(run_dir / "checkpoints" / "best.pt", weights_only=False)
    assert "obs_norm" in best and best["config"]["squash"] == "tanh"
