"""The Ray actors: the parameter server and the worker (the local backend's Learner against the server; the
evaluation actor is in eval_actor.py); and how long the driver waits for them (see a3c/backends/ray/driver.py
for the design)."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import numpy as np
import ray
import torch

from a3c.algo.diagnostics.metrics import MetricsWindow
from a3c.algo.learner.learner import Learner, UpdateResult, build_model, build_shared
from a3c.algo.shared.flat import flatten_parameters
from a3c.algo.shared.optim import non_finite_counts
from a3c.backends.base import BackendFailed
from a3c.backends.ray.stats import Arrays, RunStats
from a3c.core.config import Config
from a3c.core.records import EpisodeRecord, MetricsRecord
from a3c.core.spaces import Spaces
from a3c.rundir.resume import restore_model, restore_optimizer

SYNC_AT_LEAST_S = 0.5  # a worker whose gradients are all skipped (non-finite) still reports this often


# Fault injection for tests/backends/test_ray*.py only: an actor named by this environment variable blocks in
# one of its methods (see ``injected_hang``). Nothing sets it outside the tests; unset, it costs one lookup.
HANG_VAR = "A3C_TEST_HANG"


HANG_S = 3600.0  # the injected hang; the driver must notice it and kill the actor long before
INJECTED_HANG_TIMEOUT_S = 5.0  # the driver's wait for that actor then (``wait_limit``): not the healthy ones'


def injected_hang(actor: str) -> None:
    """Block (a test's injected hang) when ``A3C_TEST_HANG`` names ``actor``, in its first incarnation only:
    the actor that Ray restarts in its place goes on."""
    if os.environ.get(HANG_VAR) == actor and not ray.get_runtime_context().was_current_actor_reconstructed:
        time.sleep(HANG_S)


def writable_tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor over ``array``; Ray hands arrays over read-only (zero-copy), so those are copied first."""
    return torch.from_numpy(np.require(array, requirements="W"))


@ray.remote
class ParameterServer:
    """The global model and optimizer, and the run's observation and return statistics (``RunStats``);
    ``push`` applies one gradient and returns the new weights."""

    def __init__(
        self,
        config: dict[str, Any],
        spaces: Spaces,
        model_state: dict[str, torch.Tensor],
        optimizer_state: dict[str, Any],
        base: list[int],
        stats: dict[str, Arrays],
    ):
        torch.set_num_threads(1)
        cfg = Config.from_dict(config)
        self.stats = RunStats.empty(spaces.obs_shape, cfg.workers, cfg.obs_norm, cfg.reward_scale)
        self.stats.load(stats)
        self.model, self.optimizer = build_shared(cfg, spaces)
        restore_model(self.model, model_state, "the driver's model")
        restore_optimizer(self.optimizer, optimizer_state, "the driver's optimizer")
        self.flat = self.optimizer.param_groups[0]["params"][0]
        self.slots = np.zeros((3, cfg.workers), np.int64)  # steps, updates, skipped of each worker
        self.base = np.asarray(base, np.int64)
        self.registrations = np.zeros(cfg.workers, np.int64)
        self.contact = np.full(cfg.workers, -np.inf)  # time.monotonic() of each worker's last call: its beat
        self.records: list[Any] = []
        self.stopped = False
        self.synced_updates = 0  # updates in the last state(), which the driver checkpoints: the hang's cue

    def register(self, worker: int) -> int:
        """How many times ``worker`` started before: its restart index (a fresh seed stream each time)."""
        self.registrations[worker] += 1
        self.contact[worker] = time.monotonic()
        return int(self.registrations[worker] - 1)

    def push(
        self,
        worker: int,
        grad: np.ndarray | None,
        counts: tuple[int, int, int],
        lr: float,
        records: list,
        own_stats: dict[str, Arrays],
    ) -> tuple[np.ndarray, int, int, bool, dict[str, Arrays]]:
        """Apply ``grad`` (if any) at learning rate ``lr`` (the worker's schedule), add ``counts`` (steps,
        updates, skipped), keep the records and the worker's own statistics slots; return (weights, global
        step, updates, stop, every statistics slot).

        Arrays, not bytes: bytes saved ~0.15 ms per side per call for the CartPole MLP with a bare actor but
        nothing measurable in training, and they made an Atari push about twice as costly (Ray copies bytes in
        band; a large array goes out of band, zero-copy)."""
        if grad is not None:
            self.flat.grad = writable_tensor(grad)
            self.optimizer.param_groups[0]["lr"] = lr
            self.optimizer.step()
        self.slots[:, worker] += counts
        self.contact[worker] = time.monotonic()
        self.records.extend(records)
        self.stats.load_own(worker, own_stats)
        total = self.base + self.slots.sum(axis=1)
        return self.flat.numpy().copy(), int(total[0]), int(total[1]), self.stopped, self.stats.arrays()

    def snapshot(self) -> tuple[np.ndarray, int, int, dict[str, Arrays]]:
        """(weights, global step, updates, every statistics slot) read together."""
        total = self.base + self.slots.sum(axis=1)
        return self.flat.numpy().copy(), int(total[0]), int(total[1]), self.stats.arrays()

    def drain(self) -> tuple[list, np.ndarray, np.ndarray]:
        """The records since the last drain, the per-worker counter slots [3, workers] and the seconds since
        each worker last called [workers] (inf: never; ages, not times, as the driver's clock may differ)."""
        if self.synced_updates > 0:
            # tests: a server that hangs once training is under way and a checkpoint holds some of it (a count
            # of updates alone raced the first checkpoint on a fast machine)
            injected_hang("server")
        records, self.records = self.records, []
        return records, self.slots.copy(), time.monotonic() - self.contact

    def non_finite_counts(self) -> dict[str, int]:
        """{parameter name: NaN/inf values} for the parameters that have any (empty: all finite), counted on
        a copy (``a3c.algo.shared.optim.non_finite_counts``), so the driver's check moves a verdict, not the
        state."""
        return {name: count for name, count in non_finite_counts(self.model).items() if count}

    def state(self) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray, dict[str, Arrays]]:
        """(weights, optimizer state tensors, counter slots, statistics slots): the driver's checkpoint."""
        optimizer = {k: v.numpy().copy() for k, v in self.optimizer.state[self.flat].items()}
        self.synced_updates = int(self.slots[1].sum())
        return self.flat.numpy().copy(), optimizer, self.slots.copy(), self.stats.arrays()

    def stop(self) -> None:
        """Tell the workers to stop: every later ``push`` returns stop = True."""
        self.stopped = True


class GradientLink:
    """A Ray worker's stand-in for the shared optimizer. ``Learner`` hands it each gradient as the ``.grad``
    of the local flat weights and calls ``step()``; the link sums them until the worker sends their mean."""

    def __init__(self, flat: torch.Tensor, lr: float, sync_every: int):
        self.param_groups = [{"params": [flat], "lr": lr}]
        self.flat = flat
        self.sync_every = sync_every
        self.total = torch.zeros_like(flat)
        self.count = 0

    def step(self) -> None:
        """Add the flat weights' ``.grad`` to the sum (in place of an optimizer step)."""
        self.total += self.flat.grad
        self.count += 1

    def due(self) -> bool:
        """True once ``sync_every`` gradients are summed: time to send their mean."""
        return self.count >= self.sync_every

    def take(self) -> np.ndarray | None:
        """The mean of the gradients since the last take (None if there were none); starts a new sum."""
        mean = None if self.count == 0 else (self.total / self.count).numpy()  # a new tensor: safe to zero
        self.total.zero_()
        self.count = 0
        return mean

    def load(self, weights: np.ndarray) -> None:
        """Copy the server's flat ``weights`` into the local model's flat parameters."""
        with torch.no_grad():
            self.flat.copy_(writable_tensor(weights))


@ray.remote(num_cpus=1)
class RayWorker:
    """One A3C worker: the local backend's Learner; gradients to the server, weights back."""

    def __init__(
        self,
        worker: int,
        config: dict[str, Any],
        spaces: Spaces,
        server: Any,
        seed: int,
        resume_index: int,
        start_time: float,
    ):
        from a3c.core.seeding import child_seed

        torch.set_num_threads(1)
        self.cfg = cfg = Config.from_dict(config)
        self.worker, self.server, self.start_time = worker, server, start_time
        # The server may still be starting; later, a server that stays silent fails the run at the driver
        # first (after hang_timeout), so the worker's own waits are bounded more loosely.
        self.timeout = 2 * max(cfg.hang_timeout, STARTUP_TIMEOUT_S)
        restart = ray.get(server.register.remote(worker), timeout=self.timeout)
        weights, self.global_step, self.updates_seen, stats = ray.get(
            server.snapshot.remote(), timeout=self.timeout
        )
        model = build_model(cfg, spaces)
        self.link = GradientLink(flatten_parameters(model), cfg.lr, cfg.sync_every)
        self.link.load(weights)
        # A private twin of the run's statistics, its slot from the server: a restart goes on from it.
        self.stats = RunStats.empty(spaces.obs_shape, cfg.workers, cfg.obs_norm, cfg.reward_scale)
        self.stats.load(stats)
        normalizer, reward_stats = self.stats.writers(worker)
        self.learner = Learner(
            cfg,
            model,
            self.link,
            seed=child_seed(seed, worker, restart, resume_index),
            clock=lambda: (self.updates_seen, self.global_step, time.time() - self.start_time),
            normalizer=normalizer,
            reward_stats=reward_stats,
        )
        self.window = MetricsWindow(worker, every_steps=cfg.metrics_interval_steps)

    def run(self) -> list[EpisodeRecord | MetricsRecord]:
        """Update until the server says stop; returns the records no push carried (the last metrics).

        With ``ray_overlap`` the worker sends each push and starts its next update at once, taking the
        previous push's reply only then: the round trip and the server's work hide behind a rollout, and each
        gradient is computed on weights one exchange older (metrics.csv's policy lag counts that update)."""
        steps = updates = skipped = 0
        self.records: list[EpisodeRecord | MetricsRecord] = []
        group: list[UpdateResult] = []  # this exchange's results: to the metrics once their lag is known
        pending: tuple[Any, int, list[UpdateResult]] | None = None  # (reply, weights' update count, group)
        last_sync = time.monotonic()
        while True:
            result = self.learner.update()
            finite = bool(np.isfinite(result.grad_norm))
            steps, updates, skipped = steps + result.steps, updates + 1, skipped + (not finite)
            group.append(result)
            wall = round(time.time() - self.start_time, 3)
            self.records += [
                EpisodeRecord(wall, self.global_step + steps, self.worker, e.episode_return, e.length)
                for e in result.episodes
            ]
            if not (self.link.due() or time.monotonic() - last_sync >= SYNC_AT_LEAST_S):
                continue
            lr = self.link.param_groups[0]["lr"]  # the Learner's schedule sets it before each step
            reply = self.server.push.remote(
                self.worker, self.link.take(), (steps, updates, skipped), lr, self.records,
                self.stats.own(self.worker),
            )  # fmt: skip
            sent = (reply, self.updates_seen, group)
            steps = updates = skipped = 0
            self.records, group, last_sync = [], [], time.monotonic()
            if not self.cfg.ray_overlap:
                sent, pending = None, sent
            stop = pending is not None and self._receive(*pending)
            pending = sent
            if stop:
                if pending is not None:
                    self._receive(*pending)  # the last push's reply: its update count and lag
                if self.window.lags:  # the last, partial window: every worker that updated has metrics
                    wall = round(time.time() - self.start_time, 3)
                    self.records.append(self.window.record(wall, self.global_step, lr))
                return self.records  # the driver takes them from the loop's result

    def _receive(self, reply: Any, used: int, results: list[UpdateResult]) -> bool:
        """Take a push's reply: load its weights and statistics, add its ``results`` to the metrics with
        their policy lag (the updates that landed between the weights they used, counted ``used``, and
        their own); whether the server says stop."""
        weights, self.global_step, updates_now, stop, stats = ray.get(
            reply, timeout=2 * self.cfg.hang_timeout
        )
        self.stats.load(stats, keep=self.worker)
        lag = max(updates_now - used - len(results), 0)
        for result in results:
            self.window.add(dataclasses.replace(result, policy_lag=lag))
        self.updates_seen = updates_now
        self.link.load(weights)
        if self.window.due():
            wall = round(time.time() - self.start_time, 3)
            lr = self.link.param_groups[0]["lr"]
            self.records.append(self.window.record(wall, self.global_step, lr))
        return stop


STARTUP_TIMEOUT_S = 120.0  # an actor's first answer waits for Ray to start its process and import torch


def wait_limit(hang_timeout: float, starting: bool, hanging: str = "") -> float:
    """How long to wait for an actor: ``hang_timeout``, or at least STARTUP_TIMEOUT_S while it may still be
    starting (before its first answer, or its loop's first seconds); INJECTED_HANG_TIMEOUT_S instead while
    it is ``hanging`` (its name) where the hang a test injects with ``A3C_TEST_HANG`` blocks."""
    if hanging and os.environ.get(HANG_VAR) == hanging:
        hang_timeout = INJECTED_HANG_TIMEOUT_S
    return max(hang_timeout, STARTUP_TIMEOUT_S) if starting else hang_timeout


class ActorFailed(BackendFailed):
    """An actor that hung or died beyond what a restart can mend: the run fails naming ``source``. (Not an
    OSError, as Ray's GetTimeoutError is: the trainer treats an OSError at a checkpoint as a full disk.)"""
