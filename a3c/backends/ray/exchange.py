"""The arithmetic of the Ray node mode's exchange (no Ray here): how a node's parameter change reaches the
sharded global model, and how the node is rebased on the global weights without losing its own progress.

A node's workers update the node's shared flat weights θ (Hogwild, as the local backend). The node
remembers the global weights it was last rebased on, ``base``. An exchange:

1. ``sent = θ`` (a copy), ``delta = sent − base``: the node's change since its last exchange;
2. each shard adds its slice of ``delta`` (× ``scale``) to its slice of the global weights g and replies
   with the new g;
3. the node sets ``θ += g − sent`` in place and ``base = g``: the global weights plus whatever the workers
   wrote meanwhile (θ − sent), so no update is lost and no lock is taken.

With one node and ``scale`` 1 the global weights follow the node's exactly (g = sent, θ unchanged).
"""

from __future__ import annotations

import numpy as np
import torch


def shard_bounds(size: int, shards: int) -> list[tuple[int, int]]:
    """Contiguous [start, end) slices of a flat vector of ``size`` over ``shards`` shards, as equal as can
    be (the first ``size % shards`` one element longer); never more shards than elements."""
    shards = max(1, min(shards, size))
    cuts = np.linspace(0, size, shards + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def combine_scale(combine: str, nodes: int) -> float:
    """The factor a shard applies to each node's change: 1 for ``sum`` (each node counts as its workers
    would in one Hogwild group), 1/nodes for ``mean``."""
    return 1.0 if combine == "sum" else 1.0 / nodes


class NodeExchange:
    """One node's side of the exchange over its shared flat weights ``flat`` [params], starting from the
    global weights ``base`` [params] (equal to ``flat`` when the node starts)."""

    def __init__(self, flat: torch.Tensor, base: np.ndarray):
        self.flat = flat
        self.base = np.array(base, dtype=np.float32, copy=True)

    def take(self) -> tuple[np.ndarray, np.ndarray]:
        """(sent, delta), both [params]: a copy of the node's weights now and their change since ``base``."""
        sent = self.flat.detach().numpy().copy()
        return sent, sent - self.base

    def rebase(self, sent: np.ndarray, global_weights: np.ndarray, start: int = 0) -> None:
        """Move the node onto ``global_weights`` keeping what its workers wrote since ``sent`` [params]:
        all of it, or the slice [start, start + len(global_weights)) that one shard answered for (a slice
        whose shard did not answer keeps its base: its change is sent again, to the rebuilt shard)."""
        end = start + global_weights.size
        with torch.no_grad():
            self.flat[start:end].add_(torch.from_numpy(global_weights - sent[start:end]))
        self.base[start:end] = global_weights
