"""A live run dir has one writer: a ``--resume`` or a ``--force`` on it while its trainer runs is one
``error:`` line naming the trainer's PID, exit 2, and the run goes on untouched; once the trainer ends, the
same resume runs."""

from __future__ import annotations

import os
import signal

import pytest

from tests.support.commands import call_a3c_train, end, start_cartpole, wait_until
from tests.support.run_files import data_rows, read_json

pytestmark = pytest.mark.slow


def test_a_second_writer_is_refused_while_the_run_lives(run_dir, token):
    # The trainer is a real process; the second writers are commands in this process, refused before they
    # start anything (--serial and a step budget: were one not refused, it would start no process either).
    proc = start_cartpole(run_dir, token)
    try:
        config_before = (run_dir / "config.json").read_bytes()
        resume = call_a3c_train("--resume", str(run_dir), "--serial", "--max-steps", "1", "--quiet")
        force = call_a3c_train(
            "--env", "CartPole-v1", "--run-dir", str(run_dir), "--force", "--serial", "--max-steps", "1"
        )
        for option, refused in (("--resume", resume), ("--force", force)):
            assert refused.returncode == 2, refused.stderr
            assert refused.stderr.strip().splitlines() == [
                f"error: {option}: {str(run_dir)!r} is in use by a running a3c (PID {proc.pid}); "
                "wait for it to end or stop it, then run this again"
            ]
        assert proc.poll() is None and (run_dir / "config.json").read_bytes() == config_before
        rows = data_rows(run_dir / "episodes.csv")
        wait_until(proc, lambda: data_rows(run_dir / "episodes.csv") > rows, timeout=60)  # it goes on
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        end(proc)
    assert proc.returncode == 130, err
    # Once it has ended, the same run dir resumes (serially, in this process: 10 steps an update).
    step = read_json(run_dir / "summary.json")["total_steps"]
    resumed = call_a3c_train("--resume", str(run_dir), "--serial", "--max-steps", str(step + 2000), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert read_json(run_dir / "config.json")["resumes"] == 1
    assert read_json(run_dir / "summary.json")["total_steps"] == step + 2000
