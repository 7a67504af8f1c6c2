"""A rollout segment — T steps of B envs in buffers allocated once — and what an update makes of it: the ONE
batch of observations its forward runs on, and its targets (GAE advantages and value targets) from that
batch's values.

Both gradient paths import this (``a3c.algo.learner.torch_update.segment_loss``: autograd;
``a3c.algo.fast.mlp_grad``: the numpy MLP in closed form), and neither imports the other. ``terminated`` and
``truncated`` stay separate (invariant 4): a truncated step bootstraps from V(its final observation), which is
in the batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from a3c.algo.loss.returns import gae


@dataclass
class Segment:
    """One segment of T steps in B envs. Buffers are allocated once and overwritten by every collection.

    obs [T, B, *obs_shape] (observation the action was taken in; normalised when the run normalises);
    actions [T, B] int64 (Discrete), [T, B, A] float32 (Box: the Gaussian sample ``u``, before clipping or
    squashing), [T, B, D] int64 (MultiDiscrete) or [T, B, A] int8 (MultiBinary); rewards [T, B] float32
    (scaled when the run scales rewards); terminated, truncated [T, B] bool; final_obs [T, B, *obs_shape],
    the real last observation of an episode (valid only where ``truncated``); next_obs [B, *obs_shape], the
    observation after the last step; init_state: a recurrent policy's state before step 0 (None for a
    feed-forward one).
    """

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: np.ndarray
    next_obs: np.ndarray
    init_state: Any = None

    @classmethod
    def allocate(
        cls,
        t_max: int,
        num_envs: int,
        obs_shape: int | tuple[int, ...],
        action_dims: int = 0,
        obs_dtype: Any = np.float32,
        action_dtype: Any = np.float32,
    ) -> Segment:
        """Buffers for T=t_max, B=num_envs; ``action_dims`` > 0: actions of that many dimensions, of
        ``action_dtype`` (float32: Box; int64: MultiDiscrete; int8: MultiBinary)."""
        shape = (obs_shape,) if isinstance(obs_shape, int) else tuple(obs_shape)
        if action_dims:
            actions = np.zeros((t_max, num_envs, action_dims), action_dtype)
        else:
            actions = np.zeros((t_max, num_envs), np.int64)
        return cls(
            obs=np.zeros((t_max, num_envs, *shape), obs_dtype),
            actions=actions,
            rewards=np.zeros((t_max, num_envs), np.float32),
            terminated=np.zeros((t_max, num_envs), bool),
            truncated=np.zeros((t_max, num_envs), bool),
            final_obs=np.zeros((t_max, num_envs, *shape), obs_dtype),
            next_obs=np.zeros((num_envs, *shape), obs_dtype),
        )


def segment_batch(seg: Segment) -> np.ndarray:
    """Every observation the update of ``seg`` needs, as one batch [T*B + B + M, ...]: the T×B
    observations, the B observations after the last step (bootstrap values) and the M final observations
    of truncated steps (their bootstrap values, invariant 4), in that order."""
    steps, num_envs = seg.obs.shape[:2]
    trunc_t, trunc_b = seg.truncated.nonzero()
    return np.concatenate(
        [seg.obs.reshape(steps * num_envs, *seg.obs.shape[2:]), seg.next_obs, seg.final_obs[trunc_t, trunc_b]]
    )


def segment_targets(
    seg: Segment, batch_values: np.ndarray, gamma: float, gae_lambda: float
) -> tuple[np.ndarray, np.ndarray]:
    """(advantages, returns), each [T, B], from the values [T*B + B + M] of ``segment_batch(seg)``."""
    steps, num_envs = seg.rewards.shape
    n = steps * num_envs
    values = batch_values[:n].reshape(steps, num_envs)
    next_values = np.empty_like(values)
    next_values[:-1] = values[1:]
    next_values[-1] = batch_values[n : n + num_envs]
    trunc_t, trunc_b = seg.truncated.nonzero()
    if len(trunc_t):
        next_values[trunc_t, trunc_b] = batch_values[n + num_envs :]
    return gae(seg.rewards, values, next_values, seg.terminated, seg.truncated, gamma, gae_lambda)
