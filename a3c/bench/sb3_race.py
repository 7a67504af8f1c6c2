"""The race peer: Stable-Baselines3 A2C on any env for a wall-clock budget, run as its own command.

    python -m a3c.bench.sb3_race --env ID --settings zoo|default --seed S --seconds T --launch UNIX
        --target R [--eval-every-s E] [--eval-episodes N]

``default``: ``A2C(policy, env)`` on one env with nothing changed (what a new user gets). ``zoo``: the
RL-Zoo's ``hyperparams/a2c.yml`` entry for the env where it has one (Atari: 16 envs, frame stack 4,
``RMSpropTFLike``; LunarLander's entry is the zoo's for v2), else the defaults. Atari envs are SB3's own
``make_atari_env`` (AtariWrapper) over the id with ``frameskip=1`` (the wrapper skips 4), so an
``ALE/<Game>-v5`` id keeps its sticky actions.

Every ``eval_every_s`` seconds of wall clock the current policy plays ``eval_episodes`` deterministic
episodes on raw (unclipped, no life loss) envs; the time they take counts, as ours's evaluator's CPU does.
The first evaluation at or above the target is the solve; the run stops there or at ``launch + seconds``.
The last stdout line is one JSON object.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import click

from envs.atari import is_atari

# rl-baselines3-zoo hyperparams/a2c.yml (n_timesteps left out: the race's budget is wall clock).
ZOO: dict[str, dict[str, Any]] = {
    "CartPole-v1": dict(n_envs=8, ent_coef=0.0),
    "LunarLander-v3": dict(n_envs=8, gamma=0.995, n_steps=5, learning_rate="lin_0.00083", ent_coef=1e-5),
    "Acrobot-v1": dict(normalize=True, n_envs=16, ent_coef=0.0),
    "MountainCar-v0": dict(normalize=True, n_envs=16, ent_coef=0.0),
}
ATARI_ZOO: dict[str, Any] = dict(n_envs=16, frame_stack=4, ent_coef=0.01, vf_coef=0.25, rmsprop_tf=True)


def settings_for(env_id: str, settings: str) -> dict[str, Any]:
    """The A2C settings of ``env_id`` under ``settings`` ("zoo" or "default"), as a plain dict."""
    if settings == "default":
        return dict(n_envs=1, frame_stack=4) if is_atari(env_id) else dict(n_envs=1)
    if is_atari(env_id):
        return dict(ATARI_ZOO)
    return dict(ZOO.get(env_id, dict(n_envs=1)))


def _linear(start: float):
    return lambda progress_remaining: progress_remaining * start


def _make_envs(env_id: str, n_envs: int, seed: int, training: bool, frame_stack: int | None):
    from stable_baselines3.common.env_util import make_atari_env, make_vec_env
    from stable_baselines3.common.vec_env import VecFrameStack

    if not is_atari(env_id):
        return make_vec_env(env_id, n_envs=n_envs, seed=seed)
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    wrapper = {} if training else dict(terminal_on_life_loss=False, clip_reward=False)
    envs = make_atari_env(
        env_id, n_envs=n_envs, seed=seed, env_kwargs=dict(frameskip=1), wrapper_kwargs=wrapper
    )
    return VecFrameStack(envs, frame_stack) if frame_stack else envs


def build(env_id: str, settings: dict[str, Any], seed: int):
    """(model, training envs, evaluation envs) for ``settings``."""
    from stable_baselines3 import A2C
    from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike
    from stable_baselines3.common.vec_env import VecNormalize

    s = dict(settings)
    n_envs, frame_stack = s.pop("n_envs"), s.pop("frame_stack", None)
    normalize, rmsprop_tf = s.pop("normalize", False), s.pop("rmsprop_tf", False)
    envs = _make_envs(env_id, n_envs, seed, True, frame_stack)
    eval_envs = _make_envs(env_id, 1, seed + 10_000, False, frame_stack)
    if normalize:
        envs = VecNormalize(envs)
        eval_envs = VecNormalize(eval_envs, training=False, norm_reward=False)
    if isinstance(s.get("learning_rate"), str):
        s["learning_rate"] = _linear(float(s["learning_rate"].split("_", 1)[1]))
    if rmsprop_tf:
        s["policy_kwargs"] = dict(optimizer_class=RMSpropTFLike, optimizer_kwargs=dict(eps=1e-5))
    policy = "CnnPolicy" if is_atari(env_id) else "MlpPolicy"
    return A2C(policy, envs, seed=seed, device="cpu", verbose=0, **s), envs, eval_envs


def race(
    env_id: str, settings: str, seed: int, seconds: float, launch: float, target: float | None, **evals: Any
) -> dict[str, Any]:
    """Train until ``launch + seconds`` or the first evaluation at ``target``; the result dict."""
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import sync_envs_normalization

    model, envs, eval_envs = build(env_id, settings_for(env_id, settings), seed)
    curve: list[dict[str, float]] = []
    started = time.time()

    class Race(BaseCallback):
        last_eval = started
        solved_at: float | None = None

        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:
            now = time.time()
            if now - self.last_eval >= evals["eval_every_s"] or now >= launch + seconds:
                self.last_eval = now
                if hasattr(envs, "obs_rms"):  # VecNormalize: evaluate with the training statistics
                    sync_envs_normalization(envs, eval_envs)
                mean, _ = evaluate_policy(model, eval_envs, evals["eval_episodes"], deterministic=True)
                curve.append({"time_s": time.time() - launch, "steps": self.num_timesteps, "mean": mean})
                if target is not None and mean >= target and self.solved_at is None:
                    self.solved_at = time.time()
            if self.solved_at is not None or time.time() >= launch + seconds:
                self.model.num_timesteps = 10**15  # ends learn() after this rollout's update

    callback = Race()
    model.learn(total_timesteps=10**14, callback=callback)
    learn_s = time.time() - started
    steps = curve[-1]["steps"] if curve else 0
    solved = callback.solved_at is not None
    return {
        "solved": solved,
        "time_to_solve_s": callback.solved_at - launch if solved else None,
        "steps": steps,
        "final_return": curve[-1]["mean"] if curve else None,
        "best_return": max((p["mean"] for p in curve), default=None),
        "steps_per_s": steps / learn_s if learn_s > 0 else None,
        "curve": curve,
    }


@click.command()
@click.option("--env", "env_id", required=True)
@click.option("--settings", type=click.Choice(["zoo", "default"]), default="zoo")
@click.option("--seed", type=int, required=True)
@click.option("--seconds", type=float, required=True, help="Budget from --launch.")
@click.option("--launch", type=float, required=True, help="Unix time the harness started this command.")
@click.option("--target", type=float, default=None)
@click.option("--eval-every-s", type=float, default=5.0)
@click.option("--eval-episodes", type=int, default=10)
def main(**kwargs: Any) -> None:
    """One SB3 A2C race run; prints its JSON result."""
    print(json.dumps(race(**kwargs)))


if __name__ == "__main__":
    sys.exit(main())
