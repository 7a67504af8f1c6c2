"""Observation normalisation statistics shared by all worker processes, and a per-worker reward scaler.

Workers accumulate the observations they see locally and merge them, once per update, into their own slot of
``SharedObsStats`` (shared memory, no lock); every worker normalises with all slots merged, so all of them
(and the evaluator, which copies a snapshot) feed the shared model inputs on the same scale.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
import torch

_KEYS = ("mean", "var", "count")
# normalize(): z = (obs - mean) / sqrt(var + OBS_VAR_EPS), clipped to [-OBS_CLIP, OBS_CLIP]. Named here
# because the exported policy (a3c.algo.export_graph) applies the same numbers inside its graph.
OBS_CLIP, OBS_VAR_EPS = 10.0, 1e-8


class RunningMeanStd:
    """Running mean/variance of vectors of shape `shape`, merged with Chan et al.'s parallel formula.

    State: float64 tensors ``mean`` [*shape], ``var`` [*shape] (population variance) and ``count`` [].
    It starts as ``epsilon`` pseudo-observations with mean 0 and variance 1, so that ``normalize`` is
    defined before any data arrives.
    """

    def __init__(self, shape: tuple[int, ...], shared: bool = False, epsilon: float = 1e-4):
        self.shape = tuple(shape)
        self.mean = torch.zeros(self.shape, dtype=torch.float64)
        self.var = torch.ones(self.shape, dtype=torch.float64)
        self.count = torch.tensor(epsilon, dtype=torch.float64)
        if shared:
            # In place, before any child starts: a shared tensor pickles as a handle to the same memory, so
            # every process that receives this object reads and writes one copy.
            for t in (self.mean, self.var, self.count):
                t.share_memory_()
        self._make_views()

    @classmethod
    def over(cls, mean: torch.Tensor, var: torch.Tensor, count: torch.Tensor) -> RunningMeanStd:
        """Statistics kept in existing float64 tensors (e.g. one slot's views into larger shared ones)."""
        rms = cls.__new__(cls)
        rms.shape, rms.mean, rms.var, rms.count = tuple(mean.shape), mean, var, count
        rms._make_views()
        return rms

    def _make_views(self) -> None:
        # numpy views of the tensors' memory: the per-step arithmetic on small arrays is cheaper in numpy.
        self._mean, self._var, self._count = self.mean.numpy(), self.var.numpy(), self.count.numpy()

    def __getstate__(self) -> dict[str, Any]:
        # Pickle only the tensors: numpy views would pickle as private copies, and a child would then
        # write to memory nobody else sees. The views are rebuilt on the receiving side.
        return {"shape": self.shape, "mean": self.mean, "var": self.var, "count": self.count}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._make_views()

    def update(self, batch: np.ndarray) -> None:
        """Merge a batch [N, *shape] of observations into the statistics, in place."""
        batch = np.asarray(batch, dtype=np.float64)
        if batch.shape[1:] != self.shape:
            raise ValueError(f"batch shape {batch.shape} is not [N, *{self.shape}]")
        if len(batch):
            self.merge(batch.mean(axis=0), batch.var(axis=0), len(batch))

    def merge(self, mean: np.ndarray, var: np.ndarray, count: float) -> None:
        """Merge the moments of another sample (mean and population var [*shape], its size) in place."""
        total = self._count + count
        if total <= 0:  # both empty: nothing to merge, and the formula would divide by zero
            return
        delta = mean - self._mean
        # Sum of squared deviations of the union: both parts' own plus the spread between their means.
        m2 = self._var * self._count + var * count + delta**2 * (self._count * count / total)
        self._mean[...] = self._mean + delta * (count / total)
        self._var[...] = m2 / total
        self._count[...] = total

    def normalize(self, obs: np.ndarray, clip: float = OBS_CLIP) -> np.ndarray:
        """(obs - mean) / sqrt(var + 1e-8), clipped to [-clip, clip]: float32, the shape of ``obs``."""
        z = (np.asarray(obs, dtype=np.float64) - self._mean) / np.sqrt(self._var + OBS_VAR_EPS)
        return np.clip(z, -clip, clip).astype(np.float32)

    def copy_from(self, other: RunningMeanStd) -> None:
        """Overwrite these statistics, in place, with ``other``'s."""
        self.load_state_dict({"mean": other.mean, "var": other.var, "count": other.count})

    def state_dict(self) -> dict[str, torch.Tensor]:
        """{"mean": [*shape], "var": [*shape], "count": []}: clones, so later updates do not change them."""
        return {"mean": self.mean.clone(), "var": self.var.clone(), "count": self.count.clone()}

    def load_state_dict(self, state: dict) -> None:
        """Copy ``state`` (as from ``state_dict``) in place; ValueError naming the key if one is missing or
        has another shape. All keys are checked before any is written, so a bad state changes nothing."""
        values = {}
        for key, target in zip(_KEYS, (self.mean, self.var, self.count), strict=True):
            if key not in state:
                raise ValueError(f"state has no {key!r}")
            value = torch.as_tensor(state[key], dtype=torch.float64)
            if value.shape != target.shape:
                raise ValueError(f"{key!r} has shape {tuple(value.shape)}, expected {tuple(target.shape)}")
            values[key] = value
        for key, target in zip(_KEYS, (self.mean, self.var, self.count), strict=True):
            target.copy_(values[key])  # in place: a shared tensor must stay the shared memory


class SharedObsStats:
    """The observation statistics of all workers, in shared memory, with no lock.

    Writer w (worker w) merges only into its own slot w + 1; slot 0 holds what a resumed checkpoint brought.
    A reader merges all slots. A lock would be exact, but a worker killed while holding it would hang every
    other one; without it a reader can at worst catch one slot mid-merge (its new mean with its old variance)
    and normalise one segment with slightly torn statistics, which the next segment's read corrects.
    """

    def __init__(self, shape: tuple[int, ...], writers: int, shared: bool = True):
        self.shape = tuple(shape)
        # All slots in three tensors, [writers + 1, *shape] (counts [writers + 1]), each slot a view: a child
        # receives 3 file descriptors whatever the worker count. Three tensors per slot made a worker's start
        # carry 6 per worker with obs and reward statistics, past Linux's 253 per message at ~39 workers.
        slots = writers + 1
        self.means = torch.zeros((slots, *self.shape), dtype=torch.float64)
        self.vars = torch.ones((slots, *self.shape), dtype=torch.float64)
        self.counts = torch.zeros(slots, dtype=torch.float64)  # epsilon 0: real observations only
        if shared:
            for t in (self.means, self.vars, self.counts):
                t.share_memory_()
        self._make_slots()

    def _make_slots(self) -> None:
        self.slots = [
            RunningMeanStd.over(self.means[i], self.vars[i], self.counts[i]) for i in range(len(self.counts))
        ]

    def __getstate__(self) -> dict[str, Any]:
        # The three tensors only (a shared tensor pickles as a handle to the same memory); the slots' views
        # are rebuilt on the receiving side.
        return {"shape": self.shape, "means": self.means, "vars": self.vars, "counts": self.counts}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._make_slots()

    def merged(self) -> RunningMeanStd:
        """A private snapshot of all slots merged (with a small prior, so it is defined when empty)."""
        total = RunningMeanStd(self.shape)
        for slot in self.slots:
            total.merge(slot._mean.copy(), slot._var.copy(), float(slot._count))
        return total

    def writer(self, index: int, clip: float = 10.0) -> ObsNormalizer:
        """The normaliser of writer ``index`` (0-based), which merges into slot ``index + 1``."""
        return ObsNormalizer(self, self.slots[index + 1], clip)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The merged statistics (what a checkpoint keeps)."""
        return self.merged().state_dict()

    def slot_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Copies of every slot: (means [slots, *shape], vars [slots, *shape], counts [slots]). What the Ray
        driver and its node groups hand each other (a process boundary shared memory cannot cross)."""
        return self.means.numpy().copy(), self.vars.numpy().copy(), self.counts.numpy().copy()

    def load_slot_arrays(
        self, arrays: tuple[np.ndarray, ...], keep: int | Collection[int] | None = None
    ) -> None:
        """Overwrite the slots, in place, with ``slot_arrays()`` of a twin; the own slots of the writers
        ``keep`` (0-based writer indices), if given, stay: their newest observations are here, not in the
        twin."""
        kept = {int(keep) + 1} if isinstance(keep, (int, np.integer)) else {int(k) + 1 for k in keep or ()}
        rows = [i for i in range(len(self.counts)) if i not in kept]
        for target, source in zip((self.means, self.vars, self.counts), arrays, strict=True):
            values = torch.tensor(np.asarray(source), dtype=torch.float64)  # Ray hands arrays read-only
            if kept:
                target[rows] = values[rows]
            else:
                target.copy_(values)

    def writer_arrays(self, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Copies of writer ``index``'s slot: (mean [*shape], var [*shape], count [])."""
        slot = self.slots[index + 1]
        return slot._mean.copy(), slot._var.copy(), slot._count.copy()

    def load_writer_arrays(self, index: int, arrays: tuple[np.ndarray, ...]) -> None:
        """Overwrite writer ``index``'s slot, in place, with ``writer_arrays(index)`` of a twin."""
        for target, source in zip((self.means, self.vars, self.counts), arrays, strict=True):
            # torch.tensor copies: Ray hands the arrays read-only
            target[index + 1] = torch.tensor(np.asarray(source), dtype=torch.float64)

    def load_state_dict(self, state: dict) -> None:
        """Start from ``state`` (a checkpoint's merged statistics) in slot 0; empty the writers' slots."""
        self.slots[0].load_state_dict(state)
        for slot in self.slots[1:]:
            slot.load_state_dict(RunningMeanStd(self.shape, epsilon=0.0).state_dict())


class ObsNormalizer:
    """A worker's normaliser: accumulates the raw observations it sees locally, merges them into its slot of
    the shared statistics at each ``flush()`` (once per rollout segment) and normalises with a snapshot of all
    slots taken at that flush, so the statistics stay fixed within a segment."""

    def __init__(self, stats: SharedObsStats, slot: RunningMeanStd, clip: float = 10.0):
        self.stats, self.slot, self.clip = stats, slot, clip
        self.current = stats.merged()
        # The segment's batches, merged into the slot at the flush in one update: an update per env step
        # cost ~22 us of numpy overhead (with reward scaling, 19% of CartPole 2 x 16 throughput; now 2-11%).
        self.pending: list[np.ndarray] = []

    def observe(self, obs: np.ndarray) -> None:
        """Keep a raw observation batch [B, *shape] for the next flush (no shared memory touched)."""
        self.pending.append(np.array(obs, dtype=np.float64))  # a copy: an env may reuse its buffer

    def flush(self) -> None:
        """Merge the segment's batches into this writer's slot and take a fresh snapshot of all slots."""
        if self.pending:
            self.slot.update(np.concatenate(self.pending))  # the batch's own moments: no prior is added
            self.pending.clear()
        self.current = self.stats.merged()

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Normalise ``obs`` [B, *shape] with the snapshot of the last flush → float32 [B, *shape]."""
        return self.current.normalize(obs, self.clip)


class RewardScaler:
    """Reward scaling (as SB3's VecNormalize norm_reward): divide each reward by the std of a running
    estimate of the discounted return; the return of env i resets at its episode end.

    The return statistics are a writer of ``SharedObsStats`` of shape (): the run's workers share them, as
    they share the critic whose targets they scale, and a checkpoint keeps them (``reward_stats``), so the
    critic's units do not jump at a resume. Like the observation statistics they stay fixed within a segment:
    ``flush()`` at each segment's end merges this worker's returns and takes the newest of all workers.
    """

    def __init__(
        self, num_envs: int, gamma: float, stats: ObsNormalizer, clip: float = 10.0, epsilon: float = 1e-8
    ):
        self.gamma, self.clip, self.epsilon = gamma, clip, epsilon
        self.ret = np.zeros(num_envs, dtype=np.float64)  # [num_envs] discounted return so far, per env
        self.stats = stats
        self.scale = self._scale()

    def _scale(self) -> float:
        """1 / the std of the returns, from the statistics' snapshot (fixed for a segment)."""
        return float(1.0 / np.sqrt(self.stats.current._var + self.epsilon))

    def __call__(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        """Scale rewards [B] -> float32 [B] in [-clip, clip]; ``dones`` [B] bool: the episode ended here. A
        non-finite reward stays non-finite (its segment's update is skipped) but enters neither the running
        return nor the statistics, which would otherwise stay NaN for the rest of the run."""
        rewards = np.atleast_1d(np.asarray(rewards, dtype=np.float64))
        finite = np.isfinite(rewards)
        scaled = np.clip(rewards * self.scale, -self.clip, self.clip)
        if finite.all():  # every step but a broken env's: no masking on the hot path
            self.ret = self.ret * self.gamma + rewards
            self.stats.observe(self.ret)  # a copy is kept until the flush
        else:
            self.ret = np.where(finite, self.ret * self.gamma + rewards, self.ret)
            self.stats.observe(self.ret[finite])
            scaled = np.where(finite, scaled, rewards)  # an infinite reward stays so (clip made it finite)
        self.ret[np.asarray(dones, dtype=bool)] = 0.0  # after the update: the final step's return counts
        return scaled.astype(np.float32)

    def flush(self) -> None:
        """End of a segment: share this worker's returns and scale the next segment by all workers' stats."""
        self.stats.flush()
        self.scale = self._scale()
