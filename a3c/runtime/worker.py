"""The worker process shell: a Learner in a loop, counts in its own shared slots, episodes to the trainer."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from multiprocessing.connection import Connection

from a3c.algo.learner import Learner
from a3c.algo.metrics import MetricsWindow
from a3c.core.devices import model_device, use_device
from a3c.core.records import EpisodeRecord, MetricsRecord
from a3c.runtime.child import ChildGuard, run_child
from a3c.runtime.counters import StopReason
from a3c.runtime.state import SharedState

# A worker sends its finished episodes at most this often, and all of them when it stops. One pipe message per
# update (~600 a second per worker with 16 envs) cost the trainer and the workers CPU for nothing.
EPISODES_EVERY_S = 0.05


def run_learner(
    worker_id: int,
    learner: Learner,
    shared: SharedState,
    emit: Callable[[list[EpisodeRecord] | MetricsRecord], None],
    metrics: MetricsWindow,
    max_updates: int | None = None,
    should_exit: Callable[[], bool] = lambda: False,
) -> None:
    """Update until the run stops (or ``max_updates``, or ``should_exit``), counting steps in this worker's
    slots; emit finished episodes as lists (every ``EPISODES_EVERY_S``, and the rest at the end) and, about
    once a second, the worker's training metrics."""
    counters, stop, start_time = shared.counters, shared.stop, shared.start_time
    max_steps = learner.config.max_steps
    done = 0
    episodes: list[EpisodeRecord] = []
    last_sent = time.monotonic()
    try:
        while not stop.is_set() and not should_exit() and (max_updates is None or done < max_updates):
            result = learner.update()
            counters.add(worker_id, result.steps, skipped=not math.isfinite(result.grad_norm))
            metrics.add(result)
            done += 1
            global_step = counters.total_steps
            wall_time = round(start_time.elapsed(), 3)
            if metrics.due():
                emit(metrics.record(wall_time, global_step, learner.optimizer.param_groups[0]["lr"]))
            episodes += [
                EpisodeRecord(wall_time, global_step, worker_id, e.episode_return, e.length)
                for e in result.episodes
            ]
            if episodes and time.monotonic() - last_sent >= EPISODES_EVERY_S:
                batch, episodes, last_sent = episodes, [], time.monotonic()
                emit(batch)
            if max_steps is not None and global_step >= max_steps:
                stop.stop(StopReason.MAX_STEPS)
    finally:  # the episodes of this batch happened (their steps are counted): send them even after an error
        if episodes:
            emit(episodes)
    if max_updates is None and metrics.lags:  # the last, partial window: a short run still gets its metrics
        wall_time = round(start_time.elapsed(), 3)
        emit(metrics.record(wall_time, counters.total_steps, learner.optimizer.param_groups[0]["lr"]))


def worker_main(worker_id: int, shared: SharedState, conn: Connection, seed: int) -> None:
    """Process target of worker ``worker_id``: a Learner on the shared state, records to ``conn`` (its own
    pipe to the trainer); the child shell (``run_child``) reports an error and exits 1."""

    def body(guard: ChildGuard) -> None:
        use_device(model_device(shared.model))
        obs, rewards = shared.obs_stats, shared.reward_stats
        learner = Learner(
            shared.config,
            shared.model,
            shared.optimizer,
            seed=seed,
            clock=shared.clock,
            normalizer=None if obs is None else obs.writer(worker_id),
            reward_stats=None if rewards is None else rewards.writer(worker_id),
        )
        guard.cleanups.append(learner.close)
        window = MetricsWindow(worker_id, every_steps=shared.config.metrics_interval_steps)
        run_learner(worker_id, learner, shared, conn.send, window, should_exit=guard.should_exit)

    run_child(
        f"worker {worker_id}",
        shared.heartbeats,
        worker_id,
        conn,
        body,
        shared.config.hang_timeout,
        shared.hangup_ignored,
    )
