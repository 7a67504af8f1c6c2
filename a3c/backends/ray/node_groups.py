"""The driver's supervisor of the node group actors (``GroupSupervisor``; the actor is node.py's
``NodeGroup``): one per Ray node, their start, their drains every tick, their liveness and the run's counts
they hold.

Liveness, per group: a call that fails as *unavailable* may be transient (the actor can still be alive), so
a loss is counted when a group is seen dead (``ActorDiedError``), or does not answer for ``hang_timeout`` s;
the driver then replaces it (Ray does not restart groups: a group is pinned to its node, and a lost node's
group goes to the head node). The counts of a lost incarnation are carried over only when its successor
answers (never twice). A new incarnation is sent ``start`` (the trainer's optimizer moments of the last
checkpoint, the run's counts, the statistics); a start that fails or does not finish within the start-up
allowance (``wait_limit``), or a group that stays unavailable for STARTUP_TIMEOUT_S + ``hang_timeout``,
fails the run naming it. Each group has at most one drain outstanding: a slow one never holds up the
others.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray
from ray.exceptions import ActorUnavailableError, RayActorError, RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from a3c.backends.ray.actor_calls import wait_limit
from a3c.backends.ray.node import NodeGroup
from a3c.backends.ray.stats import RunStats
from a3c.core.records import ErrorRecord
from a3c.runtime.state import SharedState
from a3c.runtime.supervisor import STARTUP_TIMEOUT_S

STOP_WAIT_S = 10.0  # a group's stop (its workers' last update, its last exchange), beyond its grace


HEAD_RESOURCE = "node:__internal_head__"  # Ray gives the head node this resource


def head_node() -> str:
    """The id of the cluster's head node (where a3c's driver runs, docs/ray.md), else the driver's own."""
    heads = [n["NodeID"] for n in ray.nodes() if n["Alive"] and HEAD_RESOURCE in n["Resources"]]
    return heads[0] if heads else ray.get_runtime_context().get_node_id()


def cpu_nodes() -> list[str]:
    """The ids of the cluster's live nodes that have CPUs: the head first (group 0 runs next to the shards
    and the evaluator), then the others in a stable order."""
    head = head_node()
    nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0]
    return sorted(nodes, key=lambda node: (node != head, node))


@dataclass
class Watch:
    """The driver's view of one group."""

    incarnation: str | None = None  # the last one that answered
    started: str | None = None  # the incarnation that reported itself started
    start_sent: str | None = None  # the incarnation the last start went to
    start_ref: Any = None
    down_since: float | None = None  # the first failed call since the last answer
    generation: int = 0  # actors spawned for it so far, less one
    lost_generation: int | None = None  # the generation whose loss is counted, until a successor answers
    failed: bool = False  # reported as the run's failure: not again
    restarts: int = 0
    worker_restarts: int = 0  # inside its lost incarnations
    live_worker_restarts: int = 0  # inside the current one
    exchanges: int = 0  # of its lost incarnations
    live_exchanges: int = 0  # of the current one

    def starting(self) -> bool:
        """Whether the start-up allowance applies to a wait on it."""
        return self.started is None or self.started != self.incarnation or self.down_since is not None


class GroupSupervisor:
    """The driver's side of the ``NodeGroup`` actors. Node group ``i`` on Ray node ``node_ids[i]`` runs
    workers ``groups[i]``. ``trainer``: the trainer's shared state (config, spaces, its optimizer and
    counters: what a group starts from); ``cluster``: the run's statistics (all slots); ``lock``: held while
    the counts or ``cluster`` change (the evaluator thread reads them)."""

    def __init__(
        self, trainer: SharedState, node_ids: list[str], shards: list[Any], bounds: list[tuple[int, int]],
        cluster: RunStats, lock: threading.Lock, resume_index: int,
    ):  # fmt: skip
        config = self.config = trainer.config
        self.trainer, self.cluster, self.lock = trainer, cluster, lock
        self.times = (trainer.start_time, resume_index)
        split = np.array_split(np.arange(config.workers), len(node_ids))
        self.groups = [list(map(int, ids)) for ids in split]
        self.node_ids, self.spawn_args = list(node_ids), (config.to_dict(), trainer.spaces, shards, bounds)
        self.watch = [Watch() for _ in node_ids]
        self.actors = [self._spawn(i) for i in range(len(node_ids))]
        self.pending: list[tuple[Any, float, int] | None] = [None] * len(self.actors)  # (drain, sent, gen.)
        self.slots = np.zeros((3, config.workers), np.int64)  # the current incarnations' counts, per worker
        self.carried = np.zeros((3, config.workers), np.int64)  # their lost incarnations' counts
        self.stopping = False  # no start is sent, and no group restarted, once the run stops

    def _spawn(self, i: int) -> Any:
        """A new actor for group ``i`` on Ray node ``node_ids[i]``, there or nowhere (Ray's soft affinity put
        groups meant for two nodes on one). Ray does not restart it: ``_replace`` does."""
        return NodeGroup.options(
            max_restarts=0,
            max_task_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(self.node_ids[i], soft=False),
        ).remote(i, self.groups[i], *self.spawn_args, self.watch[i].generation)

    def _replace(self, i: int) -> None:
        """Kill group ``i``'s actor (dead, or hung) and start a new one (a new generation): on its node if
        that is alive, else on the head (where it shares the CPUs). The shards are told first to refuse the
        old generation's exchanges: a kill that does not reach it (a partitioned node) leaves it alive."""
        ray.kill(self.actors[i], no_restart=True)
        self.watch[i].generation += 1
        for shard in self.spawn_args[2]:
            shard.retire.remote(i, self.watch[i].generation)  # a dead shard's error is the drains' to see
        alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        if self.node_ids[i] not in alive:
            self.node_ids[i] = head_node()
        self.actors[i] = self._spawn(i)
        self.pending[i] = None

    @property
    def restarts(self) -> int:
        """Group restarts and worker restarts inside groups, so far."""
        return sum(w.restarts + w.worker_restarts + w.live_worker_restarts for w in self.watch)

    def counts(self) -> np.ndarray:
        """The run's counts per worker [3 (steps, updates, skipped), workers], this segment."""
        return self.carried + self.slots

    def drain(self, timeout: float) -> tuple[list[Any], list[tuple[int, dict[str, Any]]]]:
        """Ask every group for a drain (one outstanding per group) and take the answers that arrive within
        ``timeout`` s: (records, [(group, its reply)] of the groups that answered started). A group whose
        drain is unanswered past its limit is lost (hung); one past its budget is an ErrorRecord. A slow
        group never holds up the others' drains."""
        with self.lock:
            mirror, arrays = self.counts(), self.cluster.arrays()
        for i, actor in enumerate(self.actors):
            if self.pending[i] is None and not self.watch[i].failed:
                self.pending[i] = (
                    actor.drain.remote(0.0, mirror, arrays),
                    time.monotonic(),
                    self.watch[i].generation,
                )
        refs = [p[0] for p in self.pending if p is not None]
        ready = ray.wait(refs, num_returns=len(refs), timeout=timeout)[0] if refs else []
        records: list[Any] = []
        replies = []
        for i, pending in enumerate(self.pending):
            if pending is None:
                continue
            ref, sent, generation = pending
            if ref in ready:
                self.pending[i] = None
                reply = self._answer(i, ref, generation, records)
                if reply is not None:
                    replies.append((i, reply))
                continue
            w = self.watch[i]
            limit = wait_limit(self.config.hang_timeout, w.starting())
            if time.monotonic() - sent > limit and not self.stopping:
                self.pending[i] = None
                if w.start_sent == w.incarnation and w.started != w.incarnation:
                    self._fail(i, f"node group {i} did not start within {limit:g} s", records)
                else:
                    self._lost(
                        i, generation, f"did not answer within {limit:g} s (hung) and was killed", records
                    )
        return records, replies

    def _answer(self, i: int, ref: Any, generation: int, records: list[Any]) -> dict[str, Any] | None:
        w = self.watch[i]
        try:
            reply = ray.get(ref, timeout=0)  # ready: no wait
        except ActorUnavailableError:  # perhaps transient: counted once it is seen dead, or too late
            w.down_since = w.down_since or time.monotonic()
            self._overdue(i, w.down_since, "did not come back", records)
            return None
        except RayError as exc:  # dead, or (a replacement on a node just lost) unschedulable
            self._lost(i, generation, f"died ({type(exc).__name__})", records)
            return None
        if w.incarnation is not None and reply["incarnation"] != w.incarnation:
            if w.lost_generation is None:  # a new incarnation nobody saw coming: count it, do not replace
                self._lost(i, generation, "was restarted", records, replace=False)
            self._carry(i)
        w.incarnation, w.down_since, w.lost_generation = reply["incarnation"], None, None
        if not reply["started"]:
            self._start(i, records)
            return None
        w.started, w.live_worker_restarts = reply["incarnation"], reply["restarts"]
        with self.lock:
            self.slots[:, self.groups[i]] = reply["slots"]
            for worker, own in reply["stats"].items():
                self.cluster.load_own(worker, own)
        w.live_exchanges = reply["exchanges"]
        reply["exchanges"] += w.exchanges
        return reply

    def _lost(self, i: int, generation: int, why: str, records: list[Any], replace: bool = True) -> None:
        """Count the loss of group ``i``'s actor of ``generation`` once (not while the run stops), and
        replace it; past ``max_restarts`` an ErrorRecord. A generation already counted lost only checks
        whether its successor is overdue."""
        w = self.watch[i]
        w.down_since = w.down_since or time.monotonic()
        if self.stopping:
            return
        if w.lost_generation == generation:
            self._overdue(i, w.down_since, "did not come back", records)
            return
        w.lost_generation = generation
        if w.restarts >= self.config.max_restarts:  # restarts counts the ones made, as the local backend's
            self._fail(i, f"node group {i} {why}; past its restart budget", records)
            return
        w.restarts += 1
        budget = f"{w.restarts}/{self.config.max_restarts}"
        print(f"warning: node group {i} {why}; restarting it ({budget})", file=sys.stderr, flush=True)
        if replace:
            self._replace(i)

    def _carry(self, i: int) -> None:
        """A new incarnation of group ``i`` answered: its predecessor's counts are kept, once."""
        w, ids = self.watch[i], self.groups[i]
        with self.lock:
            self.carried[:, ids] += self.slots[:, ids]
            self.slots[:, ids] = 0
        w.worker_restarts += w.live_worker_restarts
        w.live_worker_restarts = 0
        w.exchanges += w.live_exchanges
        w.live_exchanges = 0

    def _start(self, i: int, records: list[Any]) -> None:
        """Send the current incarnation of group ``i`` its start once; report a start that failed."""
        w = self.watch[i]
        if self.stopping:
            return
        if w.start_sent != w.incarnation:
            with self.lock:
                base = self.trainer.counters.base.numpy() + self.carried[:, self.groups[i]].sum(axis=1)
                stats = self.cluster.arrays()
            args = (
                self.trainer.optimizer.state_dict(),
                [int(v) for v in base],
                stats,
                (*self.times, w.restarts),
            )
            w.start_ref, w.start_sent = self.actors[i].start.remote(*args), w.incarnation
        elif ray.wait([w.start_ref], timeout=0)[0]:
            try:
                ray.get(w.start_ref, timeout=0)  # ready: no wait
            except RayActorError:
                pass  # it died starting: seen as a loss by the next drain
            except Exception as exc:  # noqa: BLE001 - the group's own error: the run fails naming it
                self._fail(i, f"node group {i} could not start: {str(exc)[-2500:]}", records)

    def _overdue(self, i: int, since: float, what: str, records: list[Any]) -> None:
        limit = STARTUP_TIMEOUT_S + self.config.hang_timeout
        if time.monotonic() - since > limit:
            self._fail(i, f"node group {i} {what} within {limit:g} s", records)

    def _fail(self, i: int, message: str, records: list[Any]) -> None:
        """The run's failure, naming group ``i``, once; its actor is killed and never waited on again."""
        if not self.watch[i].failed:
            self.watch[i].failed = True
            self.pending[i] = None
            records.append(ErrorRecord(f"node {i}", message))
            ray.kill(self.actors[i], no_restart=True)

    def stop(self, reason: int) -> None:
        """Stop every group (its workers, then its last exchange), waiting a bounded time."""
        self.stopping = True
        live = [
            a for a, w in zip(self.actors, self.watch, strict=True) if not w.failed and w.down_since is None
        ]
        stops = [actor.stop.remote(reason) for actor in live]
        if stops:
            ray.wait(stops, num_returns=len(stops), timeout=STOP_WAIT_S + self.config.hang_timeout)


def first_moments(groups: GroupSupervisor) -> dict[str, np.ndarray] | None:
    """The optimizer moments of the first of ``groups`` that answers started (None: none does within
    --hang-timeout). All are asked at once, so that a hung group holds up a checkpoint only while no other
    answers."""
    watched = zip(groups.actors, groups.watch, strict=True)
    pending = [a.optimizer_state.remote() for a, w in watched if not w.failed and w.down_since is None]
    deadline = time.monotonic() + groups.config.hang_timeout
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=max(deadline - time.monotonic(), 0.0))
        if not ready:
            return None  # none answered in time: the drains find the hung ones
        try:
            moments = ray.get(ready[0], timeout=0)  # ready: no wait
        except RayError:
            continue  # a lost group: another's
        if moments is not None:
            return moments
    return None
