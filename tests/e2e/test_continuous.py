"""Box actions end to end: a Gaussian policy with the Pendulum preset's features (observation statistics,
reward scaling, the tanh squash) learns a continuous bandit; observation statistics are saved in
checkpoints, continued by a resume and used by ``a3c evaluate``. Both train serially in this process."""

from __future__ import annotations

import pytest
import torch

import a3c
from tests.support.commands import call_a3c
from tests.support.run_files import read_json

pytestmark = pytest.mark.slow

# The Pendulum-v1 preset's learner until 2026-12-07 (the RL Zoo's A2C values; Pendulum now resolves to the
# derived Box defaults, γ 0.98 among them), its target left out: the bandit's budget below was measured on it.
RL_ZOO_PENDULUM = {
    "envs_per_worker": 4,
    "t_max": 8,
    "gamma": 0.9,
    "gae_lambda": 0.9,
    "lr": 1e-3,
    "entropy_coef": 1e-3,
    "init_log_std": -0.5,
    "squash": "tanh",
    "obs_norm": True,
    "reward_scale": True,
}


def test_a_gaussian_policy_learns_a_continuous_bandit_within_a_step_budget(tmp_path):
    # Aim-v0 (tests/support/envs.py): aim a in [-1, 1] at the target x in [-0.8, 0.8] shown, reward
    # 1 - |a - x|, 10 steps an episode. A policy acting 0 whatever it sees (an untrained net's tanh(mean))
    # scores 6.0, a uniform random one about 3.9; 9 needs the greedy action within 0.1 of x on average. On
    # these settings (32 steps an update) a seeded serial run is bit-reproducible. Measured (this call
    # with seeds 0-9, target 9 and its derived 100 confirming episodes, an evaluation every 256 steps,
    # 2026-12-06, AMD EPYC): solved at 768 steps (seeds 0-3 and 6-9) and 1,024 (4, 5), best 9.12-9.58;
    # the first evaluation (256 steps) scored 6.5-7.2. Budget 2,048 steps, 2x the slowest. (On derived
    # defaults instead, seed 0 peaked at 9.45 at 2.5k steps and fell back to about 7 by 10k.)
    run = a3c.train("tests.support.envs:Aim-v0", run_dir=tmp_path / "run", serial=True, seed=0,
                    target_return=9.0, max_steps=2048, eval_interval_steps=256, max_seconds=120,
                    **RL_ZOO_PENDULUM)  # fmt: skip
    summary = run.summary
    assert summary["solved"] is True and summary["exit_reason"] == "solved", summary
    assert summary["steps_to_solve"] == summary["total_steps"] <= 2048, summary
    assert summary["best_mean_return"] >= 9.0, summary
    config = run.config
    assert (config["squash"], config["obs_norm"], config["reward_scale"], config["confirm_episodes"]) == (
        "tanh", True, True, 100)  # fmt: skip


def test_obs_stats_are_checkpointed_resumed_and_evaluated(tmp_path):
    # The Pendulum preset (obs_norm, 16 envs x t_max 8): 128 steps an update, so the budgets are exact. The
    # statistics count one observation per env step plus each env's first one after a reset (16 at the
    # start, 16 more at the resume); their prior adds 1e-4 per start.
    run_dir = tmp_path / "run"
    a3c.train("Pendulum-v1", run_dir=run_dir, serial=True, seed=0, max_steps=1024, eval_interval_steps=1024,
              eval_episodes=2)  # fmt: skip
    assert read_json(run_dir / "summary.json")["total_steps"] == 1024
    saved = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=False)
    assert float(saved["obs_norm"]["count"]) == pytest.approx(1024 + 16, abs=1e-3)
    assert saved["obs_norm"]["mean"].shape == (3,)
    assert saved["spaces"]["continuous"] and saved["spaces"]["action_high"] == [2.0]

    refused = call_a3c("train", "--resume", str(run_dir), "--set", "obs_norm=false")
    assert refused.returncode == 2 and "obs_norm" in refused.stderr

    a3c.resume(run_dir, serial=True, max_steps=2048)
    assert read_json(run_dir / "summary.json")["total_steps"] == 2048
    again = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=False)
    assert float(again["obs_norm"]["count"]) == pytest.approx(2048 + 32, abs=1e-3)  # continued, not restarted
    assert read_json(run_dir / "config.json")["resumes"] == 1

    played = call_a3c("evaluate", str(run_dir), "--episodes", "2", "--json")
    assert played.returncode == 0, played.stderr
    best = torch.load(run_dir / "checkpoints" / "best.pt", weights_only=False)
    assert "obs_norm" in best and best["config"]["squash"] == "tanh"
