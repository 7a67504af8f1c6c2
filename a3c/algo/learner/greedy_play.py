"""Greedy play: the most likely action in each env, for evaluation and for `a3c evaluate`."""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np
from torch import nn

from a3c.algo.learner.rollout import action_dist
from a3c.algo.models.policy import make_policy
from a3c.algo.shared.normalize import RunningMeanStd
from a3c.core.config import Config
from envs import make_eval_vector_env
from envs.episodes import eval_step_limit


def play_greedy(
    model: nn.Module,
    envs: gym.vector.VectorEnv,
    seed: int,
    should_stop: Callable[[], bool] = lambda: False,
    squash: str = "clip",
    normalize: Callable[[np.ndarray], np.ndarray] | None = None,
    max_steps: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Play one greedy episode (the most likely action: argmax, per dimension for MultiDiscrete; the bits
    whose logit is > 0; a Gaussian's mean) in each env at once.

    ``envs.reset(seed=seed)`` seeds the episodes (env i gets ``seed + i`` in a serial vector env; a native
    vector env seeds one generator for all). ``squash``: how Box actions reach the env (``config.squash``);
    ``normalize``: the run's observation normaliser, if it has one; ``max_steps``: an episode still going
    after this many steps ends there (``envs.episodes.eval_step_limit``). Returns (returns [num_envs],
    lengths [num_envs]); on ``should_stop`` (checked every step) it returns early with the partial episodes.
    """
    obs, _ = envs.reset(seed=seed)
    returns = np.zeros(envs.num_envs, np.float64)
    lengths = np.zeros(envs.num_envs, np.int64)
    running = np.ones(envs.num_envs, bool)
    policy = make_policy(model, envs.num_envs)
    dist = action_dist(envs.single_action_space, squash)
    image = len(envs.single_observation_space.shape) == 3
    limit, step = (max_steps if max_steps is not None else float("inf")), 0
    while running.any() and not should_stop() and step < limit:  # every episode started together
        step += 1
        x = np.asarray(obs) if image else np.asarray(obs, dtype=np.float32)
        actions = dist.greedy(policy(x if normalize is None else normalize(x)))
        obs, rewards, terminated, truncated, _ = envs.step(actions)
        returns += np.where(running, rewards, 0.0)
        lengths += running
        running &= ~(terminated | truncated)
    return returns, lengths


def play_policy(
    model: nn.Module, config: Config, episodes: int, seed: int, obs_stats: RunningMeanStd | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``episodes`` greedy episodes of ``model`` on fresh envs of ``config.env_id`` seeded from ``seed``."""
    envs = make_eval_vector_env(config.env_id, episodes, frame_stack=config.frame_stack, **config.env_kwargs)
    try:
        normalize = None if obs_stats is None else obs_stats.normalize
        limit = eval_step_limit(config.env_id, config.eval_max_steps, config.env_kwargs)
        return play_greedy(model, envs, seed, squash=config.squash, normalize=normalize, max_steps=limit)
    finally:
        envs.close()
