"""Collect one rollout segment of t_max steps from K envs, with no gradient, into preallocated buffers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np


@dataclass
class Segment:
    """One segment of T steps in B envs. Buffers are allocated once and overwritten by every collection.

    obs [T, B, D] float32 (observation the action was taken in); actions [T, B] int64; rewards [T, B] float32;
    terminated, truncated [T, B] bool; final_obs [T, B, D] float32, the real last observation of an episode
    (valid only where ``truncated``); next_obs [B, D], the observation after the last step.
    """

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: np.ndarray
    next_obs: np.ndarray

    @classmethod
    def allocate(cls, t_max: int, num_envs: int, obs_dim: int) -> Segment:
        return cls(
            obs=np.zeros((t_max, num_envs, obs_dim), np.float32),
            actions=np.zeros((t_max, num_envs), np.int64),
            rewards=np.zeros((t_max, num_envs), np.float32),
            terminated=np.zeros((t_max, num_envs), bool),
            truncated=np.zeros((t_max, num_envs), bool),
            final_obs=np.zeros((t_max, num_envs, obs_dim), np.float32),
            next_obs=np.zeros((num_envs, obs_dim), np.float32),
        )


@dataclass(frozen=True)
class Episode:
    """A finished training episode: undiscounted return and length in steps."""

    env_index: int
    episode_return: float
    length: int


class RolloutCollector:
    """Steps a vector env with a stochastic policy and keeps per-env episode statistics.

    Args:
        envs: a vector env in SAME_STEP autoreset mode (``envs.make_vector_env``).
        t_max: steps per env per segment.
        seed: seeds the envs (env i gets ``seed + i``) and the action sampler.

    Actions are sampled with the Gumbel-max trick, argmax(logits + Gumbel noise), which draws exactly from
    softmax(logits): no softmax, no torch Distribution (~130 µs per step), and the noise for a whole segment
    is drawn at once.
    """

    def __init__(self, envs: gym.vector.VectorEnv, t_max: int, seed: int):
        self.envs = envs
        self.num_envs = envs.num_envs
        self.n_actions = int(envs.single_action_space.n)
        obs, _ = envs.reset(seed=seed)
        self.obs = np.asarray(obs, dtype=np.float32)
        # Not default_rng(seed): that stream would equal env 0's own np_random after reset(seed=seed).
        self.rng = np.random.default_rng([seed, 1])
        self.segment = Segment.allocate(t_max, self.num_envs, self.obs.shape[1])
        self.episode_returns = np.zeros(self.num_envs, np.float64)
        self.episode_lengths = np.zeros(self.num_envs, np.int64)

    def collect(self, logits: Callable[[np.ndarray], np.ndarray]) -> tuple[Segment, list[Episode]]:
        """Fill ``self.segment`` with t_max steps of every env; return it and the episodes that ended.

        ``logits`` maps observations [B, D] float32 to policy logits [B, A] (``ActorCritic.numpy_logits``).
        """
        seg = self.segment
        finished: list[Episode] = []
        steps = seg.obs.shape[0]
        gumbel = self.rng.gumbel(size=(steps, self.num_envs, self.n_actions)).astype(np.float32)
        for t in range(steps):
            seg.obs[t] = self.obs
            scores = logits(seg.obs[t])
            scores += gumbel[t]
            actions = seg.actions[t]
            actions[:] = scores.argmax(axis=1)
            obs, rewards, terminated, truncated, info = self.envs.step(actions)
            seg.rewards[t] = rewards
            seg.terminated[t] = terminated
            seg.truncated[t] = truncated
            self.episode_returns += rewards
            self.episode_lengths += 1
            done = terminated | truncated
            if done.any():
                for i in np.flatnonzero(done):
                    if truncated[i]:
                        seg.final_obs[t, i] = info["final_obs"][i]
                    finished.append(
                        Episode(int(i), float(self.episode_returns[i]), int(self.episode_lengths[i]))
                    )
                self.episode_returns[done] = 0.0
                self.episode_lengths[done] = 0
            self.obs = obs
        seg.next_obs[:] = self.obs
        return seg, finished
