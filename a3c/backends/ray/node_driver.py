"""The driver's side of the Ray node mode (``ray_mode = "node"``, the default): one ``NodeGroup`` per Ray
node (workers split evenly), the global weights in ``ray_shards`` ``ParamShard`` actors, the evaluator
thread of both modes (``EvalLoop``). Used by ``Trainer`` as its Backend.

Every trainer tick the driver drains each node (records, its workers' counter and statistics slots, its
exchange counts) and hands it the other nodes' slots. A node actor that dies is restarted by Ray (within
``max_restarts``) on the same node: the new incarnation starts from the shards' current weights, and the
counts of the lost one are kept. A node that does not answer for ``hang_timeout`` s is killed and restarted
the same way. A shard holds the only copy of its slice of the weights and is not restarted: a shard that
fails an exchange (or a read) ends the run, naming it, with ``last.pt`` from the last checkpoint.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import ray
import torch
from ray.exceptions import GetTimeoutError, RayActorError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from a3c.algo.learner.learner import build_model
from a3c.algo.shared.flat import flat_view, flatten_parameters
from a3c.algo.shared.optim import non_finite_counts
from a3c.backends.ray.actors import STARTUP_TIMEOUT_S, ActorFailed, wait_limit, writable_tensor
from a3c.backends.ray.cluster import check_private, connect
from a3c.backends.ray.eval_loop import EvalLoop
from a3c.backends.ray.exchange import combine_scale, shard_bounds
from a3c.backends.ray.node import NodeGroup
from a3c.backends.ray.shard import ParamShard, ShardFailed, gather
from a3c.backends.ray.stats import RunStats
from a3c.backends.ray.sync_log import SyncLog
from a3c.core.records import ErrorRecord, EvalRecord
from a3c.runtime.state import SharedState

STOP_WAIT_S = (
    10.0  # a node's stop (its workers' last update, its last exchange) within this, beyond its grace
)


def cpu_nodes() -> list[str]:
    """The ids of the cluster's live nodes that have CPUs, in a stable order."""
    return sorted(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0)


class NodeRun:
    """The ``ray`` Backend in node mode (see the module docstring)."""

    def __init__(self, shared: SharedState, seeds: tuple[int, int], resume_index: int, best_mean: float):
        cfg = self.config = shared.config
        self.shared, self.counters, self.run_dir = shared, shared.counters, shared.run_dir
        self.started_cluster = connect(cfg)
        self.lock = threading.Lock()  # the evaluator thread reads what the main thread's drains write
        try:
            nodes = cpu_nodes()[: cfg.workers]
            self.groups = [list(map(int, ids)) for ids in np.array_split(np.arange(cfg.workers), len(nodes))]
            flat = flat_view(shared.model).detach().numpy().copy()
            self.bounds = shard_bounds(flat.size, cfg.ray_shards)
            scale = combine_scale(cfg.sync_combine, len(nodes))
            # The shards next to the driver: they hold the only copy of the weights, and a node that dies
            # must not take one with it.
            here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
            self.shards = [
                ParamShard.options(scheduling_strategy=here).remote(k, flat[a:b], len(nodes), scale)
                for k, (a, b) in enumerate(self.bounds)
            ]
            self.stats = RunStats(shared.obs_stats, shared.reward_stats)  # the trainer's: the checkpoint's
            self.cluster = RunStats.empty(
                shared.spaces.obs_shape, cfg.workers, cfg.obs_norm, cfg.reward_scale
            )
            self.cluster.load(self.stats.arrays())
            self.times = (shared.start_time, resume_index)
            self.nodes = [
                NodeGroup.options(
                    max_restarts=cfg.max_restarts,
                    max_task_retries=0,
                    # soft: a group whose node died is restarted on another (then shares its CPUs)
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=True),
                ).remote(i, ids, cfg.to_dict(), shared.spaces, self.shards, self.bounds)
                for i, (node, ids) in enumerate(zip(nodes, self.groups, strict=True))
            ]
            self.start_sent: list[str | None] = [None] * len(nodes)  # the incarnation each start went to
            self.slots = np.zeros((3, cfg.workers), np.int64)  # this incarnation's, per worker
            self.carried = np.zeros((3, cfg.workers), np.int64)  # lost incarnations' counts
            self.carried_exchanges = [0] * len(nodes)
            self.incarnation: list[str | None] = [None] * len(nodes)
            self.node_restarts = [0] * len(nodes)
            self.down_since: list[float | None] = [None] * len(nodes)  # lost, not answering again yet
            self.private_checked = not self.started_cluster
            # A failed shard's record: the weights are lost past the last checkpoint, whose counts these are.
            self.shard_failure: ErrorRecord | None = None
            self.synced = np.zeros((3, cfg.workers), np.int64)
            self.sync_log = SyncLog(
                self.run_dir / "sync.csv", self.groups, shared.start_time, self.shards, cfg.hang_timeout
            )
            self.scratch = build_model(cfg, shared.spaces)  # the finite check's copy of the global weights
            self.scratch_flat = flatten_parameters(self.scratch)
            self.eval_loop = EvalLoop(shared, seeds[1], best_mean, self._ask_server, placement=here)
        except BaseException:  # a failed start must not leave actors (or the cluster it started) behind
            self._tear_down()
            raise

    def _tear_down(self) -> None:
        eval_loop = getattr(self, "eval_loop", None)
        actors = [
            *getattr(self, "nodes", []),
            *getattr(self, "shards", []),
            getattr(eval_loop, "actor", None),
        ]
        for actor in actors:
            if actor is not None:
                try:
                    ray.kill(actor, no_restart=True)
                except Exception as exc:  # noqa: BLE001 - one failed kill must not keep the rest alive
                    print(f"warning: could not kill a Ray actor: {exc}", file=sys.stderr, flush=True)
        if self.started_cluster:
            ray.shutdown()

    @property
    def restarts(self) -> int:
        """Node group and evaluator actor restarts so far (worker restarts inside a node are the node's)."""
        return sum(self.node_restarts) + self.eval_loop.restarts

    def _weights(self) -> np.ndarray:
        """The global weights from the shards; ActorFailed once a shard failed (never waited on again)."""
        if self.shard_failure is None:
            try:  # tests: a shard's injected hang blocks reads too; the driver then waits the short time
                return gather(self.shards, wait_limit(self.config.hang_timeout, False, hanging="shard 0"))
            except ShardFailed as exc:
                why = f"the driver's read: parameter shard {exc.shard} failed: {exc.why}"
                self.shard_failure = ErrorRecord(f"parameter shard {exc.shard}", why)
        raise ActorFailed(self.shard_failure.source, self.shard_failure.traceback)

    def _ask_server(self, method: str) -> Any:
        """The evaluator's ``snapshot``: (global weights, global step, updates, statistics slots)."""
        assert method == "snapshot"
        weights = self._weights()
        with self.lock:
            total = self.counters.base.numpy() + (self.carried + self.slots).sum(axis=1)
            return weights, int(total[0]), int(total[1]), self.cluster.arrays()

    def _start(self, i: int, incarnation: str) -> None:
        """Send node ``i``'s ``start`` once per incarnation: the trainer's optimizer state (a resumed
        checkpoint's, or the last sync's after a loss), the run's counts so far and its statistics."""
        if self.start_sent[i] == incarnation:
            return
        self.start_sent[i] = incarnation
        optimizer = self.shared.optimizer.state_dict()
        with self.lock:
            base = self.counters.base.numpy() + self.carried.sum(axis=1)
            stats = self.cluster.arrays()
        self.nodes[i].start.remote(optimizer, [int(v) for v in base], stats, self.times)

    def _node_lost(self, i: int, why: str) -> ErrorRecord | None:
        """Count node ``i``'s loss (its counts carried over); an ErrorRecord once past ``max_restarts``."""
        ids = self.groups[i]
        self.carried[:, ids] += self.slots[:, ids]
        self.slots[:, ids] = 0
        self.carried_exchanges[i] = self.sync_log.exchanges[i]
        self.node_restarts[i] += 1
        self.down_since[i] = time.monotonic()
        if self.node_restarts[i] > self.config.max_restarts:
            return ErrorRecord(f"node {i}", f"node group {i} {why}; past its restart budget")
        budget = f"{self.node_restarts[i]}/{self.config.max_restarts}"
        print(f"warning: node group {i} {why}; Ray restarts it ({budget})", file=sys.stderr, flush=True)
        return None

    def poll(self, timeout: float) -> list[Any]:
        """Drain every node (waiting up to ``timeout`` s on each one's workers); the records since the last
        poll, evaluations included; a node past its restart budget, or a failed shard, is an ErrorRecord."""
        with self.lock:
            mirror = self.carried + self.slots
            arrays = self.cluster.arrays()
        refs = [node.drain.remote(timeout, mirror, arrays) for node in self.nodes]
        records: list[Any] = []
        for i, ref in enumerate(refs):
            starting = self.incarnation[i] is None or self.down_since[i] is not None
            limit = timeout + wait_limit(self.config.hang_timeout, starting, hanging=f"node {i}")
            try:
                reply = ray.get(ref, timeout=limit)
            except GetTimeoutError:
                ray.kill(self.nodes[i], no_restart=False)
                records += [self._node_lost(i, f"did not answer within {limit:g} s (hung) and was killed")]
                continue
            except RayActorError as exc:
                lost = self.down_since[i]
                if lost is None:
                    records += [self._node_lost(i, f"died ({type(exc).__name__})")]
                elif time.monotonic() - lost > STARTUP_TIMEOUT_S:
                    records += [ErrorRecord(f"node {i}", f"node group {i} did not come back after a restart")]
                continue
            if self.incarnation[i] not in (None, reply["incarnation"]) and self.down_since[i] is None:
                records += [self._node_lost(i, "was restarted")]
            self.incarnation[i] = reply["incarnation"]
            if not reply["started"]:
                self._start(i, reply["incarnation"])
                continue
            self.down_since[i] = None
            failure = reply["failure"]
            records += reply["records"] + ([failure] if failure is not None else [])
            if failure is not None and failure.source.startswith("parameter shard"):
                self.shard_failure = self.shard_failure or failure
            with self.lock:
                self.slots[:, self.groups[i]] = reply["slots"]
                for worker, own in reply["stats"].items():
                    self.cluster.load_own(worker, own)
            self.sync_log.add(i, reply, self.carried_exchanges[i])
        self._mirror()
        self.sync_log.write_due()
        if not self.private_checked and all(self.slots[1] > 0):
            self.private_checked = True
            check_private()  # again, now that every worker's process exists (BackendFailed stops the run)
        return [r for r in records if r is not None] + self.eval_loop.take()

    def _mirror(self, slots: np.ndarray | None = None) -> None:
        slots = self.carried + self.slots if slots is None else slots
        for name, row in zip(("steps", "updates", "skipped"), slots, strict=True):
            getattr(self.counters, name)[:] = torch.from_numpy(row)

    def non_finite_counts(self) -> dict[str, int]:
        """{parameter name: NaN/inf values} of the global weights (read from the shards into a scratch
        model), nonzero ones only."""
        with torch.no_grad():
            self.scratch_flat.copy_(torch.from_numpy(self._weights()))
        return {name: count for name, count in non_finite_counts(self.scratch).items() if count}

    def sync(self) -> None:
        """Copy the global weights, the first live node's optimizer state, the counters and the statistics
        into the trainer's objects, in place."""
        weights = self._weights()
        optimizer = self.shared.optimizer
        flat = optimizer.param_groups[0]["params"][0]
        for node in self.nodes:
            try:
                moments = ray.get(node.optimizer_state.remote(), timeout=self.config.hang_timeout)
            except (GetTimeoutError, RayActorError):
                moments = None
            if moments is None:
                continue  # a lost node, or one not started yet: the next one's moments
            with torch.no_grad():
                for key, value in optimizer.state[flat].items():
                    value.copy_(writable_tensor(np.asarray(moments[key])))
            break
        with torch.no_grad():
            flat_view(self.shared.model).copy_(writable_tensor(weights))
        self.synced = self.carried + self.slots
        self._mirror(self.synced)
        with self.lock:
            self.stats.load(self.cluster.arrays())

    def final_evaluation(self) -> list[EvalRecord | ErrorRecord]:
        """One more evaluation at a budget's end (``EvalLoop.final``)."""
        return self.eval_loop.final()

    def stop(self, cut_short: Callable[[], bool] = lambda: False) -> list[Any]:
        """Stop the evaluator thread and every node (its workers, then its last exchange), take their last
        records, sync, and tear down the actors (and a cluster this run started)."""
        records: list[Any] = []
        try:
            self.eval_loop.stop()
            reason = int(self.shared.stop.reason)
            stops = [node.stop.remote(reason) for node in self.nodes]
            ray.wait(stops, num_returns=len(stops), timeout=STOP_WAIT_S + self.config.hang_timeout)
            records = self.poll(0.0)
            try:
                self.sync()
            except ActorFailed as exc:  # the trainer keeps the last sync: its counts go with its weights
                records.append(exc.record())
                self._mirror(self.synced)
        finally:
            try:
                self._kill_all()
                self.eval_loop.close()
                self.sync_log.close()
            finally:
                if self.started_cluster:
                    ray.shutdown()
        return [*records, *self.eval_loop.take()]

    def _kill_all(self) -> None:
        for actor in [*self.nodes, *self.shards, self.eval_loop.actor]:
            try:
                ray.kill(actor, no_restart=True)
            except Exception as exc:  # noqa: BLE001 - one failed kill must not keep the rest alive
                print(f"warning: could not kill a Ray actor: {exc}", file=sys.stderr, flush=True)
