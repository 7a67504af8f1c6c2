"""The Python API: ``a3c.train`` makes the run ``a3c train`` makes, ``Run`` reads it back, ``a3c.load`` and
``Policy`` act with its checkpoint; bad arguments raise the message the command prints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import a3c
from tests.helpers import call_a3c, require_extra


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    """A seeded serial CartPole run of 6,000 steps, made through ``a3c.train``."""
    run_dir = tmp_path_factory.mktemp("api") / "run"
    return a3c.train("CartPole-v1", run_dir=run_dir, serial=True, max_steps=6000, eval_interval_steps=2000)


def test_train_returns_the_run_with_its_files(cartpole):
    require_extra("pandas", "analysis")
    assert cartpole.exit_code == 0 and cartpole.summary["exit_reason"] in ("max_steps", "solved")
    assert cartpole.config["env_id"] == "CartPole-v1" and cartpole.config["serial"] is True
    assert len(cartpole.evals) >= 1 and cartpole.evals["global_step"].max() <= cartpole.summary["total_steps"]
    assert cartpole.episodes["length"].sum() <= cartpole.summary["total_steps"]
    assert {"policy_loss", "entropy", "steps_per_s"} <= set(cartpole.metrics.columns)


def test_the_callers_torch_threads_are_given_back(tmp_path):
    torch.set_num_threads(2)
    a3c.train("CartPole-v1", run_dir=tmp_path / "r", serial=True, max_steps=500)
    assert torch.get_num_threads() == 2


def test_predict_takes_one_observation_or_a_batch(cartpole):
    policy = a3c.load(cartpole.run_dir)
    assert policy.path == cartpole.run_dir / "checkpoints" / "best.pt"
    env = policy.make_env()
    obs, _ = env.reset(seed=0)
    action = policy.predict(obs)
    assert np.shape(action) == () and env.action_space.contains(int(action))
    batch = policy.predict(np.stack([obs, -obs, obs]))
    assert batch.shape == (3,) and batch[0] == batch[2] == action
    with pytest.raises(a3c.BadInput, match=r"^obs: shape \(3,\) is not allowed; expected \(4,\)"):
        policy.predict(obs[:3])
    env.close()


def test_predict_plays_what_evaluate_plays(cartpole):
    policy = cartpole.policy("last")
    env = policy.make_env()
    obs, _ = env.reset(seed=7)
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(int(policy.predict(obs)))
        total, done = total + reward, terminated or truncated
    env.close()
    result = policy.evaluate(episodes=1, seed=7)
    assert result["mean_return"] == total and result["env_id"] == "CartPole-v1"


@pytest.mark.parametrize(
    ("kwargs", "cli"),
    [
        ({"lr": -1}, ["--set", "lr=-1"]),
        ({"workers": 0}, ["--workers", "0"]),
        ({"env_kwargs": {"seed": 1}}, ["--env-kwarg", "seed=1"]),
    ],
)
def test_a_bad_value_raises_the_message_the_command_prints(tmp_path, kwargs, cli):
    with pytest.raises(a3c.BadInput) as raised:
        a3c.train("CartPole-v1", run_dir=tmp_path / "api", **kwargs)
    printed = call_a3c("train", "--env", "CartPole-v1", "--run-dir", str(tmp_path / "cli"), *cli)
    assert printed.returncode == 2 and printed.stderr == f"error: {raised.value}\n"
    assert not (tmp_path / "api").exists()


def test_unknown_keys_and_a_foreign_file_are_bad_input(tmp_path):
    with pytest.raises(ValueError, match="^learning_rate: unknown config key; allowed: env_kwargs, seed"):
        a3c.train("CartPole-v1", learning_rate=1e-3)
    (tmp_path / "x.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(a3c.BadInput) as raised:
        a3c.load(tmp_path / "x.pt")
    assert call_a3c("evaluate", str(tmp_path / "x.pt")).stderr == f"error: {raised.value}\n"
    with pytest.raises(a3c.BadInput, match="^which: 'best.pt' is not allowed; expected best or last"):
        a3c.Run(tmp_path).policy("best.pt")


def test_resume_continues_the_run(tmp_path):
    first = a3c.train("CartPole-v1", run_dir=tmp_path / "r", serial=True, max_steps=1000)
    again = a3c.resume(first.run_dir, serial=True, max_steps=2000)
    assert again.config["resumes"] == 1 and again.summary["total_steps"] >= 2000
