"""The Python API: ``a3c.train`` makes the run ``a3c train`` makes, ``Run`` reads it back, ``a3c.load`` and
``Policy`` act with its checkpoint; bad arguments raise the message the command prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import a3c
from a3c.rundir.lock import holder
from tests.support import ROOT
from tests.support.commands import a3c_env, call_a3c, wait_until
from tests.support.extras import require_extra
from tests.support.run_files import csv_rows


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    """A seeded serial CartPole run of 3,000 steps, made through ``a3c.train``."""
    run_dir = tmp_path_factory.mktemp("api") / "run"
    return a3c.train("CartPole-v1", run_dir=run_dir, serial=True, max_steps=3000, eval_interval_steps=1000)


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


def counts(run_dir: Path) -> tuple[int, int, int]:
    """last.pt's global step, updates and Adam's step (of the one flat parameter)."""
    last = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    return last["global_step"], last["updates"], int(last["optimizer_state"]["state"][0]["step"])


def test_resume_continues_the_run_with_the_values_given(tmp_path):
    # 10 steps an update (CartPole's preset, serial): 500 steps are 50 updates; the resume's lr wins over
    # the saved one, and its counters, rows and Adam's step continue from the checkpoint's.
    run_dir = tmp_path / "r"
    first = a3c.train("CartPole-v1", run_dir=run_dir, serial=True, max_steps=500, eval_interval_steps=250)
    episodes = csv_rows(run_dir / "episodes.csv")
    assert counts(run_dir) == (500, 50, 50) and first.config["lr"] != 5e-4

    again = a3c.resume(run_dir, serial=True, max_steps=1000, lr=5e-4)
    assert (again.config["resumes"], again.config["lr"], again.config["max_steps"]) == (1, 5e-4, 1000)
    summary = again.summary
    assert (summary["exit_reason"], summary["total_steps"], summary["total_updates"]) == (
        "max_steps",
        1000,
        100,
    )
    assert counts(run_dir) == (1000, 100, 100)
    last = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert last["optimizer_state"]["param_groups"][0]["lr"] == 5e-4
    table = csv_rows(run_dir / "episodes.csv")  # the first run's rows, then the resume's own
    assert table[: len(episodes)] == episodes and len(table) == summary["episodes"] > len(episodes)
    assert all(int(row["global_step"]) > 500 for row in table[len(episodes) :])
    evaluated_at = [int(row["global_step"]) for row in csv_rows(run_dir / "eval.csv")]
    assert evaluated_at == [250, 500, 750, 1000]


def hold_lock(run_dir: Path, token: str) -> subprocess.Popen:
    """Another process (no torch: the lock module alone) that holds ``run_dir``'s lock until its stdin
    closes, as a live trainer does; returned once it holds it."""
    code = "import pathlib, sys\nfrom a3c.rundir.lock import lock_run_dir\n"
    code += "lock_run_dir(pathlib.Path(sys.argv[1]), '-')\nsys.stdin.read()"
    command = [sys.executable, "-c", code, str(run_dir)]
    proc = subprocess.Popen(command, cwd=ROOT, env=a3c_env(token), stdin=subprocess.PIPE)
    wait_until(proc, lambda: holder(run_dir) == proc.pid, timeout=30)
    return proc


@pytest.mark.slow  # starts a process (a small one: no torch)
def test_a_run_another_process_writes_is_refused_to_resume_and_force(cartpole, token):
    def files() -> dict[str, bytes]:  # the run's files (the lock file holds the last holder's PID)
        found = [p for p in cartpole.run_dir.iterdir() if p.is_file() and p.name != ".a3c.lock"]
        return {p.name: p.read_bytes() for p in found}

    before = files()
    proc = hold_lock(cartpole.run_dir, token)
    try:
        in_use = f"is in use by a running a3c (PID {proc.pid}); wait for it to end or stop it, then run this "
        in_use += "again"
        with pytest.raises(a3c.BadInput) as refused:
            a3c.resume(cartpole.run_dir, serial=True, max_steps=7000)
        assert str(refused.value) == f"resume: {str(cartpole.run_dir)!r} {in_use}"
        with pytest.raises(a3c.BadInput) as refused:
            a3c.train("CartPole-v1", run_dir=cartpole.run_dir, force=True, serial=True, max_steps=100)
        assert str(refused.value) == f"force: {str(cartpole.run_dir)!r} {in_use}"
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert files() == before


def test_a_resume_keeps_the_env_and_the_model(cartpole):
    before = (cartpole.run_dir / "config.json").read_bytes()
    with pytest.raises(a3c.BadInput, match=r"^--resume: hidden_sizes \(32,\) does not match the checkpoint"):
        a3c.resume(cartpole.run_dir, serial=True, max_steps=7000, hidden_sizes=(32,))
    with pytest.raises(a3c.BadInput, match=r"^--resume: env_kwargs \{'sutton_barto_reward': True\} does not"):
        a3c.resume(cartpole.run_dir, serial=True, max_steps=7000, env_kwargs={"sutton_barto_reward": True})
    assert (cartpole.run_dir / "config.json").read_bytes() == before


def test_a_failed_run_raises_training_failed_with_its_run(tmp_path, capsys):
    # Faulty-v0 raises in its 51st step: in this process (serial) the trainer's error, after two updates of
    # 20 steps; the run's files are kept.
    with pytest.raises(a3c.TrainingFailed) as failed:
        a3c.train("tests.support.envs:Faulty-v0", run_dir=tmp_path / "r", serial=True, max_steps=1000)
    run = failed.value.run
    message = f"training failed (exit 1; its traceback is on stderr); run dir {str(run.run_dir)!r}"
    assert str(failed.value) == message
    assert (run.run_dir, run.exit_code) == (tmp_path / "r", 1)
    assert (run.summary["exit_reason"], run.summary["total_steps"]) == ("failed: trainer", 40)
    assert (run.run_dir / "checkpoints" / "last.pt").is_file() and run.config["env_id"].endswith("Faulty-v0")
    assert "RuntimeError: injected fault: FaultyEnv raised on purpose" in capsys.readouterr().err


MINE = """
import gymnasium

gymnasium.register("Mine-v0", entry_point="tests.support.envs:FixedLengthEnv", max_episode_steps=10)
"""


def test_resume_imports_an_env_module_of_the_current_directory_only_when_trusted(tmp_path, monkeypatch):
    # As under `python -m`: the cwd first on sys.path (tests/envs/test_modules.py has the commands' refusals).
    import gymnasium

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path[1:]])
    (tmp_path / "my_envs.py").write_text(MINE)

    def forget() -> None:  # what importing it left in this process
        sys.modules.pop("my_envs", None)
        gymnasium.registry.pop("Mine-v0", None)

    try:
        # Named by the caller, the module is imported.
        a3c.train("my_envs:Mine-v0", run_dir="run", serial=True, max_steps=200)
        forget()
        # a3c_envs.EnvSetupError, the command's exit 2 too
        with pytest.raises(a3c.BadInput, match=r"^--resume: 'run': its env 'my_envs:Mine-v0' would import"):
            a3c.resume("run", serial=True, max_steps=400)
        assert "my_envs" not in sys.modules
        resumed = a3c.resume("run", serial=True, max_steps=400, trust_env_module=True)
        assert (resumed.config["resumes"], resumed.summary["total_steps"]) == (1, 400)  # 20 steps an update
    finally:
        forget()
