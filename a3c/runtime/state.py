"""The one bundle every child gets: what the trainer shares with its workers and its evaluator."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from a3c.algo.learner import build_shared
from a3c.algo.normalize import SharedObsStats
from a3c.algo.optim import SharedOptimizer, assert_shared
from a3c.core.config import Config
from a3c.core.devices import out_of_memory_line
from a3c.core.errors import BadInput
from a3c.core.spaces import Spaces
from a3c.core.user_code import CodeBook
from a3c.rundir.resume import restore_model, restore_obs_stats, restore_optimizer, restore_reward_stats
from a3c.runtime.counters import Counters, Heartbeats, StopSignal
from a3c.runtime.run_clock import RunClock


@dataclass(frozen=True)
class SharedState:
    """Created by the trainer before any child starts; the tensors and counters live in shared memory, so a
    child's pickled copy writes the same memory (docs/how-it-works.md, "What runs").

    model: the global actor-critic (parameters are views into one flat shared buffer).
    optimizer: the shared optimizer over that buffer (state created eagerly).
    counters, stop, heartbeats: per-slot step/update counters, the stop signal, one heartbeat per child.
    obs_stats, reward_stats: shared observation / return statistics (one slot per worker), or None.
    config, spaces, run_dir: the run every child belongs to; start_time: when it began (its wall_time is
    ``start_time.elapsed()``, monotonic: ``a3c.runtime.run_clock``).
    code: the user's objects the config names that a child cannot import by name (``a3c.core.user_code``),
    registered in each child as it unpickles this.
    hangup_ignored: the trainer was started with SIGHUP ignored (``nohup``): its children ignore it too.
    """

    config: Config
    spaces: Spaces
    run_dir: Path
    start_time: RunClock
    model: nn.Module
    optimizer: SharedOptimizer
    counters: Counters
    stop: StopSignal
    heartbeats: Heartbeats
    obs_stats: SharedObsStats | None = None
    reward_stats: SharedObsStats | None = None
    code: CodeBook = field(default_factory=CodeBook)
    hangup_ignored: bool = False

    def clock(self) -> tuple[int, int, float]:
        """The run so far, all workers: (updates, env steps, seconds of its wall time), a Learner's clock.
        The seconds count from ``start_time``, which the trainer set back by a resumed run's wall time."""
        return self.counters.total_updates, self.counters.total_steps, self.start_time.elapsed()

    def snapshot(self) -> dict[str, Any]:
        """The shared state as one instant (invariant 10): weights, optimizer moments and steps,
        counters and statistics, each copied once and back to back, before anything slow (a save) runs.
        The workers keep writing meanwhile; a checkpoint must not pair these weights with later moments.
        The copies are CPU tensors whatever the device: a checkpoint of a GPU run loads on any machine."""

        def host_copy(v: torch.Tensor) -> torch.Tensor:
            return v.detach().to("cpu", copy=True)

        with torch.no_grad():
            model_state = {k: host_copy(v) for k, v in self.model.state_dict().items()}
            optimizer_state = self.optimizer.state_dict()
            optimizer_state["state"] = {
                i: {k: host_copy(v) if isinstance(v, torch.Tensor) else v for k, v in s.items()}
                for i, s in optimizer_state["state"].items()
            }
        return {
            "model_state": model_state,
            "optimizer_state": optimizer_state,
            **self.counters.snapshot(),
            **({} if self.obs_stats is None else {"obs_norm": self.obs_stats.state_dict()}),
            **({} if self.reward_stats is None else {"reward_stats": self.reward_stats.state_dict()}),
        }


def build_state(config: Config, spaces: Spaces, resume: dict[str, Any] | None, source: str) -> SharedState:
    """The shared model, optimizer, statistics and counters, restored in place from ``resume`` (a checkpoint
    from ``load_resume_checkpoint``; ``source`` names it in errors). The run dir and start time are filled in
    by the Trainer."""
    try:
        model, optimizer = build_shared(config, spaces)  # one flat shared buffer, eager optimizer state
    except torch.OutOfMemoryError as exc:  # the network alone does not fit the GPU
        raise BadInput(f"device: {config.device!r}: {out_of_memory_line(exc)}") from None
    obs_stats = SharedObsStats(spaces.obs_shape, config.workers) if config.obs_norm else None
    reward_stats = SharedObsStats((), config.workers) if config.reward_scale else None
    if resume is not None:  # restore in place, before anything is written to the run dir
        restore_model(model, resume["model_state"], source)
        restore_optimizer(optimizer, resume["optimizer_state"], source)
        if obs_stats is not None:
            restore_obs_stats(obs_stats, resume.get("obs_norm"), source)
        if reward_stats is not None:
            restore_reward_stats(reward_stats, resume.get("reward_stats"), source)
        if "rng_state" in resume:
            torch.set_rng_state(resume["rng_state"])
    assert_shared(model, optimizer)
    counts = (
        () if resume is None else (resume["global_step"], resume["updates"], resume.get("skipped_updates", 0))
    )
    return SharedState(
        config=config,
        spaces=spaces,
        run_dir=Path(),
        start_time=RunClock.started(),
        model=model,
        optimizer=optimizer,
        counters=Counters(config.workers, *counts),
        stop=StopSignal(),
        heartbeats=Heartbeats(config.workers + 1),
        obs_stats=obs_stats,
        reward_stats=reward_stats,
    )
