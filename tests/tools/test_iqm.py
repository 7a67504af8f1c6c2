"""The interquartile mean and its stratified bootstrap interval (a3c.tools.analysis), on fixed data:
hand-computed values, an independent loop over the same draws, and rliable's intervals for the same data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from a3c.tools.analysis import Runs, aggregate, iqm, seed_groups, stratified_bootstrap_ci


def test_iqm_cuts_a_quarter_of_the_runs_from_each_end():
    assert iqm(np.arange(1, 9)) == 4.5  # 3, 4, 5, 6
    assert iqm([100.0, 1, 2, 3, 4]) == 3.0  # five runs: 1 and 100 cut, mean of 2, 3, 4
    assert iqm([5.0, 1, 2, 3]) == 2.5  # four runs: the middle two
    assert iqm([1.0, 2, 30]) == 11.0  # fewer than four: nothing cut, the mean
    # Along an axis, NaN values absent: column 0 has 1, 3, 5 (mean 3), column 1 has 4, 6 (mean 5).
    np.testing.assert_array_equal(iqm([[1.0, np.nan], [3, 4], [5, 6]], axis=0), [3.0, 5.0])
    assert np.isnan(iqm([[np.nan], [np.nan]], axis=0)[0])


def test_the_interval_is_the_percentiles_of_the_iqms_of_resampled_runs():
    scores = np.array([3.0, 10, 12, 15, 40])
    low, high = stratified_bootstrap_ci(scores, reps=8, rng=np.random.default_rng(7))
    # The same draws by hand: 8 replications of 5 runs, each one's IQM (sorted, the middle 3), percentiles.
    picks = np.random.default_rng(7).integers(0, 5, size=(8, 5, 1))[..., 0]
    by_hand = [np.sort(scores[p])[1:4].mean() for p in picks]
    assert (low, high) == (np.percentile(by_hand, 2.5), np.percentile(by_hand, 97.5))
    assert (low, high) == pytest.approx((10.291666666666666, 22.983333333333334), abs=1e-12)


def test_every_replication_keeps_each_tasks_share_of_the_runs():
    # Two runs on each of two tasks: every replication has two scores of task A (0 or 1) and two of task B
    # (10 or 11), so its IQM (the middle two of four) is max(A) / 2 + min(B) / 2: 5, 5.5 or 6. A bootstrap
    # that resampled all four cells together would also draw 0.5 (0, 0, 0, 1) or 10.5.
    scores = np.array([[0.0, 10.0], [1.0, 11.0]])
    seen = []

    def iqm_of_all(drawn: np.ndarray) -> np.ndarray:  # [reps, runs, tasks] → [reps]
        seen.append(drawn)
        return iqm(drawn.reshape(len(drawn), -1), axis=1)

    low, high = stratified_bootstrap_ci(scores, statistic=iqm_of_all)
    drawn = seen[0]  # [reps, runs, tasks]
    assert set(np.unique(drawn[:, :, 0])) == {0.0, 1.0} and set(np.unique(drawn[:, :, 1])) == {10.0, 11.0}
    assert (low, high) == (5.0, 6.0)
    assert (low, high) == stratified_bootstrap_ci(scores)  # the default statistic: the IQM of all scores


# rliable 1.2.0 (arch 7.2.0): get_interval_estimates({"x": SCORES}, aggregate_iqm, reps=50_000); its
# intervals for these data. Ours draw other random numbers, so they agree to within the bootstrap's noise.
SCORES = np.array([[12.0, 310], [35, 420], [51, 480], [80, 500], [95, 500], [120, 495], [133, 260]])
RLIABLE = {"one task": (38.0, 112.2), "two tasks": (183.875, 291.625)}


@pytest.mark.parametrize("case", list(RLIABLE))
def test_the_interval_agrees_with_rliables(case):
    scores = SCORES[:, 0] if case == "one task" else SCORES
    low, high = stratified_bootstrap_ci(scores, reps=200_000)
    assert (low, high) == pytest.approx(RLIABLE[case], abs=1.0)


def test_aggregate_draws_the_iqm_curve_with_its_interval():
    # Five runs, straight lines 0 → 10k at slopes k = 1, 2, 3, 4, 100: the IQM cuts k=1 and k=100.
    table = pd.DataFrame(
        [
            {"run": f"r{k}", "env_id": "E", "global_step": x, "mean_return": x * k}
            for k in (1, 2, 3, 4, 100)
            for x in (0.0, 10.0)
        ]  # fmt: skip
    )
    curve = aggregate(table, points=3, n_boot=500, statistic="iqm")
    np.testing.assert_allclose(curve["iqm"], [0.0, 15.0, 30.0])  # (2 + 3 + 4) / 3 = 3 per step
    assert curve["ci_low"].iloc[-1] < 30.0 < curve["ci_high"].iloc[-1] <= 1000.0
    assert list(curve["n_runs"]) == [5, 5, 5]


def runs_of(rows: list[dict]) -> Runs:
    """Runs whose ``runs`` table holds ``rows`` (the summary_ columns a run's summary.json makes)."""
    empty = pd.DataFrame()
    return Runs(runs=pd.DataFrame(rows), eval=empty, episodes=empty, metrics=empty)


def test_seed_groups_split_by_config_and_score_time_to_solve_only_where_all_solved():
    rows = [
        {"run": f"{lr}-{seed}", "env_id": "E", "seed": seed, "lr": lr, "summary_solved": solved,
         "summary_last_mean_return": 100.0 * seed, "summary_best_mean_return": 500.0,
         "summary_time_to_solve_s": 10.0 + seed if solved else None}
        for lr, solved_seeds in ((0.1, {0, 1, 2, 3}), (0.2, {0, 1})) for seed in range(4)
        for solved in [seed in solved_seeds]
    ] + [{"run": "alone", "env_id": "E", "seed": 0, "lr": 0.3}]  # fmt: skip
    groups = seed_groups(runs_of(rows), reps=200).set_index("lr")
    assert list(groups.index) == [0.1, 0.2]  # lr=0.3 has one run: no group
    assert groups.loc[0.1, "n"] == 4 and groups.loc[0.2, "solved"] == 2
    assert groups.loc[0.1, "final_return"] == 150.0  # 0, 100, 200, 300: the middle two
    assert groups.loc[0.1, "best_return"] == groups.loc[0.1, "best_return_low"] == 500.0
    assert groups.loc[0.1, "time_to_solve_s"] == 11.5
    assert np.isnan(groups.loc[0.2, "time_to_solve_s"])  # two of four solved


def test_plot_draws_the_iqm_curve_of_a_seed_group(tmp_path, monkeypatch):
    # Five seeds whose evaluations read 10 + seed: seed 40 is an outlier that moves the mean (19.2 at the
    # first point) but not the IQM (11, 12, 13 → 12).
    from matplotlib.figure import Figure

    from a3c.tools.analysis import load_runs
    from a3c.tools.plot import plot_runs
    from tests.tools.test_plot_group_by import fake_run

    for seed in (0, 1, 2, 3, 40):
        fake_run(tmp_path, f"s{seed}", seed=seed, lr=0.1)
    drawn = []
    monkeypatch.setattr(
        Figure, "savefig", lambda fig, *a, **k: drawn.append(fig.axes[0].lines[0].get_ydata())
    )
    plot_runs(load_runs(tmp_path), tmp_path / "x.png")
    assert drawn[0][0] == 12.0 and drawn[0][-1] == 40.0  # the last point: 30 + 100 * lr for every run
