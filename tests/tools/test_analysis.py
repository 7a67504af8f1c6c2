"""a3c.tools.analysis, a3c runs / plot, TensorBoard tags, policy lag, and the notebook executed on a real
run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from a3c.core.extras import install_hint
from a3c.tools.analysis import Runs, aggregate, load_runs, runs_table, solved_runs, training_reach
from a3c.tools.plot import throughput
from tests.support import ROOT
from tests.support.commands import call_a3c
from tests.support.extras import require_extra

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_committed_notebooks_carry_no_outputs():
    assert NOTEBOOKS, "notebooks/ has no notebook"
    for path in NOTEBOOKS:
        notebook = json.loads(path.read_text())
        for cell in notebook["cells"]:
            if cell["cell_type"] == "code":
                assert cell.get("outputs") == [] and cell.get("execution_count") is None, path.name


def test_first_code_cell_is_tagged_parameters_and_sets_runs_dir():
    notebook = json.loads((ROOT / "notebooks" / "analyze_runs.ipynb").read_text())
    first = next(c for c in notebook["cells"] if c["cell_type"] == "code")
    assert "parameters" in first["metadata"].get("tags", [])
    assert "".join(first["source"]).startswith("runs_dir =")


def fake_eval(run: str, xs, ys) -> pd.DataFrame:
    return pd.DataFrame({"run": run, "env_id": "E", "global_step": xs, "mean_return": ys})


def test_aggregate_means_runs_on_a_common_grid_with_a_ci():
    table = pd.concat([fake_eval("a", [0, 10], [0.0, 10.0]), fake_eval("b", [0, 10], [2.0, 12.0])])
    curve = aggregate(table, points=11, n_boot=200)
    assert list(curve["global_step"]) == list(np.linspace(0, 10, 11))
    np.testing.assert_allclose(curve["mean"], np.arange(11) + 1.0)
    assert (curve["ci_low"] <= curve["mean"]).all() and (curve["mean"] <= curve["ci_high"]).all()
    assert (curve["ci_low"] >= np.arange(11)).all() and (curve["ci_high"] <= np.arange(11) + 2).all()
    assert set(curve["n_runs"]) == {2}


def test_aggregate_carries_a_finished_run_forward():
    table = pd.concat([fake_eval("a", [0, 5], [0.0, 5.0]), fake_eval("b", [0, 10], [0.0, 10.0])])
    for held in (None, ["a"]):
        curve = aggregate(table, points=3, n_boot=50, held=held)
        np.testing.assert_allclose(curve["mean"], [0.0, 5.0, 7.5])  # run a holds 5.0 after its end
        assert list(curve["n_runs"]) == [2, 2, 2]


def test_aggregate_counts_a_run_that_was_not_held_only_up_to_its_end():
    # Run a was stopped at x=5 without solving: after that the mean is run b's alone, not (5 + b) / 2.
    table = pd.concat([fake_eval("a", [0, 5], [0.0, 5.0]), fake_eval("b", [0, 10], [0.0, 20.0])])
    curve = aggregate(table, points=3, n_boot=50, held=["b"])
    np.testing.assert_allclose(curve["mean"], [0.0, 7.5, 20.0])
    assert curve["ci_low"].iloc[-1] == curve["ci_high"].iloc[-1] == 20.0  # one run left: no spread
    assert list(curve["n_runs"]) == [2, 2, 1]


def test_solved_runs_are_those_whose_summary_says_solved():
    empty = pd.DataFrame()
    table = pd.DataFrame({"run": ["a", "b", "c"], "summary_solved": [True, False, np.nan]})  # c: no summary
    assert solved_runs(Runs(runs=table, eval=empty, episodes=empty, metrics=empty)) == ["a"]
    no_summaries = pd.DataFrame({"run": ["a"]})
    assert solved_runs(Runs(runs=no_summaries, eval=empty, episodes=empty, metrics=empty)) == []


def test_throughput_is_the_global_steps_growth_per_window_not_the_noise_between_two_workers_rows():
    # A true 1,000 steps/s; worker 0 writes on the second, worker 1 a millisecond later, counting 200 steps
    # behind: neighbouring rows' differences would read -200,000 and then +1,200 steps/s.
    seconds = np.arange(41.0)
    rows = pd.DataFrame(
        {
            "wall_time": np.concatenate([seconds + 0.001, seconds]),
            "global_step": np.concatenate([1000 * seconds - 200, 1000 * seconds]),
        }
    )
    rate = throughput(rows, windows=10)
    assert len(rate) == 10
    assert rate["steps_per_s"].to_numpy() == pytest.approx(1000, rel=1e-3)
    assert rate["wall_time"].iloc[-1] == pytest.approx(40.001)
    # Three rows make one window (about four rows each); one time, none.
    assert throughput(rows.iloc[41:44])["steps_per_s"].tolist() == [1000.0]
    assert throughput(rows.iloc[:1]).empty and throughput(rows.iloc[:0]).empty
    # A row with a missing value (a half-written last line) is left out, not carried into later windows.
    torn = pd.concat([rows, pd.DataFrame({"wall_time": [20.5], "global_step": [np.nan]})])
    assert throughput(torn, windows=10)["steps_per_s"].to_numpy() == pytest.approx(1000, rel=1e-3)


@pytest.mark.slow
def test_tensorboard_event_files_have_the_stable_tags(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    import a3c

    # In this process, serial and seeded: FixedLength's episodes are 10 steps and a segment 20 (1 env x
    # t_max 20), so 4,000 steps are exactly 400 episodes; an evaluation every 1,000 steps makes 4.
    a3c.train("tests.support.envs:FixedLength-v0", run_dir=tmp_path / "run", serial=True, seed=0,
              max_steps=4000, eval_interval_steps=1000, tensorboard=True)  # fmt: skip
    accumulator = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    accumulator.Reload()
    tags = set(accumulator.Tags()["scalars"])
    expected = {
        "charts/episodic_return",
        "charts/episodic_length",
        "charts/eval_mean_return",
        "charts/steps_per_s",
        "charts/learning_rate",
        "losses/policy_loss",
        "losses/value_loss",
        "losses/entropy",
        "losses/grad_norm",
        "losses/explained_variance",
        "async/policy_lag_mean",
        "async/policy_lag_p95",
        "async/policy_lag_max",
    }
    assert expected <= tags, expected - tags
    assert len(accumulator.Scalars("charts/episodic_return")) == 400
    assert [e.step for e in accumulator.Scalars("charts/eval_mean_return")] == [1000, 2000, 3000, 4000]


def test_tensorboard_gets_the_config_as_hparams_and_text_in_the_runs_own_folder(tmp_path):
    require_extra("tensorboard", "tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

    from a3c.rundir.tensorboard import TensorBoardLog

    config = json.loads((ROOT / "tests" / "fixtures" / "old_run" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config))
    TensorBoardLog(tmp_path).close()
    assert [p.is_file() for p in (tmp_path / "tensorboard").iterdir()] == [True]  # one event file, no subrun
    accumulator = EventAccumulator(str(tmp_path / "tensorboard"))
    accumulator.Reload()
    content = accumulator.PluginTagToContent("hparams")
    start = HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info
    values = {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind")) for k, v in start.hparams.items()}
    assert values["env_id"] == "CartPole-v1" and values["lr"] == 0.001 and values["seed"] == 3
    assert values["hidden_sizes"] == "64,64" and values["obs_norm"] == "false"
    left_out = {"max_seconds", "versions", "command", "started_at"}  # None, or records of the run
    assert not left_out & set(values)
    experiment = HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    assert [m.name.tag for m in experiment.metric_infos] == ["charts/eval_mean_return"]
    (text,) = accumulator.Tensors("config/text_summary")
    table = text.tensor_proto.string_val[0].decode()
    assert "| env_id | CartPole-v1 |" in table and "| lr | 0.001 |" in table
    assert '| versions | {"python": "3.11.7"' in table and "| command | [" in table  # the whole file


@pytest.mark.slow
def test_policy_lag_is_zero_in_serial_mode(tmp_path):
    # One learner in this process pulls the weights it pushes to: no update can come between. A metrics row
    # every 1,000 of its steps (FixedLength: 1 env x t_max 20, so 6,000 steps exactly) makes 6 rows. The
    # lag of two spawned workers (positive) is tests/e2e/test_train.py's exact step count run's.
    import a3c

    run = a3c.train("tests.support.envs:FixedLength-v0", run_dir=tmp_path / "serial", serial=True, seed=0,
                    max_steps=6000, metrics_interval_steps=1000, eval_interval_steps=6000)  # fmt: skip
    metrics = run.metrics
    assert metrics["global_step"].tolist() == list(range(1000, 6001, 1000))
    assert (metrics["policy_lag_max"] == 0).all() and (metrics["policy_lag_mean"] == 0).all(), metrics


@pytest.fixture(scope="module")
def three_seeds(tmp_path_factory) -> Path:
    """Three short real CartPole runs in one folder, made in this process: serial (the run dir is the same
    as a spawned run's, which test_train checks), 3,000 steps with an evaluation every 1,000 (none reaches
    the target, so no run spends 100 confirming episodes of 500 steps, nor the notebook 100 more)."""
    import a3c

    root = tmp_path_factory.mktemp("runs")
    for seed in range(3):
        run = a3c.train("CartPole-v1", run_dir=root / f"s{seed}", serial=True, seed=seed, max_steps=3000,
                        eval_interval_steps=1000)  # fmt: skip
        assert run.summary["total_steps"] == 3000 and not run.summary["solved"], run.summary
    return root


@pytest.mark.slow
def test_load_runs_and_runs_table(three_seeds):
    runs = load_runs(three_seeds)
    assert len(runs.paths) == 3
    for table in (runs.eval, runs.episodes, runs.metrics):
        assert {"run", "env_id", "seed", "lr", "workers"} <= set(table.columns) and len(table)
    assert sorted(runs.eval["global_step"]) == [1000] * 3 + [2000] * 3 + [3000] * 3  # every run's evaluations
    table = runs_table(runs)
    assert sorted(table["seed"]) == [0, 1, 2] and set(table["env"]) == {"CartPole-v1"}
    listing = call_a3c("runs", str(three_seeds))
    table, groups = listing.stdout.split("\nseed groups: ")  # the three runs are one seed group
    assert listing.returncode == 0 and table.count("CartPole-v1") == 3 and groups.count("CartPole-v1") == 1
    # --reach: CartPole's first games (about 20 steps each) average 10 as soon as there are 5 of them
    reached = runs_table(runs, [10], window=5)
    for run, steps in zip(runs.runs["run"], reached["steps_to_10"], strict=True):
        games = runs.episodes[runs.episodes["run"] == run].sort_values(["wall_time", "global_step"])
        assert steps == games["global_step"].iloc[4]
    listing = call_a3c("runs", str(three_seeds), "--reach", "10,1e9,10", "--window", "5")
    header = listing.stdout.splitlines()[0].split()
    assert listing.returncode == 0 and header[-4:] == [
        "steps_to_10",
        "seconds_to_10",
        "steps_to_1000000000",
        "seconds_to_1000000000",
    ]  # a level given twice is one pair of columns


@pytest.mark.slow
@pytest.mark.parametrize("x", ["steps", "time"])
def test_plot_writes_a_png(three_seeds, tmp_path, x):
    out = tmp_path / f"curves-{x}.png"
    result = call_a3c("plot", str(three_seeds), "-o", str(out), "--x", x)  # in this process
    assert result.returncode == 0, result.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000


@pytest.mark.slow
def test_notebook_executes_end_to_end_on_real_runs(three_seeds):
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(ROOT / "notebooks" / "analyze_runs.ipynb", as_version=4)
    index = next(i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", []))
    # What papermill does: a cell right after the parameters cell overrides them.
    notebook.cells.insert(index + 1, nbformat.v4.new_code_cell(f"runs_dir = {str(three_seeds)!r}"))
    client = NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()
    errors = [
        o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors
    assert any(o.output_type == "display_data" for c in notebook.cells for o in c.get("outputs", []))


def test_plot_refuses_an_unknown_image_type_and_a_missing_folder(tmp_path, capsys):
    from a3c.cli import main

    for output in (tmp_path / "x.xyz", tmp_path / "missing" / "x.png"):
        with pytest.raises(SystemExit) as exit_info:
            main(["plot", str(tmp_path), "-o", str(output)])
        assert exit_info.value.code == 2
        assert capsys.readouterr().err.startswith("error: --output:")


def test_plot_without_matplotlib_names_the_extra_before_reading_any_run(tmp_path, capsys, monkeypatch):
    from a3c.cli import main

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    with pytest.raises(SystemExit) as exit_info:
        main(["plot", str(tmp_path / "no-such-run"), "-o", str(tmp_path / "x.png")])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == f"error: matplotlib is not installed; {install_hint('analysis')}\n"


def test_find_runs_skips_config_json_files_that_a3c_did_not_write(tmp_path):
    from a3c.tools.analysis import find_runs

    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text('{"name": "not a run"}')
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text('{"env_id": "E", "versions": {"a3c": "0.1.0"}}')
    assert find_runs(tmp_path) == [tmp_path / "run"]


def test_training_reach_is_where_the_trailing_mean_of_training_games_first_gets_there():
    games = pd.DataFrame(
        {
            "run": ["a"] * 6 + ["b"],
            "wall_time": [1.0, 2.0, 3.0, 5.0, 4.0, 6.0, 1.0],  # out of order, as a hand-joined table may be
            "global_step": [10, 20, 30, 50, 40, 60, 10],
            "return": [0.0, 0.0, 0.0, 10.0, 10.0, 10.0, 99.0],
        }
    )
    # run a in time order: 0 0 0 10 10 10, trailing means of 2: - 0 0 5 10 10; run b: one game, no window
    reached = training_reach(games, [5, 10, 11], window=2).set_index("run")
    assert reached.loc["a", "steps_to_5"] == 40 and reached.loc["a", "seconds_to_5"] == 4.0
    assert reached.loc["a", "steps_to_10"] == 50 and reached.loc["a", "seconds_to_10"] == 5.0
    assert reached.loc[:, ["steps_to_11", "seconds_to_11"]].isna().all().all()
    assert reached.loc["b"].isna().all()
    # Levels that print alike at 6 digits stay apart; one given twice is one pair of columns
    close = training_reach(games, [1234567, 1234568, 5, 5], window=2).columns
    assert list(close) == ["run"] + [
        f"{k}_to_{n}" for n in ("1234567", "1234568", "5") for k in ("steps", "seconds")
    ]


def test_runs_refuses_a_window_of_no_games(tmp_path):
    refused = call_a3c("runs", str(tmp_path), "--reach", "16", "--window", "0")
    assert (
        refused.returncode == 2
        and refused.stderr == "error: --window: 0 is not allowed; expected an integer >= 1\n"
    )


@pytest.mark.parametrize("levels", ["16,x", "", "inf", "16,,17"])
def test_runs_refuses_reach_levels_that_are_not_returns(tmp_path, levels):
    refused = call_a3c("runs", str(tmp_path), "--reach", levels)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == (
        f"error: --reach: {levels!r} is not allowed; expected finite returns joined by commas, e.g. 16,17\n"
    )
