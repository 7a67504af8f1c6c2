"""The driver's side of the Ray backend (node mode): one ``NodeGroup`` per Ray node (workers split evenly),
the global weights in ``ray_shards`` ``ParamShard`` actors, the evaluator thread (``EvalLoop``). Used by
``Trainer`` as its Backend.

Every DRAIN_S the driver drains each group (``GroupSupervisor``: records, counts, statistics, restarts).
A shard that fails an exchange (a group reports it) or a read of the driver's is rebuilt (``_rebuild``):
its slice as a live group last received it from the shard, else the driver's last sync; the groups switch
to it, and the change each made meanwhile reaches it. Past ``max_restarts`` rebuilds the run fails naming
the shard, with ``last.pt`` from the last checkpoint (its counts too).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import ray
import torch
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from a3c.algo.learner import build_model
from a3c.algo.optim import flat_view, flatten_parameters, non_finite_counts
from a3c.backends.ray.actor_calls import ActorFailed, wait_limit, writable_tensor
from a3c.backends.ray.cluster import Rechecks, connect
from a3c.backends.ray.eval_loop import EvalLoop
from a3c.backends.ray.exchange import combine_scale, shard_bounds
from a3c.backends.ray.node_groups import GroupSupervisor, cpu_nodes, first_moments, head_node
from a3c.backends.ray.shard import ParamShard, ShardFailed, gather
from a3c.backends.ray.stats import RunStats
from a3c.backends.ray.sync_log import SyncLog
from a3c.core.records import ErrorRecord, EvalRecord
from a3c.runtime.state import SharedState

# The groups are drained this often (the trainer polls every 0.1 s): a drain is a Ray call on both sides,
# and at 0.1 s the driver and a group's actor took about 8% of a core each (top, CartPole 2 x 16).
DRAIN_S = 0.25
STOP_DRAIN_S = 10.0  # the last drains after the groups stopped, each


class RayBackend:
    """The ``ray`` Backend (see the module docstring)."""

    def __init__(
        self,
        shared: SharedState,
        seeds: tuple[int, int],
        resume_index: int,
        best_mean: float,
        interrupted: Callable[[], bool] = lambda: False,
    ):
        cfg = self.config = shared.config
        self.shared, self.counters, self.run_dir = shared, shared.counters, shared.run_dir
        self.interrupted = interrupted  # a signal arrived: cuts the final evaluation short
        self.ray_cluster = connect(cfg)  # started or joined, judged by its rule before anything runs on it
        self.lock = threading.Lock()  # the evaluator thread reads what the main thread's drains write
        self.shards: list[Any] = []
        try:
            nodes = cpu_nodes()[: cfg.workers]
            flat = flat_view(shared.model).detach().numpy().copy()
            self.bounds = shard_bounds(flat.size, cfg.ray_shards)
            scale = combine_scale(cfg.sync_combine, len(nodes))
            # The shards and the evaluator on the head: the shards hold the only copy of the weights, and a
            # node that dies must not take one with it.
            here = NodeAffinitySchedulingStrategy(head_node(), soft=False)
            for k, (a, b) in enumerate(self.bounds):
                self.shards.append(
                    ParamShard.options(scheduling_strategy=here).remote(k, flat[a:b], len(nodes), scale)
                )
            self.shards_answered = False  # until a first read, the start-up allowance applies
            self.shard_lock = threading.RLock()  # a rebuild and the reads (the evaluator thread's too)
            self.shard_epochs = [0] * len(self.bounds)  # rebuilds so far, per shard
            self.shard_options = (len(nodes), scale, here)
            self.stats = RunStats(shared.obs_stats, shared.reward_stats)  # the trainer's: the checkpoint's
            obs_shape = shared.spaces.obs_shape
            self.cluster = RunStats.empty(obs_shape, cfg.workers, cfg.obs_norm, cfg.reward_scale)
            self.cluster.load(self.stats.arrays())
            self.groups = GroupSupervisor(
                shared, nodes, self.shards, self.bounds, self.cluster, self.lock, resume_index
            )
            self.rechecks = Rechecks(self.ray_cluster)
            # A failed shard's record: the weights are lost past the last checkpoint, whose counts these are.
            self.shard_failure: ErrorRecord | None = None
            self.shard_failure_reported = False
            self.synced = np.zeros((3, cfg.workers), np.int64)
            self.groups_stopped = False
            self.unsent: list[Any] = []  # the groups' last records, until handed to the trainer
            self.next_drain = 0.0
            self.sync_log = SyncLog(self.run_dir / "sync.csv", self.groups.groups, shared.start_time)
            self.scratch = build_model(cfg, shared.spaces)  # the finite check's copy of the global weights
            self.scratch_flat = flatten_parameters(self.scratch)
            self.eval_loop = EvalLoop(shared, seeds[1], best_mean, self._snapshot, placement=here)
        except BaseException:  # a failed start must not leave actors (or the cluster it started) behind
            self._kill_all()
            if self.ray_cluster.connected_by_run:
                ray.shutdown()
            raise

    @property
    def restarts(self) -> int:
        """Group restarts, worker restarts inside groups, shard rebuilds and evaluator actor restarts so
        far."""
        return self.groups.restarts + sum(self.shard_epochs) + self.eval_loop.restarts

    def _weights(self) -> np.ndarray:
        """The global weights from the shards (a failed shard rebuilt, and read again); ActorFailed once a
        shard failed past its rebuilds (never waited on again)."""
        with self.shard_lock:
            for _ in range(len(self.shards) + 1):  # each shard rebuilt at most once per read
                if self.shard_failure is not None:
                    break
                limit = wait_limit(self.config.hang_timeout, not self.shards_answered)
                try:
                    weights = gather(self.shards, limit)
                    self.shards_answered = True
                    return weights
                except ShardFailed as exc:
                    self._rebuild(exc.shard, f"{exc.why}, seen by the driver's read")
            if self.shard_failure is None:
                self.shard_failure = ErrorRecord("driver", "the parameter shards keep failing")
            self.shard_failure_reported = True  # as the ActorFailed's record
        raise ActorFailed(self.shard_failure.source, self.shard_failure.traceback)

    def _rebuild(self, k: int, why: str) -> None:
        """Replace failed shard ``k`` by a new one holding its slice as a live group last received it (the
        first to answer), else as the driver's last sync left it; the groups switch to it. Past
        ``max_restarts`` rebuilds of it, the run's failure (``shard_failure``) instead."""
        if self.shard_failure is not None:
            return
        if self.shard_epochs[k] >= self.config.max_restarts:
            self.shard_failure = self._shard_failed(k, f"{why}; past its restart budget")
            return
        a, b = self.bounds[k]
        nodes, scale, here = self.shard_options
        with contextlib.suppress(Exception):  # already gone
            ray.kill(self.shards[k], no_restart=True)  # a hung one must not answer later
        weights, source = self._live_slice(a, b)
        if weights is None:
            weights = flat_view(self.shared.model).detach().numpy()[a:b].copy()
            source = "the driver's last sync"
        generations = [w.generation for w in self.groups.watch]
        self.shards[k] = ParamShard.options(scheduling_strategy=here).remote(
            k, weights, nodes, scale, generations
        )
        self.shard_epochs[k] += 1
        self.shards_answered = False
        for actor, w in zip(self.groups.actors, self.groups.watch, strict=True):
            if not w.failed:
                actor.adopt_shard.remote(k, self.shards[k], self.shard_epochs[k])
        budget = f"{self.shard_epochs[k]}/{self.config.max_restarts}"
        print(
            f"warning: parameter shard {k} {why}; rebuilt from {source} ({budget})",
            file=sys.stderr,
            flush=True,
        )

    def _live_slice(self, a: int, b: int) -> tuple[np.ndarray | None, str]:
        """The global weights [a:b] as the first live group to answer last received them, and which group;
        (None, "") when none answers within --hang-timeout."""
        watched = list(enumerate(zip(self.groups.actors, self.groups.watch, strict=True)))
        asked = {
            a_.global_slice.remote(a, b): i for i, (a_, w) in watched if not w.failed and w.down_since is None
        }
        pending = list(asked)
        deadline = time.monotonic() + self.config.hang_timeout
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=max(deadline - time.monotonic(), 0.0))
            if not ready:
                break
            try:
                weights = ray.get(ready[0], timeout=0)  # ready: no wait
            except RayError:
                continue  # a lost group: another's
            if weights is not None:
                return np.asarray(weights), f"node group {asked[ready[0]]}'s last exchange"
        return None, ""

    def _shard_failed(self, shard: int, why: str) -> ErrorRecord:
        """The run's failure for a shard that failed past its rebuilds."""
        why += (
            "; its slice of the weights is lost past the last checkpoint (checkpoints/last.pt, the last "
            f"sync): continue with `a3c train --resume {self.run_dir}`"
        )
        return ErrorRecord(f"parameter shard {shard}", why)

    def _snapshot(self) -> tuple[np.ndarray, int, int, dict[str, Any]]:
        """The evaluator's view of the global model: (weights, global step, updates, statistics slots)."""
        weights = self._weights()
        with self.lock:
            total = self.counters.base.numpy() + self.groups.counts().sum(axis=1)
            return weights, int(total[0]), int(total[1]), self.cluster.arrays()

    def poll(self, timeout: float) -> list[Any]:
        """The records since the last poll, evaluations included, within ``timeout`` s: every DRAIN_S the
        groups are drained (a group past its restart budget, or a failed shard, is an ErrorRecord)."""
        wait = self.next_drain - time.monotonic()
        if wait > 0:
            time.sleep(min(wait, timeout))  # pacing the drains: each costs a Ray call on both sides
            if time.monotonic() < self.next_drain:
                return self.eval_loop.take()
        self.next_drain = time.monotonic() + DRAIN_S
        records = self._drain()
        # Each worker's updates over all its group's incarnations (a restarted group counts from 0 again);
        # not while stopping (``_drain`` alone), when a refusal would cost the last records.
        self.rechecks.after_drain(self.groups.counts()[1], self.restarts)  # BackendFailed stops the run
        return records

    def _drain(self, wait: float = 0.0) -> list[Any]:
        records, replies = self.groups.drain(wait)
        for i, reply in replies:
            failure = reply["failure"]
            records += reply["records"] + ([failure] if failure is not None else [])
            self.sync_log.add(i, reply)
            with self.shard_lock:
                for k, (why, epoch) in reply.get("shards_down", {}).items():
                    if epoch < self.shard_epochs[k]:  # it has not switched to the rebuilt one yet
                        self.groups.actors[i].adopt_shard.remote(k, self.shards[k], self.shard_epochs[k])
                    else:
                        self._rebuild(k, f"{why}, seen by node {i}'s exchange")
        if self.shard_failure is not None and not self.shard_failure_reported:
            self.shard_failure_reported = True
            records.append(self.shard_failure)
        self._mirror(self.groups.counts())
        if self.shard_failure is None:
            limit = wait_limit(self.config.hang_timeout, False)
            self.sync_log.write_due(self.shards, limit)
        return records + self.eval_loop.take()

    def _mirror(self, slots: np.ndarray) -> None:
        for name, row in zip(("steps", "updates", "skipped"), slots, strict=True):
            getattr(self.counters, name)[:] = torch.from_numpy(row)

    def non_finite_counts(self) -> dict[str, int]:
        """{parameter name: NaN/inf values} of the global weights (read from the shards into a scratch
        model), nonzero ones only."""
        with torch.no_grad():
            self.scratch_flat.copy_(torch.from_numpy(self._weights()))
        return {name: count for name, count in non_finite_counts(self.scratch).items() if count}

    def sync(self) -> None:
        """Copy the global weights, the first live group's optimizer state, the counters and the statistics
        into the trainer's objects, in place."""
        weights = self._weights()
        moments = first_moments(self.groups)
        optimizer = self.shared.optimizer
        flat = optimizer.param_groups[0]["params"][0]
        with torch.no_grad():
            if moments is not None:  # else (no group up) the moments stay the last checkpoint's
                for key, value in optimizer.state[flat].items():
                    value.copy_(writable_tensor(np.asarray(moments[key])))
            flat_view(self.shared.model).copy_(writable_tensor(weights))
        with self.lock:
            self.synced = self.groups.counts()
            self.stats.load(self.cluster.arrays())
        self._mirror(self.synced)

    def _stop_groups(self) -> None:
        """Stop every group once (its workers, then its last exchange); keep their last records in
        ``unsent``. Two drains: the first takes the answers to drains sent before the stop, the second the
        records the workers sent while stopping."""
        if not self.groups_stopped:
            self.groups_stopped = True
            self.groups.stop(int(self.shared.stop.reason))
            self.unsent += self._drain(STOP_DRAIN_S) + self._drain(STOP_DRAIN_S)

    def final_evaluation(self) -> list[EvalRecord | ErrorRecord]:
        """After a budget stop: the groups stop first (the evaluation then plays the final global weights,
        as the local evaluator plays the stopped workers' ones), then one more evaluation."""
        self._stop_groups()
        evaluation = self.eval_loop.final(self.interrupted)
        records, self.unsent = self.unsent, []  # handed over only now: ``stop`` still has them otherwise
        return [*records, *evaluation]

    def stop(self, cut_short: Callable[[], bool] = lambda: False) -> list[Any]:
        """Stop the evaluator thread and every group, take their last records, sync, and tear down the
        actors (and a cluster this run started). If the sync fails, the counters go back to the last sync's,
        so the trainer's state stays one instant."""
        records: list[Any] = []
        synced = False
        try:
            self.eval_loop.stop()
            self._stop_groups()
            records, self.unsent = self.unsent, []
            if self.shard_failure is None:
                self.sync_log.write_due(self.shards, self.config.hang_timeout, force=True)
            try:
                self.sync()
                synced = True
            except ActorFailed as exc:
                records.append(exc.record())
        finally:
            try:
                if not synced:
                    self._mirror(self.synced)
                self._kill_all()
                self.eval_loop.close()
                self.sync_log.close()
            finally:
                if self.ray_cluster.connected_by_run:
                    ray.shutdown()
        return [*records, *self.eval_loop.take()]

    def _kill_all(self) -> None:
        eval_loop = getattr(self, "eval_loop", None)
        groups = getattr(self, "groups", None)
        actors = [*(groups.actors if groups else []), *self.shards, getattr(eval_loop, "actor", None)]
        for actor in actors:
            if actor is None:
                continue
            try:
                ray.kill(actor, no_restart=True)
            except Exception as exc:  # noqa: BLE001 - one failed kill must not keep the rest alive
                print(f"warning: could not kill a Ray actor: {exc}", file=sys.stderr, flush=True)
