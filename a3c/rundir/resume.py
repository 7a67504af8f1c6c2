"""Continuing a run from its checkpoints/last.pt: compatibility checks, shared-state restore, CSV trimming."""

from __future__ import annotations

import csv
import math
import os
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

from a3c.algo.distributions import INIT_LOG_STD_RANGE, raw_log_std
from a3c.algo.normalize import SharedObsStats
from a3c.algo.optim import SharedOptimizer
from a3c.core.config import Config
from a3c.core.errors import BadInput
from a3c.core.spaces import Spaces
from a3c.rundir.checkpoints import LOG_STD_PARAM, history_newest_first, load_checkpoint
from a3c.rundir.csvlog import EPISODE_COLUMNS, EVAL_COLUMNS, METRICS_COLUMNS, SYNC_COLUMNS
from a3c.rundir.durable import fsync_dir
from a3c.rundir.files import check_resume_dir

# Fields that fix the env, the shape of the model or the optimizer state: a resume may not change them.
# The env's keyword arguments and its wrappers too (they may change its spaces or its task); the model
# kind, the action squashing, the observation normalisation and the reward scaling too: a model trained
# with them means something else without them (reward scaling sets the critic's units).
SHAPE_FIELDS = (
    "env_id",
    "env_kwargs",
    "wrappers",
    "hidden_sizes",
    "shared_body",
    "activation",
    "optimizer",
    "model",
    "lstm_size",
    "frame_stack",
    "gaussian_std",
    "squash",
    "obs_norm",
    "reward_scale",
)
_DEFAULTS = Config(env_id="-")  # a checkpoint from before a field existed had its default


TRAINING_FIELDS = ("config", "model_state", "optimizer_state", "global_step", "wall_time")


def load_resume_checkpoint(run_dir: Path) -> dict[str, Any]:
    """``run_dir/checkpoints/last.pt``, checked to be a whole a3c training checkpoint (else BadInput).

    A last.pt that cannot be read (a power cut, a full disk, a bad sector) falls back to the newest intact
    ``step-*.pt`` of the history, in the order they were written, with one warning line; the CSVs are then
    trimmed to that checkpoint like to any other. An earlier run a killed ``--force`` moved aside is put
    back first (``a3c.rundir.replace``)."""
    path = check_resume_dir(run_dir)
    try:
        data = training_checkpoint(path)
    except BadInput as damaged:
        for older in history_newest_first(path.parent):
            try:
                data = training_checkpoint(older)
            except BadInput:
                continue
            print(
                f"warning: --resume: checkpoints/last.pt is damaged ({str(damaged)[:200]}); resuming from "
                f"checkpoints/{older.name}, the newest intact checkpoint (step {data['global_step']:,})",
                file=sys.stderr,
            )
            break
        else:
            raise
    return upgrade_log_std(data, path)


def training_checkpoint(path: Path) -> dict[str, Any]:
    """One checkpoint file, checked to hold a training checkpoint whose parts have the right types (a
    crafted or damaged file is BadInput naming it, never a traceback further on)."""
    data = load_checkpoint(path)
    missing = [k for k in TRAINING_FIELDS if k not in data]
    if missing:
        raise BadInput(f"--resume: {str(path)!r} is not a training checkpoint (no {', '.join(missing)})")
    for name in ("config", "model_state", "optimizer_state"):
        if not isinstance(data[name], dict):
            raise BadInput(
                f"checkpoint: {str(path)!r} has a {name} of type {type(data[name]).__name__}; expected a dict"
            )
    step, wall = data["global_step"], data["wall_time"]
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise BadInput(f"checkpoint: {str(path)!r} has global_step {step!r}; expected a whole number >= 0")
    if isinstance(wall, bool) or not isinstance(wall, int | float) or not math.isfinite(wall) or wall < 0:
        raise BadInput(f"checkpoint: {str(path)!r} has wall_time {wall!r}; expected a number of seconds >= 0")
    return data


def upgrade_log_std(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """``data`` as this a3c reads a checkpoint from before log σ was bounded smoothly (no ``log_std_param``):
    a learned log σ [A] (stored as itself, clamped to [-20, 2]) becomes the raw value with the same σ, as near
    as ``INIT_LOG_STD_RANGE`` allows; its config keeps the loss it trained with (no mean pull) and an
    ``init_log_std`` this a3c accepts (it only shaped the first weights). A state-dependent log σ (a head
    output) cannot be converted: such a run cannot be resumed (its best.pt still plays on its mean)."""
    if data.get("log_std_param") == LOG_STD_PARAM:
        return data
    low, high = INIT_LOG_STD_RANGE
    config = dict(data["config"])
    config.setdefault("mean_l2_coef", 0.0)
    if isinstance(config.get("init_log_std"), (int, float)):
        config["init_log_std"] = min(max(float(config["init_log_std"]), low), high)
    data = {**data, "config": config, "log_std_param": LOG_STD_PARAM}
    state = data["model_state"]
    if "log_std" in state:
        raw = torch.tensor([raw_log_std(v) for v in state["log_std"].tolist()], dtype=state["log_std"].dtype)
        return {**data, "model_state": {**state, "log_std": raw}}
    if config.get("gaussian_std") == "state" and Spaces.of_checkpoint(data).continuous:
        raise BadInput(
            f"--resume: {str(path)!r} was saved by an older a3c whose state-dependent log σ this one reads "
            "differently; start a new run (its best.pt still evaluates)"
        )
    return data


def check_compatible(checkpoint: dict[str, Any], config: Config, run_dir: Path) -> None:
    """Refuse a config that changes the env, the model shape or the optimizer of the checkpoint."""
    saved = checkpoint["config"]
    for name in SHAPE_FIELDS:
        old, new = saved.get(name, getattr(_DEFAULTS, name)), getattr(config, name)
        if name in ("hidden_sizes", "wrappers"):
            old = tuple(old or ())
        if old != new:
            raise BadInput(
                f"--resume: {name} {new!r} does not match the checkpoint's {old!r} in {str(run_dir)!r}; "
                f"a resume keeps {', '.join(SHAPE_FIELDS)}"
            )


def restore_model(model: nn.Module, state: dict[str, torch.Tensor], source: str) -> None:
    """Copy weights into ``model`` in place (its parameters stay in shared memory)."""
    try:
        model.load_state_dict(state)
    except (RuntimeError, KeyError) as exc:
        raise BadInput(
            f"checkpoint: {source} does not fit the model ({str(exc).splitlines()[0][:160]})"
        ) from None


def restore_obs_stats(stats: SharedObsStats, state: dict[str, Any] | None, source: str) -> None:
    """Continue the observation statistics of a checkpoint, in place (they stay in shared memory)."""
    if state is None:
        raise BadInput(f"checkpoint: {source} has no observation statistics (obs_norm was off in that run)")
    _load_stats(stats, state, source, "observation statistics")


def _load_stats(stats: SharedObsStats, state: dict[str, Any], source: str, what: str) -> None:
    """Load a checkpoint's merged statistics into slot 0 of ``stats``; BadInput if they do not fit."""
    try:
        stats.load_state_dict(state)
    except ValueError as exc:
        raise BadInput(f"checkpoint: {source} has {what} that do not fit ({exc})") from None


@torch.no_grad()
def restore_optimizer(optimizer: SharedOptimizer, state_dict: dict[str, Any], source: str) -> None:
    """Copy a saved optimizer state into the live shared state tensors, in place.

    ``Optimizer.load_state_dict`` would replace them with new, private tensors: the workers would then step
    state that the trainer no longer sees, and the eager sharing would be lost.
    """
    params = [p for group in optimizer.param_groups for p in group["params"]]
    saved = state_dict.get("state", {})
    if len(params) == 1 and len(saved) > 1:
        saved = {0: _concatenated(saved)}
    if len(saved) != len(params):
        raise BadInput(
            f"checkpoint: {source} has optimizer state for {len(saved)} parameters, expected {len(params)}"
        )
    for index, param in enumerate(params):
        live, old = optimizer.state[param], saved[index]
        if set(live) != set(old):
            raise BadInput(f"checkpoint: {source} optimizer state keys {sorted(old)} != {sorted(live)}")
        for key, tensor in live.items():
            if tensor.shape != old[key].shape:
                raise BadInput(
                    f"checkpoint: {source} optimizer state {key} of parameter {index} has the wrong shape"
                )
            tensor.copy_(old[key])


def _concatenated(per_parameter: dict[int, dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Per-parameter optimizer state (checkpoints written before parameters were flat) as the state of the
    one flat parameter: each tensor flattened and concatenated in parameter order; the step count is one
    number for all of them."""
    states = [per_parameter[i] for i in sorted(per_parameter)]
    return {
        key: states[0][key] if key == "step" else torch.cat([s[key].reshape(-1) for s in states])
        for key in states[0]
    }


LOGS = {
    "eval.csv": EVAL_COLUMNS,
    "metrics.csv": METRICS_COLUMNS,
    "episodes.csv": EPISODE_COLUMNS,
    "sync.csv": SYNC_COLUMNS,  # no global_step: trimmed by wall time alone
}


def read_csv_rows(path: Path, columns: tuple[str, ...]) -> tuple[list[str], list[list[str]], int]:
    """The header and data rows of one of the run's CSVs, checked against ``columns`` (what this a3c
    writes): the same, or a prefix of them (an older a3c's file: columns are only ever added at the end).
    A row cut short by a kill (no final newline) is dropped and counted (the last value). Anything else is
    BadInput."""
    text = path.read_text()
    cut = int(bool(text) and not text.endswith("\n"))
    if cut:
        text = text[: text.rfind("\n") + 1]  # a row cut short by the kill: drop it, it may hold a cut number
    rows = list(csv.reader(text.splitlines()))
    header = rows[0] if rows else list(columns)
    if tuple(header) != columns[: len(header)] or not header:
        raise BadInput(
            f"--resume: {str(path)!r} has the columns {header}, which this a3c does not write (expected "
            f"{list(columns)}, or the first of them); move the file away to resume without it"
        )
    return header, rows[1:], cut


def trim_csv(path: Path, max_step: int, max_wall: float, columns: tuple[str, ...]) -> tuple[int, int]:
    """Drop rows logged after the checkpoint (global_step > max_step; a file without global_step, sync.csv,
    by wall_time > max_wall): their training was lost with the process, and keeping them would make
    global_step and wall_time go back on resume. The step, where there is one, decides: it is exact, while a
    time is only as good as the clock it was read on (wall_time is monotonic since it counts run time, but
    a run dir written by an older a3c counted it on the wall clock, which may have jumped).
    Rows of an older a3c's shorter header get the new columns at the end, empty. Returns (rows kept, rows
    removed); the file is rewritten atomically (a temp file renamed over it)."""
    if not path.exists():
        return 0, 0
    header, body, cut = read_csv_rows(path, columns)
    wall_col = header.index("wall_time")
    step_col = header.index("global_step") if "global_step" in header else None
    try:
        kept = [
            [*r, *[""] * (len(columns) - len(header))]
            for r in body
            if len(r) == len(header)
            and (float(r[wall_col]) <= max_wall if step_col is None else int(r[step_col]) <= max_step)
        ]
    except ValueError as exc:
        raise BadInput(f"--resume: {str(path)!r} is not a CSV this a3c wrote ({exc})") from None
    tmp = path.with_name(f".{path.name}.trim")
    with tmp.open("w", newline="") as f:
        csv.writer(f).writerows([list(columns), *kept])
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    fsync_dir(path.parent)
    return len(kept), len(body) + cut - len(kept)


def restore_reward_stats(stats: SharedObsStats, state: dict[str, Any] | None, source: str) -> None:
    """Continue the return statistics of the reward scaling, in place; a checkpoint from before they were
    saved starts them afresh, with a warning (the critic's targets change units until they settle)."""
    if state is None:
        print(
            f"warning: {source} has no reward statistics (an older a3c, or a run on the Ray backend, did not "
            "save them); reward scaling starts afresh",
            file=sys.stderr,
        )
        return
    _load_stats(stats, state, source, "reward statistics")


def trim_logs(run_dir: Path, checkpoint: dict[str, Any]) -> int:
    """Cut the run's CSVs (LOGS) back to the resumed checkpoint (rows after its global step or wall time
    happened in a run segment the checkpoint does not hold); the episodes rows kept."""
    step, wall = int(checkpoint["global_step"]), float(checkpoint["wall_time"])
    check_logs(run_dir)  # every file checked before any is rewritten
    kept = {}
    for name, columns in LOGS.items():
        kept[name], removed = trim_csv(run_dir / name, step, wall, columns)
        if removed:
            print(
                f"resume: {name}: removed {removed} rows logged after the checkpoint (step {step:,}); "
                f"{kept[name]} kept",
                file=sys.stderr,
            )
    return kept["episodes.csv"]


def latest_logged_time(run_dir: Path) -> float:
    """The largest wall_time of the rows the run's CSVs hold (0 for none). An evaluation's row is stamped
    when it ends and carries the step it began at, so a row the checkpoint keeps may be later than the
    checkpoint's own time: a resume counts on from here, and wall_time never goes back in a file."""
    latest = 0.0
    for name, columns in LOGS.items():
        if (run_dir / name).exists():
            header, body, _ = read_csv_rows(run_dir / name, columns)
            column = header.index("wall_time")
            latest = max([latest, *(float(row[column]) for row in body if len(row) == len(header))])
    return latest


def check_logs(run_dir: Path) -> None:
    """BadInput unless each of the run's CSVs that exists has this a3c's columns (or the first of them)."""
    for name, columns in LOGS.items():
        if (run_dir / name).exists():
            read_csv_rows(run_dir / name, columns)
