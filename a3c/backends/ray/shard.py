"""A shard of the Ray node mode's global model: one contiguous slice of the flat weights, to which every
node adds its parameter change (a3c/backends/ray/exchange.py) and from which it takes the new slice. A
shard that dies or hangs is rebuilt by the driver from a live group's copy of its slice (backend.py).

A shard applies no optimizer: each node's Hogwild group runs its own shared optimizer, and what arrives is
that group's change. Its load is therefore nodes ÷ sync interval exchanges per second, whatever the number
of workers behind each node.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import ray
from ray.exceptions import RayActorError, RayError


class ShardFailed(Exception):
    """Parameter shard ``shard`` hung or died (``why``): the driver rebuilds it, or past its restart
    budget the run fails naming it."""

    def __init__(self, shard: int, why: str):
        super().__init__(f"parameter shard {shard} failed: {why}")
        self.shard, self.why = shard, why


def collect_each(refs: list[Any], timeout: float) -> list[Any]:
    """The replies of one call to each shard (``refs`` in shard order), waited on together for at most
    ``timeout`` s: each shard's reply, or a ShardFailed for a shard that did not answer, or died."""
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    replies: list[Any] = []
    for k, ref in enumerate(refs):
        if ref not in ready:
            replies.append(ShardFailed(k, f"no answer within {timeout:g} s (hung)"))
            continue
        try:
            replies.append(ray.get(ref, timeout=0))  # ready: no wait
        except RayActorError as exc:
            replies.append(ShardFailed(k, f"died ({type(exc).__name__})"))
        except RayError as exc:  # its own error, or the object lost on the way
            replies.append(ShardFailed(k, f"{type(exc).__name__}: {str(exc)[-2000:]}"))
    return replies


def collect(refs: list[Any], timeout: float) -> list[Any]:
    """The replies of one call to each shard (``collect_each``); ShardFailed naming the first shard that
    did not answer, or died."""
    replies = collect_each(refs, timeout)
    for reply in replies:
        if isinstance(reply, ShardFailed):
            raise reply
    return replies


def gather(shards: list[Any], timeout: float) -> np.ndarray:
    """The global weights [params]: every shard's slice, read in parallel and joined (ShardFailed)."""
    return np.concatenate(collect([s.read.remote() for s in shards], timeout))


@ray.remote(num_cpus=0)
class ParamShard:
    """Slice ``index`` of the global weights, ``weights`` [slice size]; ``scale`` multiplies each change;
    ``generations`` [nodes]: each node's newest group incarnation (a rebuilt shard takes the driver's)."""

    def __init__(
        self, index: int, weights: np.ndarray, nodes: int, scale: float, generations: list[int] | None = None
    ):
        self.index = index
        self.weights = np.array(weights, dtype=np.float32, copy=True)
        self.scale = np.float32(scale)
        self.exchanges = np.zeros(nodes, np.int64)  # exchanges applied, per node
        self.version = 0  # exchanges applied, all nodes
        self.seen = np.zeros(nodes, np.int64)  # ``version`` after each node's last exchange
        self.generations = np.array(
            generations or [0] * nodes, np.int64
        )  # each node's newest: the one admitted
        self.cpu_start = time.process_time()

    def exchange(
        self, node: int, delta: np.ndarray | None, generation: int = 0
    ) -> tuple[np.ndarray, int] | None:
        """Add ``delta`` [slice] (None: nothing, a node's first look) from ``node``'s group incarnation
        ``generation``; return (the new slice, the global lag: other nodes' exchanges applied since this
        node's previous one). None, and nothing added, from an incarnation older than the node's newest:
        a replaced group that is still alive (a kill that did not reach it, a partition that healed) trains
        on its own and must not write into the global model beside its successor."""
        if generation < self.generations[node]:
            return None
        self.generations[node] = generation
        lag = self.version - int(self.seen[node])
        if delta is not None:
            self.weights += self.scale * delta
            self.exchanges[node] += 1
            self.version += 1
        self.seen[node] = self.version
        return self.weights.copy(), max(lag, 0)

    def retire(self, node: int, generation: int) -> None:
        """The driver replaced ``node``'s group by incarnation ``generation``: refuse older ones from now on,
        before the new one's first exchange."""
        self.generations[node] = max(int(self.generations[node]), generation)

    def read(self) -> np.ndarray:
        """The slice as it is now (the evaluator's and the checkpoint's view)."""
        return self.weights.copy()

    def counts(self) -> tuple[np.ndarray, float]:
        """(exchanges applied per node, this process's CPU seconds since it started)."""
        return self.exchanges.copy(), time.process_time() - self.cpu_start
