"""The worker count: ``auto`` (the default) follows the CPUs the process may use, and a run with more workers
than cores (8 on this 2-core machine) starts, trains in every worker, survives a SIGKILLed trainer and resumes
with all of them. Whether 8 workers solve CartPole is tests/learning/test_local_learning.py's (a race against
the clock, not in CI)."""

from __future__ import annotations

import os

import pytest

import a3c
from a3c.core.cpus import auto_workers
from a3c.rundir.resume import load_resume_checkpoint
from a3c.training.options import train_setup
from tests.e2e.test_reliability import assert_continuous
from tests.support.commands import call_a3c_train, end, kill_trainer, popen_a3c, wait_until
from tests.support.processes import left_behind, spawned_children
from tests.support.run_files import csv_rows, read_json

pytestmark = pytest.mark.slow

WORKERS = 8  # four per core on the 2-core dev machine: more workers than cores


def test_a_fresh_run_takes_one_worker_per_usable_cpu(tmp_path):
    # Two of the CPUs this test may use (all of them on the 2-core dev machine), then one: the count follows
    # the affinity mask, whatever the machine's size. Two: a3c train's setup, under that mask (what a run
    # then does with its count is the one-CPU run's proof); one: a short CartPole run with no --workers
    # whose trainer runs under a mask of one CPU (its worker comes from the session's forkserver, unpinned:
    # the count is the trainer's decision). Both in this process, whose own mask is put back after them.
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        pytest.skip("needs two usable CPUs")
    try:
        os.sched_setaffinity(0, set(mine[:2]))
        two = train_setup(
            "CartPole-v1", {}, (), run_dir=tmp_path / "two", force=False, resume=None, serial=False
        )
        os.sched_setaffinity(0, {mine[0]})
        args = ("--env", "CartPole-v1", "--max-steps", "3000", "--target-return", "1e9")
        pinned = call_a3c_train(*args, "--run-dir", str(tmp_path / "pinned"))
    finally:
        os.sched_setaffinity(0, mine)
    assert (two.config.workers, two.auto_workers) == (auto_workers(2), True) and auto_workers(2) == 2
    assert pinned.returncode == 0, pinned.stderr
    assert read_json(tmp_path / "pinned" / "config.json")["workers"] == 1
    assert "workers: 1 (auto: one per CPU this process may use" in pinned.stderr
    assert {int(r["worker"]) for r in csv_rows(tmp_path / "pinned" / "episodes.csv")} == {0}


def workers_since(run_dir, step: int, old: list[dict[str, str]] = ()) -> set[int]:
    """The workers with an episode logged after global step ``step``, not among the rows ``old`` (none before
    the file exists)."""
    seen = {tuple(r.values()) for r in old}
    try:
        rows = csv_rows(run_dir / "episodes.csv")
    except OSError:
        return set()
    return {int(r["worker"]) for r in rows if int(r["global_step"]) > step and tuple(r.values()) not in seen}


class UntilEveryWorkerTrains:
    """A callback that stops the run once each of its WORKERS workers logged an episode in it."""

    def __init__(self) -> None:
        self.workers: set[int] = set()

    def on_episode(self, row: dict) -> bool:
        self.workers.add(int(row["worker"]))
        return self.workers == set(range(WORKERS))


def test_eight_workers_on_two_cores_train_and_resume_after_the_trainer_is_killed(run_dir, token):
    args = f"train --env CartPole-v1 --workers {WORKERS} --target-return 1e9 --max-seconds 600 --quiet"
    proc = popen_a3c(*args.split(), "--checkpoint-interval", "0.2", "--run-dir", str(run_dir), token=token)
    last = run_dir / "checkpoints" / "last.pt"
    try:
        wait_until(proc, lambda: workers_since(run_dir, -1) == set(range(WORKERS)), timeout=300)
        wait_until(proc, last.is_file, timeout=60)
        # The workers and the evaluator (which names itself once started: wait for it, do not race it).
        wait_until(proc, lambda: len(spawned_children(proc.pid)) == WORKERS + 1, timeout=60)
        kill_trainer(proc, token)
    finally:
        end(proc)
    checkpoint = load_resume_checkpoint(run_dir)
    step = checkpoint["global_step"]
    assert len(checkpoint["worker_steps"]) == WORKERS and step == int(checkpoint["worker_steps"].sum()) > 0
    before_kill = csv_rows(run_dir / "episodes.csv")

    # The resume, in this process (its workers forked from the session's forkserver), stops once every worker
    # logged an episode of it: in episodes.csv, rows of all 8 after the checkpoint (not: rows the killed run
    # logged after it). Its budget of 300 s more is a cap, for a worker that never gets there.
    cap = float(checkpoint["wall_time"]) + 300
    resumed = a3c.resume(run_dir, progress=False, callbacks=[UntilEveryWorkerTrains()], max_seconds=cap)
    assert (resumed.exit_code, resumed.summary["exit_reason"]) == (0, "callback"), resumed.summary
    assert workers_since(run_dir, step, before_kill) == set(range(WORKERS))
    assert read_json(run_dir / "config.json")["workers"] == WORKERS
    state = load_resume_checkpoint(run_dir)
    summary = read_json(run_dir / "summary.json")
    assert state["resumes"] == 1 and state["global_step"] == summary["total_steps"] > step
    # The per-worker slots count this run segment, on top of the resumed total: each of the 8 trained in it.
    assert state["global_step"] == step + int(state["worker_steps"].sum())
    assert len(state["worker_steps"]) == WORKERS and bool((state["worker_steps"] > 0).all())
    assert_continuous(run_dir / "episodes.csv", before_kill, step, float(checkpoint["wall_time"]))
    # The killed run's processes (the resume's workers carry the session's token: its leak check covers them).
    assert not left_behind(token, timeout=30.0)
