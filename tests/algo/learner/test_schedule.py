"""The learning-rate schedule: its values, and that the learner steps with it."""

from __future__ import annotations

import pytest

from a3c.algo.learner.learner import Learner, build_shared
from a3c.algo.learner.schedule import scheduled_lr
from a3c.core.config import Config
from a3c.core.spaces import Spaces


def test_constant_is_lr_and_linear_decays_to_zero_at_max_steps():
    assert scheduled_lr(1e-3, "constant", 500, 1000) == 1e-3
    assert scheduled_lr(1e-3, "linear", 0, 1000) == 1e-3
    assert scheduled_lr(1e-3, "linear", 250, 1000) == pytest.approx(7.5e-4)
    assert scheduled_lr(1e-3, "linear", 1000, 1000) == 0.0
    assert scheduled_lr(1e-3, "linear", 1500, 1000) == 0.0  # a resumed run past its old budget: never < 0
    with pytest.raises(ValueError):
        scheduled_lr(1e-3, "linear", 0, None)


@pytest.mark.parametrize("schedule", ["constant", "linear"])
def test_the_learner_steps_with_the_scheduled_rate(schedule):
    config = Config(env_id="CartPole-v1", lr=1e-3, lr_schedule=schedule, max_steps=1000, t_max=5).validate()
    model, optimizer = build_shared(config, Spaces((4,), 2))
    # As if the run had made 40 updates (of another t_max: a resume may change it) and 200 of 1000 steps.
    learner = Learner(config, model, optimizer, seed=0, clock=lambda: (40, 200))
    try:
        learner.update()
    finally:
        learner.close()
    expected = {"constant": 1e-3, "linear": 8e-4}[schedule]
    assert optimizer.param_groups[0]["lr"] == pytest.approx(expected)
