"""A jump of the wall clock (NTP stepping it, a person setting it, a VM resumed) is not run time: budgets,
the learning-rate schedule and the logged wall_time count monotonic seconds, and a resume trims its CSVs
by step."""

from __future__ import annotations

import csv
import time

import pytest

import a3c
from a3c.rundir.resume import trim_csv
from tests.support.run_files import read_json

JUMP_S = 1e6  # about 11.6 days


def rows(path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_a_wall_clock_jump_mid_run_ends_no_budget_and_zeroes_no_learning_rate(tmp_path, monkeypatch):
    # The clock jumps forward at the first episode: a max_seconds of 10 minutes must not end the run, and
    # the linear learning rate follows the steps (max_steps is further along than the seconds).
    offset = [0.0]
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + offset[0])

    class Jump:
        def on_episode(self, row) -> None:
            offset[0] = JUMP_S

    run_dir = tmp_path / "run"
    run = a3c.train(
        "tests.support.envs:FixedLength-v0",
        run_dir=run_dir,
        serial=True,
        max_steps=2000,
        max_seconds=600,
        eval_interval=0.5,
        lr_schedule="linear",
        metrics_interval_steps=200,
        callbacks=[Jump()],
    )
    summary = read_json(run_dir / "summary.json")
    assert (run.exit_code, summary["exit_reason"], summary["total_steps"]) == (0, "max_steps", 2000)
    assert offset[0] == JUMP_S  # the clock did jump
    assert summary["wall_s"] < 600
    lrs = [float(r["learning_rate"]) for r in rows(run_dir / "metrics.csv")]
    assert lrs and min(lrs) > 0.0, lrs
    walls = [float(r["wall_time"]) for r in rows(run_dir / "episodes.csv")]
    assert walls == sorted(walls) and walls[-1] < 600, walls[-5:]


def test_a_resume_keeps_rows_up_to_the_checkpoints_step_whatever_their_times(tmp_path):
    # Rows written before a backward clock jump carry larger wall times than the checkpoint saved after it
    # (an older a3c counted wall_time on the wall clock): their steps say they are the checkpoint's.
    path = tmp_path / "episodes.csv"
    path.write_text(
        "wall_time,global_step,worker,return,length\n900.0,10,0,5.0,5\n901.0,20,1,7.0,7\n5.0,30,0,9.0,3\n"
    )
    columns = ("wall_time", "global_step", "worker", "return", "length")
    assert trim_csv(path, max_step=20, max_wall=2.0, columns=columns) == (2, 1)
    assert [r["global_step"] for r in rows(path)] == ["10", "20"]


def test_a_linear_learning_rate_is_never_above_its_start_whatever_the_seconds_say():
    # A clock read back from another machine (a Ray node counts by the Unix time) can put the seconds
    # before the start: the rate stays at lr, not 1.5 lr.
    from a3c.algo.optim import scheduled_lr

    assert scheduled_lr(1e-3, "linear", 0, None, seconds=-50.0, max_seconds=100.0) == 1e-3
    assert scheduled_lr(1e-3, "linear", 0, None, seconds=50.0, max_seconds=100.0) == 5e-4


@pytest.mark.slow
def test_a_resume_counts_on_from_the_latest_row_it_keeps(tmp_path):
    # An evaluation that began before the checkpoint and ended after it: its row is the checkpoint's (by its
    # step) and later than the checkpoint's time. The resumed run's rows must not go back before it.
    run_dir = tmp_path / "run"
    first = a3c.train("tests.support.envs:FixedLength-v0", run_dir=run_dir, serial=True, max_steps=600)
    assert first.exit_code == 0
    eval_rows = (run_dir / "eval.csv").read_text().splitlines()
    last = eval_rows[-1].split(",")
    late = read_json(run_dir / "summary.json")["wall_s"] + 30.0  # ended well after the checkpoint
    eval_rows[-1] = ",".join([f"{late:.3f}", *last[1:]])
    (run_dir / "eval.csv").write_text("\n".join(eval_rows) + "\n")
    resumed = a3c.resume(run_dir, max_steps=1200)
    assert resumed.exit_code == 0
    walls = [float(r["wall_time"]) for r in rows(run_dir / "eval.csv")]
    assert len(walls) > len(eval_rows) - 1 and walls == sorted(walls), walls
