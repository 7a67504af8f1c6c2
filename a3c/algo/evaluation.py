"""Greedy play: the most likely action in each env, for evaluation and for `a3c evaluate`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from torch import nn

from a3c.algo.distributions import action_dist
from a3c.algo.normalize import RunningMeanStd
from a3c.algo.numpy_mlp import make_policy
from a3c.core.config import Config
from a3c_envs import make_eval_vector_env
from a3c_envs.episodes import eval_step_limit


def _ales(envs: gym.vector.VectorEnv) -> list[Any] | None:
    """The ALE interfaces of a vector env's sub-envs (``SerialVectorEnv``'s, SyncVectorEnv's), or None."""
    subs = getattr(envs, "envs", None)
    if not isinstance(subs, list) or not subs or not all(isinstance(env, gym.Env) for env in subs):
        return None  # e.g. NativeAtariVectorEnv, whose C++ envs report their lives in info instead
    return [env.unwrapped.ale for env in subs] if all(hasattr(env.unwrapped, "ale") for env in subs) else None


class LostLives:
    """Which envs of a vector env lost a life in each step (Atari: evaluation episodes are whole games).

    Sub-envs with an ALE (``env.unwrapped.ale``) are asked their lives, as ``SerialVectorEnv`` passes no
    per-env info on; other vector envs must report ``info["lives"]`` [K] from ``reset`` on (gymnasium's
    SyncVectorEnv merges it from its sub-envs, masked by ``info["_lives"]``; ``NativeAtariVectorEnv``).
    """

    def __init__(self, ales: list[Any] | None, lives: np.ndarray):
        """``ales``: the sub-envs' ALE interfaces to ask, or None to read infos; ``lives``: [K] at reset."""
        self._ales = ales
        self._lives = lives

    @classmethod
    def of(cls, envs: gym.vector.VectorEnv, reset_info: dict[str, Any]) -> LostLives | None:
        """A watch over ``envs`` just reset (``reset_info``: what ``reset`` returned); None when the envs have
        no lives, so that they cost nothing."""
        ales = _ales(envs)
        if ales is not None:
            return cls(ales, cls._ask(ales))
        if "lives" in reset_info:
            return cls(None, np.array(reset_info["lives"], np.int64))
        return None

    @staticmethod
    def _ask(ales: list[Any]) -> np.ndarray:
        return np.fromiter((ale.lives() for ale in ales), np.int64, len(ales))

    def __call__(self, info: dict[str, Any], rows: np.ndarray) -> np.ndarray | None:
        """After a step of the envs ``rows`` [n] (indices) with this ``info`` (its arrays one entry per env of
        ``rows``): [n] bool, True where an env's lives dropped (None: none did)."""
        known = self._lives[rows]
        if self._ales is not None:
            lives = self._ask([self._ales[i] for i in rows.tolist()])
        elif "lives" not in info:
            return None
        elif "_lives" in info:  # envs that did not report keep their last count
            lives = np.where(info["_lives"], info["lives"], known).astype(np.int64)
        else:
            lives = np.array(info["lives"], np.int64)  # a copy: an env's info arrays may be its buffers
        lost = lives < known
        self._lives[rows] = lives
        return lost if lost.any() else None


def _rows(info: dict[str, Any], rows: np.ndarray, num_envs: int) -> dict[str, Any]:
    """``info`` of a step of all ``num_envs`` envs, its per-env arrays [num_envs] cut to ``rows``."""
    return {
        key: value[rows] if isinstance(value, np.ndarray) and value.shape[:1] == (num_envs,) else value
        for key, value in info.items()
    }


class RunningEnvs:
    """Steps the envs whose episode goes on, and only those where the vector env can step a subset (a
    ``step_some(indices, actions)`` method: ``SerialVectorEnv``, ``NativeAtariVectorEnv``). Other vector envs
    (gymnasium's, a registered vector entry point such as CartPole's) step every env: the ended ones repeat
    their last action, which changes no running env's episode (envs share no state but, in some vector envs,
    a random generator that only resets draw from, and a running env is never reset)."""

    def __init__(self, envs: gym.vector.VectorEnv):
        self.envs = envs
        self._step_some = getattr(envs, "step_some", None)
        self._actions: np.ndarray | None = None  # the last action of every env, for envs stepped all at once

    def step(
        self, rows: np.ndarray, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step envs ``rows`` [n] (indices) with ``actions`` [n, ...]: (obs [n, ...], rewards [n], ended [n]
        bool, info whose per-env arrays are [n]), row j env ``rows[j]``'s."""
        if self._step_some is not None:
            obs, rewards, terminated, truncated, info = self._step_some(rows, actions)
            return obs, rewards, terminated | truncated, info
        if self._actions is None:  # the first step: every env runs
            self._actions = np.array(actions)
        else:
            self._actions[rows] = actions
        obs, rewards, terminated, truncated, info = self.envs.step(self._actions)
        if len(rows) == self.envs.num_envs:
            return obs, rewards, terminated | truncated, info
        ended = (terminated | truncated)[rows]
        return np.asarray(obs)[rows], rewards[rows], ended, _rows(info, rows, self.envs.num_envs)


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
    after this many steps ends there (``a3c_envs.episodes.eval_step_limit``). Returns (returns [num_envs],
    lengths [num_envs]); on ``should_stop`` (checked every step) it returns early with the partial episodes.

    An env whose episode ended is stepped no more where the vector env can step a subset (``RunningEnvs``),
    and the network runs on the running envs' rows only (a recurrent state keeps theirs:
    ``TorchPolicy.keep_rows``): the running games' actions are the same as if every env were stepped to the
    longest game's end, at the cost of the running ones only.

    A recurrent model's state is zeroed for each env that lost a life (``LostLives``), as in training, where
    episodic life ends the learner's episode there; the evaluation episode itself goes on to the game's end.
    """
    obs, reset_info = envs.reset(seed=seed)
    returns = np.zeros(envs.num_envs, np.float64)
    lengths = np.zeros(envs.num_envs, np.int64)
    running = np.arange(envs.num_envs)  # the envs whose episode goes on, in order: the policy's rows
    policy = make_policy(model, envs.num_envs)
    lost_lives = LostLives.of(envs, reset_info) if getattr(policy, "recurrent", False) else None
    stepper = RunningEnvs(envs)
    keep_rows = getattr(policy, "keep_rows", None)  # a policy with a state per env (TorchPolicy)
    dist = action_dist(envs.single_action_space, squash)
    image = len(envs.single_observation_space.shape) == 3
    limit, step = (max_steps if max_steps is not None else float("inf")), 0
    while running.size and not should_stop() and step < limit:  # every episode started together
        step += 1
        x = np.asarray(obs) if image else np.asarray(obs, dtype=np.float32)
        actions = dist.greedy(policy(x if normalize is None else normalize(x)))
        obs, rewards, ended, info = stepper.step(running, actions)
        if lost_lives is not None and (lost := lost_lives(info, running)) is not None:
            policy.reset(lost)  # the LSTM meets a new life with a zero state, as it did in training
        returns[running] += rewards
        lengths[running] += 1
        if ended.any():  # those envs are stepped no more, and the network sees only the others' rows
            going = ~ended
            running, obs = running[going], np.asarray(obs)[going]
            if keep_rows is not None:
                keep_rows(going)
    return returns, lengths


def play_policy(
    model: nn.Module, config: Config, episodes: int, seed: int, obs_stats: RunningMeanStd | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``episodes`` greedy episodes of ``model`` on fresh envs of ``config.env_id`` seeded from ``seed``."""
    envs = make_eval_vector_env(
        config.env_id, episodes, frame_stack=config.frame_stack, wrappers=config.wrappers, **config.env_kwargs
    )
    try:
        normalize = None if obs_stats is None else obs_stats.normalize
        limit = eval_step_limit(config.env_id, config.eval_max_steps, config.env_kwargs)
        return play_greedy(model, envs, seed, squash=config.squash, normalize=normalize, max_steps=limit)
    finally:
        envs.close()
