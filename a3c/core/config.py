"""The resolved training config: a frozen dataclass with one help line per field, and how it is built.
It is long because each of its ~40 fields carries its documentation (help, option, choices) as data:
the CLI and ``a3c config-keys`` are generated from it, so this is the one place they are written.

Precedence, lowest first: the dataclass defaults, values derived from the env (target from its spec's
``reward_threshold``), the env's preset (``envs/presets/<env-id>.toml``), then command-line options and
``--set key=value``.

Each field's ``metadata`` is the one place its documentation lives:

- ``help``: one line, lower case, no final period (``a3c config-keys``; an option's help is made from it);
- ``option``: the field also has an ``a3c train`` option with this flag, e.g. ``"--max-steps"`` (a bool
  field: a flag that sets it true); ``a3c.training.options`` makes the option from the field;
- ``shown_default``: what the option's help shows as its default, ``{}`` standing for the built-in one
  (without it: the built-in default, if not None);
- ``choices``: the values allowed, checked by ``validate`` (and by the option, if any).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import reprlib
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any

from a3c.core import user_code
from a3c.core.cpus import AUTO, auto_workers, usable_cpus
from a3c.core.devices import ALLOWED as ALLOWED_DEVICES
from a3c.core.devices import is_device_name
from a3c.core.errors import BadInput

# Bounds of the counts (the worker count is bounded by the machine too: a3c/core/limits.py). Evaluation
# episodes are played as one vector env, all at once; more envs per worker than this gain nothing.
MAX_WORKERS, MAX_ENVS_PER_WORKER, MAX_EPISODES = 1024, 1024, 1000
# Below this a healthy child under load (a long update, 8 workers on 2 cores) would be taken for hung.
MIN_HANG_TIMEOUT_S = 5.0

# The networks a3c builds itself (``model``); any other value is a reference to the user's builder.
BUILTIN_MODELS = ("mlp", "cnn")
# The MLP's hidden-layer activations (``activation``).
ACTIVATIONS = ("tanh", "relu")

# The shown default of an option whose field presets usually set, and of one the env's spaces derive too.
PRESET_ELSE = "the env's preset, else {}"
PRESET_DERIVED_ELSE = "the env's preset, else derived from its spaces, else {}"


@dataclass(frozen=True)
class Config:
    """One run's settings, frozen; each field's ``metadata`` documents it and ``validate()`` checks them.
    It is long because of that metadata (see the module docstring): declarations, not logic."""

    env_id: str = field(metadata={"help": "Gymnasium env id"})
    env_kwargs: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "help": "keyword arguments of every env the run makes (gymnasium.make), e.g. continuous=true; "
            "a resume keeps them",
            "shown_default": "none",
        },
    )
    seed: int = field(
        default=0, metadata={"help": "seed of every random stream of the run", "option": "--seed"}
    )
    workers: int = field(
        default=AUTO,  # type: ignore[assignment]  # a count once constructed (__post_init__)
        metadata={
            "help": "worker processes (each with its own envs); auto: one per CPU this process may use "
            "(less one above 4 CPUs)",
            "option": "--workers",
            "shown_default": PRESET_ELSE,
            "auto": True,
        },
    )
    envs_per_worker: int = field(
        default=1,
        metadata={
            "help": "envs each worker steps as one batch",
            "option": "--envs-per-worker",
            "shown_default": PRESET_DERIVED_ELSE,
        },
    )
    t_max: int = field(default=20, metadata={"help": "rollout length: env steps per env between updates"})
    gamma: float = field(
        default=0.99,
        metadata={
            "help": "discount factor, in (0, 1] (Box actions on flat observations derive 0.98-0.99 from the "
            "episode limit)"
        },
    )
    gae_lambda: float = field(
        default=1.0, metadata={"help": "GAE λ in [0, 1]; 1 = n-step returns (A3C paper)"}
    )
    optimizer: str = field(
        default="adam",
        metadata={
            "help": "shared optimizer: adam, rmsprop (torch's) or rmsprop_tf (TensorFlow's, SB3's Atari one)",
            "choices": ("adam", "rmsprop", "rmsprop_tf"),
        },
    )
    lr: float = field(
        default=1e-3,
        metadata={"help": "learning rate, > 0 (derived: 1e-4 for images)"},
    )
    lr_schedule: str = field(
        default="constant",
        metadata={
            "help": "learning rate over the run: constant, or linear decay from lr to 0 at the end of the "
            "budget (max_steps or max_seconds, whichever is further along)",
            "choices": ("constant", "linear"),
        },
    )
    lr_decay_start: float = field(
        default=0.0,
        metadata={
            "help": "lr_schedule linear: the share of the budget, in [0, 1), at lr before the decay to 0 "
            "over the rest (0: from the start)"
        },
    )
    optimizer_eps: float | None = field(
        default=None,
        metadata={
            "help": "optimizer epsilon, > 0; none: the optimizer's own (adam 1e-8, both rmsprops 1e-5)"
        },
    )
    value_coef: float = field(default=0.5, metadata={"help": "weight of the value loss"})
    entropy_coef: float = field(
        default=0.01,
        metadata={"help": "weight of the entropy bonus (derived: 0 for Box actions, 1e-3 with squash tanh)"},
    )
    max_grad_norm: float = field(default=0.5, metadata={"help": "global gradient-norm clip; <= 0 disables"})
    hidden_sizes: tuple[int, ...] = field(
        default=(64, 64), metadata={"help": "hidden layer widths, e.g. 64,64"}
    )
    shared_body: bool = field(default=False, metadata={"help": "one body for policy and value heads"})
    activation: str = field(
        default="tanh",
        metadata={
            "help": "mlp: the hidden layers' activation, tanh or relu (cnn: always relu, the A3C paper's)",
            "choices": ACTIVATIONS,
        },
    )
    model: str = field(
        default="mlp",
        metadata={
            "help": "network: mlp (flat observations), cnn (images, the A3C paper's), or pkg.module:name of "
            "your builder (observation_space, action_space) -> torch.nn.Module (docs/api.md, Your network)",
            "option": "--model",
            "shown_default": "cnn for images, else mlp",
        },
    )
    lstm_size: int = field(default=0, metadata={"help": "cnn: LSTMCell width after the conv net; 0: none"})
    frame_stack: int = field(
        default=1,
        metadata={
            "help": "image envs: frames per observation, newest last (derived: 4 for cnn without an LSTM)"
        },
    )
    wrappers: tuple[str, ...] = field(
        default=(),
        metadata={
            "help": "wrappers of every env the run makes, in order, each a pkg.module:Name of a callable "
            "env -> env (repeatable); a resume keeps them",
            "option": "--wrapper",
            "shown_default": "none",
        },
    )
    gaussian_std: str = field(
        default="learned",
        metadata={
            "help": "Box actions: log σ learned per dimension (learned) or a head output (state)",
            "choices": ("learned", "state"),
        },
    )
    init_log_std: float = field(
        default=0.0, metadata={"help": "Box actions: initial log σ, in [-4.5, 1.5] (log σ stays in (-5, 2))"}
    )
    squash: str = field(
        default="clip",
        metadata={
            "help": "Box actions: Gaussian samples clipped to the bounds (clip) or squashed (tanh; "
            "derived for flat observations)",
            "choices": ("clip", "tanh"),
        },
    )
    mean_l2_coef: float = field(
        default=1e-3,
        metadata={
            "help": "squash tanh: weight of an L2 pull on the Gaussian's pre-squash mean, so it cannot run "
            "into tanh's flat tails and stay there; 0 disables"
        },
    )
    obs_norm: bool = field(
        default=False, metadata={"help": "normalise observations by running stats shared by all workers"}
    )
    reward_scale: bool = field(
        default=False,
        metadata={
            "help": "scale rewards by the running std of the discounted return (derived: true for flat "
            "observations)"
        },
    )
    numpy_grad: bool = field(
        default=True,
        metadata={
            "help": "MLP loss gradient in closed form in numpy (same numbers, ~10x faster than autograd)"
        },
    )
    device: str = field(
        default="auto",
        metadata={
            "help": "where the network trains and acts: auto (the first GPU for cnn and your networks when "
            "CUDA is there, else the CPU; the mlp stays on the CPU), cpu, cuda or cuda:N (docs/gpu.md)",
            "option": "--device",
        },
    )
    max_steps: int | None = field(
        default=None,
        metadata={
            "help": "stop after this many env steps (all workers)",
            "option": "--max-steps",
            "shown_default": "no limit",
        },
    )
    max_seconds: float | None = field(
        default=None,
        metadata={
            "help": "stop after this many seconds",
            "option": "--max-seconds",
            "shown_default": "no limit",
        },
    )
    target_return: float | None = field(
        default=None,
        metadata={
            "help": "stop when the evaluator's mean return reaches this",
            "option": "--target-return",
            "shown_default": "the preset's, else the env spec's reward_threshold",
        },
    )
    eval_interval: float = field(
        default=2.0,
        metadata={
            "help": "minimum seconds between evaluations",
            "option": "--eval-interval",
            "shown_default": PRESET_DERIVED_ELSE,
        },
    )
    eval_interval_steps: int | None = field(
        default=None,
        metadata={
            "help": "evaluate every this many global steps instead of by time (none: by eval_interval); a "
            "seeded --serial run then evaluates at the same steps on any machine"
        },
    )
    metrics_interval_steps: int | None = field(
        default=None,
        metadata={
            "help": "a metrics row every this many of a worker's steps instead of about once a second (none: "
            "by time); a seeded --serial run then writes the same rows on any machine"
        },
    )
    eval_max_steps: int | None = field(
        default=None,
        metadata={
            "help": "a greedy episode (evaluations, a3c evaluate, --video) ends after this many steps; none: "
            "the env's time limit, else 10,000"
        },
    )
    eval_cpu_share: float = field(
        default=0.05,
        metadata={
            "help": "the evaluator's pauses keep its evaluating to this share of its time, in (0, 1] (4 "
            "times that after an evaluation at the target, which played a confirmation), but never "
            "longer than the run's age nor sqrt(2 x age x evaluation CPU-s / workers)"
        },
    )
    eval_episodes: int = field(
        default=10,
        metadata={
            "help": "greedy episodes per evaluation",
            "option": "--eval-episodes",
            "shown_default": PRESET_ELSE,
        },
    )
    confirm_episodes: int = field(
        default=0,
        metadata={
            "help": "greedy episodes on fresh seeds that must confirm an evaluation at the target (0: none; "
            "derived for any target: 100, fewer for long episodes, at least 30)"
        },
    )
    confirm_confidence: float = field(
        default=0.95,
        metadata={
            "help": "a confirmation holds when the lower confidence bound at this level of its games' mean "
            "reaches the target, in [0.5, 1) (0.5: the mean itself)"
        },
    )
    tensorboard: bool = field(
        default=False,
        metadata={
            "help": "also write TensorBoard event files to RUN_DIR/tensorboard (extra `tensorboard`)",
            "option": "--tensorboard",
        },
    )
    track: str = field(
        default="none",
        metadata={
            "help": "log the run to an experiment tracker: none, mlflow (MLFLOW_TRACKING_URI; extra "
            "`mlflow`) or wandb (WANDB_MODE, WANDB_PROJECT; extra `wandb`)",
            "option": "--track",
            "choices": ("none", "mlflow", "wandb"),
        },
    )
    checkpoint_interval: float = field(
        default=60.0,
        metadata={
            "help": "seconds between checkpoints (checkpoints/last.pt; --set keep_checkpoints=N older ones "
            "kept)",
            "option": "--checkpoint-interval",
        },
    )
    keep_checkpoints: int = field(default=3, metadata={"help": "earlier checkpoints kept beside last.pt"})
    max_restarts: int = field(
        default=3,
        metadata={"help": "restarts of one crashed child allowed within 10 minutes (Ray: over the run)"},
    )
    hang_timeout: float = field(
        default=60.0,
        metadata={
            "help": "a child silent (no heartbeat) this many seconds counts as crashed and is restarted",
            "option": "--hang-timeout",
        },
    )
    backend: str = field(
        default="local",
        metadata={
            "help": "where workers run: local (processes on this machine) or ray (actors on a Ray cluster, "
            "extra `ray`)",
            "option": "--backend",
            "choices": ("local", "ray"),
        },
    )
    ray_address: str | None = field(
        default=None,
        metadata={
            "help": "with backend ray: the cluster to join (auto or HOST:PORT); none starts one here",
            "option": "--ray-address",
        },
    )
    sync_interval: float = field(
        default=1.0,
        metadata={"help": "ray backend: seconds between a node's exchanges with the global model"},
    )
    sync_combine: str = field(
        default="sum",
        metadata={
            "help": "ray backend: how nodes' parameter changes combine in the global model: sum (as more "
            "A3C workers would) or mean (each change divided by the node count)",
            "choices": ("sum", "mean"),
        },
    )
    ray_shards: int = field(
        default=1,
        metadata={"help": "ray backend: parameter shards, each holding a contiguous slice of the weights"},
    )

    def __post_init__(self) -> None:
        if self.workers == AUTO:  # the count for this process's CPUs (a3c/core/cpus.py)
            object.__setattr__(self, "workers", auto_workers(usable_cpus()))

    def validate(self) -> Config:
        """Raise BadInput naming the first invalid field, its value and what is allowed; return self."""
        finite = math.isfinite
        checks: list[tuple[str, bool, str]] = [
            ("seed", 0 <= self.seed < 2**32, "an integer in [0, 2**32)"),
            ("workers", 1 <= self.workers <= MAX_WORKERS, f"an integer in [1, {MAX_WORKERS}]"),
            (
                "envs_per_worker",
                1 <= self.envs_per_worker <= MAX_ENVS_PER_WORKER,
                f"an integer in [1, {MAX_ENVS_PER_WORKER}]",
            ),
            ("t_max", self.t_max >= 1, "an integer >= 1"),
            ("gamma", 0 < self.gamma <= 1, "a number in (0, 1]"),
            ("gae_lambda", 0 <= self.gae_lambda <= 1, "a number in [0, 1]"),
            self._choice("optimizer"),
            ("lr", self.lr > 0 and finite(self.lr), "a finite number > 0"),
            (
                "optimizer_eps",
                self.optimizer_eps is None or (self.optimizer_eps > 0 and finite(self.optimizer_eps)),
                "a finite number > 0, or none (the optimizer's own default)",
            ),
            ("value_coef", self.value_coef >= 0 and finite(self.value_coef), "a finite number >= 0"),
            ("entropy_coef", self.entropy_coef >= 0 and finite(self.entropy_coef), "a finite number >= 0"),
            ("mean_l2_coef", self.mean_l2_coef >= 0 and finite(self.mean_l2_coef), "a finite number >= 0"),
            ("max_grad_norm", not math.isnan(self.max_grad_norm), "a number (<= 0 disables clipping)"),
            (
                "hidden_sizes",
                len(self.hidden_sizes) >= 1 and min(self.hidden_sizes) >= 1,
                "one or more integers >= 1, e.g. 64,64",
            ),
            ("max_steps", self.max_steps is None or self.max_steps >= 1, "an integer >= 1"),
            self._choice("lr_schedule"),
            ("lr_decay_start", 0 <= self.lr_decay_start < 1, "a number in [0, 1)"),
            (
                "max_seconds",
                self.max_seconds is None or (self.max_seconds > 0 and finite(self.max_seconds)),
                "a finite number > 0",
            ),
            ("target_return", self.target_return is None or finite(self.target_return), "a finite number"),
            ("eval_interval", self.eval_interval > 0 and finite(self.eval_interval), "a finite number > 0"),
            (
                "eval_interval_steps",
                self.eval_interval_steps is None or self.eval_interval_steps >= 1,
                "an integer >= 1, or none (evaluations by time)",
            ),
            (
                "metrics_interval_steps",
                self.metrics_interval_steps is None or self.metrics_interval_steps >= 1,
                "an integer >= 1, or none (a row about once a second)",
            ),
            ("eval_cpu_share", 0 < self.eval_cpu_share <= 1, "a number in (0, 1]"),
            (
                "eval_max_steps",
                self.eval_max_steps is None or self.eval_max_steps >= 1,
                "an integer >= 1, or none (the env's time limit)",
            ),
            ("eval_episodes", 1 <= self.eval_episodes <= MAX_EPISODES, f"an integer in [1, {MAX_EPISODES}]"),
            (
                "confirm_episodes",
                0 <= self.confirm_episodes <= MAX_EPISODES,
                f"an integer in [0, {MAX_EPISODES}]",
            ),
            ("confirm_confidence", 0.5 <= self.confirm_confidence < 1, "a number in [0.5, 1)"),
            (
                "confirm_episodes",
                self.confirm_episodes != 1 or self.confirm_confidence == 0.5,
                "0 (no confirmation) or at least 2 (one game has no spread to bound its mean by; or set "
                "confirm_confidence 0.5)",
            ),
            (
                "checkpoint_interval",
                self.checkpoint_interval > 0 and finite(self.checkpoint_interval),
                "a finite number of seconds > 0",
            ),
            ("keep_checkpoints", self.keep_checkpoints >= 0, "an integer >= 0"),
            ("max_restarts", self.max_restarts >= 0, "an integer >= 0"),
            (
                "hang_timeout",
                self.hang_timeout >= MIN_HANG_TIMEOUT_S and finite(self.hang_timeout),
                f"a finite number of seconds >= {MIN_HANG_TIMEOUT_S:g}",
            ),
        ]
        checks += [
            (
                "model",
                self.model in BUILTIN_MODELS or ":" in self.model,
                "mlp, cnn, or pkg.module:name of a callable (observation_space, action_space) -> "
                "torch.nn.Module",
            ),
            self._choice("activation"),
            ("lstm_size", self.lstm_size >= 0, "an integer >= 0 (0: no LSTM)"),
            (
                "frame_stack",
                1 <= self.frame_stack <= 4,
                "an integer in [1, 4] (the conv net takes 4 channels)",
            ),
            self._choice("gaussian_std"),
            (
                "init_log_std",
                -4.5 <= self.init_log_std <= 1.5,
                "a number in [-4.5, 1.5] (inside log σ's bounds (-5, 2), where it can still move)",
            ),
            self._choice("squash"),
            ("device", is_device_name(self.device), ALLOWED_DEVICES),
            self._choice("backend"),
            self._choice("track"),
            (
                "sync_interval",
                finite(self.sync_interval) and 0.05 <= self.sync_interval <= 3600,
                "a number of seconds in [0.05, 3600]",
            ),
            self._choice("sync_combine"),
            ("ray_shards", 1 <= self.ray_shards <= 64, "an integer in [1, 64]"),
        ]
        check_env_kwargs(self.env_kwargs)
        checks.append(
            (
                "wrappers",
                all(isinstance(w, str) and _WRAPPER.fullmatch(w) for w in self.wrappers),
                "references pkg.module:Name of callables env -> env",
            )
        )
        for name, ok, allowed in checks:
            if not ok:
                raise BadInput(f"{name}: {getattr(self, name)!r} is not allowed; expected {allowed}")
        if self.eval_interval_steps is not None and self.backend == "ray":
            raise BadInput(
                f"eval_interval_steps: {self.eval_interval_steps!r} is not allowed with backend ray; "
                "expected none there (the Ray driver evaluates by time: eval_interval)"
            )
        if self.lr_decay_start and self.lr_schedule != "linear":
            raise BadInput(
                f"lr_decay_start: {self.lr_decay_start!r} is not allowed with lr_schedule "
                f"{self.lr_schedule!r}; expected 0 (or lr_schedule linear)"
            )
        if self.lr_schedule == "linear" and self.max_steps is None and self.max_seconds is None:
            raise BadInput(
                "lr_schedule: 'linear' needs a budget to decay over; set --max-steps or --max-seconds"
            )
        return self

    def _choice(self, name: str) -> tuple[str, bool, str]:
        """The check of a field with ``choices``: its name, whether its value is one, what is allowed."""
        allowed = FIELDS[name].metadata["choices"]
        return name, getattr(self, name) in allowed, " or ".join(allowed)

    @property
    def steps_per_update(self) -> int:
        """Env steps one worker update consumes: t_max × envs_per_worker."""
        return self.t_max * self.envs_per_worker

    def to_dict(self) -> dict[str, Any]:
        """{field name: value}, as saved in checkpoints and read back by ``from_dict``."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Config:
        """Rebuild a config saved with ``to_dict`` (e.g. from a checkpoint); the ``RETIRED_FIELDS`` an older
        a3c saved are dropped, other unknown keys are an error."""
        kept = {k: v for k, v in values.items() if k not in RETIRED_FIELDS}
        return cls(**{k: coerce(k, v) for k, v in known_keys(kept, "config").items()})


# What a3c passes to an env itself: an env keyword argument may not set them.
RESERVED_ENV_KWARGS = ("render_mode", "seed", "training", "frame_stack", "encode", "native", "wrappers")
# A wrapper's reference (a3c.core.user_code): module:qualname, where an object passed in Python may carry a
# <lambda>, <locals> or a #2 in its name.
_WRAPPER = re.compile(r"[A-Za-z_][\w.]*:[\w.<>#()]+")


# How deep an env keyword argument's value may nest (a list in a list ...): far more than an env needs, far
# less than Python's readers and writers of JSON and TOML recurse through before a RecursionError.
MAX_ENV_KWARGS_DEPTH = 32


class NestedTooDeep(BadInput):
    """A value nested deeper than ``MAX_ENV_KWARGS_DEPTH`` levels."""


def too_deep(name: str, key: str | None) -> NestedTooDeep:
    """The error of ``name``'s (a field, an option, a file) value of ``key`` (None: a value whose key no
    reader got to) nested deeper than allowed."""
    what = "a value" if key is None else repr(key)
    return NestedTooDeep(
        f"{name}: {what} is nested more than {MAX_ENV_KWARGS_DEPTH} levels deep; expected JSON values "
        f"nested at most {MAX_ENV_KWARGS_DEPTH} levels"
    )


def nesting_depth(value: Any, limit: int = MAX_ENV_KWARGS_DEPTH) -> int:
    """How many lists, tuples and dicts ``value`` nests (``[[1]]``: 2; a number: 0), counted without
    recursion and only up to ``limit + 1``: enough to tell too deep from deep enough."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, list | tuple | dict):
            depth += 1
            deepest = max(deepest, depth)
            if depth > limit:
                return deepest
            stack.extend((child, depth) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def check_depth(kwargs: dict[str, Any], name: str = "env_kwargs") -> dict[str, Any]:
    """``kwargs`` if no value nests more than ``MAX_ENV_KWARGS_DEPTH`` levels; else BadInput naming the
    key."""
    for key, value in kwargs.items():
        if nesting_depth(value) > MAX_ENV_KWARGS_DEPTH:
            raise too_deep(name, key)
    return kwargs


def check_env_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` if they can be an env's keyword arguments: identifier keys, none that a3c sets itself, JSON
    values (they are saved in config.json and checkpoints) nested at most ``MAX_ENV_KWARGS_DEPTH`` levels;
    else BadInput."""
    check_depth(kwargs)
    ok = all(isinstance(k, str) and k.isidentifier() and k not in RESERVED_ENV_KWARGS for k in kwargs)
    try:
        json.dumps(kwargs, allow_nan=False)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise BadInput(
            f"env_kwargs: {kwargs!r} is not allowed; expected keyword names mapped to JSON values (true, 3, "
            f'0.5, "text", null, lists), none of {", ".join(RESERVED_ENV_KWARGS)}'
        )
    return kwargs


FIELDS = {f.name: f for f in fields(Config)}
FIELD_NAMES = tuple(FIELDS)
# The fields of the Ray backend's gradient mode, removed with it (docs/ray.md). The config.json and the
# checkpoints of runs saved before hold them, so ``from_dict`` drops them (a resume of such a run goes on in
# the node mode); given as a setting they are unknown keys, and the error says why.
RETIRED_FIELDS = ("ray_mode", "sync_every", "ray_overlap")
RETIRED_WHY = "a field of the Ray backend's gradient mode, which was removed: node mode is the Ray backend"
_TYPES = typing.get_type_hints(Config)


def field_type(name: str, cls: type | None = None) -> Any:
    """The type of field ``name`` of Config (or of ``cls``, a dataclass) without ``| None``: ``int`` for
    ``max_steps: int | None``."""
    hint = (_TYPES if cls is None else typing.get_type_hints(cls))[name]
    if isinstance(hint, types.UnionType) and type(None) in typing.get_args(hint):
        return next(a for a in typing.get_args(hint) if a is not type(None))
    return hint


def unknown_key(key: str) -> str:
    """``unknown key 'KEY'``, and why when it is one of the ``RETIRED_FIELDS``."""
    return f"unknown key {key!r}" + (f" ({RETIRED_WHY})" if key in RETIRED_FIELDS else "")


def known_keys(values: dict[str, Any], source: str) -> dict[str, Any]:
    """``values`` unchanged if every key is a Config field; else BadInput naming ``source`` and the key."""
    unknown = sorted(set(values) - set(FIELD_NAMES))
    if unknown:
        raise BadInput(f"{source}: {unknown_key(unknown[0])}; allowed: {', '.join(FIELD_NAMES)}")
    return values


def coerce(name: str, value: Any) -> Any:
    """Turn ``value`` (a TOML/JSON value or a command-line string) into the type of field ``name``."""
    base = field_type(name)
    if FIELDS[name].metadata.get("auto") and isinstance(value, str) and value.strip().lower() == AUTO:
        return AUTO  # resolved to a count when the run is set up
    optional = base is not _TYPES[name]
    if optional and (value is None or (isinstance(value, str) and value.lower() in ("none", "null", ""))):
        return None
    try:
        if base is bool:
            if isinstance(value, str):
                if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError
                return value.lower() in ("true", "1", "yes")
            return bool(value)
        if typing.get_origin(base) is dict:
            # "a=1,b=[2, 3]": split at the commas that start a new key
            items = re.split(r",\s*(?=[A-Za-z_]\w*\s*=)", value) if isinstance(value, str) else value
            return parse_kwargs(items, name)
        if typing.get_origin(base) is tuple:
            return _to_tuple(typing.get_args(base)[0], value)
        if base is int:
            return _to_int(value)
        return base(value)
    except NestedTooDeep:  # already one line naming the field and the key
        raise
    except (TypeError, ValueError, OverflowError):
        kinds = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
        if typing.get_origin(base) is tuple and typing.get_args(base)[0] is str:
            kinds[base] = "a list of pkg.module:Name strings"
        kind = kinds.get(
            base, "key=value items" if typing.get_origin(base) is dict else "comma-separated integers"
        ) + (f" or {AUTO}" if FIELDS[name].metadata.get("auto") else "")
        raise BadInput(f"{name}: {_shown(value)} is not allowed; expected {kind}") from None


def _shown(value: Any) -> str:
    """``repr(value)``, or an abridged one (``[[[[[[...]]]]]]``) for a value nested past what repr recurses
    through."""
    try:
        return repr(value)
    except RecursionError:
        return reprlib.repr(value)


def _to_tuple(kind: type, value: Any) -> tuple:
    """A tuple of ``kind`` (int: hidden_sizes; str: wrappers' references) from a list or a comma-separated
    string; TypeError/ValueError when an item is not one."""
    items = value.split(",") if isinstance(value, str) else value
    if kind is str:
        if not isinstance(items, list | tuple) or not all(isinstance(x, str) for x in items):
            raise TypeError(items)
        return tuple(x.strip() for x in items)
    return tuple(int(x) for x in items)


def _to_int(value: Any) -> int:
    """An exact integer from 3, "3" or "1e6"; 2.5, "2.5" and inf are ValueError/OverflowError."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    number = float(value)
    if number != int(number):
        raise ValueError(value)
    return int(number)


def parse_kwargs(items: Any, name: str = "env_kwargs") -> dict[str, Any]:
    """Keyword arguments from a mapping (a TOML table, JSON) or from ``key=value`` strings, each value read
    as JSON (``true``, ``3``, ``0.5``, ``[1, 2]``, ``null``; True/False/None too), else kept as text."""
    if isinstance(items, dict):
        return check_depth(dict(items), name)
    if not isinstance(items, list | tuple):
        raise ValueError(items)
    parsed: dict[str, Any] = {}
    for item in items:
        key, sep, raw = str(item).partition("=")
        if not sep or not key.strip():
            raise BadInput(f"{name}: {item!r} is not allowed; expected key=value, e.g. continuous=true")
        raw = raw.strip()
        words = {"true": True, "false": False, "none": None, "null": None}
        try:
            value = words[raw.lower()] if raw.lower() in words else json.loads(raw)
        except ValueError:
            value = raw
        except RecursionError:  # nested past what the JSON reader recurses through
            raise too_deep(name, key.strip()) from None
        parsed[key.strip()] = value
    return check_depth(parsed, name)


def parse_values(values: dict[str, Any]) -> dict[str, Any]:
    """``{"lr": 3e-4, "hidden_sizes": [128, 128]}`` (the Python API's keywords) → typed values; unknown keys
    and bad values are BadInput, with the messages of ``--set``."""
    unknown = [k for k in values if k not in FIELD_NAMES or k == "env_id"]
    if unknown:
        allowed = ", ".join(n for n in FIELD_NAMES if n != "env_id")
        why = f" ({RETIRED_WHY})" if unknown[0] in RETIRED_FIELDS else ""
        raise BadInput(f"{unknown[0]}: unknown config key{why}; allowed: {allowed}")
    if "model" in values and callable(values["model"]):  # the user's network: known by its reference
        values = {**values, "model": user_code.register(values["model"], "model")}
    return {k: coerce(k, v) for k, v in values.items()}


def parse_set(items: tuple[str, ...]) -> dict[str, Any]:
    """``("lr=3e-4", "hidden_sizes=128,128")`` → typed overrides; unknown keys and bad values are BadInput."""
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep:
            raise BadInput(f"--set: {item!r} is not allowed; expected key=value")
        if key not in FIELD_NAMES or key == "env_id":
            allowed = ", ".join(n for n in FIELD_NAMES if n != "env_id")
            raise BadInput(f"--set: {unknown_key(key)}; allowed: {allowed}")
        overrides[key] = coerce(key, raw.strip())
    return overrides
