"""The run-dir contract users and notebooks rely on (docs/runs.md, docs/cli.md): the
default run-dir name, --force, every summary.json key, every TensorBoard tag, `a3c config-keys`, and that
--serial starts no child process (in-process: any attempt to start one fails)."""

from __future__ import annotations

import csv
import multiprocessing.forkserver
import multiprocessing.process
import multiprocessing.resource_tracker
import os
import re
import subprocess
import time
from dataclasses import MISSING, fields
from pathlib import Path

import pytest
import torch

from a3c.cli import main
from a3c.core.config import Config
from a3c.rundir.files import default_run_dir
from a3c.rundir.tensorboard import EVAL_TAGS, METRIC_TAGS
from tests.support.commands import call_a3c, call_a3c_train
from tests.support.processes import descendants, shm_entries, shm_left
from tests.support.run_files import data_rows, read_json

STAMP = re.compile(r"^(\d{8}-\d{6})-s(\d+)$")


def stamp_time(name: str) -> float:
    """The Unix time of a run-dir name's local ``YYYYmmdd-HHMMSS`` stamp."""
    return time.mktime(time.strptime(STAMP.match(name).group(1), "%Y%m%d-%H%M%S"))


def test_default_run_dir_is_runs_env_stamp_seed():
    before = time.time()
    path = default_run_dir("CartPole-v1", 7)
    after = time.time()
    assert path.parent == Path("runs") / "CartPole-v1"
    match = STAMP.match(path.name)
    assert match and match.group(2) == "7", path
    # The local time of the call, to the second. strftime reads glibc's coarse clock, which can still show
    # the previous second for a few ms after time.time() has moved on: hence the 1 s of slack.
    assert int(before) - 1 <= stamp_time(path.name) <= after
    assert default_run_dir("a:b-v0", 0, root=Path("/x")).parent == Path("/x/a:b-v0")


# -- one --serial run in a fresh cwd, without --run-dir, with TensorBoard on (in this process) --

# confirm_episodes=0 and a target every CartPole evaluation reaches: each evaluation round is a solve that
# plays no confirmation round (a3c/runtime/eval_rounds.py), and best.pt goes to the highest of those means
# over the same episodes, eval.csv's own, so the summary's best is eval.csv's maximum.
SERIAL_ARGS = (
    "train --env CartPole-v1 --serial --seed 7 --max-steps 600 --target-return 5 --eval-interval 30 "
    "--set confirm_episodes=0 --tensorboard --quiet"
)


@pytest.fixture(scope="module")
def serial_run(tmp_path_factory):
    """Runs SERIAL_ARGS in this process (it starts none: ``test_serial_starts_no_child_process_in_process``)
    with an empty cwd, so the default run dir lands there. Yields (result, cwd, run dirs found, (start, end)).
    """
    cwd = tmp_path_factory.mktemp("cwd")
    start = time.time()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        done = call_a3c_train(*SERIAL_ARGS.split()[1:])
    end = time.time()
    runs = list((cwd / "runs").glob("*/*")) if (cwd / "runs").is_dir() else []
    return (done.returncode, done.stdout, done.stderr), cwd, runs, (start, end)


def the_run(serial_run) -> Path:
    (code, out, err), _, runs, _ = serial_run
    assert code == 0, (out, err)
    assert len(runs) == 1, runs
    return runs[0]


@pytest.mark.slow
def test_train_without_run_dir_creates_runs_env_stamp_seed(serial_run):
    run = the_run(serial_run)
    _, cwd, _, (start, end) = serial_run
    assert run.parent == cwd / "runs" / "CartPole-v1"
    match = STAMP.match(run.name)
    assert match and match.group(2) == "7", run.name
    assert int(start) - 1 <= stamp_time(run.name) <= end  # 1 s slack: see the unit test above
    assert {"config.json", "summary.json", "episodes.csv", "metrics.csv", "eval.csv"} <= {
        p.name for p in run.iterdir()
    }
    assert (run / "checkpoints" / "last.pt").is_file()


NUMBER = (int, float)
# docs/runs.md's keys first, then the rest of what RunMonitor.summary writes; the types a reader may rely on
# (None where nothing was measured).
SUMMARY_TYPES: dict[str, tuple[type, ...]] = {
    "env_id": (str,),
    "solved": (bool,),
    "target_return": (*NUMBER, type(None)),
    "time_to_solve_s": (*NUMBER, type(None)),
    "steps_to_solve": (int, type(None)),
    "total_steps": (int,),
    "wall_s": NUMBER,
    "steps_per_s": (*NUMBER, type(None)),
    "best_mean_return": (*NUMBER, type(None)),
    "exit_reason": (str,),
    "start_unix": NUMBER,
    "total_updates": (int,),
    "episodes": (int,),
    "last_mean_return": (*NUMBER, type(None)),
    "evaluator_cpu_s": (*NUMBER, type(None)),
    "evaluator_cpu_fraction": (*NUMBER, type(None)),
    "restarts": (int,),
    "skipped_updates": (int,),
    "warnings": (list,),  # of {kind, global_step, wall_time, message} (a3c/algo/health.py)
}


def eval_rows(run: Path) -> list[dict[str, str]]:
    with (run / "eval.csv").open() as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_summary_json_has_every_key_with_its_type(serial_run):
    run = the_run(serial_run)
    summary = read_json(run / "summary.json")
    missing = set(SUMMARY_TYPES) - set(summary)
    assert not missing, f"summary.json lacks {sorted(missing)}"
    for key, types in SUMMARY_TYPES.items():
        value = summary[key]
        # bool is an int: a count or a time that became True/False would pass isinstance(.., int)
        assert isinstance(value, types) and (bool in types or not isinstance(value, bool)), (key, value)
    for key, value in summary.items():  # keys added later: still plain JSON scalars
        if key == "warnings":
            assert all(set(w) == {"kind", "global_step", "wall_time", "message"} for w in value), value
            continue
        assert value is None or isinstance(value, (str, bool, int, float)), (key, value)

    # The values of this run: a max-steps budget, then a final evaluation above the (low) target.
    evals = eval_rows(run)
    assert summary["env_id"] == "CartPole-v1" and summary["target_return"] == 5.0
    assert summary["exit_reason"] == "max_steps" and summary["solved"] is True
    assert summary["total_steps"] == 600 and summary["total_updates"] == 60  # 10 steps an update (serial)
    assert summary["steps_to_solve"] == int(evals[0]["global_step"]) <= summary["total_steps"]
    assert summary["time_to_solve_s"] == float(evals[0]["wall_time"]) <= summary["wall_s"]
    assert summary["best_mean_return"] == max(float(r["mean_return"]) for r in evals)
    assert summary["last_mean_return"] == float(evals[-1]["mean_return"])
    assert summary["episodes"] == data_rows(run / "episodes.csv") > 0
    assert summary["restarts"] == 0 and summary["skipped_updates"] == 0
    # Serial: the evaluator shares the trainer's process, so its CPU time is not told apart.
    assert summary["evaluator_cpu_s"] is None and summary["evaluator_cpu_fraction"] is None
    _, _, _, (start, end) = serial_run
    assert start - 1 <= summary["start_unix"] <= end and 0 < summary["wall_s"] <= end - start
    assert (
        torch.load(run / "checkpoints" / "last.pt", weights_only=True)["global_step"]
        == summary["total_steps"]
    )


# Every tag a3c/rundir/tensorboard.py writes: episodes, then one per metrics and eval field.
TENSORBOARD_TAGS = {
    "charts/episodic_return",
    "charts/episodic_length",
    "losses/policy_loss",
    "losses/value_loss",
    "losses/entropy",
    "losses/grad_norm",
    "losses/explained_variance",
    "charts/learning_rate",
    "charts/steps_per_s",
    "async/policy_lag_mean",
    "async/policy_lag_p50",
    "async/policy_lag_p95",
    "async/policy_lag_max",
    "charts/eval_mean_return",
    "charts/eval_std_return",
}


@pytest.mark.slow
def test_tensorboard_has_every_tag(serial_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = the_run(serial_run)
    assert set(METRIC_TAGS.values()) | set(EVAL_TAGS.values()) <= TENSORBOARD_TAGS  # this list is whole
    events = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0})  # 0: keep every event
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert tags >= TENSORBOARD_TAGS, f"missing: {sorted(TENSORBOARD_TAGS - tags)}"

    # The events hold what the CSVs hold, against global_step.
    returns = [e.value for e in events.Scalars("charts/episodic_return")]
    with (run / "episodes.csv").open() as f:
        assert returns == pytest.approx([float(r["return"]) for r in csv.DictReader(f)])
    evals = [(e.step, e.value) for e in events.Scalars("charts/eval_mean_return")]
    expected = [(int(r["global_step"]), float(r["mean_return"])) for r in eval_rows(run)]
    assert evals == [(s, pytest.approx(v)) for s, v in expected]
    assert data_rows(run / "metrics.csv") == len(events.Scalars("losses/policy_loss")) >= 1


# -- --serial, in this process, with every way of starting a process watched --


@pytest.mark.slow
def test_serial_starts_no_child_process_in_process(tmp_path, monkeypatch, capsys):
    """Any attempt to start a process through multiprocessing (Process, the forkserver, the resource tracker)
    or a bare fork is recorded and refused; subprocesses other than run_metadata's `git` too."""
    attempts: list[str] = []

    def refuse(what):
        def start(*args, **kwargs):
            attempts.append(what)
            raise AssertionError(f"--serial started a process: {what}")

        return start

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse("Process.start"))
    # The modules' ensure_running are bound methods of their singletons, taken at import: patch both.
    monkeypatch.setattr(multiprocessing.forkserver.ForkServer, "ensure_running", refuse("forkserver"))
    monkeypatch.setattr(multiprocessing.forkserver, "ensure_running", refuse("forkserver"))
    monkeypatch.setattr(multiprocessing.resource_tracker.ResourceTracker, "ensure_running", refuse("tracker"))
    monkeypatch.setattr(multiprocessing.resource_tracker, "ensure_running", refuse("tracker"))
    monkeypatch.setattr(os, "fork", refuse("os.fork"))
    real_popen_init = subprocess.Popen.__init__

    def popen_init(self, args, *rest, **kwargs):
        if list(args)[:1] != ["git"]:
            attempts.append(f"subprocess {args!r}")
            raise AssertionError(f"--serial started a process: {args!r}")
        real_popen_init(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", popen_init)
    children_before, shm_before = descendants(os.getpid()), shm_entries()
    run = tmp_path / "run"
    args = "train --env CartPole-v1 --serial --max-steps 300 --eval-interval 30 --quiet --run-dir"
    try:
        main([*args.split(), str(run)])
        code = 0
    except SystemExit as exc:
        code = exc.code
    except AssertionError:
        code = None
    err = capsys.readouterr().err
    assert not attempts, attempts
    assert not descendants(os.getpid()) - children_before  # nothing got past the patches either
    assert code == 0, err
    assert read_json(run / "summary.json")["total_steps"] >= 300
    assert not shm_left(shm_before)


# -- --force --


def file_set(run: Path) -> set[str]:
    return {str(p.relative_to(run)) for p in run.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_force_replaces_an_earlier_run(run_dir):
    # In this process: serial runs start none.
    base = ["--env", "CartPole-v1", "--serial", "--eval-interval", "30", "--quiet", "--run-dir"]
    first = call_a3c_train(*base, str(run_dir), "--seed", "1", "--max-steps", "640", "--tensorboard")
    assert first.returncode == 0, first.stderr
    old_files = file_set(run_dir)
    old_steps = {p.name for p in (run_dir / "checkpoints").glob("step-*.pt")}
    assert old_steps and any(f.startswith("tensorboard/") for f in old_files)

    refused = call_a3c("train", *base, str(run_dir), "--seed", "2", "--max-steps", "320")
    assert refused.returncode == 2 and "--force" in refused.stderr  # without --force it is kept
    assert file_set(run_dir) == old_files

    second = call_a3c_train(*base, str(run_dir), "--seed", "2", "--max-steps", "320", "--force")
    assert second.returncode == 0, second.stderr
    files = file_set(run_dir)
    # The old run's files are gone: its TensorBoard events and its checkpoint history.
    assert not any(f.startswith("tensorboard") for f in files), files
    new_steps = {p.name for p in (run_dir / "checkpoints").glob("step-*.pt")}
    assert new_steps and not new_steps & old_steps, (old_steps, new_steps)
    # ... and the new run is whole and only itself.
    summary, config = read_json(run_dir / "summary.json"), read_json(run_dir / "config.json")
    assert config["seed"] == 2 and config["max_steps"] == 320 and config["tensorboard"] is False
    assert (summary["exit_reason"], summary["total_steps"]) == ("max_steps", 320)  # 32 updates of 10
    assert summary["episodes"] == data_rows(run_dir / "episodes.csv")
    last = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert last["global_step"] == summary["total_steps"] and last["config"]["seed"] == 2
    with (run_dir / "episodes.csv").open() as f:
        assert max(int(r["global_step"]) for r in csv.DictReader(f)) <= summary["total_steps"]
    assert {
        "config.json",
        "summary.json",
        "eval.csv",
        "episodes.csv",
        "metrics.csv",
        "checkpoints/last.pt",
    } <= files


# -- a3c config-keys --


def test_every_config_field_has_help():
    assert all(f.metadata.get("help", "").strip() for f in fields(Config)), [
        f.name for f in fields(Config) if not f.metadata.get("help", "").strip()
    ]


def test_config_keys_lists_every_field_with_its_default_and_help(capsys):
    try:
        main(["config-keys"])
    except SystemExit as exc:
        assert exc.code in (None, 0)
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    # env_id is --env, not a --set key; everything else is listed, once.
    expected = [f for f in fields(Config) if f.name != "env_id"]
    assert sorted(lines) == sorted(f.name for f in expected)
    assert len(out.strip().splitlines()) == len(expected)
    for f in expected:
        line = lines[f.name]
        default = "-" if f.default is MISSING else str(f.default)
        if f.default_factory is not MISSING:  # env_kwargs: {}
            default = str(f.default_factory())
        assert line.split(None, 1)[1].startswith(default), (f.name, line)
        assert line.rstrip().endswith(f.metadata["help"]), (f.name, line)
