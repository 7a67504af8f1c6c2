"""Several runs of one config, one per seed (``a3c train --seeds 0-4``): the seed list, where the runs go
(one parent folder, a run dir ``s<seed>`` each) and the exit code of them all."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from pathlib import Path

from a3c.core.errors import BadInput

SEEDS_HELP = "a list of seeds like 0-4 or 0,2,5 (non-negative integers, ranges low-high, no seed twice)"
MAX_SEEDS = 1000  # far above any sensible study; a typo like 0-1000000 is refused, not run


def parse_seeds(text: str, what: str = "--seeds") -> list[int]:
    """``0-4`` → [0, 1, 2, 3, 4]; ``0,2,5`` → [0, 2, 5]; ``0-2,7`` → [0, 1, 2, 7]; in the order given.
    Anything else (empty, negative, a reversed range, a seed twice, over MAX_SEEDS seeds) is BadInput."""
    seeds: list[int] = []
    for part in str(text).split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        low, high = (int(match[1]), int(match[2] or match[1])) if match else (1, 0)
        if high < low or high - low >= MAX_SEEDS:
            raise BadInput(f"{what}: {text!r} is not allowed; expected {SEEDS_HELP}")
        seeds.extend(range(low, high + 1))
        if len(seeds) > MAX_SEEDS:
            raise BadInput(f"{what}: {text!r} is not allowed; expected at most {MAX_SEEDS} seeds")
    if len(set(seeds)) != len(seeds):
        raise BadInput(f"{what}: {text!r} is not allowed; expected {SEEDS_HELP}")
    return seeds


def check_seeds(seeds: list[int] | tuple[int, ...], what: str = "seeds") -> list[int]:
    """A Python list of seeds (``a3c.train(seeds=...)``) as a list of ints, or BadInput."""
    if (
        isinstance(seeds, str | bytes)
        or not isinstance(seeds, Iterable)
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    ):
        raise BadInput(f"{what}: {seeds!r} is not allowed; expected a list of non-negative integers")
    return parse_seeds(",".join(map(str, seeds)), what) if seeds else parse_seeds("", what)


def seeds_dir(env_id: str, root: Path = Path("runs")) -> Path:
    """The default parent of a seed list's runs: ``runs/<env-id>/<YYYYmmdd-HHMMSS>-seeds`` (an env factory's
    own name for ``<env-id>``, as one run's)."""
    from a3c_envs.user_envs import run_name

    return root / run_name(env_id) / f"{time.strftime('%Y%m%d-%H%M%S')}-seeds"


def seed_run_dir(parent: Path, seed: int) -> Path:
    """The run dir of ``seed`` in a seed list's parent folder: ``<parent>/s<seed>``."""
    return Path(parent) / f"s{seed}"


def worst_exit(codes: list[int]) -> int:
    """The exit code of several runs: 0 when all finished, else the highest (143 SIGTERM > 130 SIGINT >
    1 failure): a stop by signal means the list itself did not finish."""
    return max(codes, default=0)


def stopped_by_signal(code: int) -> bool:
    """Whether a run's exit code says a signal stopped it (the seeds after it are not started)."""
    return code in (129, 130, 143)  # SIGHUP, SIGINT, SIGTERM
