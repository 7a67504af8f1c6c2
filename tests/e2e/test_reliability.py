"""Fault injection with real processes: crashed and hung children, a killed trainer, resume, bad checkpoints,
non-finite numbers and a failing disk. Every run is under a timeout and leaves no process behind."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
from pathlib import Path

import pytest
import torch

import a3c
from a3c.core.config import Config
from a3c.rundir.resume import load_resume_checkpoint
from a3c.training.train import Trainer
from a3c_envs import inspect_env
from tests.support.commands import (
    call_a3c_train,
    end,
    kill_trainer,
    start_cartpole,
    train_serial_fixed_length,
    wait_until,
)
from tests.support.processes import processes_with_token
from tests.support.run_files import assert_continuous, csv_rows, data_rows, read_json

pytestmark = pytest.mark.slow


def comm_pids(name: str) -> set[int]:
    """PIDs of processes whose name (/proc/PID/comm, set by a3c's children) is ``name``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == name:
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_worker_that_always_raises_ends_the_run_after_its_restart_budget(run_dir):
    # One worker, so the counts are exact: its budget (per worker) is 2 restarts; its third crash ends the run
    # (restarts of two workers racing to their budgets made them 2 to 4). The trainer runs in this process,
    # its worker processes forked from the session's forkserver: each crash and restart is a real process's.
    args = "--env tests.support.envs:Faulty-v0 --workers 1 --eval-interval 600 --set max_restarts=2"
    result = call_a3c_train(*args.split(), "--max-seconds", "180", "--run-dir", str(run_dir))
    err = result.stderr
    assert result.returncode == 1, err
    assert "injected fault" in err and "crashed 3 times within 600 s; the restart budget is 2" in err
    assert err.count("restarting it") == 2 and err.count("\nerror: worker 0 failed:\n") == 1, err
    summary = read_json(run_dir / "summary.json")
    assert (summary["exit_reason"], summary["restarts"]) == ("failed: worker 0", 2), summary


def test_killed_trainer_leaves_no_child_and_resume_continues_exactly(run_dir, token):
    # One run, two kills: a SIGKILLed worker is restarted and trains on, then the trainer is killed. Events,
    # not a race: worker 0 is killed, a new worker 0 process appears and logs episodes of its own (that such
    # a run still solves is tests/learning's check). Then the trainer itself is SIGKILLed, and no child may
    # outlive it. A checkpoint every 0.1 s (kept on resume): the resume's 10k steps (half a second or more)
    # rotate them. The resume is serial, in this process (10 steps an update, so its step count is exact); a
    # killed run resumed with all its workers is tests/e2e/test_many_workers.py's.
    proc = start_cartpole(run_dir, token, extra="--target-return 1e9 --checkpoint-interval 0.1")
    last = run_dir / "checkpoints" / "last.pt"
    try:
        (victim,) = comm_pids("a3c-worker-0") & processes_with_token(token)
        steps_before = max(int(r["global_step"]) for r in csv_rows(run_dir / "episodes.csv"))
        os.kill(victim, signal.SIGKILL)
        wait_until(proc, lambda: comm_pids("a3c-worker-0") & processes_with_token(token) - {victim}, 60)
        # The trainer read what the dead worker had sent before it restarted it: rows from here on are the
        # new worker's.
        worker_0_rows = lambda: sum(r["worker"] == "0" for r in csv_rows(run_dir / "episodes.csv"))  # noqa: E731
        before_restart = worker_0_rows()
        wait_until(proc, lambda: worker_0_rows() >= before_restart + 5, timeout=120)

        wait_until(proc, lambda: last.is_file() and data_rows(run_dir / "episodes.csv") >= 200, timeout=120)
        wait_until(proc, lambda: len(list((run_dir / "checkpoints").glob("step-*.pt"))) >= 2, timeout=60)
        kill_trainer(proc, token)
        err = proc.stderr.read()
    finally:
        end(proc)
    assert err.count("worker 0 crashed") == 1 and "restarting" in err, err
    checkpoint = load_resume_checkpoint(run_dir)
    step = checkpoint["global_step"]
    assert step > steps_before and step == int(checkpoint["worker_steps"].sum())
    before_kill = {name: csv_rows(run_dir / name) for name in ("episodes.csv", "eval.csv")}

    assert a3c.resume(run_dir, serial=True, max_steps=step + 10_000, max_seconds=600).exit_code == 0
    summary = read_json(run_dir / "summary.json")
    assert (summary["exit_reason"], summary["total_steps"]) == ("max_steps", step + 10_000), summary
    resumed = load_resume_checkpoint(run_dir)
    assert resumed["global_step"] == summary["total_steps"] and resumed["resumes"] == 1
    assert resumed["updates"] == checkpoint["updates"] + 1000
    assert read_json(run_dir / "config.json")["resumes"] == 1
    for name in ("episodes.csv", "eval.csv"):
        assert_continuous(run_dir / name, before_kill[name], step, float(checkpoint["wall_time"]))
    table = csv_rows(run_dir / "episodes.csv")
    assert summary["episodes"] == len(table)
    assert any(int(r["global_step"]) > step for r in table) and any(
        int(r["global_step"]) <= step for r in table
    )
    assert len(list((run_dir / "checkpoints").glob("step-*.pt"))) == 4  # last.pt's own + keep_checkpoints (3)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A short serial FixedLength run, finished: a run dir with a good last.pt to break in copies."""
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    train_serial_fixed_length(run_dir, 400)
    return run_dir


def break_last(run_dir: Path, how: str, other: Path) -> None:
    """Break last.pt; damaged, every step-*.pt too (else a resume falls back to the newest intact one)."""
    last = run_dir / "checkpoints" / "last.pt"
    for path in [last, *last.parent.glob("step-*.pt")] if how != "another env" else [last]:
        if how == "truncated":
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        elif how == "random bytes":
            path.write_bytes(os.urandom(4096))
        else:  # a checkpoint of another env
            shutil.copy(other / "checkpoints" / "last.pt", path)


@pytest.fixture(scope="module")
def other_env_run(tmp_path_factory) -> Path:
    """A short serial CartPole run: a whole checkpoint of another env than ``finished_run``'s."""
    run_dir = tmp_path_factory.mktemp("other") / "run"
    assert a3c.train("CartPole-v1", run_dir=run_dir, serial=True, max_steps=200).exit_code == 0
    return run_dir


@pytest.mark.parametrize("how", ["truncated", "random bytes", "another env"])
def test_broken_or_foreign_checkpoint_is_refused_and_nothing_is_overwritten(
    finished_run, other_env_run, tmp_path, how, capsys
):
    # The refusals through the CLI in this process: they come before anything starts (a command each would
    # only add its imports).
    from tests.test_cli import call

    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    break_last(run_dir, how, other_env_run)
    before = digest(run_dir)

    code, err = call("train", "--resume", str(run_dir), "--quiet"), capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    code, err = call("evaluate", str(run_dir / "checkpoints" / "last.pt")), capsys.readouterr().err
    if how == "another env":
        assert code == 0, err  # a whole checkpoint of CartPole: evaluate plays it on CartPole
    else:
        assert code == 2 and err.startswith("error: checkpoint:"), err
    assert digest(run_dir) == before


def serial_trainer(run_dir: Path, resume=None, **overrides) -> Trainer:
    info = inspect_env("tests.support.envs:FixedLength-v0")
    values = {"env_id": info.env_id, "workers": 1, "eval_interval": 0.2, "max_steps": 600, **overrides}
    config = Config(**values).validate()
    return Trainer(config, info, run_dir, serial=True, show_progress=False, resume=resume)


def test_resume_round_trip_is_bit_exact(tmp_path):
    run_dir = tmp_path / "run"
    first = serial_trainer(run_dir)
    assert first.run() == 0
    # The first trainer's own final state, read from it (not from its checkpoint)...
    final_model = {k: v.clone() for k, v in first.model.state_dict().items()}
    (first_flat,) = first.optimizer.param_groups[0]["params"]
    final_moments = {k: v.clone() for k, v in first.optimizer.state[first_flat].items()}
    final_counts = (first.counters.total_steps, first.counters.total_updates, first.monitor.episodes)
    final_rng = torch.get_rng_state()
    checkpoint = load_resume_checkpoint(run_dir)
    # ... is what its last.pt holds ...
    torch.testing.assert_close(checkpoint["model_state"], final_model, rtol=0, atol=0)
    torch.testing.assert_close(checkpoint["optimizer_state"]["state"][0], final_moments, rtol=0, atol=0)
    assert (checkpoint["global_step"], checkpoint["updates"], checkpoint["episodes"]) == final_counts
    assert torch.equal(checkpoint["rng_state"], final_rng)

    torch.manual_seed(first.config.seed)  # what a fresh Trainer seeds: the resume must replace it
    fresh_rng = torch.get_rng_state()
    assert not torch.equal(fresh_rng, final_rng)  # else the RNG check below could not fail
    second = serial_trainer(run_dir, resume=checkpoint, max_steps=1200)
    # ... and what the resumed trainer starts from.
    torch.testing.assert_close(second.model.state_dict(), final_model, rtol=0, atol=0)
    (flat,) = second.optimizer.param_groups[0]["params"]  # one flat parameter (a3c/algo/optim.py)
    for key in ("step", "exp_avg", "exp_avg_sq"):
        live = second.optimizer.state[flat][key]
        assert torch.equal(live, final_moments[key]) and live.is_shared(), key
    assert (
        second.counters.total_steps,
        second.counters.total_updates,
        second.monitor.episodes,
    ) == final_counts
    assert final_counts[2] == data_rows(run_dir / "episodes.csv")
    assert torch.equal(torch.get_rng_state(), final_rng)  # the torch RNG continues where it stopped
    assert second.run() == 0
    assert load_resume_checkpoint(run_dir)["global_step"] == 1200  # 60 updates of 20 steps


def test_non_finite_gradients_are_skipped_and_counted(tmp_path):
    env_id = "tests.support.envs:NaNReward-v0"
    run = a3c.train(env_id, run_dir=tmp_path / "run", serial=True, max_steps=3000, eval_interval=0.5)
    assert run.exit_code == 0
    summary = run.summary
    # One env, 20 steps a segment, a NaN reward at every 53rd step: 56 NaNs in 3,000 steps, each in a segment
    # of its own; exactly those updates are skipped (the return statistics stay finite: a NaN once kept them
    # NaN, and 148 of the 150 updates were skipped).
    assert (summary["skipped_updates"], summary["total_updates"]) == (3000 // 53, 150), summary
    checkpoint = load_resume_checkpoint(tmp_path / "run")
    assert all(torch.isfinite(t).all() for t in checkpoint["model_state"].values())
    assert all(torch.isfinite(checkpoint["reward_stats"][key]) for key in ("mean", "var"))


def test_non_finite_shared_parameters_stop_the_run_and_keep_the_last_good_checkpoint(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert serial_trainer(run_dir).run() == 0
    good = (run_dir / "checkpoints" / "last.pt").read_bytes()
    trainer = serial_trainer(run_dir, resume=load_resume_checkpoint(run_dir), max_steps=100_000)
    with torch.no_grad():
        next(trainer.model.parameters()).fill_(float("nan"))
    assert trainer.run() == 1
    assert "non-finite" in capsys.readouterr().err
    assert (run_dir / "checkpoints" / "last.pt").read_bytes() == good
    assert read_json(run_dir / "summary.json")["exit_reason"] == "failed: trainer"


def test_a_full_disk_keeps_the_previous_checkpoint(tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "run"
    # A checkpoint at every tick (the interval is tiny), so the first checkpoint is last.pt after the first
    # update, on any machine; every later one fails.
    trainer = serial_trainer(run_dir, checkpoint_interval=1e-6, max_steps=3000)
    real_save = torch.save
    calls = {"n": 0}

    def save_then_fail(obj, f, *args, **kwargs):
        if "rng_state" not in obj:  # best.pt, whenever an evaluation comes: only last.pt's saves count
            return real_save(obj, f, *args, **kwargs)
        calls["n"] += 1
        if calls["n"] > 1:  # the first checkpoint succeeds, then the disk is full mid-write
            f.write(b"partial")
            raise OSError(28, "No space left on device")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save_then_fail)
    assert trainer.run() == 1  # the run ends, but could not write its final checkpoint
    err = capsys.readouterr().err
    assert "No space left on device" in err
    checkpoint = load_resume_checkpoint(run_dir)  # the last good one, whole
    assert (checkpoint["global_step"], checkpoint["updates"]) == (20, 1)  # after the first update (20 steps)
    assert not list((run_dir / "checkpoints").glob(".*.tmp"))  # no half-written temp file left
    assert read_json(run_dir / "summary.json")["total_steps"] == 3000  # the budget, 150 updates of 20


def test_a_hung_worker_is_found_by_its_missing_heartbeat(run_dir):
    # The worker hangs for good, so the timeout only sets how long the test waits; 6 s, not less, so that the
    # idle evaluator (a heartbeat every 50 ms) is never taken for hung on a loaded machine. The trainer runs
    # in this process, its worker forked from the session's forkserver: the hung process is a real one.
    args = "--env tests.support.envs:Hanging-v0 --workers 1 --eval-interval 600 --hang-timeout 6"
    result = call_a3c_train(*args.split(), "--set", "max_restarts=0", "--max-seconds", "120", "--run-dir",
                            str(run_dir))  # fmt: skip
    err = result.stderr
    assert result.returncode == 1, err
    assert "sent no heartbeat for 6 s and was killed" in err
    assert read_json(run_dir / "summary.json")["exit_reason"] == "failed: worker 0"


def test_trim_csv_drops_a_row_cut_short_by_a_kill(tmp_path):
    from a3c.rundir.resume import trim_csv

    path = tmp_path / "episodes.csv"
    path.write_text(
        "wall_time,global_step,worker,return,length\n1.0,10,0,5.0,5\n2.0,20,1,7.0,7\n3.0,30,0,9.0,3"
    )
    columns = ("wall_time", "global_step", "worker", "return", "length")
    # The last row has no newline: it may be cut, so it is removed with the rows after the checkpoint.
    assert trim_csv(path, max_step=100, max_wall=100.0, columns=columns) == (2, 1)
    assert path.read_text().splitlines()[-1] == "2.0,20,1,7.0,7"
    assert trim_csv(path, max_step=15, max_wall=100.0, columns=columns) == (1, 1)
