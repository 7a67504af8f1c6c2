"""How long a greedy (evaluation) episode may last: every evaluation ends, even on an env without a time
limit, where a good policy could play for ever (`a3c evaluate`, `--video` and the evaluator would never
return)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from a3c_envs.atari import FRAME_SKIP, is_atari, register_atari
from a3c_envs.user_envs import is_factory

# An env with no time limit of its own: greedy episodes end here (a user's env; set eval_max_steps to change).
NO_LIMIT_EVAL_STEPS = 10_000
# ALE's emulator frames per game (ale-py's ids: ``max_num_frames_per_episode``): 30 minutes at 60 Hz.
ALE_MAX_FRAMES = 108_000


def eval_step_limit(
    env_id: str, configured: int | None = None, env_kwargs: dict[str, Any] | None = None
) -> int:
    """The most steps of one greedy episode: ``configured`` (the config's ``eval_max_steps``) when set, else
    the env's own time limit (a ``max_episode_steps`` among its ``env_kwargs``, else its spec's), else, for
    an Atari id (``a3c_envs.atari.is_atari``: ``ALE/`` and the legacy ``NoFrameskip-v4`` ones), ALE's own end
    of a game, else ``NO_LIMIT_EVAL_STEPS``. A ``module:Name`` id is looked up as ``Name`` (its module
    imported by then); an env factory's reference (``a3c_envs.user_envs``) has no spec."""
    if configured is not None:
        return configured
    kwargs = env_kwargs or {}
    limit = kwargs.get("max_episode_steps")
    spec = None
    if limit is None and not is_factory(env_id):
        if is_atari(env_id):
            register_atari()  # its ids are in gymnasium's registry once ale_py is imported
        try:
            spec = gym.spec(env_id.split(":")[-1])
        except Exception:  # noqa: BLE001 - an id gymnasium cannot look up (its module not imported yet)
            spec = None
        limit = None if spec is None else spec.max_episode_steps
    if limit is None and is_atari(env_id):
        return atari_step_limit(kwargs, {} if spec is None else spec.kwargs)
    return int(limit or NO_LIMIT_EVAL_STEPS)


def atari_step_limit(env_kwargs: dict[str, Any], spec_kwargs: dict[str, Any]) -> int:
    """ALE's own end of a game in agent steps: its emulator frame limit (``max_num_frames_per_episode`` of the
    run's ``env_kwargs``, else of the id's spec, else ALE's 108,000: 30 minutes at 60 Hz) over the frame
    skip every Atari path of ours uses (``FRAME_SKIP`` = 4: ``AtariPreprocessing`` on a ``frameskip=1`` base
    env, or ale-py's C++ env), rounded up: 27,000 steps for the v5 and the legacy ``NoFrameskip-v4`` ids.
    ALE truncates the game at that frame, so a longer bound would never be reached and a shorter one (the
    10,000 steps of an env without a time limit) would cut long games short. A limit of 0 (ALE: none) gives
    ``NO_LIMIT_EVAL_STEPS``."""
    frames = env_kwargs.get("max_num_frames_per_episode", spec_kwargs.get("max_num_frames_per_episode"))
    frames = ALE_MAX_FRAMES if frames is None else int(frames)
    if frames <= 0:  # ALE's "no limit": a game without a time limit, as any such env
        return NO_LIMIT_EVAL_STEPS
    return -(-frames // FRAME_SKIP)
