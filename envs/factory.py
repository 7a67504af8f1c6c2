"""Build Gymnasium envs for workers and the evaluator, and check their spaces before anything spawns."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import partial

import gymnasium as gym
import numpy as np

from envs.serial import SerialVectorEnv


class EnvSetupError(ValueError):
    """An env id that cannot be made, or a space this project does not support yet (bad input, exit 2)."""


@dataclass(frozen=True)
class EnvInfo:
    """What the model and the config need to know about an env, read once in the trainer."""

    env_id: str
    obs_dim: int
    n_actions: int
    reward_threshold: float | None
    max_episode_steps: int | None


def _suggest(env_id: str) -> str:
    close = difflib.get_close_matches(env_id, list(gym.registry.keys()), n=3, cutoff=0.6)
    return (
        f"; did you mean: {', '.join(close)}?" if close else "; see `gymnasium.pprint_registry()` for the ids"
    )


def make_env(env_id: str, seed: int | None = None, **kwargs) -> gym.Env:
    """Make one env (time limit included, from its spec), reset it once with ``seed`` when one is given.

    Raises:
        EnvSetupError: unknown id (close registered names are suggested) or an id whose module is missing.
    """
    try:
        env = gym.make(env_id, **kwargs)
    except (gym.error.NameNotFound, gym.error.NamespaceNotFound, gym.error.VersionNotFound) as exc:
        raise EnvSetupError(f"--env: unknown environment {env_id!r}{_suggest(env_id)}") from exc
    except gym.error.DeprecatedEnv as exc:
        raise EnvSetupError(f"--env: {env_id!r} is deprecated ({exc}){_suggest(env_id)}") from exc
    except ModuleNotFoundError as exc:
        raise EnvSetupError(
            f"--env: environment {env_id!r} needs module {exc.name!r}, which is not installed"
        ) from exc
    except Exception as exc:  # gymnasium and env modules raise many kinds for a bad id or a broken env
        raise EnvSetupError(f"--env: {env_id!r} cannot be made ({type(exc).__name__}: {exc})") from exc
    if seed is not None:
        env.reset(seed=seed)
        env.action_space.seed(seed)
    return env


def check_spaces(env_id: str, observation_space: gym.Space, action_space: gym.Space) -> None:
    """Accept Discrete actions and flat (1-D) Box observations; name anything else as not supported yet."""
    if not isinstance(action_space, gym.spaces.Discrete):
        raise EnvSetupError(
            f"--env: {env_id!r} has action space {action_space}, which is not supported yet "
            "(supported: Discrete)"
        )
    if not (isinstance(observation_space, gym.spaces.Box) and len(observation_space.shape) == 1):
        raise EnvSetupError(
            f"--env: {env_id!r} has observation space {observation_space}, which is not supported yet "
            "(supported: a flat 1-D Box)"
        )


def inspect_env(env_id: str) -> EnvInfo:
    """Make the env once, check its spaces and return the facts the config and the model need."""
    env = make_env(env_id)
    try:
        check_spaces(env_id, env.observation_space, env.action_space)
        spec = env.spec
        # "CartPole" resolves to its newest version: use the full id (for the preset and the run dir). An id
        # with a module prefix ("pkg.mod:Name-v0") keeps it, so that spawned workers import the module too.
        full_id = spec.id if spec is not None and ":" not in env_id else env_id
        return EnvInfo(
            env_id=full_id,
            obs_dim=int(np.prod(env.observation_space.shape)),
            n_actions=int(env.action_space.n),
            reward_threshold=None if spec is None else spec.reward_threshold,
            max_episode_steps=None if spec is None else spec.max_episode_steps,
        )
    finally:
        env.close()


def make_vector_env(env_id: str, num_envs: int) -> gym.vector.VectorEnv:
    """K copies of ``env_id`` stepped as one batch, in this process (``SerialVectorEnv``).

    Autoreset is SAME_STEP: when a sub-env ends, ``step`` already returns its reset observation and
    puts the real last observation in ``info["final_obs"]`` (masked by ``info["_final_obs"]``), which a
    truncated step needs for its bootstrap value. Seed it with ``reset(seed=s)``: env i gets ``s + i``.
    The arrays it returns are overwritten by its next step: callers copy them into their own buffers.
    """
    return SerialVectorEnv([partial(make_env, env_id)] * num_envs)


def make_eval_vector_env(env_id: str, num_envs: int) -> gym.vector.VectorEnv:
    """K copies of ``env_id`` for greedy evaluation episodes: the env's own numpy-vectorised implementation
    when it registers one (CartPole-v1's steps 100 envs in ~170 µs, ~10x faster than 100 Python envs),
    else ``make_vector_env``. Its autoreset mode may be NEXT_STEP: callers play one episode per env and
    stop counting an env at its first end, so either mode gives the same episodes' returns.
    """
    spec = gym.spec(env_id) if ":" not in env_id else None
    if spec is not None and spec.vector_entry_point is not None:
        try:
            return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point")
        except Exception:  # noqa: BLE001 - a vector entry point that cannot be made: the serial envs work
            pass
    return make_vector_env(env_id, num_envs)
