"""A shard of the Ray node mode's global model: one contiguous slice of the flat weights, to which every
node adds its parameter change (a3c/backends/ray/exchange.py) and from which it takes the new slice.

A shard applies no optimizer: each node's Hogwild group runs its own shared optimizer, and what arrives is
that group's change. Its load is therefore nodes ÷ sync interval exchanges per second, whatever the number
of workers behind each node.
"""

from __future__ import annotations

import time

import numpy as np
import ray
import torch

from a3c.backends.ray.actors import injected_hang


@ray.remote(num_cpus=0)
class ParamShard:
    """Slice ``index`` of the global weights, ``weights`` [slice size]; ``scale`` multiplies each change."""

    def __init__(self, index: int, weights: np.ndarray, nodes: int, scale: float):
        torch.set_num_threads(1)
        self.index = index
        self.weights = np.array(weights, dtype=np.float32, copy=True)
        self.scale = np.float32(scale)
        self.exchanges = np.zeros(nodes, np.int64)  # exchanges applied, per node
        self.version = 0  # exchanges applied, all nodes
        self.seen = np.zeros(nodes, np.int64)  # ``version`` after each node's last exchange
        self.cpu_start = time.process_time()

    def exchange(self, node: int, delta: np.ndarray | None) -> tuple[np.ndarray, int]:
        """Add ``delta`` [slice] (None: nothing, a node's first look) from ``node``; return (the new slice,
        the global lag: other nodes' exchanges applied since this node's previous one)."""
        injected_hang(f"shard {self.index}")
        lag = self.version - int(self.seen[node])
        if delta is not None:
            self.weights += self.scale * delta
            self.exchanges[node] += 1
            self.version += 1
        self.seen[node] = self.version
        return self.weights.copy(), max(lag, 0)

    def read(self) -> np.ndarray:
        """The slice as it is now (the evaluator's and the checkpoint's view)."""
        return self.weights.copy()

    def load(self, weights: np.ndarray) -> None:
        """Overwrite the slice (a node's final state when it is the only one)."""
        self.weights = np.array(weights, dtype=np.float32, copy=True)

    def counts(self) -> tuple[np.ndarray, float]:
        """(exchanges applied per node, this process's CPU seconds since it started)."""
        return self.exchanges.copy(), time.process_time() - self.cpu_start
