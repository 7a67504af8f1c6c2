"""Seed streams: every child (worker, evaluator, restart, resumed run) gets its own seed."""

from __future__ import annotations

import numpy as np


def child_seed(seed: int, slot: int, restart: int = 0, resume: int = 0) -> int:
    """The seed of child ``slot`` (workers 0..N-1, then the evaluator) at its ``restart``-th start in the
    ``resume``-th segment of the run: a stream of its own that no other process, earlier or later, shares."""
    sequence = np.random.SeedSequence(seed, spawn_key=(resume, slot, restart))
    return int(sequence.generate_state(1)[0] % 2**30)
