"""Where one worker's time goes, in µs per env step: each part of ``Learner.update`` timed in this process.

The learner is the one a worker runs (an env's preset, CartPole's by default, one worker, no other process);
the parts are timed by wrapping its collaborators for the duration of the measurement only. On the autograd
path (conv nets, continuous actions) "loss and gradient" is the loss's forward, backward and clip together.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any
from unittest import mock

import torch

import a3c.algo.learner as learner_module


def _timed(fn: Callable, totals: dict[str, float], key: str) -> Callable:
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[key] += time.perf_counter() - start

    return wrapper


def breakdown(env_id: str = "CartPole-v1", seconds: float = 5.0, warmup_updates: int = 50) -> dict[str, Any]:
    """Run one learner for ``seconds`` and return µs per env step of each part, and its steps/s."""
    from a3c.algo.learner import Learner, build_shared
    from a3c.training.resolve import resolve_config
    from a3c_envs import inspect_env

    torch.set_num_threads(1)
    info = inspect_env(env_id)
    config = resolve_config(info, {"workers": 1}, {})
    info = inspect_env(env_id, frame_stack=config.frame_stack)
    model, optimizer = build_shared(config, info.spaces)
    learner = Learner(config, model, optimizer, seed=0)
    for _ in range(warmup_updates):
        learner.update()

    totals: dict[str, float] = defaultdict(float)
    collector = learner.collector
    with ExitStack() as stack:
        stack.enter_context(
            mock.patch.object(collector.envs, "step", _timed(collector.envs.step, totals, "env"))
        )
        stack.enter_context(mock.patch.object(learner, "policy", _timed(learner.policy, totals, "policy")))
        stack.enter_context(
            mock.patch.object(collector, "collect", _timed(collector.collect, totals, "rollout"))
        )
        if learner.numpy_grad is not None:
            grad = learner.numpy_grad
            stack.enter_context(
                mock.patch.object(grad, "loss_and_grad", _timed(grad.loss_and_grad, totals, "loss"))
            )
        else:  # autograd: the loss's forward, then its backward and clip
            for name in ("segment_loss", "compute_gradients"):
                timed = _timed(getattr(learner_module, name), totals, "loss")
                stack.enter_context(mock.patch.object(learner_module, name, timed))
        stack.enter_context(mock.patch.object(optimizer, "step", _timed(optimizer.step, totals, "step")))
        for name, key in (("clip_flat_grad", "clip"), ("pull_weights", "pull")):
            stack.enter_context(
                mock.patch.object(learner_module, name, _timed(getattr(learner_module, name), totals, key))
            )
        steps = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            steps += learner.update().steps
        elapsed = time.perf_counter() - start
    learner.close()

    def per_step(seconds_total: float) -> float:
        return seconds_total / steps * 1e6

    parts = {
        "env_step_us": per_step(totals["env"]),
        "policy_forward_us": per_step(totals["policy"]),
        "sampling_and_buffers_us": per_step(totals["rollout"] - totals["env"] - totals["policy"]),
        "loss_and_gradient_us": per_step(totals["loss"]),
        "clip_us": per_step(totals["clip"]),
        "optimizer_step_us": per_step(totals["step"]),
        "weight_pull_us": per_step(totals["pull"]),
        "total_us": per_step(elapsed),
    }
    parts["other_us"] = parts["total_us"] - sum(v for k, v in parts.items() if k != "total_us")
    parts["steps_per_s"] = steps / elapsed
    parts["config"] = config_summary(config)
    return parts


def config_summary(config: Any) -> dict[str, Any]:
    """The settings that shape a breakdown's figures: the batch, and the fields of the network it times."""
    network = ("hidden_sizes", "numpy_grad") if config.model == "mlp" else ("lstm_size", "frame_stack")
    return {k: getattr(config, k) for k in ("model", "envs_per_worker", "t_max", *network)}


if __name__ == "__main__":  # the harness runs it as its own process, with a worker's one-thread settings
    # python -m a3c.tools.bench.breakdown [SECONDS [ENV_ID]], e.g. 60 ALE/Pong-v5
    args = sys.argv[1:]
    print(json.dumps(breakdown(*args[1:2], seconds=float(args[0]) if args else 5.0)))
