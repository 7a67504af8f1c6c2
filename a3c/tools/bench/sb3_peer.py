"""The peer: Stable-Baselines3 A2C with the RL-Zoo's tuned CartPole-v1 settings, run as its own command.

    python -m a3c.tools.bench.sb3_peer solve --seed S --launch T --out DIR
    python -m a3c.tools.bench.sb3_peer throughput --envs N --seconds 20

Zoo settings (rl-baselines3-zoo hyperparams/a2c.yml, CartPole-v1): 8 envs, MlpPolicy, ent_coef 0; the rest
is A2C's defaults (n_steps 5, RMSprop lr 7e-4, eps 1e-5, gamma 0.99, gae_lambda 1, vf_coef 0.5, grad norm
0.5). "Solved" is the issue's criterion: a deterministic 10-episode evaluation every 2,000 steps averages
>= 475. The last line on stdout is one JSON object with the result.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from stable_baselines3.common.logger import Logger

TARGET = 475.0
ZOO = dict(n_envs=8, ent_coef=0.0)
EVAL_EVERY_STEPS = 2000


def silent_logger() -> Logger:
    """A Stable-Baselines3 logger with no output. Without one, ``learn()`` makes its default logger, which
    creates an empty ``SB3-<date>`` folder in the system's temp dir on every call and leaves it there."""
    from stable_baselines3.common.logger import Logger

    return Logger(folder=None, output_formats=[])


@click.group()
def main() -> None:
    """Stable-Baselines3 A2C runs for ``a3c bench``."""


@main.command()
@click.option("--seed", type=int, required=True)
@click.option("--launch", type=float, required=True, help="Unix time the harness started this command.")
@click.option("--out", type=click.Path(), required=True, help="Folder for best_model.zip.")
@click.option("--max-steps", type=int, default=500_000)
@click.option("--reeval-episodes", type=int, default=100)
def solve(seed: int, launch: float, out: str, max_steps: int, reeval_episodes: int) -> None:
    """Train until solved (or max_steps); then re-evaluate the best model on fresh episodes (not timed)."""
    from stable_baselines3 import A2C
    from stable_baselines3.common.callbacks import EvalCallback, StopTrainingOnRewardThreshold
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    class StopAndStamp(StopTrainingOnRewardThreshold):
        solved_unix: float | None = None

        def _on_step(self) -> bool:
            go_on = super()._on_step()
            if not go_on and self.solved_unix is None:
                self.solved_unix = time.time()
            return go_on

    envs = make_vec_env("CartPole-v1", n_envs=ZOO["n_envs"], seed=seed)
    eval_env = make_vec_env("CartPole-v1", n_envs=1, seed=seed + 10_000)
    stopper = StopAndStamp(reward_threshold=TARGET, verbose=0)
    callback = EvalCallback(
        eval_env,
        n_eval_episodes=10,
        eval_freq=max(EVAL_EVERY_STEPS // ZOO["n_envs"], 1),
        deterministic=True,
        best_model_save_path=out,
        callback_on_new_best=stopper,
        verbose=0,
    )
    model = A2C("MlpPolicy", envs, ent_coef=ZOO["ent_coef"], seed=seed, device="cpu", verbose=0)
    model.set_logger(silent_logger())
    model.learn(total_timesteps=max_steps, callback=callback)
    result = {
        "solved": stopper.solved_unix is not None,
        "time_to_solve_s": None if stopper.solved_unix is None else stopper.solved_unix - launch,
        "steps": int(model.num_timesteps),
        "best_mean_return": float(callback.best_mean_reward),
    }
    best = A2C.load(f"{out}/best_model.zip", device="cpu")
    fresh = make_vec_env("CartPole-v1", n_envs=1, seed=seed + 20_000)
    returns, _ = evaluate_policy(
        best, fresh, n_eval_episodes=reeval_episodes, deterministic=True, return_episode_rewards=True
    )
    result["reeval_mean"] = float(sum(returns) / len(returns))
    result["reeval_episodes"] = len(returns)
    print(json.dumps(result))


@main.command()
@click.option("--envs", "n_envs", type=int, required=True)
@click.option("--seconds", type=float, default=20.0)
@click.option("--warmup", type=float, default=2.0, help="Seconds not counted at the start.")
def throughput(n_envs: int, seconds: float, warmup: float) -> None:
    """Env steps per second of A2C (zoo settings, ``n_envs`` envs) over ``seconds`` after a warm-up."""
    from stable_baselines3 import A2C
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class Clock(BaseCallback):
        def __init__(self):
            super().__init__()
            self.start = time.perf_counter()
            self.mark: tuple[float, int] | None = None
            self.last: tuple[float, int] | None = None

        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:
            now = time.perf_counter() - self.start
            if self.mark is None and now >= warmup:
                self.mark = (now, self.num_timesteps)
            self.last = (now, self.num_timesteps)
            # The window is `seconds` long from the mark, and holds at least one rollout even when a loaded
            # machine took longer than the warm-up and the window together to reach the first.
            if self.mark is not None and now >= self.mark[0] + seconds and self.last[1] > self.mark[1]:
                self.model.num_timesteps = 10**12  # ends learn() after this rollout's update

    envs = make_vec_env("CartPole-v1", n_envs=n_envs, seed=0)
    model = A2C("MlpPolicy", envs, ent_coef=ZOO["ent_coef"], seed=0, device="cpu", verbose=0)
    model.set_logger(silent_logger())
    clock = Clock()
    model.learn(total_timesteps=10**11, callback=clock)
    (t0, s0), (t1, s1) = clock.mark, clock.last
    print(
        json.dumps(
            {"envs": n_envs, "steps": s1 - s0, "seconds": t1 - t0, "steps_per_s": (s1 - s0) / (t1 - t0)}
        )
    )


if __name__ == "__main__":
    sys.exit(main())
