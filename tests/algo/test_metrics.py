"""The per-worker metrics window: the explained variance it records is pooled over its updates."""

from __future__ import annotations

import math

import pytest

from a3c.algo.learner import UpdateResult
from a3c.algo.metrics import MetricsWindow


def update(return_var: float, residual_var: float) -> UpdateResult:
    return UpdateResult(
        steps=80,
        episodes=[],
        policy_loss=0.0,
        value_loss=0.1,
        entropy=1.7,
        grad_norm=0.5,
        return_var=return_var,
        residual_var=residual_var,
    )


def test_a_segment_whose_returns_barely_vary_does_not_swamp_the_explained_variance():
    """Nine segments a good critic explains (0.8 each) and one between points of a sparse-reward game
    (returns almost constant: its own ratio is 1 - 1e-3 / 1e-7 = -9,999). Pooled: about 0.8; a mean of
    per-update ratios would record about -1,000 (and fire dead_critic on a working critic)."""
    window = MetricsWindow(0)
    for _ in range(9):
        window.add(update(return_var=0.5, residual_var=0.1))
    window.add(update(return_var=1e-7, residual_var=1e-3))
    record = window.record(1.0, 800, 2.5e-4)
    assert record.explained_variance == pytest.approx(1 - (0.9 + 1e-3) / (4.5 + 1e-7))
    assert record.explained_variance > 0.79


def test_no_varying_returns_give_nan_and_a_new_window_starts_empty():
    window = MetricsWindow(1)
    window.add(update(return_var=0.0, residual_var=0.0))
    window.add(update(return_var=float("nan"), residual_var=float("nan")))
    assert math.isnan(window.record(1.0, 160, 1e-3).explained_variance)
    window.add(update(return_var=2.0, residual_var=0.5))
    assert window.record(2.0, 240, 1e-3).explained_variance == pytest.approx(0.75)


def test_a_window_by_steps_is_due_once_it_holds_that_many_steps_whatever_the_clock():
    window = MetricsWindow(0, every_s=0.0, every_steps=200)  # by time it would always be due
    assert not window.due()
    window.add(update(return_var=1.0, residual_var=0.5))  # 80 steps
    window.add(update(return_var=1.0, residual_var=0.5))  # 160
    assert not window.due()
    window.add(update(return_var=1.0, residual_var=0.5))  # 240
    assert window.due()
    assert window.record(1.0, 240, 1e-3).updates == 3 and not window.due()  # a new, empty window
