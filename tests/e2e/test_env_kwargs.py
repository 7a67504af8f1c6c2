"""``--config`` and ``--env-kwarg`` end to end: LunarLander-v3 named in a config file, with
``continuous=true`` on the command line, trains a Gaussian policy, and every
env of the run and of the commands after it (the evaluator, ``a3c evaluate``, ``a3c export``, a resume) is
made with the same keyword arguments, read from the run's config. The commands run in this process: serial
runs, evaluate and export start no process."""

from __future__ import annotations

import json

import pytest
import torch

import a3c
from a3c.rundir.checkpoints import load_policy
from a3c_envs import make_env
from tests.support.commands import call_a3c, call_a3c_train
from tests.support.extras import require_extra
from tests.support.run_files import read_json

pytestmark = pytest.mark.slow


def test_continuous_lunar_lander_trains_evaluates_exports_and_resumes_with_its_kwargs(tmp_path):
    require_extra("Box2D", "box2d")
    run_dir, config_file = tmp_path / "run", tmp_path / "my.toml"
    config_file.write_text('env_id = "LunarLander-v3"\nt_max = 16\neval_interval_steps = 1500\n')
    args = ["--config", str(config_file), "--env-kwarg", "continuous=true", "--serial", "--quiet"]
    done = call_a3c_train(*args, "--max-steps", "3000", "--run-dir", str(run_dir))
    assert done.returncode == 0, done.stderr
    config = read_json(run_dir / "config.json")
    assert config["env_kwargs"] == {"continuous": True} and config["t_max"] == 16  # from the file
    saved = load_policy(run_dir / "checkpoints" / "last.pt")
    assert saved.config.env_kwargs == {"continuous": True}
    assert saved.spaces.continuous and saved.spaces.n_actions == 2  # a Gaussian over the two engines
    last = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert "log_std" in "".join(last["model_state"])

    # a3c evaluate plays the continuous env: its episode is the one the policy plays there, step by step.
    evaluated = call_a3c("evaluate", str(run_dir), "--episodes", "1", "--json")
    assert evaluated.returncode == 0, evaluated.stderr
    policy, env = a3c.load(run_dir), make_env("LunarLander-v3", continuous=True)
    obs, _ = env.reset(seed=json.loads(evaluated.stdout)["seed"])
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(policy.predict(obs))
        total, done = total + float(reward), terminated or truncated
    env.close()
    assert json.loads(evaluated.stdout)["mean_return"] == total

    require_extra("onnx", "export")
    exported = call_a3c("export", str(run_dir), "-o", str(tmp_path / "policy.onnx"))
    assert exported.returncode == 0, exported.stderr
    import onnx

    props = {p.key: p.value for p in onnx.load(str(tmp_path / "policy.onnx")).metadata_props}
    assert json.loads(props["env_kwargs"]) == {"continuous": True}

    # A resume keeps them: another value is refused before anything changes, the same one continues.
    refused = call_a3c("train", "--resume", str(run_dir), "--env-kwarg", "continuous=false")
    assert refused.returncode == 2 and "env_kwargs {'continuous': False} does not match" in refused.stderr
    resumed = call_a3c_train("--resume", str(run_dir), "--serial", "--quiet", "--max-steps", "4000")
    assert resumed.returncode == 0, resumed.stderr
    assert read_json(run_dir / "summary.json")["total_steps"] == 4096  # 16 updates of 16 envs x 16 steps
    assert read_json(run_dir / "config.json")["env_kwargs"] == {"continuous": True}
