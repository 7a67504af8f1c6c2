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
import io
import json
import os
from collections.abc import Callable, Collection, Sequence
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
    scalars["hidden_sizes"] = _joined(config.get("hidden_sizes", []))
    scalars["wrappers"] = _joined(config.get("wrappers") or [])
    scalars["env_kwargs"] = json.dumps(config.get("env_kwargs", {}), sort_keys=True)  # one column, comparable
    return {
        "run": str(path),
        **{k: scalars[k] for k in sorted(scalars) if k not in ("command", "started_at")},
    }


def _joined(values: Any) -> str:
    """``64,64`` of a list; a value of another kind (a hand-edited config.json) as it is."""
    return ",".join(map(str, values)) if isinstance(values, list | tuple) else str(values)


# What a run's CSV files must hold to be read (every column of a3c's CSV files is a number).
CSV_KEYS = ("wall_time", "global_step")
# The summary.json values the runs table and the seed groups read as numbers.
SUMMARY_NUMBERS = (
    "total_steps",
    "wall_s",
    "best_mean_return",
    "last_mean_return",
    "time_to_solve_s",
    "steps_to_solve",
)


def _read_csv(path: Path) -> tuple[pd.DataFrame, str | None]:
    """One of a run's CSV files, and what is wrong with it in one line (None: nothing). A row that is not
    a3c's (a line run together with another by a crash, the zeros a power cut can leave, bytes that are not
    text) is left out and counted; a file without a3c's header is left out whole; a missing or empty file
    (a run that has not written it yet) is an empty table. A last line without its line end is a row being
    written (a live run) or cut by a crash: left out, and no problem."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return pd.DataFrame(), None
    except OSError as exc:
        return pd.DataFrame(), f"{path.name}: cannot be read ({exc.strerror or exc}), left out"
    data = data[: data.rfind(b"\n") + 1]  # whole lines only
    if not data.strip():
        return pd.DataFrame(), None
    try:
        table = pd.read_csv(io.BytesIO(data))
        if set(CSV_KEYS) <= set(table.columns) and all(kind in "fiu" for kind in table.dtypes.map(_kind)):
            return table, None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError):
        pass
    return _read_damaged_csv(path.name, data.decode("utf-8", errors="replace"))


def _kind(dtype: Any) -> str:
    """numpy's one-letter kind of a column's dtype (``f`` float, ``i`` int, ``O`` text...)."""
    return getattr(dtype, "kind", "O")


def _read_damaged_csv(name: str, text: str) -> tuple[pd.DataFrame, str | None]:
    """``_read_csv`` of a file pandas could not read as a3c's: row by row, every cell a number (a3c writes
    only numbers; an empty cell or ``nan`` for none), the others left out and counted by line number."""
    lines = text.splitlines()
    header = lines[0].split(",")
    if not set(CSV_KEYS) <= set(header):
        return pd.DataFrame(), f"{name}: its header is not a3c's (no {', '.join(CSV_KEYS)}), left out"
    rows, bad = [], []
    for number, line in enumerate(lines[1:], start=2):
        row = _numbers(line.split(","), len(header))
        if row is not None:
            rows.append(row)
        elif line.strip():
            bad.append(number)
    table = pd.DataFrame(rows, columns=header)
    if not bad:
        return table, None
    where = ", ".join(map(str, bad[:3])) + (", ..." if len(bad) > 3 else "")
    rows_word = "row that is" if len(bad) == 1 else "rows that are"
    return table, f"{name}: {len(bad)} {rows_word} not a3c's (line {where}), left out"


def _numbers(cells: list[str], width: int) -> list[float] | None:
    """The cells of one CSV row as numbers, or None when there are not ``width`` of them or one is not a
    number."""
    if len(cells) != width:
        return None
    try:
        return [float(cell) if cell.strip() else float("nan") for cell in cells]
    except ValueError:
        return None


def _read_summary(path: Path) -> tuple[dict[str, Any], str | None]:
    """A run's summary.json ({} when it has none: a live or killed run), and what is wrong with it in one
    line; a damaged file is left out whole."""
    try:
        summary = json.loads(path.read_text())
    except FileNotFoundError:
        return {}, None
    except UnicodeDecodeError:
        return {}, f"{path.name}: not text, left out"
    except OSError as exc:
        return {}, f"{path.name}: cannot be read ({exc.strerror or exc}), left out"
    except ValueError as exc:
        return {}, f"{path.name}: not valid JSON ({exc}), left out"
    except RecursionError:
        return {}, f"{path.name}: nested too deep to read, left out"
    if not isinstance(summary, dict):
        return {}, f"{path.name}: not a JSON object, left out"
    for key in SUMMARY_NUMBERS:
        value = summary.get(key)
        if not (value is None or (isinstance(value, int | float) and not isinstance(value, bool))):
            return {}, f"{path.name}: {key} {value!r} is not a number, left out"
    if not isinstance(summary.get("solved", False), bool):
        return {}, f"{path.name}: solved {summary['solved']!r} is not true or false, left out"
    return summary, None


def load_run(path: str | Path) -> Runs:
    """Load one run directory (docs/runs.md: config.json, eval.csv, episodes.csv, metrics.csv,
    summary.json when it finished). What cannot be read of a damaged file is left out, and the ``problem``
    column of ``runs`` says what, in one line (None for a whole run)."""
    path = Path(path)
    config = json.loads((path / "config.json").read_text())
    summary, problem = _read_summary(path / "summary.json")
    problems = [problem] if problem else []
    meta = _metadata(path, config)
    tables = {}
    for name in TABLES:
        table, problem = _read_csv(path / f"{name}.csv")
        problems += [problem] if problem else []
        for key, value in meta.items():
            table[key] = value
        tables[name] = table
    row = {
        **meta,
        "started_at": config.get("started_at"),
        **{f"summary_{k}": v for k, v in summary.items()},
        "problem": "; ".join(problems) or None,
    }
    return Runs(runs=pd.DataFrame([row]), paths=[path], **tables)


def is_run(path: Path) -> bool:
    """A directory whose config.json is one that a3c wrote (other tools' config.json files are skipped)."""
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError, RecursionError):  # RecursionError: nested deeper than a3c ever writes
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


def runs_table(runs: Runs, reach: Sequence[float] = (), window: int = 100) -> pd.DataFrame:
    """The ``a3c runs`` table: env, seed, start, steps, wall, best eval, solved, time to solve, exit reason;
    with ``reach``, when each run's training games first averaged each level (``training_reach``); and, when
    a run's files were damaged, which (``damaged``; the ``problem`` column of ``runs.runs`` says what is
    wrong)."""
    r = runs.runs
    reached = pd.DataFrame()
    if reach:
        by_run = training_reach(runs.episodes, reach, window).set_index("run")
        reached = by_run.reindex(r["run"]).reset_index(drop=True)

    def get(name: str) -> pd.Series:
        return r[name] if name in r else pd.Series([None] * len(r))

    return pd.DataFrame(
        {
            "run": [Path(p).name for p in r["run"]],
            "env": r["env_id"],
            "seed": get("seed"),
            "start": get("started_at"),
            "steps": get("summary_total_steps"),
            "wall_s": get("summary_wall_s"),
            "best_eval": get("summary_best_mean_return"),
            "solved": get("summary_solved"),
            "time_to_solve_s": get("summary_time_to_solve_s"),
            "exit": get("summary_exit_reason"),
            **{column: reached[column] for column in reached},
            **({"damaged": r["problem"].map(_damaged_files)} if r["problem"].notna().any() else {}),
        }
    )


def training_reach(episodes: pd.DataFrame, levels: Sequence[float], window: int = 100) -> pd.DataFrame:
    """Per run of ``episodes`` (episodes.csv rows, a ``run`` column), the global step and seconds of wall time
    at which the mean return of its last ``window`` training games first reached each level (NaN where it
    never did): a learning speed that does not depend on when evaluations happened to run.

    Returns: a row per run: ``run``, then ``steps_to_<level>`` and ``seconds_to_<level>`` for each level."""
    levels = list(dict.fromkeys(levels))
    names = [f"{level:.12g}" for level in levels]  # 1234567 and 1234568 stay two columns
    rows = []
    for run, games in episodes.groupby("run", sort=False):
        games = games.sort_values(["wall_time", "global_step"], kind="stable")
        trailing = games["return"].rolling(window, min_periods=window).mean().to_numpy()
        row: dict[str, Any] = {"run": run}
        for level, name in zip(levels, names, strict=True):
            reached = np.flatnonzero(trailing >= level)
            at = games.iloc[reached[0]] if len(reached) else None
            row[f"steps_to_{name}"] = at["global_step"] if at is not None else np.nan
            row[f"seconds_to_{name}"] = at["wall_time"] if at is not None else np.nan
        rows.append(row)
    columns = ["run"] + [f"{k}_to_{name}" for name in names for k in ("steps", "seconds")]
    table = pd.DataFrame(rows, columns=columns)
    steps = [c for c in columns if c.startswith("steps_to_")]
    table[steps] = table[steps].astype("Int64")  # a step count, even where a run never got there (<NA>)
    return table


def _damaged_files(problem: str | None) -> str:
    """The files a run's ``problem`` names (``summary.json,eval.csv``); "" for none."""
    if not isinstance(problem, str):
        return ""
    return ",".join(part.split(":")[0] for part in problem.split("; "))


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


def iqm(scores: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """Interquartile mean: the mean of the middle half of ``scores`` (all of them, or along ``axis``).

    Sorted, ``n // 4`` values are cut from each end (``scipy.stats.trim_mean(scores, 0.25)``, rliable's
    ``aggregate_iqm``): 8 values keep the middle 4, 5 keep 3, 4 keep the middle 2 (their median), fewer
    than 4 keep all (their mean). NaN values are absent ones: each slice counts only its present values,
    and is NaN where none is.
    """
    values = np.asarray(scores, dtype=float)
    if axis is None:
        values, axis = values.reshape(-1), 0
    ordered = np.moveaxis(np.sort(values, axis=axis), axis, -1)  # [..., n], NaN last
    present = (~np.isnan(ordered)).sum(axis=-1, keepdims=True)  # [..., 1]
    cut = present // 4
    rank = np.arange(ordered.shape[-1])
    kept = (rank >= cut) & (rank < present - cut)  # [..., n]
    counts = kept.sum(axis=-1)
    sums = np.where(kept, ordered, 0.0).sum(axis=-1)
    result = np.divide(sums, counts, out=np.full(sums.shape, np.nan), where=counts > 0)
    return float(result) if result.ndim == 0 else result


def stratified_bootstrap_ci(
    scores: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
    reps: int = 10_000,
    size: float = 0.95,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray | float, np.ndarray | float]:
    """The stratified bootstrap ``size`` interval of ``statistic`` (default: the IQM of all scores), the
    percentile method, as rliable computes it (Agarwal et al. 2021, "Deep RL at the edge of the
    statistical precipice").

    ``scores``: [runs] (one task) or [runs, tasks] (one column per task, e.g. env) or [runs, tasks, points]
    (a curve: one statistic per point). Each of ``reps`` replications draws, for every task alone, ``runs``
    runs with replacement from that task's runs (the strata: every replication keeps each task's share);
    a curve's points share their run's draw. ``statistic`` maps a replication [reps, runs, tasks, ...] to
    [reps, ...] (default: the IQM over runs and tasks together, NaN values left out). The interval is the
    ``(1 - size) / 2`` and ``(1 + size) / 2`` percentiles of the replications (linear interpolation, NaN
    ones left out); ``rng`` defaults to ``default_rng(0)``, so a table reads the same twice.
    """
    values = np.asarray(scores, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    runs, tasks = values.shape[:2]
    rng = np.random.default_rng(0) if rng is None else rng
    picks = rng.integers(0, runs, size=(reps, runs, tasks))  # [reps, runs, tasks]
    picks = picks.reshape(picks.shape + (1,) * (values.ndim - 2))
    drawn = np.take_along_axis(values[None], picks, axis=1)  # [reps, runs, tasks, ...]
    if statistic is None:
        stats = iqm(drawn.reshape(reps, runs * tasks, *values.shape[2:]), axis=1)
    else:
        stats = statistic(drawn)
    tail = 100 * (1 - size) / 2
    low, high = np.nanpercentile(np.asarray(stats, dtype=float), [tail, 100 - tail], axis=0)
    return (float(low), float(high)) if np.ndim(low) == 0 else (low, high)


def aggregate(  # noqa: PLR0913 - the curve's options by name, as analysis.md shows them
    table: pd.DataFrame,
    x: str = "global_step",
    y: str = "mean_return",
    by: tuple[str, ...] = ("env_id",),
    points: int = 100,
    n_boot: int = 1000,
    held: Collection[str] | None = None,
    statistic: str = "mean",
) -> pd.DataFrame:
    """Mean (or, ``statistic="iqm"``, the interquartile mean: ``iqm``) of ``y`` across runs on a common grid
    of ``x``, with a bootstrap 95% interval over runs (for the IQM rliable's: ``stratified_bootstrap_ci``).

    Each run's curve is linearly interpolated onto ``points`` grid values from the earliest first ``x`` to
    the latest last ``x`` of the group; before its first point a run holds its first value. After its last
    point a run in ``held`` holds its last value (pass ``solved_runs(runs)``: a run that stopped at its
    target keeps the return it stopped with); any other run counts no further, so a run stopped early (a
    signal, a crash, a shorter budget) does not hold the mean at its last score. ``held=None``: every run
    holds. Columns: the ``by`` keys, ``x``, ``mean`` (or ``iqm``), ``ci_low``, ``ci_high``, ``n_runs`` (the
    runs counted at that ``x``).
    """
    if statistic not in ("mean", "iqm"):
        raise BadInput(f"statistic: {statistic!r} is not allowed; expected mean or iqm")
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
        if statistic == "iqm":  # one task: the runs are its stratum; the points share each run's draw
            center = iqm(values, axis=0)
            low, high = stratified_bootstrap_ci(values[:, None, :], reps=n_boot, rng=rng)
        else:
            picks = rng.integers(0, len(curves), size=(n_boot, len(curves)))
            boot_means = _mean_present(values[picks], axis=1)  # [n_boot, points]
            center = _mean_present(values, axis=0)
            low, high = np.nanpercentile(boot_means, [2.5, 97.5], axis=0)
        frame = pd.DataFrame(
            {
                x: grid,
                statistic: center,
                "ci_low": low,
                "ci_high": high,
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
    return [
        c for c in runs.runs.columns if c not in ("started_at", "problem") and not c.startswith("summary_")
    ]


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


# The per-run scores of a seed group (summary.json keys): the last evaluation's mean return, the best
# evaluation's (the one best.pt holds: the maximum of noisy evaluations, so biased upward; the final score is
# the one to compare), and the time to solve where every run of the group solved.
SCORES = {
    "final_return": "summary_last_mean_return",
    "best_return": "summary_best_mean_return",
    "time_to_solve_s": "summary_time_to_solve_s",
}


def seed_groups(runs: Runs, reps: int = 10_000, min_runs: int = 2) -> pd.DataFrame:
    """One row per group of at least ``min_runs`` runs that differ only by seed (and RUN_SPECIFIC keys):
    the IQM of each score of ``SCORES`` over the group's runs with its stratified bootstrap 95% interval.

    Groups are made like ``a3c plot``'s curves (``curve_keys``: env_id and every config key in which the
    runs differ). A run without summary.json (live, or killed) counts in ``n`` but in no score. The time to
    solve is NaN unless every run of the group solved (an IQM of the solved runs alone would flatter the
    config). Columns: the group keys, ``n``, ``solved`` (runs that solved), then ``<score>``,
    ``<score>_low``, ``<score>_high`` for each score.
    """
    keys = list(curve_keys(runs))
    table = runs.runs.copy()
    for column in (*SCORES.values(), "summary_solved"):
        if column not in table:
            table[column] = np.nan
    rows = []
    for values, group in table.groupby(keys, dropna=False, sort=True):
        if len(group) < min_runs:
            continue
        solved = int(group["summary_solved"].eq(True).sum())
        row = {**dict(zip(keys, values, strict=True)), "n": len(group), "solved": solved}
        for score, column in SCORES.items():
            data = pd.to_numeric(group[column], errors="coerce").to_numpy(float)
            data = data[~np.isnan(data)]
            if score == "time_to_solve_s" and solved < len(group):
                data = data[:0]
            center = iqm(data) if len(data) else np.nan
            low, high = stratified_bootstrap_ci(data, reps=reps) if len(data) else (np.nan, np.nan)
            row.update({score: center, f"{score}_low": low, f"{score}_high": high})
        rows.append(row)
    return pd.DataFrame(rows)


def format_seed_groups(groups: pd.DataFrame) -> str:
    """``seed_groups``' table as ``a3c runs`` prints it: each score as ``IQM [low, high]``, ``-`` where
    there is none."""

    def cell(row: pd.Series, score: str) -> str:
        if np.isnan(row[score]):
            return "-"
        return f"{row[score]:.1f} [{row[f'{score}_low']:.1f}, {row[f'{score}_high']:.1f}]"

    keys = [c for c in groups.columns if c not in ("n", "solved") and not c.startswith(tuple(SCORES))]
    shown = groups[keys].rename(columns={"env_id": "env"}).copy()
    shown["runs"] = groups["n"]
    shown["solved"] = [f"{s}/{n}" for s, n in zip(groups["solved"], groups["n"], strict=True)]
    for score, title in [
        ("final_return", "final eval IQM [95% CI]"),
        ("best_return", "best eval IQM [95% CI]"),
        ("time_to_solve_s", "time to solve s IQM [95% CI]"),
    ]:
        shown[title] = [cell(row, score) for _, row in groups.iterrows()]
    return shown.to_string(index=False)


def checkpoint_returns(run_or_checkpoint: str | Path, episodes: int = 100, seed: int = 12345) -> np.ndarray:
    """Greedy returns [episodes] of a run's best.pt (or a checkpoint file), as ``a3c evaluate`` plays."""
    from a3c.rundir.checkpoints import load_policy

    return load_policy(Path(run_or_checkpoint)).play(episodes, seed)[0]
