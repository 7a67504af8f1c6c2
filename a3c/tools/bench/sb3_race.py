"""The race peer: Stable-Baselines3 A2C on any env for a wall-clock budget, run as its own command.

    python -m a3c.tools.bench.sb3_race --env ID --settings zoo|default --seed S --seconds T --launch UNIX
        --target R [--eval-every-s E] [--eval-episodes N] [--confirm-episodes M] [--confirm-confidence C]

``default``: ``A2C(policy, env)`` on one env (what a new user gets; Atari also gets the frame stack of 4
every Atari A2C needs). ``zoo``: the RL-Zoo's ``hyperparams/a2c.yml`` entry for the env where it has one
(Atari: 16 envs, frame stack 4, ``RMSpropTFLike``; LunarLander's entry is the zoo's for v2), else the
defaults; an entry's ``n_timesteps`` is its step budget (a ``lin_`` learning rate decays over it), so the
peer may stop before the wall-clock budget. Atari envs are SB3's ``AtariWrapper`` over the id with
``frameskip=1`` (the wrapper skips 4), so an ``ALE/<Game>-v5`` id keeps its sticky actions.

The budget counts, like ``a3c train --max-seconds``, from when the model is built (imports done), and is
training time: the peer's evaluations stop its training (ours's run in another process), so their time is
given back, to the budget and to the time to the target. Every ``eval_every_s`` seconds the policy plays
``eval_episodes`` deterministic episodes on raw envs (no reward clipping, no life loss, FIRE after a lost
life as ours's evaluator does); an evaluation at the target is confirmed, as ours's, on
``confirm_episodes`` more games (the eval env plays on, so fresh ones), and their lower confidence bound at
``confirm_confidence`` must reach the target (``eval_rounds.lower_bound``). The first that holds is the
solve (its time counted from ``--launch``, less the evaluations'). After the budget a final evaluation gives
the final return. The time spent evaluating is reported (``eval_s``).
The last stdout line is one JSON object.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import click
import numpy as np

from a3c.runtime.eval_rounds import lower_bound
from a3c.tools.bench.sb3_peer import silent_logger
from a3c_envs.atari import is_atari

# rl-baselines3-zoo hyperparams/a2c.yml.
ZOO: dict[str, dict[str, Any]] = {
    "CartPole-v1": dict(n_envs=8, ent_coef=0.0, n_timesteps=500_000),
    "LunarLander-v3": dict(
        n_envs=8, gamma=0.995, n_steps=5, learning_rate="lin_0.00083", ent_coef=1e-5, n_timesteps=200_000
    ),
    "Acrobot-v1": dict(normalize=True, n_envs=16, ent_coef=0.0, n_timesteps=500_000),
    "MountainCar-v0": dict(normalize=True, n_envs=16, ent_coef=0.0, n_timesteps=1_000_000),
}
ATARI_ZOO: dict[str, Any] = dict(
    n_envs=16, frame_stack=4, ent_coef=0.01, vf_coef=0.25, rmsprop_tf=True, n_timesteps=10_000_000
)


def settings_for(env_id: str, settings: str) -> dict[str, Any]:
    """The A2C settings of ``env_id`` under ``settings`` ("zoo" or "default"), as a plain dict."""
    if settings == "default":
        return dict(n_envs=1, frame_stack=4) if is_atari(env_id) else dict(n_envs=1)
    if is_atari(env_id):
        return dict(ATARI_ZOO)
    return dict(ZOO.get(env_id, dict(n_envs=1)))


def _linear(start: float) -> Callable[[float], float]:
    return lambda progress_remaining: progress_remaining * start


def _make_envs(env_id: str, n_envs: int, seed: int, training: bool, frame_stack: int | None) -> Any:
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecFrameStack

    if not is_atari(env_id):
        return make_vec_env(env_id, n_envs=n_envs, seed=seed)
    import ale_py
    import gymnasium as gym
    from stable_baselines3.common.atari_wrappers import AtariWrapper

    from a3c_envs.atari import FireOnLifeLoss

    gym.register_envs(ale_py)

    def wrap(env: gym.Env) -> gym.Env:
        if training:
            return AtariWrapper(env)
        return FireOnLifeLoss(AtariWrapper(env, terminal_on_life_loss=False, clip_reward=False))

    envs = make_vec_env(env_id, n_envs=n_envs, seed=seed, wrapper_class=wrap, env_kwargs=dict(frameskip=1))
    return VecFrameStack(envs, frame_stack) if frame_stack else envs


def build(env_id: str, settings: dict[str, Any], seed: int) -> tuple[Any, Any, Any, int]:
    """(model, training envs, evaluation envs, step budget) for ``settings``."""
    from stable_baselines3 import A2C
    from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike
    from stable_baselines3.common.vec_env import VecNormalize

    s = dict(settings)
    n_envs, frame_stack = s.pop("n_envs"), s.pop("frame_stack", None)
    normalize, rmsprop_tf = s.pop("normalize", False), s.pop("rmsprop_tf", False)
    budget = int(s.pop("n_timesteps", 10**14))
    envs = _make_envs(env_id, n_envs, seed, True, frame_stack)
    eval_envs = _make_envs(env_id, 1, seed + 10_000, False, frame_stack)
    if normalize:
        envs = VecNormalize(envs)
        eval_envs = VecNormalize(eval_envs, training=False, norm_reward=False)
    if isinstance(s.get("learning_rate"), str):  # "lin_X": X decaying to 0 over the step budget
        s["learning_rate"] = _linear(float(s["learning_rate"].split("_", 1)[1]))
    if rmsprop_tf:
        s["policy_kwargs"] = dict(optimizer_class=RMSpropTFLike, optimizer_kwargs=dict(eps=1e-5))
    policy = "CnnPolicy" if is_atari(env_id) else "MlpPolicy"
    return A2C(policy, envs, seed=seed, device="cpu", verbose=0, **s), envs, eval_envs, budget


class Evaluations:
    """The peer's evaluations: the curve, the first confirmed solve and the seconds spent evaluating."""

    def __init__(self, model: Any, envs: Any, eval_envs: Any, launch: float, options: dict[str, Any]):
        self.model, self.envs, self.eval_envs, self.launch = model, envs, eval_envs, launch
        self.options = options
        self.curve: list[dict[str, float]] = []
        self.solved_at: float | None = None
        self.eval_s = 0.0

    def _play(self, episodes: int) -> list[float]:
        from stable_baselines3.common.evaluation import evaluate_policy
        from stable_baselines3.common.vec_env import sync_envs_normalization

        if hasattr(self.envs, "obs_rms"):  # VecNormalize: evaluate with the training statistics
            sync_envs_normalization(self.envs, self.eval_envs)
        returns, _ = evaluate_policy(
            self.model, self.eval_envs, episodes, deterministic=True, return_episode_rewards=True
        )
        return [float(r) for r in returns]

    def run(self, steps: int) -> None:
        """One evaluation (confirmed when at the target) at ``steps`` env steps."""
        start = time.time()
        returns = self._play(self.options["eval_episodes"])
        target, confirm = self.options["target"], self.options["confirm_episodes"]
        reached = target is not None and sum(returns) / len(returns) >= target
        if reached and confirm:
            more = self._play(confirm)
            reached = lower_bound(np.array(more), self.options["confirm_confidence"]) >= target
            returns += more
        mean = sum(returns) / len(returns)
        self.curve.append({"time_s": time.time() - self.launch, "steps": steps, "mean": mean})
        self.eval_s += time.time() - start
        if reached and self.solved_at is None:
            # Training time only: the peer's evaluations stop its training (ours's run in another process).
            self.solved_at = time.time() - self.eval_s


def race(
    env_id: str, settings: str, seed: int, seconds: float, launch: float, **options: Any
) -> dict[str, Any]:
    """Train until ``seconds`` after the model is built, the step budget, or the first confirmed evaluation
    at ``options["target"]``; the result dict."""
    from stable_baselines3.common.callbacks import BaseCallback

    model, envs, eval_envs, budget = build(env_id, settings_for(env_id, settings), seed)
    evals = Evaluations(model, envs, eval_envs, launch, options)
    started = time.time()

    class Race(BaseCallback):
        last_eval = started

        def _on_step(self) -> bool:
            if time.time() - self.last_eval >= options["eval_every_s"]:
                evals.run(self.num_timesteps)
                self.last_eval = time.time()
            # The budget is training time: the evaluations' time is added back.
            return evals.solved_at is None and time.time() < started + seconds + evals.eval_s

    model.set_logger(silent_logger())
    model.learn(total_timesteps=budget, callback=Race())
    learn_s = time.time() - started - evals.eval_s
    if evals.solved_at is None:
        evals.run(model.num_timesteps)  # the final evaluation, as ours's after its budget
    solved = evals.solved_at is not None
    curve = evals.curve
    return {
        "solved": solved,
        "time_to_solve_s": evals.solved_at - launch if solved else None,
        "steps": curve[-1]["steps"],
        "final_return": curve[-1]["mean"],
        "best_return": max(p["mean"] for p in curve),
        "steps_per_s": model.num_timesteps / learn_s if learn_s > 0 else None,
        "eval_s": evals.eval_s,
        "curve": curve,
    }


@click.command()
@click.option("--env", "env_id", required=True)
@click.option("--settings", type=click.Choice(["zoo", "default"]), default="zoo")
@click.option("--seed", type=int, required=True)
@click.option("--seconds", type=float, required=True, help="Budget from when the model is built.")
@click.option("--launch", type=float, required=True, help="Unix time the harness started this command.")
@click.option("--target", type=float, default=None)
@click.option("--eval-every-s", type=float, default=5.0)
@click.option("--eval-episodes", type=int, default=10)
@click.option("--confirm-episodes", type=int, default=0)
@click.option("--confirm-confidence", type=float, default=0.5)
def main(**kwargs: Any) -> None:
    """One SB3 A2C race run; prints its JSON result."""
    print(json.dumps(race(**kwargs)))


if __name__ == "__main__":
    sys.exit(main())
