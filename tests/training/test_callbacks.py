"""Callbacks (a3c.training.callbacks): a true return stops a run cleanly, a raise fails it in one line with
its files kept, the two that ship (StopOnNoImprovement, CheckpointEvery), a bad callback refused before
anything is written, and no tracker imported by a run that does not ask for one. Serial runs on FixedLength
(10-step episodes): a few hundred steps each."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import a3c
from a3c.core.errors import BadInput
from a3c.rundir.checkpoints import load_checkpoint
from a3c.training.callbacks import CallbackFailed, Callbacks
from tests.support.commands import a3c_env
from tests.support.run_files import csv_rows, data_rows, read_json

ENV = "tests.support.envs:FixedLength-v0"


def small_run(run_dir, callbacks, **config):
    """A serial run of at most 100k steps (a callback ends it), evaluating every 100 steps."""
    settings = {"max_steps": 100_000, "eval_interval_steps": 100, **config}
    return a3c.train(ENV, run_dir=run_dir, serial=True, callbacks=callbacks, **settings)


class StopAtSecondEval:
    def __init__(self):
        self.rows: list[dict] = []

    def on_eval(self, row):
        self.rows.append(row)
        return len(self.rows) == 2


def test_a_callback_returning_true_stops_the_run_cleanly(run_dir):
    callback = StopAtSecondEval()
    run = small_run(run_dir, [callback])
    assert run.exit_code == 0 and run.summary["exit_reason"] == "callback"
    assert data_rows(run_dir / "eval.csv") == 2 == len(callback.rows)  # no final evaluation after the stop
    # The rows are eval.csv's, as written.
    assert [{k: str(v) for k, v in row.items()} for row in callback.rows] == csv_rows(run_dir / "eval.csv")
    assert run.summary["total_steps"] < 100_000 and (run_dir / "checkpoints" / "last.pt").is_file()


class RaisesOnEpisode:
    def __init__(self):
        self.ended: list[dict] = []

    def on_episode(self, row):
        if row["global_step"] >= 50:
            raise ValueError("no more episodes, please")

    def on_end(self, summary):
        self.ended.append(summary)


def test_a_raising_callback_fails_the_run_in_one_line_and_keeps_its_files(run_dir, capsys):
    raising = RaisesOnEpisode()
    with pytest.raises(a3c.TrainingFailed) as failed:
        small_run(run_dir, [raising])
    assert failed.value.run.run_dir == run_dir
    # Its on_end still comes (a tracker closes its run), once, with the failure.
    assert [s["exit_reason"] for s in raising.ended] == ["failed: callback RaisesOnEpisode.on_episode"]
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and re.fullmatch(
        r"error: callback RaisesOnEpisode.on_episode failed: ValueError: no more episodes, please "
        r"\(at test_callbacks.py:\d+\)",
        errors[0],
    )
    summary = read_json(run_dir / "summary.json")
    assert summary["exit_reason"] == "failed: callback RaisesOnEpisode.on_episode"
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["global_step"] == summary["total_steps"]


def evals(*means: float) -> list[dict]:
    return [{"global_step": 100 * i, "mean_return": mean} for i, mean in enumerate(means, 1)]


def test_stop_on_no_improvement_counts_evaluations_in_a_row_without_a_new_best():
    stop = a3c.StopOnNoImprovement(2)
    assert [stop.on_eval(row) for row in evals(1, 2, 2, 3, 1, 3)] == [False, False, False, False, False, True]
    # min_evals: the first evaluations set the best but do not count.
    late = a3c.StopOnNoImprovement(2, min_evals=3)
    assert [late.on_eval(row) for row in evals(5, 1, 1, 1, 1)] == [False, False, False, False, True]


def test_stop_on_no_improvement_ends_a_run(run_dir):
    run = small_run(run_dir, [a3c.StopOnNoImprovement(3)])  # FixedLength's return is always 10
    assert run.summary["exit_reason"] == "callback" and data_rows(run_dir / "eval.csv") == 4


def test_checkpoint_every_saves_at_each_multiple_of_its_steps(run_dir):
    every = a3c.CheckpointEvery(300)
    small_run(run_dir, [every], max_steps=1000, eval_interval_steps=None)
    # One save at the first row (of any CSV) at or past each multiple of 300 the rows crossed.
    steps = [int(r["global_step"]) for f in ("episodes.csv", "metrics.csv") for r in csv_rows(run_dir / f)]
    crossed = sorted({step // 300 for step in steps} - {0})
    saved = sorted((run_dir / "checkpoints").glob("saved-*.pt"))
    assert saved == every.paths and len(saved) == len(crossed) == 3
    for path, multiple in zip(saved, crossed, strict=True):
        step = load_checkpoint(path)["global_step"]
        assert path.name == f"saved-{step:012d}.pt" and 300 * multiple <= step < 300 * (multiple + 1)
    assert a3c.load(saved[0]).config.env_id == ENV  # a checkpoint like last.pt


def test_a_callback_without_hooks_is_bad_input_before_anything_is_written(run_dir):
    with pytest.raises(BadInput, match=r"^callbacks: .*expected an object with at least one of the methods"):
        small_run(run_dir, [lambda row: True])
    with pytest.raises(BadInput, match=r"^callbacks: <.*StopOnNoImprovement.*expected a list of callbacks"):
        small_run(run_dir, a3c.StopOnNoImprovement(3))
    assert not run_dir.exists()


def test_every_callback_gets_the_row_and_the_first_failure_is_raised():
    seen: list[str] = []

    class Records:
        def on_eval(self, row):
            row["mean_return"] = None  # its own copy: the next callback still sees the value
            seen.append("records")

    class Fails:
        def on_eval(self, row):
            raise RuntimeError("")

    class Checks:
        def on_eval(self, row):
            seen.append(f"checks {row['mean_return']}")

    callbacks = Callbacks([Records(), Fails(), Checks()])
    with pytest.raises(CallbackFailed) as failed:
        callbacks.row("on_eval", {"mean_return": 1.0})
    assert seen == ["records", "checks 1.0"]
    assert failed.value.record.source == "callback Fails.on_eval"
    assert failed.value.record.traceback.startswith("RuntimeError (at test_callbacks.py:")
    assert callbacks.row("on_eval", {"mean_return": 2.0}) is None and len(callbacks.active) == 2


@pytest.mark.slow  # starts a process: a fresh interpreter is the only place to see what a run imports
def test_a_run_without_a_tracker_imports_none(tmp_path):
    code = (
        "import sys, a3c\n"
        f"a3c.train({ENV!r}, run_dir={str(tmp_path / 'run')!r}, serial=True, max_steps=50)\n"
        "print(sorted(m for m in ('mlflow', 'wandb') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=a3c_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"


def test_a_tracker_without_its_extra_is_one_line_before_anything_is_written(run_dir, monkeypatch):
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "mlflow" else found(name))
    with pytest.raises(BadInput) as bad:
        small_run(run_dir, [], track="mlflow")
    assert str(bad.value) == (
        "--track: mlflow needs the `mlflow` extra, which is not installed (mlflow missing); install it with "
        "pip install -e '.[mlflow]'"
    )
    assert not run_dir.exists()


def test_a_failing_on_start_ends_the_run_before_any_step_and_on_end_still_runs(run_dir, capsys):
    ended: list[dict] = []

    class Refuses(a3c.Callback):
        def on_start(self, run):
            assert run.run_dir == run_dir and not run.resumed and run.global_step == 0
            raise OSError("no tracking server")

    class Ends(a3c.Callback):
        def on_end(self, summary):
            ended.append(summary)

    with pytest.raises(a3c.TrainingFailed):
        small_run(run_dir, [Refuses(), Ends()])
    assert "error: callback Refuses.on_start failed: OSError: no tracking server" in capsys.readouterr().err
    assert [s["exit_reason"] for s in ended] == ["failed: callback Refuses.on_start"]
    assert read_json(run_dir / "summary.json")["total_steps"] == 0 == data_rows(run_dir / "episodes.csv")
