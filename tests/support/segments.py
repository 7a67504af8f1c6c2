"""Random rollout segments of a discrete policy for the gradient tests: every kind of episode end in them
(about 10% of steps terminated, 10% more truncated), the observations, rewards and actions drawn from
``rng``."""

from __future__ import annotations

import numpy as np

from a3c.algo.distributions import ActionDist
from a3c.algo.rollout import Segment


def random_actions(rng: np.random.Generator, dist: ActionDist, shape: tuple[int, int]) -> np.ndarray:
    """Actions of ``dist``'s kind (Discrete, MultiDiscrete or MultiBinary) for a [T, B] ``shape``."""
    if dist.nvec:
        return np.stack([rng.integers(n, size=shape) for n in dist.nvec], axis=-1)
    if dist.binary:
        return rng.integers(0, 2, size=(*shape, dist.n)).astype(np.int8)
    return rng.integers(dist.n, size=shape)


def random_segment(
    rng: np.random.Generator, steps: int, num_envs: int, obs_dim: int, dist: ActionDist
) -> Segment:
    """A segment of ``steps`` × ``num_envs`` with flat observations [obs_dim] and actions of ``dist``."""
    action_dims = dist.action_shape[0] if dist.action_shape else 0
    seg = Segment.allocate(steps, num_envs, obs_dim, action_dims, np.float32, dist.action_dtype)
    seg.obs[:] = rng.normal(size=seg.obs.shape)
    seg.actions[:] = random_actions(rng, dist, (steps, num_envs))
    seg.rewards[:] = rng.normal(size=seg.rewards.shape)
    seg.terminated[:] = rng.random(seg.terminated.shape) < 0.1
    seg.truncated[:] = ~seg.terminated & (rng.random(seg.truncated.shape) < 0.1)
    seg.final_obs[:] = rng.normal(size=seg.final_obs.shape)
    seg.next_obs[:] = rng.normal(size=seg.next_obs.shape)
    return seg
