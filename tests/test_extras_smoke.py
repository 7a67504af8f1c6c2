"""Smoke runs of the optional env families: Atari (conv net + LSTM) and MuJoCo (Gaussian policy).

Each trains a few hundred steps with 2 spawned workers, writes a checkpoint, and ``a3c evaluate`` plays it.
``make test`` installs both extras (they are in ``dev``); without one, its test is skipped and says why.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from tests.conftest import read_json, run_a3c

pytestmark = pytest.mark.slow


def needs(module: str, extra: str):
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None,
        reason=f"the {extra} extra is not installed (pip install -e '.[{extra}]'; make test installs it)",
    )


def train_and_evaluate(run_dir, token, env_id: str, steps: int, *sets: str) -> tuple[dict, dict]:
    args = ["train", "--env", env_id, "--workers", "2", "--max-steps", str(steps), "--quiet"]
    for item in sets:
        args += ["--set", item]
    result = run_a3c(*args, "--run-dir", str(run_dir), timeout=300, token=token)
    assert result.returncode == 0, result.stderr
    summary = read_json(run_dir / "summary.json")
    assert summary["total_steps"] >= steps and summary["exit_reason"] == "max_steps"
    assert (run_dir / "checkpoints" / "last.pt").is_file() and (run_dir / "checkpoints" / "best.pt").is_file()
    played = run_a3c("evaluate", str(run_dir), "--episodes", "1", "--json", timeout=300, token=token)
    assert played.returncode == 0, played.stderr
    return summary, json.loads(played.stdout)


@needs("ale_py", "atari")
def test_pong_cnn_lstm_trains_checkpoints_and_evaluates(run_dir, token):
    summary, played = train_and_evaluate(run_dir, token, "ALE/Pong-v5", 400, "eval_episodes=1")
    config = read_json(run_dir / "config.json")
    assert config["model"] == "cnn" and config["lstm_size"] == 256  # the preset's A3C-LSTM
    assert -21 <= played["mean_return"] <= 21 and played["mean_length"] > 0
    state = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=False)
    assert state["spaces"]["obs_shape"] == [1, 84, 84] and "lstm.weight_ih" in state["model_state"]


@needs("mujoco", "mujoco")
def test_halfcheetah_gaussian_trains_checkpoints_and_evaluates(run_dir, token):
    summary, played = train_and_evaluate(run_dir, token, "HalfCheetah-v5", 2000, "eval_episodes=1")
    assert played["mean_length"] == 1000 and played["env_id"] == "HalfCheetah-v5"
    state = torch.load(run_dir / "checkpoints" / "best.pt", weights_only=False)
    assert state["spaces"]["continuous"] and state["spaces"]["n_actions"] == 6
    assert state["config"]["obs_norm"] and state["obs_norm"]["mean"].shape == (17,)  # evaluate uses these
