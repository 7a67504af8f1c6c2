"""The learning-rate schedule: its values, and that the learner steps with it."""

from __future__ import annotations

import pytest

from a3c.algo.learner import Learner, build_shared
from a3c.algo.optim import scheduled_lr
from a3c.core.config import Config
from a3c.core.errors import BadInput
from a3c.core.spaces import Spaces


def test_constant_is_lr_and_linear_decays_to_zero_at_max_steps():
    assert scheduled_lr(1e-3, "constant", 500, 1000) == 1e-3
    assert scheduled_lr(1e-3, "linear", 0, 1000) == 1e-3
    assert scheduled_lr(1e-3, "linear", 250, 1000) == pytest.approx(7.5e-4)
    assert scheduled_lr(1e-3, "linear", 1000, 1000) == 0.0
    assert scheduled_lr(1e-3, "linear", 1500, 1000) == 0.0  # a resumed run past its old budget: never < 0
    with pytest.raises(ValueError):
        scheduled_lr(1e-3, "linear", 0, None)


def test_linear_follows_whichever_budget_is_further_along():
    def linear(steps: int, max_steps: int | None, seconds: float, max_seconds: float | None) -> float:
        return scheduled_lr(1e-3, "linear", steps, max_steps, seconds, max_seconds)

    assert linear(500, 1000, 10.0, 100.0) == pytest.approx(5e-4)  # steps further along (0.5 > 0.1)
    assert linear(100, 1000, 75.0, 100.0) == pytest.approx(2.5e-4)  # seconds further along (0.75 > 0.1)
    assert linear(250, 1000, 1e9, None) == pytest.approx(7.5e-4)  # steps alone: the seconds do not count
    assert linear(10**9, None, 25.0, 100.0) == pytest.approx(7.5e-4)  # seconds alone: the steps do not count
    assert linear(0, None, 0.0, 100.0) == 1e-3
    assert linear(0, None, 100.0, 100.0) == 0.0
    assert linear(0, None, 150.0, 100.0) == 0.0  # a resumed run past its old time budget: never < 0
    assert linear(2000, 1000, 150.0, 100.0) == 0.0
    assert scheduled_lr(1e-3, "constant", 500, None, 50.0, 100.0) == 1e-3
    with pytest.raises(ValueError):
        linear(0, None, 10.0, None)


def test_a_late_decay_start_holds_lr_for_its_share_of_the_budget_then_decays_to_zero_at_the_end():
    def two_phase(steps: int, seconds: float = 0.0, max_seconds: float | None = None) -> float:
        return scheduled_lr(1e-3, "linear", steps, 1000, seconds, max_seconds, decay_start=0.4)

    assert two_phase(0) == two_phase(399) == two_phase(400) == 1e-3
    assert two_phase(700) == pytest.approx(5e-4)  # halfway through the remaining 600 steps
    assert two_phase(850) == pytest.approx(2.5e-4)
    assert two_phase(1000) == two_phase(1200) == 0.0
    assert two_phase(100, 70.0, 100.0) == pytest.approx(5e-4)  # the seconds further along, as without it
    assert scheduled_lr(1e-3, "linear", 700, 1000, decay_start=0.0) == pytest.approx(3e-4)  # from the start


def test_a_decay_start_is_refused_outside_0_1_and_without_the_linear_schedule():
    for value in (-0.1, 1.0, 1.5, float("nan")):
        with pytest.raises(
            BadInput, match=f"^lr_decay_start: {value!r} is not allowed; expected a number in"
        ):
            Config(env_id="x", lr_schedule="linear", max_steps=10, lr_decay_start=value).validate()
    with pytest.raises(BadInput, match="^lr_decay_start: 0.5 is not allowed with lr_schedule 'constant'"):
        Config(env_id="x", lr_decay_start=0.5).validate()
    Config(env_id="x", lr_schedule="linear", max_steps=10, lr_decay_start=0.5).validate()


@pytest.mark.parametrize("schedule", ["constant", "linear"])
def test_the_learner_steps_with_the_scheduled_rate(schedule):
    config = Config(env_id="CartPole-v1", lr=1e-3, lr_schedule=schedule, max_steps=1000, t_max=5).validate()
    # As if the run had made 40 updates (of another t_max: a resume may change it) and 200 of 1000 steps.
    expected = {"constant": 1e-3, "linear": 8e-4}[schedule]
    assert lr_after_one_update(config) == pytest.approx(expected)


def test_the_learner_holds_lr_until_the_decay_start_of_the_run_s_budget():
    # The run at 200 of 1000 steps: within a decay start of 0.25, then past one of 0.1 (1 - 0.1/0.9 of lr).
    for decay_start, expected in ((0.25, 1e-3), (0.1, 8e-4 / 0.9)):
        config = Config(
            env_id="CartPole-v1",
            lr=1e-3,
            lr_schedule="linear",
            lr_decay_start=decay_start,
            max_steps=1000,
            t_max=5,
        ).validate()
        assert lr_after_one_update(config) == pytest.approx(expected)


@pytest.mark.parametrize(("max_steps", "expected"), [(None, 4e-4), (1000, 4e-4), (100, 0.0)])
def test_the_learner_decays_over_max_seconds_with_the_run_s_wall_time(max_steps, expected):
    config = Config(
        env_id="CartPole-v1", lr=1e-3, lr_schedule="linear", max_steps=max_steps, max_seconds=50.0, t_max=5
    ).validate()
    # The run at 200 steps and 30 of its 50 seconds (0.6): the seconds lead unless 100 steps is the budget.
    assert lr_after_one_update(config) == pytest.approx(expected)


def lr_after_one_update(config: Config) -> float:
    """The rate a learner's optimizer stepped with, its clock at 40 updates, 200 steps and 30 s."""
    model, optimizer = build_shared(config, Spaces((4,), 2))
    learner = Learner(config, model, optimizer, seed=0, clock=lambda: (40, 200, 30.0))
    try:
        learner.update()
    finally:
        learner.close()
    return optimizer.param_groups[0]["lr"]
