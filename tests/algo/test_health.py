"""The learning-health checks on metrics rows: when each warning fires, and when it must not."""

from __future__ import annotations

import math

import pytest

from a3c.algo.distributions import LOG_STD_MIN
from a3c.algo.health import (
    COLLAPSE_ROWS,
    DEAD_CRITIC_STEPS,
    DEAD_CRITIC_WINDOW,
    SATURATED_NATS,
    SIGMA_FLOOR_MARGIN,
    LearningHealth,
    box_entropy_floor,
    max_entropy,
)
from a3c.core.records import MetricsRecord
from a3c.core.spaces import Spaces
from a3c.runtime.run_clock import RunClock


def row(step: int, entropy: float = 0.6, ev: float = 0.5) -> MetricsRecord:
    return MetricsRecord(step / 1000, step, 0, 10, 0.0, 0.1, entropy, 1.0, ev, 1e-3, 1.0, 1.0, 1.0, 1, 1000.0)


def test_max_entropy_is_the_uniform_policys():
    assert max_entropy(Spaces((4,), 2)) == pytest.approx(math.log(2))
    assert max_entropy(Spaces((4,), 3, action_nvec=(3, 4))) == pytest.approx(math.log(12))
    assert max_entropy(Spaces((4,), 5, multi_binary=True)) == pytest.approx(5 * math.log(2))
    assert max_entropy(Spaces((3,), 1, continuous=True)) is None


def test_entropy_collapse_fires_once_after_enough_low_rows():
    health = LearningHealth(math.log(2))
    fired = [health.observe(row(1000 * i, entropy=0.01), solved=False) for i in range(COLLAPSE_ROWS + 3)]
    kinds = [[w.kind for w in ws] for ws in fired]
    assert kinds[: COLLAPSE_ROWS - 1] == [[]] * (COLLAPSE_ROWS - 1)
    assert kinds[COLLAPSE_ROWS - 1] == ["entropy_collapse"] and not any(kinds[COLLAPSE_ROWS:])


def test_a_noisy_low_row_or_a_solved_run_is_no_collapse():
    health = LearningHealth(math.log(2))
    for i in range(50):  # every other row low: never COLLAPSE_ROWS in a row
        assert health.observe(row(1000 * i, entropy=0.01 if i % 2 else 0.5), solved=False) == []
    solved = LearningHealth(math.log(2))
    assert all(solved.observe(row(1000 * i, entropy=0.0), solved=True) == [] for i in range(50))
    gaussian = LearningHealth(None)
    assert all(gaussian.observe(row(1000 * i, entropy=-3.0), solved=False) == [] for i in range(50))


def test_a_tanh_gaussians_floor_is_saturation_per_dimension():
    pendulum = Spaces((3,), 1, continuous=True, action_low=(-2.0,), action_high=(2.0,))
    two = Spaces((3,), 2, continuous=True, action_low=(-1.0, 0.0), action_high=(1.0, 4.0))
    assert box_entropy_floor(pendulum, "tanh").nats == pytest.approx(SATURATED_NATS + math.log(2))
    assert box_entropy_floor(two, "tanh").nats == pytest.approx(2 * SATURATED_NATS + math.log(2))
    assert box_entropy_floor(Spaces((4,), 2), "tanh") is None
    fixed = Spaces((3,), 1, continuous=True, action_low=(1.0,), action_high=(1.0,))  # a zero-width dimension
    assert box_entropy_floor(fixed, "tanh") is None


def test_a_clipped_gaussians_floor_is_sigma_near_its_lower_bound():
    cheetah = Spaces((17,), 6, continuous=True, action_low=(-1.0,) * 6, action_high=(1.0,) * 6)
    floor = box_entropy_floor(cheetah, "clip")
    per_dim = LOG_STD_MIN + SIGMA_FLOOR_MARGIN + 0.5 + 0.5 * math.log(2 * math.pi)
    assert floor.nats == pytest.approx(6 * per_dim)
    stuck, exploring = LearningHealth(None, floor), LearningHealth(None, floor)
    fired = [w for i in range(2 * COLLAPSE_ROWS) for w in stuck.observe(row(1000 * i, -21.0), solved=False)]
    assert [w.kind for w in fired] == ["entropy_collapse"] and "σ sits at its floor" in fired[0].message
    # log σ = -2 on average is far above it
    assert all(exploring.observe(row(1000 * i, entropy=6 * -0.58), solved=False) == [] for i in range(50))
    # Not checked: a run without a target, or actions whose range is small beside σ's floor
    assert box_entropy_floor(cheetah, "clip", has_target=False) is None
    tiny = Spaces((3,), 1, continuous=True, action_low=(-0.1,), action_high=(0.1,))
    assert box_entropy_floor(tiny, "clip") is None and box_entropy_floor(tiny, "tanh") is not None


def test_a_saturated_tanh_gaussian_collapses_and_one_that_dips_does_not():
    floor = box_entropy_floor(
        Spaces((3,), 1, continuous=True, action_low=(-2.0,), action_high=(2.0,)), "tanh"
    )
    stuck = LearningHealth(None, floor)  # Pendulum's preset without an entropy bonus in a CI run that failed
    fired = [w for i in range(2 * COLLAPSE_ROWS) for w in stuck.observe(row(1000 * i, -85.0), solved=False)]
    assert [w.kind for w in fired] == ["entropy_collapse"] and "tanh" in fired[0].message
    dips = LearningHealth(None, floor)  # the lowest of twelve Pendulum runs that solved
    assert all(dips.observe(row(1000 * i, entropy=-13.2), solved=False) == [] for i in range(50))


def test_dead_critic_fires_after_its_steps_and_not_for_a_learning_one():
    dead, alive = LearningHealth(None), LearningHealth(None)
    step, fired = 0, []
    while step <= DEAD_CRITIC_STEPS + DEAD_CRITIC_WINDOW:
        fired += [(step, w.kind) for w in dead.observe(row(step, ev=0.001 * (step % 3 - 1)), solved=False)]
        assert alive.observe(row(step, ev=0.3), solved=False) == []
        step += 5000
    assert fired == [(DEAD_CRITIC_STEPS, "dead_critic")]


def test_an_early_dead_stretch_that_recovers_does_not_fire():
    health = LearningHealth(None)
    for step in range(0, 3 * DEAD_CRITIC_STEPS, 5000):  # EV 0 until the window before the check, then 0.5
        ev = 0.0 if step < DEAD_CRITIC_STEPS - DEAD_CRITIC_WINDOW else 0.5
        assert health.observe(row(step, ev=ev), solved=False) == []


def test_a_resumed_run_judges_its_critic_on_a_whole_window_only():
    health = LearningHealth(None)  # a run resumed at step 1M: the first rows alone decide nothing
    fired = [(w.kind, w.global_step) for step in range(10**6, 10**6 + DEAD_CRITIC_WINDOW + 1, 5000)
             for w in health.observe(row(step, ev=0.0), solved=False)]  # fmt: skip
    assert fired == [("dead_critic", 10**6 + DEAD_CRITIC_WINDOW)]
    assert health.first_step == 10**6


def test_warnings_survive_a_resume_and_do_not_fire_twice(tmp_path):
    from a3c.core.config import Config
    from a3c.runtime.counters import Counters
    from a3c.training.monitor import RunMonitor

    def monitor() -> RunMonitor:
        made = RunMonitor(
            Config(env_id="CartPole-v1"), tmp_path, Counters(1), RunClock.started(), False, True
        )
        made.health = LearningHealth(math.log(2))
        return made

    first = monitor()
    for i in range(COLLAPSE_ROWS):
        first.handle(row(1000 * i, entropy=0.0))
    assert [w.kind for w in first.warnings] == ["entropy_collapse"]
    fields = first.checkpoint_fields()
    first.close()
    second = monitor()
    second.resumed(fields, episodes_kept=0)
    for i in range(COLLAPSE_ROWS, 3 * COLLAPSE_ROWS):
        second.handle(row(1000 * i, entropy=0.0))
    assert second.warnings == first.warnings  # kept, and not warned of again
    second.close()
