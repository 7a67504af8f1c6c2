"""Figures of runs: ``plot_runs`` draws what ``a3c plot`` writes (eval IQM curves across seeds, smoothed
training returns, throughput, policy lag) from the tables ``a3c.tools.analysis`` loads.

Needs the ``analysis`` extra (pandas, matplotlib)::

    from a3c.tools.analysis import load_runs
    from a3c.tools.plot import plot_runs
    plot_runs(load_runs("runs/CartPole-v1"), "curves.png")
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from a3c.tools.analysis import Runs, aggregate, curve_keys, solved_runs

ROWS_PER_WINDOW = 4


def throughput(metrics: pd.DataFrame, windows: int = 100) -> pd.DataFrame:
    """Env steps per second of one run over wall time, from its metrics rows (``wall_time``,
    ``global_step``; any order, every worker's rows together).

    Rows of different workers can be milliseconds apart, and each counts the global step as that worker saw
    it, a few hundred steps behind or ahead of the others: the quotient of two neighbouring rows' differences
    is noise (spikes of tens of thousands of steps/s, or below zero). So the rate is taken over ``windows``
    equal windows of the run's span: at each window's end the highest global step reported so far; the rate
    is its growth over the window. A short run gets fewer windows, about four rows each (a window without a
    row would read 0 and its neighbour twice the rate). Columns: ``wall_time`` (each window's end),
    ``steps_per_s``; empty for fewer than two distinct times. Rows with a missing value (a live CSV's
    half-written last line) are left out.
    """
    rows = metrics[["wall_time", "global_step"]].dropna() if len(metrics) else pd.DataFrame()
    times = rows["wall_time"].to_numpy(float) if len(rows) else np.zeros(0)
    distinct = len(np.unique(times))
    if distinct < 2:
        return pd.DataFrame({"wall_time": [], "steps_per_s": []}, dtype=float)
    windows = max(1, min(windows, (distinct - 1) // ROWS_PER_WINDOW))
    order = np.argsort(times, kind="stable")
    times = times[order]
    steps = np.maximum.accumulate(rows["global_step"].to_numpy(float)[order])
    edges = np.linspace(times[0], times[-1], windows + 1)
    reached = steps[np.searchsorted(times, edges, side="right") - 1]  # [windows + 1]
    return pd.DataFrame({"wall_time": edges[1:], "steps_per_s": np.diff(reached) / np.diff(edges)})


def _curve_label(keys: tuple[str, ...], values: tuple, envs: int) -> str:
    """``env`` alone, else ``key=value, …``, led by the env when the figure has several."""
    parts = [f"{k}={v}" for k, v in zip(keys[1:], values[1:], strict=True)]
    return ", ".join([str(values[0])] * (envs > 1 or not parts) + parts)


def plot_runs(
    runs: Runs,
    out: str | Path,
    x: str = "steps",
    smooth: int = 20,
    group_by: str | None = None,
    log: Callable[[str], None] | None = None,
) -> Path:
    """A 2×2 figure: eval IQM (interquartile mean) with a stratified bootstrap 95% CI band across seeds,
    smoothed training returns, throughput and policy lag; saved to ``out`` (PNG, PDF or SVG by extension).

    The eval panel has one curve per env and value of ``group_by`` (a metadata column, e.g. ``lr``; legend
    ``lr=0.001``); without it, one per env, split further by every config key in which the runs differ
    (``curve_keys``), with a ``warning:`` line naming those keys to ``log`` (default: stderr)."""
    keys = curve_keys(runs, group_by)
    if group_by is None and len(keys) > 1:
        (log or partial(print, file=sys.stderr))(
            f"warning: the runs differ in {', '.join(keys[1:])}: one curve per combination; "
            "--group-by KEY draws one per value of KEY"
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    column = {"steps": "global_step", "time": "wall_time"}[x]
    label = {"steps": "env steps", "time": "wall time (s)"}[x]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), constrained_layout=True)
    ax = axes[0, 0]
    curve = (
        aggregate(runs.eval, x=column, y="mean_return", by=keys, held=solved_runs(runs), statistic="iqm")
        if len(runs.eval)
        else pd.DataFrame()
    )
    envs = runs.runs["env_id"].nunique()
    for values, group in curve.groupby(list(keys), dropna=False, sort=False) if len(curve) else []:
        n = int(group["n_runs"].max())
        ax.plot(group[column], group["iqm"], label=f"{_curve_label(keys, values, envs)} (n={n})")
        ax.fill_between(group[column], group["ci_low"], group["ci_high"], alpha=0.25)
    ax.set(
        title="Evaluation: IQM of the mean return over runs, stratified bootstrap 95% CI",
        xlabel=label,
        ylabel="return",
    )
    ax = axes[0, 1]
    for run, group in runs.episodes.groupby("run") if len(runs.episodes) else []:
        group = group.sort_values(column)
        ax.plot(group[column], group["return"].rolling(smooth, min_periods=1).mean(), label=Path(run).name)
    ax.set(title=f"Training episodes: return (rolling mean of {smooth})", xlabel=label, ylabel="return")
    ax = axes[1, 0]
    metrics = runs.metrics
    if len(metrics):
        for run, group in metrics.groupby("run"):
            rate = throughput(group)
            ax.plot(rate["wall_time"], rate["steps_per_s"], label=Path(run).name)
    ax.set(title="Throughput (all workers)", xlabel="wall time (s)", ylabel="env steps / s")
    ax = axes[1, 1]
    if len(metrics):
        for run, group in metrics.groupby("run"):
            group = group.sort_values(column)
            ax.plot(group[column], group["policy_lag_mean"], ".", alpha=0.5, label=Path(run).name)
    ax.set(title="Policy lag: updates by others between pull and step", xlabel=label, ylabel="updates")
    for ax in axes.flat:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    out = Path(out)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
