"""Read runs into tidy pandas DataFrames and aggregate seeds with bootstrap confidence intervals (the
figures are ``a3c.tools.plot``'s).

Needs the ``analysis`` extra (pandas, matplotlib). Every table carries the run's metadata as columns
(``run``, ``env_id``, ``seed`` and every scalar config value), so runs concatenate and group cleanly::

    from a3c.tools.analysis import aggregate, load_runs, solved_runs
    runs = load_runs("runs/CartPole-v1")
    curve = aggregate(runs.eval, x="global_step", y="mean_return", held=solved_runs(runs))
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from a3c.core.errors import BadInput

TABLES = ("eval", "episodes", "metrics")


@dataclass
class Runs:
    """One or more runs: ``runs`` has a row per run (config and summary); the others a row per CSV row."""

    runs: pd.DataFrame
    eval: pd.DataFrame
    episodes: pd.DataFrame
    metrics: pd.DataFrame
    paths: list[Path] = field(default_factory=list)


def _metadata(path: Path, config: dict[str, Any]) -> dict[str, Any]:
    scalars = {k: v for k, v in config.items() if isinstance(v, str | int | float | bool) or v is None}
    scalars["hidden_sizes"] = ",".join(map(str, config.get("hidden_sizes", [])))
    scalars["env_kwargs"] = json.dumps(config.get("env_kwargs", {}), sort_keys=True)  # one column, comparable
    return {
        "run": str(path),
        **{k: scalars[k] for k in sorted(scalars) if k not in ("command", "started_at")},
    }


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame()


def load_run(path: str | Path) -> Runs:
    """Load one run directory (docs/runs.md: config.json, eval.csv, episodes.csv, metrics.csv,
    summary.json when it finished)."""
    path = Path(path)
    config = json.loads((path / "config.json").read_text())
    try:
        summary = json.loads((path / "summary.json").read_text())
    except FileNotFoundError:
        summary = {}
    meta = _metadata(path, config)
    tables = {}
    for name in TABLES:
        table = _read_csv(path / f"{name}.csv")
        for key, value in meta.items():
            table[key] = value
        tables[name] = table
    row = {**meta, "started_at": config.get("started_at"), **{f"summary_{k}": v for k, v in summary.items()}}
    return Runs(runs=pd.DataFrame([row]), paths=[path], **tables)


def is_run(path: Path) -> bool:
    """A directory whose config.json is one that a3c wrote (other tools' config.json files are skipped)."""
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "env_id" in config and "a3c" in config.get("versions", {})


def find_runs(dir_or_glob: str | Path) -> list[Path]:
    """Run directories under a directory (hidden folders like .venv are not searched), or matching a glob."""
    text = str(dir_or_glob)
    roots = [Path(p) for p in sorted(glob.glob(text))] if any(c in text for c in "*?[") else [Path(text)]
    found = []
    for root in roots:
        if is_run(root):
            found.append(root)
            continue
        for folder, subfolders, files in os.walk(root):
            subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
            if "config.json" in files and is_run(Path(folder)):
                found.append(Path(folder))
                subfolders[:] = []  # a run holds no runs
    return found


def load_runs(dir_or_glob: str | Path | list) -> Runs:
    """Every run under a directory / matching a glob (or a list of either), concatenated."""
    sources = dir_or_glob if isinstance(dir_or_glob, list | tuple) else [dir_or_glob]
    paths = [p for source in sources for p in find_runs(source)]
    if not paths:
        raise FileNotFoundError(f"no run directories (with a config.json) in {sources}")
    loaded = [load_run(p) for p in paths]
    return Runs(
        runs=pd.concat([r.runs for r in loaded], ignore_index=True),
        paths=paths,
        **{name: pd.concat([getattr(r, name) for r in loaded], ignore_index=True) for name in TABLES},
    )


def runs_table(runs: Runs) -> pd.DataFrame:
    """The ``a3c runs`` table: env, seed, start, steps, wall, best eval, solved, time to solve."""
    r = runs.runs

    def get(name: str) -> pd.Series:
        return r[name] if name in r else pd.Series([None] * len(r))

    return pd.DataFrame(
        {
            "run": [Path(p).name for p in r["run"]],
            "env": r["env_id"],
            "seed": r["seed"],
            "start": get("started_at"),
            "steps": get("summary_total_steps"),
            "wall_s": get("summary_wall_s"),
            "best_eval": get("summary_best_mean_return"),
            "solved": get("summary_solved"),
            "time_to_solve_s": get("summary_time_to_solve_s"),
            "exit": get("summary_exit_reason"),
        }
    )


def solved_runs(runs: Runs) -> list[str]:
    """The ``run`` of every run whose summary says it solved (reached and confirmed its target)."""
    r = runs.runs
    if "summary_solved" not in r:
        return []
    return r.loc[r["summary_solved"].eq(True), "run"].tolist()  # NaN (no summary.json) is not True


def _mean_present(values: np.ndarray, axis: int) -> np.ndarray:
    """Mean over ``axis`` of the values that are not NaN; NaN where none is."""
    present = ~np.isnan(values)
    counts = present.sum(axis=axis)
    sums = np.where(present, values, 0.0).sum(axis=axis)
    return np.divide(sums, counts, out=np.full(sums.shape, np.nan), where=counts > 0)


def aggregate(
    table: pd.DataFrame,
    x: str = "global_step",
    y: str = "mean_return",
    by: tuple[str, ...] = ("env_id",),
    points: int = 100,
    n_boot: int = 1000,
    held: Collection[str] | None = None,
) -> pd.DataFrame:
    """Mean of ``y`` across runs on a common grid of ``x``, with a bootstrap 95% CI over runs.

    Each run's curve is linearly interpolated onto ``points`` grid values from the earliest first ``x`` to
    the latest last ``x`` of the group; before its first point a run holds its first value. After its last
    point a run in ``held`` holds its last value (pass ``solved_runs(runs)``: a run that stopped at its
    target keeps the return it stopped with); any other run counts no further, so a run stopped early (a
    signal, a crash, a shorter budget) does not hold the mean at its last score. ``held=None``: every run
    holds. Columns: the ``by`` keys, ``x``, ``mean``, ``ci_low``, ``ci_high``, ``n_runs`` (the runs counted
    at that ``x``).
    """
    held = None if held is None else {str(run) for run in held}  # paths or strings; never a Series' index
    frames = []
    for keys, group in table.groupby(list(by), dropna=False):  # a None value is a group too
        rng = np.random.default_rng(0)  # a group's CI does not depend on the other groups
        group = group.dropna(subset=[x, y])  # a live run's half-written last row
        curves = [(run, g.sort_values(x)) for run, g in group.groupby("run") if len(g)]
        if not curves:
            continue
        start = min(float(c[x].iloc[0]) for _, c in curves)
        end = max(float(c[x].iloc[-1]) for _, c in curves)
        grid = np.linspace(start, end, points)
        rows = []
        for run, c in curves:
            row = np.interp(grid, c[x].to_numpy(float), c[y].to_numpy(float))
            if held is not None and run not in held:
                row[grid > float(c[x].iloc[-1])] = np.nan
            rows.append(row)
        values = np.stack(rows)  # [runs, points]
        picks = rng.integers(0, len(curves), size=(n_boot, len(curves)))
        boot_means = _mean_present(values[picks], axis=1)  # [n_boot, points]
        frame = pd.DataFrame(
            {
                x: grid,
                "mean": _mean_present(values, axis=0),
                "ci_low": np.nanpercentile(boot_means, 2.5, axis=0),
                "ci_high": np.nanpercentile(boot_means, 97.5, axis=0),
                "n_runs": (~np.isnan(values)).sum(axis=0),
            }
        )
        for key, value in zip(by, keys if isinstance(keys, tuple) else (keys,), strict=True):
            frame[key] = value
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# Metadata columns that tell runs of one config apart without changing what it learns: a seed's curves are
# merged, and these never split them (bookkeeping, budgets, checkpointing, failure handling).
RUN_SPECIFIC = (
    "run", "seed", "git_commit", "git_dirty", "resumes", "max_steps", "max_seconds", "tensorboard",
    "checkpoint_interval", "keep_checkpoints", "max_restarts", "hang_timeout", "ray_address",
)  # fmt: skip


def metadata_keys(runs: Runs) -> list[str]:
    """The metadata columns of ``runs`` (run, env_id, seed and every scalar config value): what
    ``--group-by`` accepts."""
    return [c for c in runs.runs.columns if c != "started_at" and not c.startswith("summary_")]


def differing_keys(runs: Runs) -> list[str]:
    """The config keys (not RUN_SPECIFIC, not env_id) whose value is not the same in every run."""
    ignored = (*RUN_SPECIFIC, "env_id")
    return [k for k in metadata_keys(runs) if k not in ignored and runs.runs[k].astype(str).nunique() > 1]


def curve_keys(runs: Runs, group_by: str | None = None) -> tuple[str, ...]:
    """The columns whose values make one eval curve: env_id and ``group_by``; without it env_id and every
    key in which the runs differ (a curve never averages over two configs). BadInput for an unknown key."""
    if group_by is None:
        return ("env_id", *differing_keys(runs))
    if group_by not in metadata_keys(runs):
        raise BadInput(
            f"--group-by: {group_by!r} is not a key of these runs' config; "
            f"expected one of {', '.join(metadata_keys(runs))}"
        )
    return tuple(dict.fromkeys(("env_id", group_by)))


def checkpoint_returns(run_or_checkpoint: str | Path, episodes: int = 100, seed: int = 12345) -> np.ndarray:
    """Greedy returns [episodes] of a run's best.pt (or a checkpoint file), as ``a3c evaluate`` plays."""
    from a3c.rundir.checkpoints import load_policy

    return load_policy(Path(run_or_checkpoint)).play(episodes, seed)[0]
