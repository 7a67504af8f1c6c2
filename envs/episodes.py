"""How long a greedy (evaluation) episode may last: every evaluation ends, even on an env without a time
limit, where a good policy could play for ever (`a3c evaluate`, `--video` and the evaluator would never
return)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from a3c_envs.user_envs import is_factory

# An env with no time limit of its own: greedy episodes end here (a user's env; set eval_max_steps to change).
NO_LIMIT_EVAL_STEPS = 10_000


def eval_step_limit(
    env_id: str, configured: int | None = None, env_kwargs: dict[str, Any] | None = None
) -> int:
    """The most steps of one greedy episode: ``configured`` (the config's ``eval_max_steps``) when set, else
    the env's own time limit (a ``max_episode_steps`` among its ``env_kwargs``, else its spec's; ALE v5's
    27,000 agent steps come from the emulator's frame limit, not from the spec), else
    ``NO_LIMIT_EVAL_STEPS``. A ``module:Name`` id is looked up as ``Name`` (its module imported by then); an
    env factory's reference (``a3c_envs.user_envs``) has no spec."""
    if configured is not None:
        return configured
    limit = (env_kwargs or {}).get("max_episode_steps")
    if limit is None and not is_factory(env_id):
        try:
            spec = gym.spec(env_id.split(":")[-1])
        except Exception:  # noqa: BLE001 - an id gymnasium cannot look up (its module not imported yet)
            spec = None
        limit = None if spec is None else spec.max_episode_steps
    if limit is None and env_id.startswith("ALE/"):
        return 27_000  # max_num_frames_per_episode=108,000 at frame skip 4: ALE's own end of a game
    return int(limit or NO_LIMIT_EVAL_STEPS)
