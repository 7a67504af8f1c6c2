"""The run's observation and return statistics on the Ray backend, where no shared memory spans the nodes.

Each node group keeps the run's ``SharedObsStats`` in its own shared memory, one slot per worker of the run
(slot 0 from a resumed checkpoint), as the local backend does: its workers merge into their own slots. Each
drain hands the driver the group's own slots (``own``), which the driver keeps in its twin (``load_own``),
and brings the other groups' slots back (``load`` keeping the group's own). The driver copies its slots into
the trainer's statistics before each checkpoint, so checkpoints keep the same ``obs_norm`` and
``reward_stats`` fields on both backends and a run resumes across them.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from a3c.algo.normalize import SharedObsStats

# One statistics' slots, or one slot: (means, vars, counts).
Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]


class RunStats:
    """The observation statistics (``obs``, shape [*obs_shape]) and return statistics (``reward``, shape [])
    of a run, each None when its option is off, as private ``SharedObsStats`` of ``workers`` writers."""

    def __init__(self, obs: SharedObsStats | None, reward: SharedObsStats | None):
        self.obs, self.reward = obs, reward

    @classmethod
    def empty(cls, obs_shape: tuple[int, ...], workers: int, obs_norm: bool, reward_scale: bool) -> RunStats:
        """Fresh private statistics for the options that are on."""
        return cls(
            SharedObsStats(obs_shape, workers, shared=False) if obs_norm else None,
            SharedObsStats((), workers, shared=False) if reward_scale else None,
        )

    def _items(self) -> list[tuple[str, SharedObsStats]]:
        return [(name, s) for name, s in (("obs", self.obs), ("reward", self.reward)) if s is not None]

    def arrays(self) -> dict[str, Arrays]:
        """Every slot of each statistics that is on: {"obs"|"reward": (means, vars, counts)}."""
        return {name: stats.slot_arrays() for name, stats in self._items()}

    def load(self, arrays: dict[str, Arrays], keep: int | Collection[int] | None = None) -> None:
        """Overwrite the slots with ``arrays()`` of a twin, in place; the own slots of writer(s) ``keep``
        stay."""
        for name, stats in self._items():
            stats.load_slot_arrays(arrays[name], keep)

    def own(self, worker: int) -> dict[str, Arrays]:
        """Worker ``worker``'s own slot of each statistics (what its group sends with a drain's reply)."""
        return {name: stats.writer_arrays(worker) for name, stats in self._items()}

    def load_own(self, worker: int, slots: dict[str, Arrays]) -> None:
        """Set worker ``worker``'s slot of each statistics to what its group sent."""
        for name, stats in self._items():
            stats.load_writer_arrays(worker, slots[name])
