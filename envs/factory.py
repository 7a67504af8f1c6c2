"""Build Gymnasium envs for workers and the evaluator, and check their spaces before anything spawns."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from a3c.core.extras import install_hint
from a3c.core.spaces import Spaces
from a3c_envs.atari import is_atari, make_atari, register_atari
from a3c_envs.atari_vector import NativeAtariVectorEnv, native_unsupported
from a3c_envs.errors import EnvSetupError
from a3c_envs.space_check import check_spaces, encode_observations, observation_encoding, spaces_of
from a3c_envs.user_envs import apply_wrappers, is_factory, make_from_factory
from a3c_envs.vector import SerialVectorEnv


@dataclass(frozen=True)
class EnvInfo:
    """What the model and the config need to know about an env, read once in the trainer."""

    env_id: str
    spaces: Spaces
    reward_threshold: float | None
    max_episode_steps: int | None

    @property
    def obs_dim(self) -> int:
        """The number of values in one observation (``spaces.obs_dim``)."""
        return self.spaces.obs_dim

    @property
    def n_actions(self) -> int:
        """The policy head's outputs: Discrete: the number of actions; Box: the number of action dimensions
        (more in ``Spaces``'s docstring)."""
        return self.spaces.n_actions


def _suggest(env_id: str) -> str:
    close = difflib.get_close_matches(env_id, list(gym.registry.keys()), n=3, cutoff=0.6)
    return (
        f"; did you mean: {', '.join(close)}?" if close else "; see `gymnasium.pprint_registry()` for the ids"
    )


@contextmanager
def _setup_errors(env_id: str, kwargs: dict[str, Any] | None = None) -> Iterator[None]:
    """Turn what making ``env_id`` raises into an ``EnvSetupError`` that names the problem (``kwargs``: the
    keyword arguments it was made with, named when the env refuses them)."""
    try:
        yield
    except EnvSetupError:
        raise
    except TypeError as exc:
        if not kwargs or "keyword argument" not in str(exc):  # else a bug in the env, not a refused argument
            raise EnvSetupError(f"--env: {env_id!r} cannot be made (TypeError: {exc})") from exc
        raise EnvSetupError(
            f"env_kwargs: {kwargs!r} is not allowed for {env_id} ({exc}); expected its make() arguments"
        ) from exc
    except (gym.error.NameNotFound, gym.error.NamespaceNotFound, gym.error.VersionNotFound) as exc:
        raise EnvSetupError(f"--env: unknown environment {env_id!r}{_suggest(env_id)}") from exc
    except gym.error.DeprecatedEnv as exc:
        raise EnvSetupError(f"--env: {env_id!r} is deprecated ({exc}){_suggest(env_id)}") from exc
    except ModuleNotFoundError as exc:
        raise EnvSetupError(
            f"--env: environment {env_id!r} needs module {exc.name!r}, which is not installed"
            f"{_extra_hint(exc.name)}"
        ) from exc
    except gym.error.DependencyNotInstalled as exc:
        raise EnvSetupError(f"--env: {env_id!r} needs a package that is not installed ({exc})") from exc
    except Exception as exc:  # gymnasium and env modules raise many kinds for a bad id or a broken env
        raise EnvSetupError(f"--env: {env_id!r} cannot be made ({type(exc).__name__}: {exc})") from exc


def _check_frame_stack(env_id: str, frame_stack: Any) -> None:
    """Refuse a ``frame_stack`` that is not an integer >= 1 (for any env)."""
    if isinstance(frame_stack, bool) or not isinstance(frame_stack, int | np.integer) or frame_stack < 1:
        raise EnvSetupError(
            f"frame_stack: {frame_stack!r} is not allowed for {env_id}; expected an integer >= 1"
        )


def _refuse_stack(env_id: str, frame_stack: int, env: gym.Env) -> None:
    """Refuse ``frame_stack`` > 1 for a non-Atari env (stacking is built for Atari's frames only)."""
    image = len(getattr(env.observation_space, "shape", None) or ()) == 3
    why = "frame stacking is built for ALE/ ids only" if image else "not an image env"
    env.close()
    raise EnvSetupError(f"frame_stack: {frame_stack} is not allowed for {env_id} ({why}); expected 1")


def make_env(
    env_id: str,
    seed: int | None = None,
    training: bool = False,
    *,
    frame_stack: int = 1,
    encode: bool = True,
    wrappers: tuple[str, ...] | list[str] = (),
    **kwargs: Any,
) -> gym.Env:
    """Make one env (time limit included, from its spec), reset it once with ``seed`` when one is given.

    ``env_id``: a Gymnasium id, or the reference of an env factory (``"pkg.mod:make_env"``,
    ``"__main__:MyEnv"``: ``a3c_envs.user_envs``), which is called with ``kwargs``. ``wrappers``:
    references of callables ``env -> env``, applied in order to the env as made (after Atari's
    preprocessing, before the encoding).

    ``encode``: observations as the model takes them (``a3c_envs.space_check.encode_observations``: a Discrete
    one-hot, a Tuple or Dict flattened, as float32); False: as the env gives them.

    Atari ids (``ALE/...``) get the standard preprocessing (``a3c_envs.atari.make_atari``); ``training`` adds
    the parts only the learner sees there (episodic life, reward clipping); ``frame_stack`` k > 1 stacks the
    last k frames (uint8 ``[k, 84, 84]``, oldest first). Other envs take only ``frame_stack=1``.
    ``kwargs`` go to ``gym.make`` (Atari: e.g. ``repeat_action_probability=0.0`` for no sticky actions,
    ``max_num_frames_per_episode``).

    Raises:
        EnvSetupError: unknown id (close registered names are suggested), an id whose module is missing, or
            a ``frame_stack`` the env cannot take; a factory or a wrapper that raises or returns no env.
    """
    _check_frame_stack(env_id, frame_stack)
    with _setup_errors(env_id, kwargs):
        if is_factory(env_id):
            env = make_from_factory(env_id, kwargs)
        elif is_atari(env_id):
            if not register_atari():
                raise ModuleNotFoundError("ale_py is not installed", name="ale_py")
            env = make_atari(env_id, training, frame_stack=frame_stack, **kwargs)
        else:
            env = gym.make(env_id, **kwargs)
    if frame_stack > 1 and not is_atari(env_id):
        _refuse_stack(env_id, frame_stack, env)
    env = apply_wrappers(env, wrappers)
    if encode:
        env = encode_observations(env)
    if seed is not None:
        env.reset(seed=seed)
        env.action_space.seed(seed)
    return env


# The extra of setup.cfg that installs a missing module, for the error message.
_EXTRAS = {"ale_py": "atari", "cv2": "atari", "mujoco": "mujoco", "Box2D": "box2d"}


def _extra_hint(module: str | None) -> str:
    extra = _EXTRAS.get((module or "").split(".")[0])
    return f"; install it with {install_hint(extra)}" if extra else ""


def inspect_env(
    env_id: str,
    *,
    frame_stack: int = 1,
    env_kwargs: dict[str, Any] | None = None,
    wrappers: tuple[str, ...] | list[str] = (),
) -> EnvInfo:
    """Make the env once, check its spaces and return the facts the config and the model need.

    ``frame_stack``: as ``make_env``'s; the spaces are those of the stacked observations (Atari, k > 1:
    ``obs_shape == (k, 84, 84)``), the same on the native vector env. ``obs_shape`` is that of the encoded
    observations (``make_env``'s ``encode``). ``env_kwargs``: ``make_env``'s keyword arguments (they may
    change the spaces: LunarLander-v3's ``continuous=True``). ``wrappers``: ``make_env``'s (the spaces are
    those of the wrapped env).
    """
    # The env's own spaces, to check and name.
    env = make_env(env_id, frame_stack=frame_stack, encode=False, wrappers=wrappers, **(env_kwargs or {}))
    try:
        check_spaces(env_id, env.observation_space, env.action_space)
        spec = env.spec
        # "CartPole" resolves to its newest version: use the full id (for the preset and the run dir). An id
        # with a module prefix ("pkg.mod:Name-v0") keeps it, so that spawned workers import the module too.
        full_id = spec.id if spec is not None and ":" not in env_id else env_id
        return EnvInfo(
            env_id=full_id,
            spaces=spaces_of(env.observation_space, env.action_space),
            reward_threshold=None if spec is None else spec.reward_threshold,
            max_episode_steps=None if spec is None else spec.max_episode_steps,
        )
    finally:
        env.close()


def _use_native(env_id: str, native: bool | None, kwargs: dict[str, Any], wrappers: Any = ()) -> bool:
    """Whether to step ``env_id`` in ale-py's C++ vector env: ``native`` None = when it can, True = must."""
    if native is False:
        return False
    if wrappers:  # the C++ envs are made without make_env: no place for a wrapper
        if native:
            raise EnvSetupError(f"native: True is not allowed with wrappers {list(wrappers)}; expected None")
        return False
    if not is_atari(env_id):
        if native:
            raise EnvSetupError(f"native: True is not allowed for {env_id}; expected an ALE/ id (or None)")
        return False
    why = native_unsupported(env_id, kwargs)
    if why is not None and native:
        raise EnvSetupError(f"native: True is not allowed for {env_id}: {why}")
    return why is None


def make_vector_env(
    env_id: str,
    num_envs: int,
    training: bool = False,
    *,
    frame_stack: int = 1,
    native: bool | None = False,
    wrappers: tuple[str, ...] | list[str] = (),
    **kwargs: Any,
) -> gym.vector.VectorEnv:
    """K copies of ``env_id`` stepped as one batch, in this process.

    Autoreset is SAME_STEP: when a sub-env ends, ``step`` already returns its reset observation and
    puts the real last observation in ``info["final_obs"]`` (masked by ``info["_final_obs"]``), which a
    truncated step needs for its bootstrap value. Seed it with ``reset(seed=s)``: env i gets ``s + i``.
    The arrays it returns are overwritten by its next step: callers copy them into their own buffers.
    ``training``: the learner's envs (Atari: episodic life and clipped rewards, and ``reports_episodes``
    with the whole games in ``info["episode"]``); the evaluator's are not. ``frame_stack``, ``wrappers`` and
    ``kwargs``: as ``make_env``'s.

    Atari ids run in ale-py's C++ vector env (``a3c_envs.atari_vector.NativeAtariVectorEnv``, same semantics)
    when ``native`` is None and it can take the id and ``kwargs`` and there are no ``wrappers``, or when
    ``native`` is True (else EnvSetupError); ``native=False`` (the default), and every other env, use
    ``SerialVectorEnv`` over ``make_env``. Opt-in for now: unpinned it measured 0.9–1.1× the Python path's
    speed on the 2-core dev machine, and its random streams and no-op draw differ, so a seed would replay
    differently.
    """
    _check_frame_stack(env_id, frame_stack)
    if _use_native(env_id, native, kwargs, wrappers):
        with _setup_errors(env_id, kwargs):
            return NativeAtariVectorEnv(env_id, num_envs, training, frame_stack=frame_stack, **kwargs)
    fn = partial(make_env, env_id, training=training, frame_stack=frame_stack, wrappers=wrappers, **kwargs)
    return SerialVectorEnv([fn] * num_envs)


def make_eval_vector_env(
    env_id: str,
    num_envs: int,
    *,
    frame_stack: int = 1,
    native: bool | None = False,
    wrappers: tuple[str, ...] | list[str] = (),
    **kwargs: Any,
) -> gym.vector.VectorEnv:
    """K copies of ``env_id`` for greedy evaluation episodes: the env's own numpy-vectorised implementation
    when it registers one (CartPole-v1's steps 100 envs in ~170 µs, ~10x faster than 100 Python envs),
    else ``make_vector_env`` (Atari: the native C++ envs when ``native`` allows, see there). Its autoreset
    mode may be NEXT_STEP: callers play one episode per env and stop counting an env at its first end, so
    either mode gives the same episodes' returns. ``frame_stack``, ``native``, ``wrappers`` and ``kwargs``:
    as ``make_vector_env``'s (wrappers and env factories always take the ``make_env`` path).
    """
    plain = frame_stack == 1 and not kwargs and not native and not wrappers
    spec = gym.spec(env_id) if plain and ":" not in env_id and not is_atari(env_id) else None
    if spec is not None and spec.vector_entry_point is not None:
        try:
            envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point")
        except Exception:  # noqa: BLE001 - a vector entry point that cannot be made: the serial envs work
            envs = None
        if envs is not None and observation_encoding(envs.single_observation_space) == "none":
            return envs
        if envs is not None:  # observations to encode: make_env's wrappers do that
            envs.close()
    return make_vector_env(
        env_id, num_envs, frame_stack=frame_stack, native=native, wrappers=wrappers, **kwargs
    )
