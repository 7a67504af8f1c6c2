"""The worker process shell: a Learner in a loop, counts in its own shared slots, episodes to the trainer."""

from __future__ import annotations

import math
import sys
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection

from torch import nn

from a3c.algo.learner import Learner
from a3c.algo.metrics import MetricsWindow
from a3c.algo.normalize import SharedObsStats
from a3c.algo.optim import SharedOptimizer
from a3c.core.config import Config
from a3c.core.records import EpisodeRecord, ErrorRecord, MetricsRecord
from a3c.runtime.child import ChildGuard, format_error
from a3c.runtime.shared import Counters, Heartbeats, StopReason, StopSignal

# A worker sends its finished episodes at most this often, and all of them when it stops. One pipe message per
# update (~600 a second per worker with 16 envs) cost the trainer and the workers CPU for nothing.
EPISODES_EVERY_S = 0.05


def run_learner(
    worker_id: int,
    learner: Learner,
    counters: Counters,
    stop: StopSignal,
    emit: Callable[[list[EpisodeRecord] | MetricsRecord], None],
    start_time: float,
    metrics: MetricsWindow,
    max_updates: int | None = None,
    should_exit: Callable[[], bool] = lambda: False,
) -> None:
    """Update until the run stops (or ``max_updates``, or ``should_exit``), counting steps in this worker's
    slots; emit finished episodes as lists (every ``EPISODES_EVERY_S``, and the rest at the end) and, about
    once a second, the worker's training metrics."""
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
            wall_time = round(time.time() - start_time, 3)
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
        wall_time = round(time.time() - start_time, 3)
        emit(metrics.record(wall_time, counters.total_steps, learner.optimizer.param_groups[0]["lr"]))


def worker_main(
    worker_id: int,
    config: Config,
    shared_model: nn.Module,
    optimizer: SharedOptimizer,
    counters: Counters,
    stop: StopSignal,
    heartbeats: Heartbeats,
    conn: Connection,
    seed: int,
    start_time: float,
    obs_stats: SharedObsStats | None = None,
    reward_stats: SharedObsStats | None = None,
) -> None:
    """Process target of worker ``worker_id``: records go to ``conn`` (its own pipe to the trainer); on any
    error it sends the traceback and exits 1."""
    guard = ChildGuard(heartbeats, worker_id, f"a3c-worker-{worker_id}")  # first: set_num_threads(1), signals
    learner = None
    try:
        normalizer = None if obs_stats is None else obs_stats.writer(worker_id)
        rewards = None if reward_stats is None else reward_stats.writer(worker_id)
        learner = Learner(
            config, shared_model, optimizer, seed, lambda: counters.total_updates, normalizer, rewards
        )
        window = MetricsWindow(worker_id)
        run_learner(
            worker_id, learner, counters, stop, conn.send, start_time, window, should_exit=guard.should_exit
        )
    except (BrokenPipeError, ConnectionResetError):
        sys.exit(
            0
        )  # the trainer is gone (its end of the pipe closed): nothing to report to, nobody to train for
    except BaseException:
        conn.send(ErrorRecord(f"worker {worker_id}", format_error(traceback.format_exc())))
        sys.exit(1)
    finally:
        if learner is not None:
            learner.close()
