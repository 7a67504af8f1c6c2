"""Learning-rate schedules over a run's budgets (env steps, wall-clock seconds)."""

from __future__ import annotations


def scheduled_lr(
    lr: float,
    schedule: str,
    steps: int,
    max_steps: int | None,
    seconds: float = 0.0,
    max_seconds: float | None = None,
) -> float:
    """The learning rate of a run at ``steps`` env steps and ``seconds`` of its wall time: ``lr`` itself
    (``constant``), or decayed linearly from ``lr`` to 0 at the end of its budget (``linear``: CleanRL's
    ``anneal_lr``, Stable-Baselines3's ``linear_schedule``), never below 0.

    The linear decay follows whichever budget set (``max_steps``, ``max_seconds``) is further along: the run
    ends at the first one reached, and the rate should be 0 there, not halfway down."""
    if schedule == "constant":
        return lr
    if schedule == "linear":
        fractions = [steps / max_steps] if max_steps is not None else []
        if max_seconds is not None:
            fractions.append(seconds / max_seconds)
        if not fractions:
            raise ValueError("a linear schedule needs max_steps or max_seconds")
        return lr * max(0.0, 1.0 - max(fractions))
    raise ValueError(f"unknown lr schedule {schedule!r}")
