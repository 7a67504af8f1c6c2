"""Greedy evaluation of a saved policy, as ``a3c evaluate`` and ``Policy.evaluate`` report it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from a3c.core.config import MAX_EPISODES
from a3c.core.errors import BadInput
from a3c.tools.video import play_episodes

if TYPE_CHECKING:
    from a3c.rundir.checkpoints import SavedPolicy


def check_episodes_and_seed(episodes: int, seed: int) -> None:
    """BadInput unless ``episodes`` is in [1, MAX_EPISODES] (played as one vector env) and the seeds
    ``seed .. seed + episodes - 1`` are valid env seeds."""
    if isinstance(episodes, bool) or not isinstance(episodes, int) or not 1 <= episodes <= MAX_EPISODES:
        raise BadInput(f"--episodes: {episodes!r} is not allowed; expected an integer in [1, {MAX_EPISODES}]")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31 - episodes:
        raise BadInput(f"--seed: {seed!r} is not allowed; expected an integer in [0, 2**31 - episodes)")


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """torch on one thread while the greedy episodes play, as in the run's evaluator, then the caller's count
    again. Its forward passes are a few envs at a time: more threads gain little, and beside another busy
    process torch's thread pool spins (docs/performance.md: 7x the CPU time for one Pong game)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def evaluate_policy(
    saved: SavedPolicy, episodes: int, seed: int, folder: Path | None = None
) -> dict[str, Any]:
    """Play ``episodes`` greedy episodes of ``saved`` seeded from ``seed`` (``folder``: one video each) and
    return {checkpoint, env_id, episodes, mean/std/min/max_return, mean_length, seed[, videos]}."""
    check_episodes_and_seed(episodes, seed)
    with one_torch_thread():
        returns, lengths, videos = play_episodes(saved, episodes, seed, folder)
    return {
        "checkpoint": str(saved.path),
        "env_id": saved.config.env_id,
        "episodes": episodes,
        "mean_return": float(returns.mean()),
        "std_return": float(returns.std()),
        "min_return": float(returns.min()),
        "max_return": float(returns.max()),
        "mean_length": float(lengths.mean()),
        "seed": seed,
        **({"videos": videos} if folder else {}),
    }
