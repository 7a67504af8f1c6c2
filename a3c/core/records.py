"""Small plain records that children send to the trainer over their pipes (never tensors)."""

from __future__ import annotations

from typing import NamedTuple


class EpisodeRecord(NamedTuple):
    """A finished training episode (one row of episodes.csv)."""

    wall_time: float
    global_step: int
    worker: int
    episode_return: float
    length: int


class EvalRecord(NamedTuple):
    """One evaluation (one row of eval.csv), plus the evaluator's CPU seconds so far and the best mean."""

    wall_time: float
    global_step: int
    updates: int
    mean_return: float
    std_return: float
    min_return: float
    max_return: float
    mean_length: float
    episodes: int
    cpu_s: float
    best_mean_return: float  # mean_return of the evaluation best.pt holds
    solved: bool
    best_selection_mean: float | None = None  # the mean best.pt was chosen by (over both rounds)
    best_save_error: str | None = None  # this evaluation beat best.pt but could not be saved: why


class ErrorRecord(NamedTuple):
    """A child's failure: who (e.g. "worker 1") and the formatted traceback (or one line); ``fatal``: a
    restart would fail the same way (the GPU's memory is full), so the run ends at once."""

    source: str
    traceback: str
    fatal: bool = False


class MetricsRecord(NamedTuple):
    """About a second of one worker's updates (one row of metrics.csv)."""

    wall_time: float
    global_step: int
    worker: int
    updates: int
    policy_loss: float
    value_loss: float
    entropy: float
    grad_norm: float
    explained_variance: float
    learning_rate: float
    policy_lag_mean: float
    policy_lag_p50: float
    policy_lag_p95: float
    policy_lag_max: int
    steps_per_s: float
