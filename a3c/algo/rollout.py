"""The rollout: a segment of T steps of B envs collected with no gradient into buffers allocated once
(``RolloutCollector``, ``Segment``), and its targets — GAE(λ) advantages and value targets (``gae``,
``segment_targets``) from the values of the ONE batch of observations an update's forward runs on
(``segment_batch``).

``terminated`` and ``truncated`` stay separate (invariant 4): a true terminal has no future value; a
time-limit cut bootstraps from V(final observation) — the observation gymnasium reports in
``info["final_obs"]``, not the reset observation that follows it — which is in the batch. Both gradient paths
(autograd: ``a3c.algo.loss.segment_loss``; the numpy closed form: ``a3c.algo.numpy_mlp.MlpGradient``) read
segments and targets from here. The targets are numpy (a loop over T of torch ops cost ~25 µs per step;
numpy's ~2 µs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from a3c.algo.distributions import ActionDist, action_dist

if TYPE_CHECKING:
    import gymnasium as gym


@dataclass(frozen=True)
class Episode:
    """A finished training episode: undiscounted return and length in steps."""

    env_index: int
    episode_return: float
    length: int


class ObsNormalizer(Protocol):
    """What the collector needs of an observation normaliser (``a3c.algo.normalize``)."""

    def observe(self, obs: np.ndarray) -> None:
        """Take raw observations [B, ...] into the statistics."""

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Raw observations [B, ...] → normalised ones [B, ...] float32."""

    def flush(self) -> None:
        """At a segment's end: hand the observed statistics on and take the newest shared ones."""


class RewardScale(Protocol):
    """What the collector needs of a reward scaler (``a3c.algo.normalize.RewardScaler``)."""

    def __call__(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        """Rewards [B] and episode ends [B] bool → the rewards the learner sees [B] float32."""

    def flush(self) -> None:
        """At a segment's end: hand the return statistics on and take the newest shared ones."""


class RolloutCollector:
    """Steps a vector env with a stochastic policy and keeps per-env episode statistics.

    Args:
        envs: a vector env in SAME_STEP autoreset mode (``a3c_envs.make_vector_env``).
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

        ``policy`` maps observations [B, ...] to policy outputs [B, P] (``a3c.algo.networks``); a
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


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation (Schulman et al. 2016) over a segment of T steps in B envs.

    Args:
        rewards: [T, B] reward of step t.
        values: [T, B] V(s_t).
        next_values: [T, B] V of the true next state of step t: V(s_{t+1}) inside the segment, the bootstrap
            value after the last step, V(final observation) where the step was truncated. Ignored where
            ``terminated``.
        terminated: [T, B] bool, the episode reached a terminal state at step t.
        truncated: [T, B] bool, the episode was cut (time limit) at step t.
        gamma: discount in (0, 1].
        gae_lambda: λ in [0, 1]. λ = 0 gives the one-step TD error; λ = 1 gives n-step returns minus V.

    Returns:
        (advantages, returns), each [T, B]; ``returns = advantages + values`` is the value target.
    """
    # The recursion must not run across an episode boundary of either kind.
    carries = (~(terminated | truncated)).astype(rewards.dtype)
    deltas = rewards + gamma * np.where(terminated, 0.0, next_values).astype(rewards.dtype) - values
    advantages = np.empty_like(rewards)
    running = np.zeros_like(rewards[0])
    decay = gamma * gae_lambda
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = deltas[t] + decay * carries[t] * running
        advantages[t] = running
    return advantages, advantages + values
