"""The evaluation actor of the Ray backend: plays greedy episodes of the weights (and observation statistics)
the driver's ``RemoteEvaluator`` hands it, with a heartbeat and cancellation."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import ray
import torch

from a3c.algo.evaluation import play_greedy
from a3c.algo.learner import build_model
from a3c.algo.normalize import RunningMeanStd
from a3c.algo.optim import flatten_parameters
from a3c.backends.ray.actor_calls import writable_tensor
from a3c.core.config import Config
from a3c.core.spaces import Spaces
from a3c_envs import make_eval_vector_env
from a3c_envs.episodes import eval_step_limit


@ray.remote(num_cpus=0, max_concurrency=2)  # two threads: ``beat`` and ``cancel`` answer during ``play``
class EvalActor:
    """Plays greedy episodes of given weights; says when they last advanced (its heartbeat) and stops them
    early on request."""

    def __init__(self, config: dict[str, Any], spaces: Spaces):
        torch.set_num_threads(1)
        self.cfg = Config.from_dict(config)
        self.model = build_model(self.cfg, spaces)
        self.flat = flatten_parameters(self.model)
        self.envs: dict[int, Any] = {}
        self.last_step: float | None = None  # time.monotonic() of the running play's last step (None: idle)
        self.cancelled = 0  # the play id to cut short

    def play(
        self, weights: np.ndarray, episodes: int, seed: int, play_id: int, obs_norm: dict | None = None
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """(returns [episodes], lengths [episodes], CPU seconds used); partial if ``cancel(play_id)``.
        ``obs_norm``: the observation statistics to normalise with (``RunningMeanStd.state_dict()``)."""
        self.last_step = time.monotonic()
        try:
            cpu = time.process_time()
            with torch.no_grad():
                self.flat.copy_(writable_tensor(weights))
            if episodes not in self.envs:
                cfg = self.cfg
                self.envs[episodes] = make_eval_vector_env(
                    cfg.env_id, episodes, frame_stack=cfg.frame_stack, wrappers=cfg.wrappers, **cfg.env_kwargs
                )

            def stepped() -> bool:  # called by play_greedy before every step
                self.last_step = time.monotonic()
                return self.cancelled == play_id

            normalize = None
            if obs_norm is not None:
                stats = RunningMeanStd(tuple(np.shape(obs_norm["mean"])))
                stats.load_state_dict(obs_norm)
                normalize = stats.normalize
            limit = eval_step_limit(self.cfg.env_id, self.cfg.eval_max_steps, self.cfg.env_kwargs)
            returns, lengths = play_greedy(
                self.model, self.envs[episodes], seed, stepped, self.cfg.squash, normalize, limit
            )
            return returns, lengths, time.process_time() - cpu
        finally:
            self.last_step = None

    def beat(self) -> float | None:
        """Seconds since the running play last stepped (None when none runs)."""
        last = self.last_step
        return None if last is None else time.monotonic() - last

    def cancel(self, play_id: int) -> None:
        """Cut play ``play_id`` short at its next step (a later or finished play is unaffected)."""
        self.cancelled = play_id
