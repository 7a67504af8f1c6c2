"""Checkpoints from before log σ was bounded smoothly: a resume reads their σ as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from a3c.algo.distributions import bound_log_std
from a3c.core.config import Config
from a3c.core.errors import BadInput
from a3c.core.spaces import Spaces
from a3c.rundir.checkpoints import LOG_STD_PARAM, checkpoint_payload
from a3c.rundir.resume import upgrade_log_std

PENDULUM = Spaces((3,), 1, continuous=True, action_low=(-2.0,), action_high=(2.0,))


def old_checkpoint(gaussian_std: str, state: dict[str, torch.Tensor]) -> dict:
    """A training checkpoint as an older a3c saved it: no ``log_std_param``."""
    data = checkpoint_payload(Config(env_id="Pendulum-v1", gaussian_std=gaussian_std), PENDULUM)
    del data["log_std_param"]
    return {**data, "model_state": state}


def test_an_old_learned_log_std_keeps_its_sigma_and_its_run_its_loss():
    old = old_checkpoint("learned", {"log_std": torch.tensor([-0.5, 1.0, -30.0, 2.0])})
    del old["config"]["mean_l2_coef"]  # an older a3c had no mean pull
    old["config"]["init_log_std"] = -8.0  # allowed then
    data = upgrade_log_std(old, Path("x"))
    assert data["log_std_param"] == LOG_STD_PARAM
    # Past the range a σ can still leave (-30, the old cap 2) they start 0.5 inside the bounds
    torch.testing.assert_close(
        bound_log_std(data["model_state"]["log_std"]), torch.tensor([-0.5, 1.0, -4.5, 1.5]), atol=1e-5, rtol=0
    )
    assert data["config"]["mean_l2_coef"] == 0.0 and data["config"]["init_log_std"] == -4.5
    Config.from_dict(data["config"]).validate()


def test_a_new_checkpoint_is_left_alone_and_an_old_state_dependent_one_is_refused():
    new = {**old_checkpoint("learned", {"log_std": torch.tensor([0.3])}), "log_std_param": LOG_STD_PARAM}
    assert upgrade_log_std(new, Path("x")) is new
    old_state = old_checkpoint("state", {"policy_head.bias": torch.zeros(2)})
    with pytest.raises(BadInput, match="^--resume: 'run/checkpoints/last.pt' was saved by an older a3c"):
        upgrade_log_std(old_state, Path("run/checkpoints/last.pt"))
    discrete = checkpoint_payload(Config(env_id="CartPole-v1", gaussian_std="state"), Spaces((4,), 2))
    del discrete["log_std_param"]
    assert upgrade_log_std({**discrete, "model_state": {}}, Path("x"))["model_state"] == {}
