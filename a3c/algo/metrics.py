"""Per-worker training metrics, aggregated over about a second of updates into one plain record."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import numpy as np

from a3c.algo.loss import explained_variance
from a3c.core.records import MetricsRecord

if TYPE_CHECKING:
    from a3c.algo.learner import UpdateResult

METRICS_EVERY_S = 1.0


class MetricsWindow:
    """Collects the UpdateResults of one worker and turns them into a MetricsRecord about once a second.

    Policy lag = updates by any worker that landed between this worker's weight pull and its own step
    (its mean, median, 95th percentile and max over the window): how asynchronous the run really was.

    The explained variance is pooled: 1 − Σ residual variance / Σ return variance over the window's updates
    (all of one worker's segments have the same size), not a mean of per-update ratios. A segment whose
    returns barely vary (a sparse-reward game between points) has a near-zero denominator, and its ratio
    alone can reach −10⁴ and swamp the mean; pooled, it weighs as little as its variance.
    """

    def __init__(self, worker: int, every_s: float = METRICS_EVERY_S, every_steps: int | None = None):
        self.worker = worker
        self.every_s = every_s
        self.every_steps = every_steps
        self._reset(time.monotonic())

    def _reset(self, now: float) -> None:
        self.started = now
        self.steps = 0
        self.values: dict[str, list[float]] = {k: [] for k in ("policy", "value", "entropy", "grad")}
        self.return_var = self.residual_var = 0.0
        self.lags: list[int] = []

    def add(self, result: UpdateResult) -> None:
        """Take one update's result into the window."""
        self.steps += result.steps
        for key, value in (
            ("policy", result.policy_loss),
            ("value", result.value_loss),
            ("entropy", result.entropy),
            ("grad", result.grad_norm),
        ):
            if math.isfinite(value):
                self.values[key].append(value)
        if math.isfinite(result.return_var) and math.isfinite(result.residual_var):
            self.return_var += result.return_var
            self.residual_var += result.residual_var
        self.lags.append(result.policy_lag)

    def due(self) -> bool:
        """Whether it is time for a ``record``: the window holds ``every_steps`` of the worker's steps when
        that is set (the same rows on any machine), else it has run ``every_s`` seconds."""
        if self.every_steps is not None:
            return self.steps >= self.every_steps
        return time.monotonic() - self.started >= self.every_s

    def record(self, wall_time: float, global_step: int, learning_rate: float) -> MetricsRecord:
        """The window as one record (NaN where nothing finite was seen), then start a new window."""
        now = time.monotonic()
        mean = {k: float(np.mean(v)) if v else float("nan") for k, v in self.values.items()}
        lags = np.asarray(self.lags or [0])
        record = MetricsRecord(
            wall_time=wall_time,
            global_step=global_step,
            worker=self.worker,
            updates=len(self.lags),
            policy_loss=mean["policy"],
            value_loss=mean["value"],
            entropy=mean["entropy"],
            grad_norm=mean["grad"],
            explained_variance=explained_variance(self.return_var, self.residual_var),
            learning_rate=learning_rate,
            policy_lag_mean=float(lags.mean()),
            policy_lag_p50=float(np.percentile(lags, 50)),
            policy_lag_p95=float(np.percentile(lags, 95)),
            policy_lag_max=int(lags.max()),
            steps_per_s=self.steps / max(now - self.started, 1e-9),
        )
        self._reset(now)
        return record
