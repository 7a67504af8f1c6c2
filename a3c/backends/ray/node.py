"""The Ray node mode's group: one actor per Ray node that runs the local backend's workers as child
processes over the node's own shared model and optimizer (Hogwild, no Ray call on the hot path), and a
syncer thread that exchanges the node's parameter change with the global model's shards every
``sync_interval`` seconds (a3c/backends/ray/exchange.py), one exchange in flight at a time.

The node's counters and statistics have a slot for every worker of the run: its own workers write theirs,
and each ``drain`` from the driver brings the other nodes' slots, so the workers' learning-rate clock, the
``max_steps`` check and the observation normalisation see the whole run (one drain behind).
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from typing import Any

import numpy as np
import ray
import torch

from a3c.algo.optim import flat_view
from a3c.backends.local import worker_specs
from a3c.backends.ray.shard import gather
from a3c.backends.ray.stats import Arrays, RunStats
from a3c.backends.ray.syncer import Syncer
from a3c.core.config import Config
from a3c.core.records import ErrorRecord
from a3c.core.spaces import Spaces
from a3c.rundir.resume import restore_optimizer
from a3c.runtime.context import child_context
from a3c.runtime.counters import Heartbeats, StopReason
from a3c.runtime.state import build_state
from a3c.runtime.supervisor import STARTUP_TIMEOUT_S, Supervisor

STOP_GRACE_S = 3.0  # the node's workers get this long to finish their update once stopped


def beat_until(heartbeats: Heartbeats, stopped: threading.Event, every_s: float = 1.0) -> None:
    """Beat the trainer's heartbeat slot every ``every_s`` seconds until ``stopped`` is set."""
    while not stopped.wait(every_s):
        heartbeats.beat(heartbeats.trainer)


@ray.remote(num_cpus=0)
class NodeGroup:
    """Node ``index``: workers ``ids`` (their global indices); ``shards`` hold the slices ``bounds`` of the
    global weights. Created light (Ray keeps no large arguments to restart it with); ``start`` brings the
    rest, and the driver sends it again to a restarted node, which then starts from the shards' weights.
    ``generation``: which incarnation of the node's group this is (the driver counts them); the shards
    refuse an older one's exchanges once a newer one exists."""

    def __init__(
        self, index: int, ids: list[int], config: dict[str, Any], spaces: Spaces, shards: list[Any],
        bounds: list[tuple[int, int]], generation: int = 0,
    ):  # fmt: skip
        torch.set_num_threads(1)
        self.index, self.ids, self.shards, self.bounds = index, list(ids), shards, bounds
        self.generation = generation
        self.config, self.spaces = Config.from_dict(config), spaces
        self.incarnation = uuid.uuid4().hex  # the driver sees a restarted node by a new one
        self.timeout = self.config.hang_timeout
        self.started = False

    def start(
        self,
        optimizer_state: dict[str, Any],
        base: list[int],
        stats: dict[str, Arrays],
        times: tuple[float, int, int],
    ) -> None:
        """Build the node's shared state from the shards' weights, ``optimizer_state``, the run's counts
        ``base`` [steps, updates, skipped] and statistics slots; start the workers and the syncer.
        ``times``: the run's start time, resume index and this group's restarts (the workers' seeds: a
        restarted group's workers take streams of their own)."""
        cfg = self.config
        start_time, resume_index, restarts = times
        shared = build_state(cfg, self.spaces, None, "the driver's model")
        self.shared = shared = dataclasses.replace(shared, start_time=start_time)
        flat = flat_view(shared.model)
        with torch.no_grad():
            flat.copy_(torch.from_numpy(gather(self.shards, max(self.timeout, STARTUP_TIMEOUT_S))))
        restore_optimizer(shared.optimizer, optimizer_state, "the driver's optimizer")
        shared.counters.base[:] = torch.tensor(base, dtype=torch.int64)  # before the workers take a copy
        self.stats = RunStats(shared.obs_stats, shared.reward_stats)
        self.stats.load(stats)
        self.records: list[Any] = []
        self.supervisor = Supervisor(
            child_context(),
            worker_specs(shared, self.ids, resume_index, first_restart=restarts << 16),
            shared.heartbeats,
            self.records.append,
            cfg.max_restarts,
            cfg.hang_timeout,
        )
        # The syncer's base is taken before any worker writes: every update reaches the global model.
        self.syncer = Syncer(self.index, flat, self.shards, self.bounds, cfg.sync_interval, self.timeout,
                             on_failure=self._shard_failed)  # fmt: skip
        self.syncer.generation = self.generation
        self.supervisor.start_all()
        self.syncer.start()
        # The workers watch their trainer's heartbeat; here that is this actor, which the driver may not
        # call for a while (it waits on a hung shard for --hang-timeout): the actor beats it while it lives.
        self.beating = threading.Event()
        threading.Thread(target=beat_until, args=(shared.heartbeats, self.beating), daemon=True).start()
        self.started = True

    def _shard_failed(self) -> None:
        """The syncer's ``on_failure`` (this incarnation refused, or the syncer's own error): the node's
        workers stop; ``drain`` reports it."""
        self.shared.stop.stop(StopReason.FAILED)

    # -- the driver's calls -------------------------------------------------------------------------------

    def drain(self, wait_s: float, slots: np.ndarray, stats: dict[str, Arrays]) -> dict[str, Any]:
        """Supervise the workers for up to ``wait_s`` s; take the run's counter ``slots`` [3, workers] and
        statistics for the other nodes' workers; return this node's records, own slots and statistics,
        exchange counts and the failure that ends the run, if any."""
        if not self.started:
            return {"incarnation": self.incarnation, "started": False}
        self.supervisor.poll(wait_s, stopped=self.shared.stop.is_set)
        mine = np.zeros(slots.shape[1], bool)
        mine[self.ids] = True
        counters = self.shared.counters
        for row, name in enumerate(("steps", "updates", "skipped")):
            counters._view(name)[~mine] = slots[row, ~mine]
        self.stats.load(stats, keep=self.ids)
        own = np.stack([counters._view(n)[self.ids] for n in ("steps", "updates", "skipped")])
        records, self.records[:] = list(self.records), []
        exchanges, lags, round_trips = self.syncer.take()
        failure = self.supervisor.failure
        if self.syncer.failure is not None:  # the syncer itself, or this incarnation refused
            failure = ErrorRecord(f"node {self.index}", f"node group {self.index}: {self.syncer.failure[1]}")
        # Not under the syncer's lock: an exchange waiting on a hung shard holds it for --hang-timeout.
        down = {k: (why, self.syncer.epochs[k]) for k, why in list(self.syncer.down.items())}
        return {
            "incarnation": self.incarnation,
            "started": True,
            "records": records,
            "slots": own,
            "stats": {i: self.stats.own(i) for i in self.ids},
            "exchanges": exchanges,
            "lags": lags,
            "round_trips": round_trips,
            "failure": failure,
            "restarts": self.supervisor.restarts,
            "shards_down": down,  # shard: (why, the successor it was about): the driver rebuilds it
        }

    def global_slice(self, start: int, end: int) -> np.ndarray | None:
        """The global weights [start:end] as of this node's last exchange with their shard (what a rebuilt
        shard starts from); None before ``start``."""
        if not self.started:
            return None
        # Not under the syncer's lock (an exchange may wait on a hung shard): a failed shard's slice of the
        # base does not change until its successor is adopted.
        return self.syncer.exchange.base[start:end].copy()

    def adopt_shard(self, shard: int, handle: Any, epoch: int) -> None:
        """The driver rebuilt ``shard`` as ``handle`` (its ``epoch``-th successor): exchange with it."""
        self.shards[shard] = handle  # what a start not yet made reads
        if self.started:
            self.syncer.adopt(shard, handle, epoch)

    def optimizer_state(self) -> dict[str, np.ndarray] | None:
        """Copies of the node's optimizer state tensors (the moments a checkpoint keeps); None before
        ``start``."""
        if not self.started:
            return None
        optimizer = self.shared.optimizer
        flat = optimizer.param_groups[0]["params"][0]
        return {k: v.numpy().copy() for k, v in optimizer.state[flat].items()}

    def stop(self, reason: int) -> None:
        """Stop the workers (within STOP_GRACE_S, then terminate), end the syncer, and make one last
        exchange so the global model holds everything the node learned."""
        if not self.started:
            return
        self.shared.stop.stop(StopReason(reason))
        self.beating.set()
        deadline = time.monotonic() + STOP_GRACE_S
        self.supervisor.stop_all(lambda: deadline)
        self.syncer.stop()
