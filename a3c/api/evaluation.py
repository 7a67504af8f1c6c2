"""``a3c.evaluate_policy``: play a policy on the caller's env for some episodes and return the mean and the
standard deviation of their returns, as Stable-Baselines3's ``evaluate_policy`` does.

The policy: an ``a3c.Policy`` or anything with ``predict(obs, deterministic=...)`` (an SB3 model too: a
``predict`` that takes ``state`` and ``episode_start`` gets the recurrent state carried between steps, and
a returned ``(action, state)`` tuple is read as such). The env: a ``gymnasium.Env``, a gymnasium vector env,
or a zero-argument callable that makes one (then closed here at the end).

What a Policy takes: observations as ``a3c_envs.make_env`` gives them for the run's env (``Policy.make_env()``
makes that env: Atari preprocessing and frame stacking included). An env whose observations are Discrete,
MultiDiscrete, MultiBinary, a Tuple or a Dict is encoded here as ``make_env`` encodes it (one-hot, flattened,
float32: ``a3c_envs.space_check``); preprocessing that ``make_env`` adds (Atari's) is the env's own to do.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from a3c.core.errors import BadInput

if TYPE_CHECKING:  # gymnasium is imported when a policy is evaluated: ``import a3c`` stays quick
    import gymnasium as gym

Encode = Callable[[Any], np.ndarray]


def evaluate_policy(
    policy: Any,
    env: Any,
    n_episodes: int = 10,
    deterministic: bool = True,
    return_episode_rewards: bool = False,
    seed: int | None = None,
) -> tuple[float, float] | tuple[list[float], list[int]]:
    """Play ``n_episodes`` episodes of ``policy`` on ``env`` and return (mean, std) of their returns, or with
    ``return_episode_rewards`` (returns [n_episodes], lengths [n_episodes]) in the order they ended.

    ``deterministic``: the most likely actions, else actions drawn from the policy. ``seed``: the first
    ``env.reset(seed=seed)`` (a vector env seeds env i with ``seed + i``) and, for an ``a3c.Policy``, the
    generator it draws actions with; None leaves both as they are. A vector env of E envs plays
    ``(n_episodes + i) // E`` episodes in env i (as SB3: short episodes do not crowd out long ones).

    Raises:
        BadInput: a bad argument, an env that is neither a gymnasium env nor makes one, or one whose
            observations do not fit the policy.
    """
    import gymnasium as gym

    _check_arguments(n_episodes, deterministic, seed)
    made = callable(env) and not isinstance(env, gym.Env | gym.vector.VectorEnv)
    if made:
        env = env()
    try:
        vector = isinstance(env, gym.vector.VectorEnv)
        if not vector and not isinstance(env, gym.Env):
            raise BadInput(
                f"env: {type(env).__name__} is not allowed; expected a gymnasium.Env, a gymnasium vector "
                "env, or a zero-argument callable that returns one"
            )
        space = env.single_observation_space if vector else env.observation_space
        encode = _encoder(policy, space)
        if seed is not None and callable(getattr(policy, "seed", None)):
            policy.seed(seed)
        act = _actor(policy, deterministic)
        play = _play_vector if vector else _play_single
        returns, lengths = play(env, act, encode, n_episodes, seed)
    finally:
        if made:
            env.close()
    if return_episode_rewards:
        return returns, lengths
    return float(np.mean(returns)), float(np.std(returns))


def _check_arguments(n_episodes: Any, deterministic: Any, seed: Any) -> None:
    if isinstance(n_episodes, bool) or not isinstance(n_episodes, int) or n_episodes < 1:
        raise BadInput(f"n_episodes: {n_episodes!r} is not allowed; expected an integer >= 1")
    if not isinstance(deterministic, bool):
        raise BadInput(f"deterministic: {deterministic!r} is not allowed; expected True or False")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31):
        raise BadInput(f"seed: {seed!r} is not allowed; expected None or an integer in [0, 2**31)")


def _encoder(policy: Any, space: gym.Space) -> Encode | None:
    """How one observation of ``space`` becomes what an ``a3c.Policy`` takes (None: as it is): flattened as
    ``make_env`` does when the policy was trained on an encoded space. BadInput when the shapes differ."""
    import gymnasium as gym

    from a3c_envs.space_check import observation_encoding

    spaces = getattr(policy, "spaces", None)
    expected = getattr(spaces, "obs_shape", None)
    if expected is None:  # not an a3c Policy: its observations are its own business
        return None
    encoding = observation_encoding(space)
    encode = None
    if encoding not in (None, "none") and getattr(spaces, "obs_encoding", "none") != "none":
        encode = lambda obs: np.asarray(gym.spaces.flatten(space, obs), np.float32)  # noqa: E731
        shape = gym.spaces.flatten_space(space).shape
    else:
        shape = getattr(space, "shape", None)
    if tuple(shape or ()) != tuple(expected):
        raise BadInput(
            f"env: observations {' '.join(str(space).split())} do not fit the policy, which takes shape "
            f"{tuple(expected)} (as a3c_envs.make_env gives them: Policy.make_env() makes that env)"
        )
    return encode


def _actor(policy: Any, deterministic: bool) -> Callable[[Any, np.ndarray, Any], tuple[Any, Any]]:
    """``act(obs, episode_start [B] bool, state) -> (actions, state)`` for ``policy``: its ``predict``
    with the recurrent state carried when it takes one (SB3's form), else ``predict(obs, deterministic)``."""
    predict = getattr(policy, "predict", None)
    if not callable(predict):
        raise BadInput(
            f"policy: {type(policy).__name__} is not allowed; expected an a3c.Policy (a3c.load) or an object "
            "with predict(obs, deterministic=...)"
        )
    try:
        carries_state = "episode_start" in inspect.signature(predict).parameters
    except (TypeError, ValueError):  # a builtin or C callable without a signature
        carries_state = False

    def act(obs: Any, starts: np.ndarray, state: Any) -> tuple[Any, Any]:
        if carries_state:
            return predict(obs, state=state, episode_start=starts, deterministic=deterministic)
        result = predict(obs, deterministic=deterministic)
        return (result[0] if isinstance(result, tuple) else result), None

    return act


def _play_single(
    env: gym.Env, act: Callable, encode: Encode | None, n_episodes: int, seed: int | None
) -> tuple[list[float], list[int]]:
    """``n_episodes`` episodes on one env, one after another."""
    returns: list[float] = []
    lengths: list[int] = []
    obs, _ = env.reset(seed=seed)
    state, start, total, length = None, True, 0.0, 0
    while len(returns) < n_episodes:
        action, state = act(obs if encode is None else encode(obs), np.array([start]), state)
        obs, reward, terminated, truncated, _ = env.step(action)
        total, length, start = total + float(reward), length + 1, False
        if terminated or truncated:
            returns.append(total)
            lengths.append(length)
            total, length, start = 0.0, 0, True
            if len(returns) < n_episodes:
                obs, _ = env.reset()
    return returns, lengths


def _play_vector(
    env: gym.vector.VectorEnv, act: Callable, encode: Encode | None, n_episodes: int, seed: int | None
) -> tuple[list[float], list[int]]:
    """``n_episodes`` episodes on a vector env's E envs, ``(n_episodes + i) // E`` in env i, under any of
    gymnasium's autoreset modes (next step: the step after an episode's end is its env's reset, not counted;
    same step: the reset observation comes with the end; disabled: reset here)."""
    import gymnasium as gym
    from gymnasium.vector import AutoresetMode

    n = env.num_envs
    targets = np.array([(n_episodes + i) // n for i in range(n)])
    counts = np.zeros(n, np.int64)
    totals, steps = np.zeros(n, np.float64), np.zeros(n, np.int64)
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    returns: list[float] = []
    lengths: list[int] = []
    obs, _ = env.reset(seed=seed)
    state, starts, resetting = None, np.ones(n, bool), np.zeros(n, bool)
    items = (lambda o: gym.vector.utils.iterate(env.observation_space, o)) if encode else None
    while (counts < targets).any():
        batch = obs if encode is None else np.stack([encode(o) for o in items(obs)])
        actions, state = act(batch, starts, state)
        obs, rewards, terminated, truncated, _ = env.step(actions)
        counted = ~resetting  # a next-step reset's step is no episode's
        ended = (terminated | truncated) & counted
        totals += np.where(counted, rewards, 0.0)
        steps += counted
        for i in np.flatnonzero(ended):
            if counts[i] < targets[i]:
                returns.append(float(totals[i]))
                lengths.append(int(steps[i]))
                counts[i] += 1
            totals[i], steps[i] = 0.0, 0
        if mode == AutoresetMode.NEXT_STEP:
            starts, resetting = resetting, ended
        elif mode == AutoresetMode.SAME_STEP:
            starts = ended
        else:
            starts = ended
            if ended.any() and (counts < targets).any():
                obs, _ = env.reset(options={"reset_mask": ended})
    return returns, lengths
