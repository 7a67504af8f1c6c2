"""What a training checkpoint holds: one instant of the shared state, and the reward statistics a resume
continues from. In-process serial trainers: no child process."""

from __future__ import annotations

from pathlib import Path

import torch

import a3c.rundir.checkpoints
from a3c.core.config import Config
from a3c.rundir.resume import load_resume_checkpoint
from a3c.training.train import Trainer
from a3c_envs import inspect_env


def pendulum_trainer(run_dir: Path, resume: dict | None = None, **overrides) -> Trainer:
    """A serial Pendulum trainer with reward scaling (what Pendulum resolves to), a few hundred steps long."""
    info = inspect_env("Pendulum-v1")
    values = dict(env_id="Pendulum-v1", workers=1, envs_per_worker=2, t_max=8, reward_scale=True)
    values |= dict(max_steps=320, eval_interval=60.0, eval_episodes=1, target_return=None) | overrides
    return Trainer(
        Config(**values).validate(), info, run_dir, serial=True, show_progress=False, resume=resume
    )


def test_reward_statistics_are_saved_and_continue_after_a_resume(tmp_path):
    run_dir = tmp_path / "run"
    first = pendulum_trainer(run_dir)
    assert first.run() == 0
    checkpoint = load_resume_checkpoint(run_dir)
    saved = checkpoint["reward_stats"]
    # Every step of every env fed one discounted return into the statistics.
    assert float(saved["count"]) >= checkpoint["global_step"] - 2 * 8
    assert float(saved["var"]) > 0.0 and float(saved["var"]) != 1.0
    second = pendulum_trainer(run_dir, resume=checkpoint, max_steps=640)
    resumed = second.reward_stats.merged()
    # The resumed workers scale by the same return statistics (not a fresh prior of var 1).
    torch.testing.assert_close(resumed.var, saved["var"], rtol=1e-3, atol=0)
    torch.testing.assert_close(resumed.count, saved["count"], rtol=1e-3, atol=0)
    assert second.run() == 0
    assert float(load_resume_checkpoint(run_dir)["reward_stats"]["count"]) > float(saved["count"])


def test_a_checkpoint_is_one_instant_even_while_workers_write(tmp_path, monkeypatch):
    # A worker that steps while the checkpoint is being written (simulated inside the save) must not reach
    # the file: weights, optimizer moments, steps and counters are copied together before the save.
    trainer = pendulum_trainer(tmp_path / "run", max_steps=160)
    assert trainer.run() == 0
    (flat,) = trainer.optimizer.param_groups[0]["params"]
    live_state = trainer.optimizer.state[flat]
    expected = {
        "weights": flat.detach().clone(),
        **{k: v.clone() for k, v in live_state.items()},
        "steps": trainer.counters.total_steps,
    }
    real_save = a3c.rundir.checkpoints.save_checkpoint

    def save_while_a_worker_steps(path, payload):
        with torch.no_grad():
            flat.add_(1.0)
            for value in live_state.values():
                value.add_(1.0)
            trainer.counters.add(0, 100)
        real_save(path, payload)

    monkeypatch.setattr(a3c.rundir.checkpoints, "save_checkpoint", save_while_a_worker_steps)
    trainer._save_last()
    saved = load_resume_checkpoint(tmp_path / "run")
    weights = torch.cat([t.reshape(-1) for t in saved["model_state"].values()])
    assert torch.equal(weights, expected["weights"])
    for key, value in saved["optimizer_state"]["state"][0].items():
        assert torch.equal(value, expected[key]), key
    assert saved["global_step"] == expected["steps"]
