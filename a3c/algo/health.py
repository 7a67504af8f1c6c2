"""Learning-health checks on the metrics rows a run already logs: an entropy that collapsed before the target
was reached (a categorical policy near one action; a Gaussian whose σ sits at its floor; a tanh-squashed
Gaussian stuck in tanh's flat tails), and a critic that explains nothing for long. Each fires at most once
per run, as a warning.

Both are symptoms a user otherwise finds only by plotting metrics.csv: a collapsed policy stops exploring
(Acrobot without a preset: every training episode at the time limit), and a dead critic (explained
variance ≈ 0) leaves the advantages as noisy as plain returns — on Pong from pixels a dead first conv layer
made the value a constant, explained variance exactly 0.000 for 1.46M steps.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass

from a3c.algo.distributions import LOG_STD_MIN
from a3c.core.records import MetricsRecord
from a3c.core.spaces import Spaces

# A categorical policy whose entropy fell below this fraction of its maximum (the uniform policy's: ln n) has
# all but stopped exploring. The maximum, not the first rows: a fast collapse is over before the first row.
COLLAPSE_FRACTION = 0.05
COLLAPSE_ROWS = 5  # consecutive rows below it: one noisy row does not count
# A tanh-squashed Gaussian has no uniform to compare with, and its σ shrinks by design; but its logged entropy
# (the Gaussian's plus the sample's log tanh Jacobian, log(1 - tanh²u) ≈ ln 4 - 2|u| in the tails, plus the
# log half range) falls without bound as the pre-squash mean u runs into saturation, where tanh's gradient
# (∝ sech² u) no longer moves it. Pendulum's preset of then without an entropy bonus failed CI at -85 nats
# (|u| ≈ 43); twelve Pendulum runs that solved dipped to -13 at their lowest (2026-12-01, seeds 0-5,
# entropy_coef 0 and 1e-3). Below -20 nats a dimension (|u| ≳ 10, sech² u < 1e-8) the mean is stuck.
SATURATED_NATS = -20.0
# A clipped Gaussian's entropy measures σ alone: Σ (log σ + ½ + ½ ln 2π). One whose log σ averages within
# this much of its lower bound (``LOG_STD_MIN``) before the target has all but stopped exploring.
SIGMA_FLOOR_MARGIN = 0.5
MIN_CHECKED_HALF_RANGE = 0.5  # σ's floor e^-5 is then at most 1.3% of the half range
_GAUSS_NATS = 0.5 + 0.5 * math.log(2 * math.pi)
# A critic whose explained variance has a median ≤ DEAD_CRITIC_EV over the last DEAD_CRITIC_WINDOW env steps,
# once the run has taken DEAD_CRITIC_STEPS, predicts the returns no better than their mean. Not exactly 0:
# an untrained critic measured 0.0001-0.0035 (CartPole, value_coef 0); a dead one on Pong -0.0009-0.0003.
# Not before 400k steps: a live Pong critic (the preset's 80-step updates) was still at or below 0.078 per 40k
# steps up to 200k (where the check first fired, falsely), 0.26 at 240k and 0.72 by 400k.
DEAD_CRITIC_EV = 0.02
DEAD_CRITIC_STEPS = 400_000
DEAD_CRITIC_WINDOW = 100_000


@dataclass(frozen=True)
class HealthWarning:
    """One warning: its kind ("entropy_collapse" or "dead_critic"), when it fired, and the line to show."""

    kind: str
    global_step: int
    wall_time: float
    message: str


def max_entropy(spaces: Spaces) -> float | None:
    """The uniform policy's entropy for ``spaces``' actions (nats): ln n, Σ ln nᵢ per dimension, n ln 2 for
    bits; None for Box actions."""
    if spaces.continuous:
        return None
    if spaces.action_nvec:
        return sum(math.log(n) for n in spaces.action_nvec)
    if spaces.multi_binary:
        return spaces.n_actions * math.log(2)
    return math.log(spaces.n_actions) if spaces.n_actions > 1 else None


@dataclass(frozen=True)
class EntropyFloor:
    """A Gaussian policy's entropy floor (nats, summed over the action dimensions) and what being below it
    means, for the warning."""

    nats: float
    meaning: str


def box_entropy_floor(spaces: Spaces, squash: str, has_target: bool = True) -> EntropyFloor | None:
    """The entropy below which a Gaussian policy is stuck: with tanh, Σ (``SATURATED_NATS`` + ln half range)
    over the action dimensions (the mean in the flat tails); with clip, log σ within ``SIGMA_FLOOR_MARGIN``
    of its lower bound on average. None for other actions or a zero-width dimension; with clip also for a
    run without a target (a policy that converged is not stuck) or a half range under
    ``MIN_CHECKED_HALF_RANGE`` (σ's floor is no longer small beside it)."""
    if not spaces.continuous:
        return None
    bounds = zip(spaces.action_low, spaces.action_high, strict=True)
    half_ranges = [0.5 * (high - low) for low, high in bounds]
    if squash != "tanh":
        if not has_target or min(half_ranges) < MIN_CHECKED_HALF_RANGE:
            return None
        per_dim = LOG_STD_MIN + SIGMA_FLOOR_MARGIN + _GAUSS_NATS
        why = "the Gaussian's σ sits at its floor and no longer explores; try a larger init_log_std or a "
        return EntropyFloor(spaces.n_actions * per_dim, why + "small entropy_coef")
    if not all(h > 0 for h in half_ranges):
        return None  # a zero-width dimension has no log-density to check
    why = "the Gaussian's mean sits in tanh's flat tails, where its gradient vanishes; try a larger "
    return EntropyFloor(
        sum(SATURATED_NATS + math.log(h) for h in half_ranges), why + "mean_l2_coef or squash=clip"
    )


class LearningHealth:
    """Feeds on metrics rows (any worker's, in arrival order); returns the warnings that fire.

    Args:
        max_entropy: the uniform policy's entropy (``max_entropy(spaces)``); a collapse is below
            ``COLLAPSE_FRACTION`` of it. None: a Gaussian, whose σ shrinks by design as the policy sharpens.
        box_floor: a Gaussian's ``box_entropy_floor``; a collapse is below it.
    """

    def __init__(self, max_entropy: float | None, box_floor: EntropyFloor | None = None):
        self.max_entropy = max_entropy
        self.box_floor = box_floor
        self.below = 0
        self.recent: deque[tuple[int, float]] = deque()  # (global_step, explained variance)
        self.first_step: int | None = None  # of the first row seen (a resumed run starts past 0)
        self.fired: set[str] = set()  # kinds already warned of (a resume restores them: once per run)

    def observe(self, row: MetricsRecord, solved: bool) -> list[HealthWarning]:
        """Take one metrics row; ``solved``: the run already reached its target (a collapse is fine then)."""
        found = []
        checked = self.max_entropy or self.box_floor is not None
        if checked and "entropy_collapse" not in self.fired and not solved:
            found += self._entropy(row)
        if "dead_critic" not in self.fired:
            found += self._critic(row)
        self.fired.update(w.kind for w in found)
        return found

    def _entropy(self, row: MetricsRecord) -> list[HealthWarning]:
        if not math.isfinite(row.entropy):
            return []
        if self.max_entropy:
            floor = COLLAPSE_FRACTION * self.max_entropy
            what = f"(uniform: {self.max_entropy:.3g}) at step {row.global_step:,}, before the target: "
            what += "the policy has almost stopped exploring; try a larger entropy_coef or a smaller lr"
        else:
            floor, meaning = self.box_floor.nats, self.box_floor.meaning
            what = f"(floor {floor:.3g}) at step {row.global_step:,}, before the target: {meaning}"
        self.below = self.below + 1 if row.entropy < floor else 0
        if self.below < COLLAPSE_ROWS:
            return []
        message = f"entropy collapsed to {row.entropy:.3g} {what}"
        return [HealthWarning("entropy_collapse", row.global_step, row.wall_time, message)]

    def _critic(self, row: MetricsRecord) -> list[HealthWarning]:
        if not math.isfinite(row.explained_variance):
            return []
        self.recent.append((row.global_step, row.explained_variance))
        if self.first_step is None:
            self.first_step = row.global_step
        while self.recent and self.recent[0][0] < row.global_step - DEAD_CRITIC_WINDOW:
            self.recent.popleft()
        # A whole window seen (since a resume too), not a median of the first row or two.
        if row.global_step < DEAD_CRITIC_STEPS or row.global_step - self.first_step < DEAD_CRITIC_WINDOW:
            return []
        median = statistics.median(ev for _, ev in self.recent)
        if median > DEAD_CRITIC_EV:
            return []
        return [
            HealthWarning(
                "dead_critic",
                row.global_step,
                row.wall_time,
                f"the critic explains nothing: explained variance {median:.3g} (median of the last "
                f"{DEAD_CRITIC_WINDOW:,} steps) at step {row.global_step:,}; check the value loss, lr and "
                "value_coef (metrics.csv)",
            )
        ]
