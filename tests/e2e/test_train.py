"""End-to-end runs of ``a3c train``: as a real command where the trainer's process is the point (the run-dir
contract, stopping), in this process where it is not (the exact step count of two workers, a serial run)."""

from __future__ import annotations

import csv
import json
import os
import re
import signal

import pytest
import torch

import a3c
from a3c.rundir.csvlog import EPISODE_COLUMNS, EVAL_COLUMNS
from a3c.rundir.resume import load_resume_checkpoint
from tests.support import ROOT
from tests.support.commands import call_a3c, end, more_rows, popen_a3c, start_cartpole, wait_until
from tests.support.processes import alive, left_behind, spawned_children
from tests.support.run_files import csv_rows, data_rows, read_json

SUMMARY_KEYS = {
    "env_id",
    "solved",
    "target_return",
    "time_to_solve_s",
    "steps_to_solve",
    "total_steps",
    "wall_s",
    "steps_per_s",
    "best_mean_return",
    "exit_reason",
}


def header(path) -> tuple[str, ...]:
    with path.open() as f:
        return tuple(next(csv.reader(f)))


def documented_files() -> dict[str, list[str]]:
    """docs/runs.md's "The files a run leaves" block: each file's documented columns (or keys), in order.

    An entry is a line ``  <name>   a, b,`` plus the deeper-indented lines that continue it.
    """
    text = (ROOT / "docs" / "runs.md").read_text()
    block = text.split("## The files a run leaves", 1)[1].split("```")[1]
    entries: dict[str, str] = {}
    name = None
    for line in block.splitlines():
        entry = re.match(r"  (\S+)\s+(.*)", line)
        if entry:
            name = entry.group(1)
            entries[name] = entry.group(2)
        elif name is not None and line.startswith("   "):
            entries[name] += line.strip()
    return {k: [c.strip() for c in v.split(",") if c.strip()] for k, v in entries.items()}


def test_csv_headers_and_summary_keys_are_the_documented_ones(tmp_path):
    # docs/runs.md is the contract notebooks and users read: the files must match it column for column.
    from a3c.core.config import Config
    from a3c.training.train import Trainer
    from a3c_envs import inspect_env

    docs = documented_files()
    assert docs["metrics.csv"][:3] == ["wall_time", "global_step", "worker"]  # the parse found the block
    info = inspect_env("tests.support.envs:FixedLength-v0")
    config = Config(env_id=info.env_id, workers=1, eval_interval=0.2, max_steps=300).validate()
    run_dir = tmp_path / "run"
    assert Trainer(config, info, run_dir, serial=True, show_progress=False).run() == 0
    for name in ("eval.csv", "episodes.csv", "metrics.csv"):
        assert list(header(run_dir / name)) == docs[name], name
    assert set(read_json(run_dir / "summary.json")) >= set(docs["summary.json"])


def workers_with_episodes(run_dir) -> set[int]:
    """The worker ids with a row in episodes.csv so far (none before the file exists)."""
    try:
        with (run_dir / "episodes.csv").open() as f:
            return {int(row["worker"]) for row in csv.DictReader(f) if row.get("length")}
    except OSError:
        return set()


def stop_when(proc, condition, timeout: float = 120, ctrl_c: int = 1) -> tuple[str, str]:
    """Wait for ``condition`` (under ``timeout``), then Ctrl-C the run (``ctrl_c`` times, back to back); its
    (stdout, stderr) once it exits."""
    try:
        wait_until(proc, condition, timeout=timeout)
        for _ in range(ctrl_c):
            os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        end(proc)
    assert proc.returncode == 130, err
    return out, err


@pytest.mark.slow
def test_two_spawned_workers_train_and_leave_the_documented_run_dir(run_dir, token):
    # Events, not a race: the run trains until both workers logged episodes and the evaluator an evaluation,
    # then Ctrl-C twice (SIGINT to the whole process group, as a terminal sends it, the second while the
    # first stop goes on) ends it cleanly, leaving no child. (One Ctrl-C ends the run of
    # tests/e2e/test_run_dir_lock.py.) Whether Hogwild CartPole solves in time is tests/learning's question;
    # that the learner learns is the seeded serial run's (tests/e2e/test_deterministic.py).
    proc = start_cartpole(run_dir, token, "--seed 0 --target-return 1e9")
    children = spawned_children(proc.pid)
    condition = lambda: workers_with_episodes(run_dir) == {0, 1} and data_rows(run_dir / "eval.csv") >= 1  # noqa: E731
    _, err = stop_when(proc, condition, ctrl_c=2)
    assert not alive(children) and not left_behind(token)
    summary = read_json(run_dir / "summary.json")
    assert set(summary) >= SUMMARY_KEYS and summary["exit_reason"] == "SIGINT" and not summary["solved"]
    # A signal is a stop: a child that ends on it is not a crash, and nothing is restarted.
    assert summary["restarts"] == 0 and "restart" not in err and "crashed" not in err, err
    assert summary["total_steps"] > 0 and summary["episodes"] == data_rows(run_dir / "episodes.csv")
    config = read_json(run_dir / "config.json")
    assert config["env_id"] == "CartPole-v1" and config["workers"] == 2 and config["seed"] == 0
    assert {"python", "torch", "gymnasium", "a3c"} <= set(config["versions"])
    assert header(run_dir / "eval.csv") == EVAL_COLUMNS
    assert header(run_dir / "episodes.csv") == EPISODE_COLUMNS
    assert workers_with_episodes(run_dir) == {0, 1}
    assert (run_dir / "checkpoints" / "best.pt").is_file() and (run_dir / "checkpoints" / "last.pt").is_file()
    assert load_resume_checkpoint(run_dir)["global_step"] > 0

    evaluation = call_a3c("evaluate", str(run_dir / "checkpoints" / "best.pt"), "--episodes", "7", "--json")
    assert evaluation.returncode == 0, evaluation.stderr
    report = json.loads(evaluation.stdout)
    assert report["episodes"] == 7 and report["env_id"] == "CartPole-v1", report
    assert report["min_return"] <= report["mean_return"] <= report["max_return"] <= 500, report


@pytest.mark.slow
def test_step_count_is_exact_with_two_spawned_workers(run_dir):
    # FixedLength-v0 truncates every episode after exactly 10 steps and t_max = 10, so every segment ends on
    # an episode boundary: the steps in episodes.csv must add up to the shared counters' total exactly. The
    # step budget ends the run (an event: the workers then finish their update and send their episodes);
    # 40k steps keep both workers busy for seconds, long after each has started (the two start side by side,
    # from the forkserver). The policy lag is checked here too. The trainer is this process (the Python
    # API), its workers forked from the session's forkserver: no interpreter or torch to start.
    run = a3c.train("tests.support.envs:FixedLength-v0", run_dir=run_dir, workers=2, envs_per_worker=2,
                    t_max=10, max_steps=40_000, target_return=1000, max_seconds=600)  # fmt: skip
    assert run.exit_code == 0, run.summary
    summary = read_json(run_dir / "summary.json")
    assert summary["exit_reason"] == "max_steps" and summary["total_steps"] >= 40_000
    with (run_dir / "episodes.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert sum(int(r["length"]) for r in rows) == summary["total_steps"]
    last = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert int(last["worker_steps"].sum()) == summary["total_steps"]
    assert last["worker_steps"].tolist() == [u * 20 for u in last["worker_updates"].tolist()]
    assert all(n > 0 for n in last["worker_updates"].tolist())
    # Hogwild: both workers update one model side by side, so some of their updates land between another's
    # pull and push (a policy lag > 0; one learner in a process has none: tests/tools/test_analysis.py).
    with (run_dir / "metrics.csv").open() as f:
        metrics = list(csv.DictReader(f))
    assert {int(r["worker"]) for r in metrics} == {0, 1}
    assert max(int(r["policy_lag_max"]) for r in metrics) > 0, metrics


@pytest.mark.slow
def test_signal_stops_the_run_and_leaves_no_child(run_dir, token):
    # A run under nohup: a hangup of its group (the terminal of a `nohup a3c train ...` closed) is no stop,
    # for the trainer or any child; SIGTERM to the trainer alone (`kill PID`) then is. (SIGINT to the whole
    # process group, a terminal's Ctrl-C, ends the run of
    # test_two_spawned_workers_train_and_leave_the_documented_run_dir; SIGTERM to the group, as `timeout` or
    # a batch scheduler sends it, test_timeout_s_term_is_a_stop_and_the_run_resumes's; a hangup without
    # nohup, tests/e2e/test_suspend_and_hangup.py's.) The run acts within a tick (about 0.1 s); the 60 s
    # wait is only a cap, so that a loaded machine cannot fail the test.
    proc = start_cartpole(run_dir, token, prefix=("nohup",))
    try:
        children = spawned_children(proc.pid)
        os.killpg(proc.pid, signal.SIGHUP)
        more_rows(run_dir, proc, 20)
        assert alive(children) == children  # no child took it for a stop either
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
        err = proc.stderr.read()
    finally:
        end(proc)
    assert not alive(children) and not left_behind(token)
    summary = read_json(run_dir / "summary.json")
    assert summary["exit_reason"] == "SIGTERM"
    # A signal is a stop: a child that ends on it is not a crash, and nothing is restarted.
    assert summary["restarts"] == 0 and "restart" not in err and "crashed" not in err, err
    assert (run_dir / "checkpoints" / "last.pt").is_file()


@pytest.mark.slow
def test_timeout_s_term_is_a_stop_and_the_run_resumes(run_dir, token):
    # `timeout -s TERM` (as Slurm and container runtimes do) sends SIGTERM to its whole process group: the
    # trainer, every child and the forkserver at once. Here timeout's own clock is a cap; the test sends
    # timeout a SIGTERM once the run trains, which it relays to the group as at its deadline.
    args = "train --env CartPole-v1 --workers 2 --max-seconds 600 --quiet --target-return 1e9"
    prefix = ("timeout", "--preserve-status", "-s", "TERM", "600")
    proc = popen_a3c(*args.split(), "--run-dir", str(run_dir), token=token, prefix=prefix)
    try:
        wait_until(proc, lambda: data_rows(run_dir / "episodes.csv") >= 20, timeout=120)
        wait_until(proc, lambda: len(spawned_children(proc.pid)) == 3, timeout=30)  # under timeout's process
        children = spawned_children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
        err = proc.stderr.read()
    finally:
        end(proc)
    assert not alive(children) and not left_behind(token)
    summary = read_json(run_dir / "summary.json")
    assert summary["exit_reason"] == "SIGTERM" and summary["restarts"] == 0, err
    assert "restart" not in err and "crashed" not in err, err
    # It resumes: serially, in this process (10 steps an update, so the count is exact; a killed run resumed
    # with its workers is tests/e2e/test_many_workers.py's).
    steps = summary["total_steps"]
    resumed = a3c.resume(run_dir, serial=True, max_steps=steps + 2000)
    assert (resumed.exit_code, resumed.summary["total_steps"], resumed.config["resumes"]) == (
        0,
        steps + 2000,
        1,
    )


@pytest.mark.slow
def test_serial_mode_runs_the_same_learner_in_process(run_dir):
    # FixedLength: one env, 20 steps an update, no target; an evaluation every 500 steps (the last at the
    # budget's end, once). That serial starts no process is tests/e2e/test_cli_contract.py's.
    env_id = "tests.support.envs:FixedLength-v0"
    run = a3c.train(env_id, run_dir=run_dir, serial=True, max_steps=2000, eval_interval_steps=500)
    summary = run.summary
    assert (run.exit_code, summary["exit_reason"], summary["total_steps"], summary["total_updates"]) == (
        0,
        "max_steps",
        2000,
        100,
    ), summary
    assert [int(r["global_step"]) for r in csv_rows(run_dir / "eval.csv")] == [500, 1000, 1500, 2000]
    assert run.config["workers"] == 1 and run.config["serial"] is True
