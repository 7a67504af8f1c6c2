"""What the bench measures: the env, its target, the warm-up and the settings compared."""

from __future__ import annotations

from dataclasses import dataclass

ENV_ID = "CartPole-v1"


TARGET = 475.0


WARMUP_S = 2.0


RAY_START_S = 15.0  # a Ray run's budget also covers starting Ray (its metrics begin after that)


CLASSIC_T_MAX = (
    20  # the classic A3C setting of the popular repositories: one env per worker, 20-step rollouts
)


@dataclass(frozen=True)
class BenchPlan:
    """What one bench run measures."""

    seeds: int = 5
    seconds: float = 20.0  # per throughput run, after the warm-up
    repeats: int = 2  # runs of each throughput setting (their mean is reported)
    reeval_episodes: int = 100
    breakdown_seconds: float = 5.0
