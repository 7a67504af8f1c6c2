"""Collect one rollout segment of t_max steps from K envs, with no gradient, into preallocated buffers
(``a3c.algo.loss.segment.Segment``), and the episodes that ended in it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import gymnasium as gym
import numpy as np

from a3c.algo.loss.segment import Segment
from a3c.algo.models.distributions import ActionDist


@dataclass(frozen=True)
class Episode:
    """A finished training episode: undiscounted return and length in steps."""

    env_index: int
    episode_return: float
    length: int


class ObsNormalizer(Protocol):
    """What the collector needs of an observation normaliser (``a3c.algo.shared.normalize``)."""

    def observe(self, obs: np.ndarray) -> None:
        """Take raw observations [B, ...] into the statistics."""

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Raw observations [B, ...] → normalised ones [B, ...] float32."""

    def flush(self) -> None:
        """At a segment's end: hand the observed statistics on and take the newest shared ones."""


class RewardScale(Protocol):
    """What the collector needs of a reward scaler (``a3c.algo.shared.normalize.RewardScaler``)."""

    def __call__(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        """Rewards [B] and episode ends [B] bool → the rewards the learner sees [B] float32."""

    def flush(self) -> None:
        """At a segment's end: hand the return statistics on and take the newest shared ones."""


def action_dist(space: gym.Space, squash: str = "clip", mean_l2_coef: float = 0.0) -> ActionDist:
    """The ``ActionDist`` of an env's (single) action space, one ``envs.space_check.check_spaces`` takes;
    ``squash`` and ``mean_l2_coef`` apply to Box actions."""
    if isinstance(space, gym.spaces.Discrete):
        return ActionDist(False, int(space.n))
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = tuple(int(x) for x in space.nvec)
        return ActionDist(False, sum(nvec), nvec=nvec)
    if isinstance(space, gym.spaces.MultiBinary):
        return ActionDist(False, int(space.shape[0]), binary=True)
    return ActionDist(
        True,
        int(space.shape[0]),
        tuple(map(float, space.low)),
        tuple(map(float, space.high)),
        squash,
        mean_l2_coef=mean_l2_coef,
    )


class RolloutCollector:
    """Steps a vector env with a stochastic policy and keeps per-env episode statistics.

    Args:
        envs: a vector env in SAME_STEP autoreset mode (``envs.make_vector_env``).
        t_max: steps per env per segment.
        seed: seeds the envs (env i gets ``seed + i``) and the action sampler.
        dist: the action distribution (default: from the env's action space, clipped Box actions).
        normalizer: normalises observations (and sees every raw one); None: observations as they come.
        reward_scale: maps (rewards [B], episode ended [B]) → the rewards the learner sees, with a
            ``flush()`` at each segment's end; None: raw.

    Discrete actions are sampled with the Gumbel-max trick, argmax(logits + Gumbel noise), which draws exactly
    from softmax(logits): no softmax, no torch Distribution (~130 µs per step); the noise for a whole segment
    is drawn at once, as is a Gaussian policy's (and MultiDiscrete's per dimension, MultiBinary's per bit:
    ``ActionDist.sample``).
    """

    def __init__(
        self,
        envs: gym.vector.VectorEnv,
        t_max: int,
        seed: int,
        dist: ActionDist | None = None,
        normalizer: ObsNormalizer | None = None,
        reward_scale: RewardScale | None = None,
    ):
        self.envs = envs
        self.num_envs = envs.num_envs
        self.dist = dist or action_dist(envs.single_action_space)
        self.normalizer = normalizer
        self.reward_scale = reward_scale
        obs, _ = envs.reset(seed=seed)
        space = envs.single_observation_space
        # Images stay uint8 (4x less to copy; the conv net scales them); everything else becomes float32.
        dtype = np.uint8 if space.dtype == np.uint8 and len(space.shape) == 3 else np.float32
        self.raw_obs = np.array(obs)
        self.obs = self._prepare(self.raw_obs).astype(dtype)
        # Not default_rng(seed): that stream would equal env 0's own np_random after reset(seed=seed).
        self.rng = np.random.default_rng([seed, 1])
        action_dims = self.dist.action_shape[0] if self.dist.action_shape else 0
        self.segment = Segment.allocate(
            t_max, self.num_envs, space.shape, action_dims, dtype, self.dist.action_dtype
        )
        # Envs that report their own episodes (Atari's real games, unclipped, across lives) are logged by
        # those; every other env by the rewards and ends seen here.
        self.env_episodes = bool(getattr(envs, "reports_episodes", False))
        self.episode_returns = np.zeros(self.num_envs, np.float64)
        self.episode_lengths = np.zeros(self.num_envs, np.int64)

    def _prepare(self, raw: np.ndarray) -> np.ndarray:
        """What the policy sees of raw observations [B, ...]: themselves, or normalised (and observed)."""
        if self.normalizer is None:
            return raw
        self.normalizer.observe(raw)
        return self.normalizer(raw)

    def _end_episodes(
        self, t: int, done: np.ndarray, truncated: np.ndarray, info: dict, finished: list[Episode]
    ) -> None:
        """Step ``t`` ended the episodes where ``done`` [B]: store the final observations of the truncated
        ones (``truncated`` [B], from ``info``) in the segment, log the episodes into ``finished`` (unless
        the env reports its own) and restart their returns and lengths."""
        seg = self.segment
        for i in np.flatnonzero(done):
            if truncated[i]:
                final = info["final_obs"][i : i + 1]
                seg.final_obs[t, i] = final[0] if self.normalizer is None else self.normalizer(final)[0]
            if not self.env_episodes:
                finished.append(Episode(int(i), float(self.episode_returns[i]), int(self.episode_lengths[i])))
        self.episode_returns[done] = 0.0
        self.episode_lengths[done] = 0

    def collect(self, policy: Callable[[np.ndarray], np.ndarray]) -> tuple[Segment, list[Episode]]:
        """Fill ``self.segment`` with t_max steps of every env; return it and the episodes that ended.

        ``policy`` maps observations [B, ...] to policy outputs [B, P] (``a3c.algo.models.policy``); a
        recurrent one (``policy.recurrent``) carries its state, which is stored in the segment before step 0
        and reset per env at episode ends (``policy.reset(ended)``).
        """
        seg, dist = self.segment, self.dist
        finished: list[Episode] = []
        steps = seg.obs.shape[0]
        recurrent = getattr(policy, "recurrent", False)
        if recurrent:
            seg.init_state = policy.state()
        noise = dist.noise(self.rng, (steps, self.num_envs))
        for t in range(steps):
            seg.obs[t] = self.obs
            actions = seg.actions[t]
            actions[:] = dist.sample(policy(seg.obs[t]), noise[t])
            obs, rewards, terminated, truncated, info = self.envs.step(dist.env_action(actions))
            self.episode_returns += rewards
            self.episode_lengths += 1
            done = terminated | truncated
            seg.rewards[t] = rewards if self.reward_scale is None else self.reward_scale(rewards, done)
            seg.terminated[t] = terminated
            seg.truncated[t] = truncated
            if self.env_episodes and "episode" in info:
                games = info["episode"]
                for i in np.flatnonzero(info["_episode"]):
                    finished.append(Episode(int(i), float(games["r"][i]), int(games["l"][i])))
            if done.any():
                self._end_episodes(t, done, truncated, info, finished)
                if recurrent:
                    policy.reset(done)
            if self.normalizer is None:
                self.obs = obs
            else:
                self.raw_obs = np.array(obs)
                self.obs = self._prepare(self.raw_obs)
        seg.next_obs[:] = self.obs
        if self.reward_scale is not None:
            self.reward_scale.flush()
        if self.normalizer is not None:
            # The stats stay fixed within a segment (its bootstrap included); between segments this worker's
            # observations go to the shared stats and the next segment takes the newest of all workers.
            self.normalizer.flush()
            self.obs = self.normalizer(self.raw_obs)
        return seg, finished
