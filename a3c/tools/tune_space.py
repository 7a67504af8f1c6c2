"""The search space of ``a3c tune``: one range (or set of choices) per hyperparameter, the defaults, and the
``--space key=low:high[:log]`` overrides; and what every trial shares (``TrialSpec``). Nothing here imports
optuna: a ``Param`` asks a trial for its value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from a3c.core.config import FIELD_NAMES, Config, field_type
from a3c.core.errors import BadInput

# Numeric fields that say how a run is run or measured, not how it learns: never searched.
RUN_SETTINGS = frozenset(
    {
        "seed",
        "max_steps",
        "max_seconds",
        "target_return",
        "eval_interval",
        "eval_cpu_share",
        "eval_episodes",
        "confirm_episodes",
        "confirm_confidence",
        "checkpoint_interval",
        "keep_checkpoints",
        "max_restarts",
        "hang_timeout",
    }
)
TUNABLE = tuple(n for n in FIELD_NAMES if field_type(n) in (int, float) and n not in RUN_SETTINGS)


class TrialSpec(NamedTuple):
    """What every trial of one ``a3c tune`` shares: the env, the budget, the seed and where workers run."""

    env_id: str
    trial_seconds: float
    seed: int
    serial: bool


@dataclass(frozen=True)
class Param:
    """One hyperparameter's range: ``low``..``high`` (log-uniform when ``log``; integers for an int field),
    or one of ``choices`` when they are given."""

    name: str
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    choices: tuple[Any, ...] = ()

    def suggest(self, trial: Any) -> Any:
        """Ask an optuna trial for this parameter's value (TPE samples it; a resumed trial replays it)."""
        if self.choices:
            return trial.suggest_categorical(self.name, list(self.choices))
        if field_type(self.name) is int:
            return trial.suggest_int(self.name, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(self.name, self.low, self.high, log=self.log)

    def describe(self) -> str:
        """The range as the docs and ``--help`` write it: ``1e-4..1e-2 log``, ``one of 1, 2, 4, 8, 16``."""
        if self.choices:
            return "one of " + ", ".join(str(c) for c in self.choices)
        return f"{self.low:g}..{self.high:g}" + (" log" if self.log else "")


# Defaults for A3C on small envs (A3C paper, rl-zoo A2C ranges, our CartPole and Pendulum sweeps): scales
# that span decades (lr, entropy, clip norm, rollout length) are searched log-uniformly.
DEFAULT_SPACE: dict[str, Param] = {
    p.name: p
    for p in (
        Param("lr", 1e-4, 1e-2, log=True),
        Param("entropy_coef", 1e-4, 0.1, log=True),
        Param("t_max", 4, 32, log=True),
        Param("gamma", 0.95, 0.999),
        Param("gae_lambda", 0.9, 1.0),
        Param("max_grad_norm", 0.25, 5.0, log=True),
        Param("value_coef", 0.25, 1.0),
        Param("envs_per_worker", choices=(1, 2, 4, 8, 16)),
    )
}


def parse_space(items: tuple[str, ...], base: dict[str, Param] | None = None) -> dict[str, Param]:
    """The defaults (``base``), each ``key=low:high[:log]`` of ``items`` replacing or adding its key's range
    (``low == high`` pins a value). Bad input is BadInput naming the item and what is allowed."""
    space = dict(DEFAULT_SPACE if base is None else base)
    for item in items:
        param = parse_param(item)
        space[param.name] = param
    return space


def parse_param(item: str) -> Param:
    """One ``--space`` item, e.g. ``lr=1e-5:1e-3:log`` or ``t_max=5:20``, checked against the Config field."""
    key, sep, bounds = (part.strip() for part in item.partition("="))
    if not sep:
        raise BadInput(f"--space: {item!r} is not allowed; expected key=low:high or key=low:high:log")
    if key not in TUNABLE:
        why = "a run setting" if key in RUN_SETTINGS else "not a number" if key in FIELD_NAMES else "unknown"
        raise BadInput(f"--space: {key!r} ({why}) is not allowed; expected one of {', '.join(TUNABLE)}")
    parts = bounds.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != "log"):
        raise BadInput(f"--space: {item!r} is not allowed; expected {key}=low:high or {key}=low:high:log")
    low, high = (_bound(key, raw, item) for raw in parts[:2])
    log = len(parts) == 3
    if low > high:
        raise BadInput(f"--space: {item!r} is not allowed; expected low <= high")
    if log and low <= 0:
        raise BadInput(f"--space: {item!r} is not allowed; a log range needs low > 0")
    for value in (low, high):
        try:  # the bounds must be values the run accepts, e.g. gamma in (0, 1]
            replace(Config(env_id="-"), **{key: value}).validate()
        except BadInput as exc:
            raise BadInput(f"--space: {item!r} is not allowed: {exc}") from None
    return Param(key, low, high, log)


def _bound(key: str, raw: str, item: str) -> float:
    """One bound of ``item``: an integer for an int field, a finite number for a float field."""
    kind = field_type(key)
    try:
        value = float(raw)
        if not math.isfinite(value) or (kind is int and value != int(value)):
            raise ValueError(raw)
    except ValueError:
        expected = "an integer" if kind is int else "a finite number"
        raise BadInput(f"--space: {item!r}: {raw!r} is not allowed; expected {expected}") from None
    return int(value) if kind is int else value
