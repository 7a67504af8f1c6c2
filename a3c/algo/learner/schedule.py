"""Learning-rate schedules over a run's step budget."""

from __future__ import annotations


def scheduled_lr(lr: float, schedule: str, steps: int, max_steps: int | None) -> float:
    """The learning rate after ``steps`` of ``max_steps`` env steps: ``lr`` itself (``constant``), or decayed
    linearly from ``lr`` to 0 at ``max_steps`` (``linear``: CleanRL's ``anneal_lr``, Stable-Baselines3's
    ``linear_schedule``), never below 0."""
    if schedule == "constant":
        return lr
    if schedule == "linear":
        if max_steps is None:
            raise ValueError("a linear schedule needs max_steps")
        return lr * max(0.0, 1.0 - steps / max_steps)
    raise ValueError(f"unknown lr schedule {schedule!r}")
