"""The serial backend: one Learner and the Evaluator take turns in this process (no child, no spawn).

The same learner and evaluator code and the same files as the other backends: how the tests check the
math without process noise, and how a user debugs (``a3c train --serial``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from a3c.algo.learner import Learner
from a3c.algo.metrics import MetricsWindow
from a3c.algo.optim import non_finite_counts
from a3c.runtime.evaluator import EvalSchedule, Evaluator
from a3c.runtime.state import SharedState
from a3c.runtime.worker import run_learner


class SerialBackend:
    """Worker 0's learner and the evaluator in this process.

    Args:
        shared: the run's shared state (here simply the trainer's own objects).
        seeds: (the learner's seed, the evaluator's seed).
        best_mean: the best evaluation so far (a resumed run keeps its best.pt unless beaten).
        interrupted: true once a signal arrived: cuts an evaluation short.
    """

    restarts = 0

    def __init__(
        self,
        shared: SharedState,
        seeds: tuple[int, int],
        best_mean: float,
        interrupted: Callable[[], bool],
    ):
        self.shared = shared
        cfg, obs, rewards = shared.config, shared.obs_stats, shared.reward_stats
        self.learner = Learner(
            cfg,
            shared.model,
            shared.optimizer,
            seed=seeds[0],
            clock=shared.clock,
            normalizer=None if obs is None else obs.writer(0),
            reward_stats=None if rewards is None else rewards.writer(0),
        )
        self.window = MetricsWindow(0, every_steps=cfg.metrics_interval_steps)
        self.evaluator = Evaluator(shared, seeds[1], best_mean)
        self.interrupted = interrupted
        self.schedule = EvalSchedule(cfg, shared.counters.total_steps)

    def poll(self, timeout: float) -> list[Any]:
        """One update (``timeout`` is not needed: an update is short), and an evaluation when one is due."""
        s = self.shared
        records: list[Any] = []
        run_learner(0, self.learner, s, records.append, self.window, 1)
        # Not once the run stops (its step budget reached by this update): the final evaluation comes next.
        if not s.stop.is_set() and self.schedule.due(s.counters.total_steps):
            records += self._evaluate()
            pause = 0.0 if self.schedule.by_steps else s.config.eval_interval  # one process: no CPU share
            self.schedule.done(s.counters.total_steps, pause)
        return records

    def _evaluate(self) -> list[Any]:
        record = self.evaluator.evaluate(self.interrupted)
        return [] if record is None else [record]

    def non_finite_counts(self) -> dict[str, int]:
        """NaN/inf counts of the trainer's model's parameters, read from a copy."""
        return non_finite_counts(self.shared.model)

    def sync(self) -> None:
        """The trainer's objects are the learner's: nothing to copy."""

    def final_evaluation(self) -> list[Any]:
        """The last, partial metrics window (its rate not diluted by the evaluation), then one evaluation
        played here, with best.pt's candidates rescored (``Evaluator.final``; none when ``interrupted()`` cut
        it short)."""
        record = self.evaluator.final(self.interrupted)
        return [*self._last_window(), *([] if record is None else [record])]

    def _last_window(self) -> list[Any]:
        """The metrics of the updates since the last record, once (empty when there are none)."""
        if not self.window.lags:
            return []
        s = self.shared
        wall_time = round(s.start_time.elapsed(), 3)
        lr = self.learner.optimizer.param_groups[0]["lr"]  # as every row: the rate the last step used
        return [self.window.record(wall_time, s.counters.total_steps, lr)]

    def stop(self, cut_short: Callable[[], bool]) -> list[Any]:
        """The last, partial metrics window (unless the final evaluation took it); the learner's envs and
        the evaluator's files closed."""
        try:
            return self._last_window()
        finally:
            self.learner.close()
            self.evaluator.close()
