"""The spaces beyond Discrete and Box end to end: MultiBinary and MultiDiscrete actions learn (test envs of
tests/support/space_envs.py), their checkpoints record the spaces and evaluate, and the Gymnasium envs with
Discrete and Tuple observations that were refused before (FrozenLake, Blackjack, Taxi) now train, evaluate
and resume. The runs are seeded, serial and in this process."""

from __future__ import annotations

import json

import pytest
import torch

import a3c
from tests.support.commands import call_a3c
from tests.support.run_files import read_json

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "env_id, recorded",
    [
        (
            "tests.support.space_envs:CopyBits-v0",
            {"multi_binary": True, "n_actions": 4, "obs_encoding": "flatten"},
        ),
        (
            "tests.support.space_envs:MatchChoices-v0",
            {"action_nvec": [3, 4], "n_actions": 7, "obs_shape": [9]},
        ),
    ],
    ids=["multi-binary", "multi-discrete"],
)
def test_factorised_actions_learn(tmp_path, env_id, recorded):
    # A seeded serial run with a step budget (bit-reproducible: the same evaluations on any machine), in this
    # process; a random policy scores 4 (bits) or about 2.3 (choices) of 8. Measured (--serial, target 7, an
    # evaluation every 1,000 steps, seeds 0-9, 2026-12-02): CopyBits solves at 5k-14k steps (median 11.5k),
    # best.pt's greedy 5 episodes score 7.15-7.95; MatchChoices at 3k-11k (median 8k), 6.9-7.8. Budget 30k
    # steps, 2x the slowest; the greedy bar 6.5. Seed 0: 13k steps (3.5 s of CPU) and 6k (3.5 s).
    run = a3c.train(env_id, run_dir=tmp_path / "run", serial=True, seed=0, target_return=7, max_steps=30_000,
                    eval_interval_steps=1000, max_seconds=120)  # fmt: skip
    summary = run.summary
    assert summary["solved"] is True and summary["best_mean_return"] >= 7, summary

    spaces = torch.load(run.run_dir / "checkpoints" / "best.pt", weights_only=True)["spaces"]
    assert {key: spaces[key] for key in recorded} == recorded
    played = call_a3c("evaluate", str(run.run_dir), "--episodes", "5", "--seed", "12345", "--json")
    assert played.returncode == 0, played.stderr
    assert json.loads(played.stdout)["mean_return"] >= 6.5  # the greedy policy, from the checkpoint


@pytest.mark.parametrize("env_id", ["FrozenLake-v1", "Blackjack-v1", "Taxi-v4"])
def test_envs_with_discrete_and_tuple_observations_train_and_evaluate(tmp_path, env_id):
    # Seeded serial runs in this process, evaluated by steps: 1 env x t_max 20 (the derived defaults) makes
    # 20 steps an update, so the budgets are exact and so are the evaluations' steps. Two greedy episodes of
    # at most 50 steps each (an untrained policy walks FrozenLake's and Taxi's 100 and 200 steps): the
    # encoding is the point here, not the score.
    cut = {"eval_interval_steps": 500, "eval_episodes": 2, "eval_max_steps": 50}
    run = a3c.train(env_id, run_dir=tmp_path / "run", serial=True, seed=0, max_steps=1000, **cut)
    assert run.summary["total_steps"] == 1000 and run.summary["exit_reason"] == "max_steps", run.summary
    assert run.evals["global_step"].tolist() == [500, 1000]
    played = call_a3c("evaluate", str(run.run_dir), "--episodes", "3", "--json")
    assert played.returncode == 0, played.stderr
    report = json.loads(played.stdout)
    assert report["episodes"] == 3 and report["mean_length"] <= 50, report
    # A resume checks the saved spaces (the observation encoding included) against the env's.
    resumed = a3c.resume(run.run_dir, serial=True, max_steps=1500)
    assert resumed.summary["total_steps"] == 1500 and read_json(run.run_dir / "config.json")["resumes"] == 1
    assert resumed.evals["global_step"].tolist() == [500, 1000, 1500]
