"""a3c tune's parts: the search space and its ``--space`` parser, the evaluation reports that prune a trial
(a callback of the Trainer's), stale trials on resume, the preset it writes, bad input."""

from __future__ import annotations

import os
import re
import socket
import sys
import tomllib
import warnings
from typing import Any

import pytest

from a3c.cli import main
from a3c.core.config import FIELDS, Config, field_type
from a3c.core.errors import BadInput
from a3c.core.records import EvalRecord
from a3c.rundir.csvlog import EVAL_COLUMNS
from a3c.tools.tune import REPORTS, Reporter, open_study, run_trial
from a3c.tools.tune_report import best_trial, toml_value, trials_table, write_best_preset
from a3c.tools.tune_space import DEFAULT_SPACE, TUNABLE, Param, TrialSpec, parse_param, parse_space
from tests.support import ROOT
from tests.support.extras import require_extra


def bad(capsys, *args: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# -- the search space ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("param", DEFAULT_SPACE.values(), ids=lambda p: p.name)
def test_default_ranges_are_valid_config_values(param):
    assert param.name in TUNABLE
    values = param.choices or (param.low, param.high)
    for value in values:  # each end (each choice) makes a config that validates
        Config(env_id="-", **{param.name: value}).validate()
    if not param.choices:
        assert param.low < param.high
        assert not param.log or param.low > 0
        if field_type(param.name) is int:
            assert float(param.low).is_integer() and float(param.high).is_integer()


def test_log_uniform_where_the_scale_spans_decades():
    assert {n for n, p in DEFAULT_SPACE.items() if p.log} == {"lr", "entropy_coef", "t_max", "max_grad_norm"}
    assert DEFAULT_SPACE["envs_per_worker"].choices == (1, 2, 4, 8, 16)


def test_tunable_keys_are_numeric_config_fields_that_shape_learning():
    assert {"lr", "gamma", "t_max", "entropy_coef", "workers", "envs_per_worker"} <= set(TUNABLE)
    assert not {"seed", "max_seconds", "eval_interval", "target_return", "env_id", "optimizer"} & set(TUNABLE)
    assert all(field_type(name) in (int, float) for name in TUNABLE)


def test_space_items_replace_or_add_a_range():
    space = parse_space(("lr=1e-5:1e-3:log", "t_max=5:20", "workers=2:2"))
    assert space["lr"] == Param("lr", 1e-5, 1e-3, log=True)
    assert space["t_max"] == Param("t_max", 5, 20) and isinstance(space["t_max"].low, int)
    assert space["workers"] == Param("workers", 2, 2)  # low = high pins a value
    assert space["envs_per_worker"].choices == (1, 2, 4, 8, 16)  # the rest stays the default
    assert parse_space(("envs_per_worker=1:4",))["envs_per_worker"] == Param("envs_per_worker", 1, 4)
    assert parse_space(()) == DEFAULT_SPACE


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("lr", "expected key=low:high or key=low:high:log"),
        ("lr=1e-3", "expected lr=low:high or lr=low:high:log"),
        ("lr=1e-4:1e-3:lin", "expected lr=low:high or lr=low:high:log"),
        ("foo=1:2", "'foo' (unknown) is not allowed; expected one of workers, envs_per_worker, t_max,"),
        ("env_id=1:2", "'env_id' (not a number)"),
        ("seed=1:2", "'seed' (a run setting)"),
        ("optimizer=1:2", "'optimizer' (not a number)"),
        ("lr=a:1e-3", "'a' is not allowed; expected a finite number"),
        ("lr=nan:1e-3", "'nan' is not allowed; expected a finite number"),
        ("t_max=2.5:8", "'2.5' is not allowed; expected an integer"),
        ("lr=1e-3:1e-4", "expected low <= high"),
        ("lr=0:1e-3:log", "a log range needs low > 0"),
        ("gamma=0.9:1.5", "gamma: 1.5 is not allowed; expected a number in (0, 1]"),
        ("t_max=0:8", "t_max: 0 is not allowed; expected an integer >= 1"),
    ],
)
def test_bad_space_items_say_what_is_allowed(item, expected):
    with pytest.raises(BadInput) as error:
        parse_param(item)
    message = str(error.value)
    assert message.startswith("--space: ") and expected in message and "\n" not in message


def test_docs_table_lists_every_default_range():
    text = (ROOT / "docs" / "tune.md").read_text()
    for param in DEFAULT_SPACE.values():
        row = re.search(rf"^\| `{param.name}` \|[^\n]*", text, re.MULTILINE)
        assert row, f"docs/tune.md: no row for {param.name}"
        assert f"`{param.describe()}`" in row.group(0), (param.describe(), row.group(0))
        assert FIELDS[param.name].metadata["help"]  # a real, documented Config field


# -- the command's bad input ---------------------------------------------------------------------------------


def test_without_optuna_one_line_names_the_install_command(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna now raises ImportError
    line = bad(capsys, "tune", "--env", "CartPole-v1", "--trials", "2", "--trial-seconds", "1")
    assert "optuna" in line and "pip install -e '.[tune]'" in line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--trials", "0"], "--trials: 0 is not allowed"),
        (["--trial-seconds", "0"], "--trial-seconds: 0.0 is not allowed"),
        (["--space", "gamma=0:1"], "--space: 'gamma=0:1' is not allowed: gamma: 0"),
        (["--space", "workers=2:4"], "workers: 2 is not allowed with --serial"),  # the env's run, checked
    ],
)
def test_bad_input_is_one_line_and_creates_nothing(capsys, tmp_path, args, expected):
    require_extra("optuna", "tune")
    values = {
        "--env": "CartPole-v1",
        "--trials": "2",
        "--trial-seconds": "1",
        "--study-dir": str(tmp_path / "s"),
    }
    values.update(dict(zip(args[::2], args[1::2], strict=True)))
    flat = [x for item in values.items() for x in item]
    line = bad(capsys, "tune", *flat, "--serial")
    assert expected in line, line
    assert not (tmp_path / "s").exists()


# -- reports and pruning -------------------------------------------------------------------------------------


class FakeTrial:
    def __init__(self, prune_at: int | None = None):
        self.reports: list[tuple[float, int]] = []
        self.prune_at = prune_at

    def report(self, value: float, step: int) -> None:
        self.reports.append((value, step))

    def should_prune(self) -> bool:
        return self.prune_at is not None and len(self.reports) >= self.prune_at


def evaluation(wall_time: float, mean_return: float) -> dict:
    """An eval.csv row, as the reporter (a callback) gets it."""
    record = EvalRecord(wall_time, 100, 10, mean_return, 0.0, 0.0, 0.0, 10.0, 10, 0.1, mean_return, False)
    return dict(zip(EVAL_COLUMNS, record[: len(EVAL_COLUMNS)], strict=True))


def test_reporter_reports_one_evaluation_per_twentieth_of_the_budget():
    trial = FakeTrial()
    reporter = Reporter(trial, trial_seconds=10.0)  # steps of 0.5 s
    times = [0.2, 0.4, 0.6, 1.4, 1.6, 9.9, 10.2]
    assert not any(reporter.on_eval(evaluation(t, 10 * t)) for t in times)
    # 0.4 falls in step 0 again; 10.2 is past the budget (the final evaluation, the trial's value).
    assert trial.reports == [(2.0, 0), (6.0, 1), (14.0, 2), (16.0, 3), (99.0, REPORTS - 1)]


def test_reporter_asks_the_pruner_after_each_report():
    reporter = Reporter(FakeTrial(prune_at=2), trial_seconds=10.0)
    assert [reporter.on_eval(evaluation(t, 1.0)) for t in (0.1, 0.2, 0.7)] == [False, False, True]


def test_a_pruning_callback_stops_the_run_cleanly(tmp_path):
    # The reporter's kind of callback: each evaluation reaches on_eval as it arrives; True ends the run,
    # exit 0, "pruned" (its stop_reason).
    from a3c.training.train import Trainer
    from a3c_envs import inspect_env
    from tests.support.run_files import data_rows, read_json

    info = inspect_env("tests.support.envs:FixedLength-v0")
    config = Config(env_id=info.env_id, workers=1, eval_interval=0.2, max_steps=100_000).validate()
    seen: list[dict] = []

    class PruneAtSecond:
        stop_reason = Reporter.stop_reason

        def on_eval(self, row):
            seen.append(row)
            return len(seen) >= 2

    trainer = Trainer(
        config, info, tmp_path / "run", serial=True, show_progress=False, callbacks=[PruneAtSecond()]
    )
    assert trainer.run() == 0
    summary = read_json(tmp_path / "run" / "summary.json")
    assert summary["exit_reason"] == "pruned" and summary["total_steps"] < 100_000
    assert len(seen) == 2 == data_rows(tmp_path / "run" / "eval.csv")  # no final evaluation after a prune
    assert (tmp_path / "run" / "checkpoints" / "last.pt").is_file()


def evaluate_after_the_first_update(monkeypatch: pytest.MonkeyPatch) -> None:
    """Serial trials evaluate right after their first update however slow the host: a short budget could
    otherwise end before the preset's first evaluation is due."""
    from a3c.backends.serial import SerialBackend

    ordinary_poll = SerialBackend.poll

    def poll_evaluating_first(self: SerialBackend, timeout: float) -> list[Any]:
        records = ordinary_poll(self, timeout)
        if getattr(self, "evaluated_first", False):  # once a trial: each has a backend of its own
            return records
        self.evaluated_first = True  # type: ignore[attr-defined]
        return records + self._evaluate()

    monkeypatch.setattr(SerialBackend, "poll", poll_evaluating_first)


def test_a_pruned_trial_is_told_pruned(tmp_path, monkeypatch):
    optuna = require_extra("optuna", "tune")
    evaluate_after_the_first_update(monkeypatch)  # a report to prune at, within the budget

    class AlwaysPrune(optuna.pruners.BasePruner):
        def prune(self, study, trial) -> bool:
            return True

    study = optuna.create_study(direction="maximize", pruner=AlwaysPrune())
    run = TrialSpec("CartPole-v1", trial_seconds=30.0, seed=0, serial=True)
    outcome = run_trial(study, {"lr": Param("lr", 1e-3, 1e-3)}, run, tmp_path)
    (trial,) = study.trials
    assert outcome.state == "PRUNED" == trial.state.name and outcome.exit_code == 0
    assert trial.intermediate_values and trial.user_attrs["run_dir"] == str(tmp_path / "trial-000")
    assert '"exit_reason": "pruned"' in (tmp_path / "trial-000" / "summary.json").read_text()


# -- the study on resume, the preset -------------------------------------------------------------------------


def left_running(study, study_dir, outcome=None):
    """A trial as an a3c tune of ``study_dir`` leaves it when killed: RUNNING, its heartbeat and owner
    recorded; ``outcome`` (state, value): what its run dir's trial.json recorded before the kill."""
    from a3c.tools.tune_storage import TrialOutcome, owner, record_outcome

    with warnings.catch_warnings():  # Optuna's note that heartbeats are meant for study.optimize
        warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)
        trial = study.ask()
    study._storage.record_heartbeat(trial._trial_id)
    run_dir = study_dir / f"trial-{trial.number:03d}"
    trial.set_user_attr("owner", owner(study_dir))
    trial.set_user_attr("run_dir", str(run_dir))
    if outcome is not None:
        run_dir.mkdir(parents=True)
        record_outcome(run_dir, TrialOutcome(trial.number, *outcome, time_to_solve_s=2.5))
    return trial


@pytest.mark.slow  # about 2 CPU-s (optuna and its study storage): out of the edit-run loop
def test_a_trial_this_study_dir_left_running_is_settled_when_the_study_reopens(tmp_path, capsys):
    optuna = require_extra("optuna", "tune")
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    run = TrialSpec("CartPole-v1", trial_seconds=1.0, seed=0, serial=True)
    study = open_study(optuna, run, storage, tmp_path)
    study.tell(left_running(study, tmp_path).number, 1.0)
    left_running(study, tmp_path)  # then the process is killed: the trial stays RUNNING
    left_running(study, tmp_path, outcome=("COMPLETE", 42.5))  # killed at the tell: its value recorded
    reopened = open_study(optuna, run, storage, tmp_path)  # at once: no grace for this study dir's own
    assert [t.state.name for t in reopened.trials] == ["COMPLETE", "FAIL", "COMPLETE"]
    assert reopened.trials[2].value == 42.5 and reopened.trials[2].user_attrs["time_to_solve_s"] == 2.5
    out = capsys.readouterr().out
    assert (
        "trial 1: was left running" in out
        and "trial 2: complete, value 42.50: told from its trial.json" in out
    )
    with pytest.raises(BadInput, match="--env: 'Pendulum-v1' does not match the study's env 'CartPole-v1'"):
        open_study(optuna, run._replace(env_id="Pendulum-v1"), storage, tmp_path)


@pytest.mark.slow  # about 2 CPU-s, as above
def test_on_shared_storage_another_tunes_trial_is_failed_only_once_its_heartbeat_is_stale(tmp_path, capsys):
    """Two a3c tune (two study dirs, perhaps two machines) on one database: one opening the study leaves the
    other's live trial alone, and fails it once its heartbeat is older than the grace (Optuna's rule)."""
    import sqlite3

    optuna = require_extra("optuna", "tune")
    db = tmp_path / "shared.db"
    run = TrialSpec("CartPole-v1", trial_seconds=1.0, seed=0, serial=True)
    first = open_study(optuna, run, f"sqlite:///{db}", tmp_path / "a")
    left_running(first, tmp_path / "a")  # live: its a3c tune is still training it
    second = open_study(optuna, run, f"sqlite:///{db}", tmp_path / "b")
    assert [t.state.name for t in second.trials] == ["RUNNING"]
    with sqlite3.connect(db) as connection:  # its a3c tune is gone: the last heartbeat is old
        connection.execute("UPDATE trial_heartbeats SET heartbeat = '2000-01-01 00:00:00.000000'")
    third = open_study(optuna, run, f"sqlite:///{db}", tmp_path / "b")
    assert [t.state.name for t in third.trials] == ["FAIL"]
    assert f"trial 0: no heartbeat for over 120 s from {socket.gethostname()}:{tmp_path / 'a'}" in (
        capsys.readouterr().out
    )


@pytest.mark.slow  # a 0.5-s serial trial
def test_a_finished_trials_value_survives_a_storage_that_fails_at_the_tell(tmp_path, monkeypatch, capsys):
    optuna = require_extra("optuna", "tune")
    from a3c.tools import tune
    from tests.support.run_files import read_json

    storage = f"sqlite:///{tmp_path / 'study.db'}"
    run = TrialSpec("CartPole-v1", trial_seconds=0.5, seed=0, serial=True)
    study = open_study(optuna, run, storage, tmp_path)

    def lost_connection(*_args, **_kwargs):
        raise ConnectionError("server closed the connection unexpectedly")

    monkeypatch.setattr(study, "tell", lost_connection)
    with pytest.raises(Exception) as failure:
        run_trial(study, {"lr": Param("lr", 1e-3, 1e-3)}, run, tmp_path)
    monkeypatch.undo()
    reopened = open_study(optuna, run, storage, tmp_path)
    (trial,) = reopened.trials
    assert trial.state.name == "COMPLETE" and trial.value is not None
    summary = read_json(tmp_path / "trial-000" / "summary.json")
    assert trial.value == summary["last_mean_return"]
    assert isinstance(failure.value, tune.TellFailed)
    assert "it is kept in " + str(tmp_path / "trial-000" / "trial.json") in str(failure.value)


VALUES = [True, False, 3, 1e-05, 0.1, 475.0, "adam", [64, 64], 'say "hi"', {"continuous": True, "g": -9.5}]
# What a storage another process writes to may hold: every character TOML must escape, quotes of all
# kinds, a line that would start a table, a comment sign, a lone backslash before a u, non-ASCII.
HOSTILE = '\x1b[2Ja"b\\c\\u0041\n[evil]\nx = 1\r\x00\x01\x08\x0c\x1f\x7f\t\'\'\' """ # \u2028 \U0001f600 é'


@pytest.mark.parametrize(
    "value", [*VALUES, HOSTILE, [HOSTILE], {HOSTILE: HOSTILE}, float("inf"), -float("inf")]
)
def test_preset_values_read_back_as_toml(value):
    assert tomllib.loads(f"key = {toml_value(value)}")["key"] == value


@pytest.mark.slow  # a 0.5-s serial trial
def test_a_trial_whose_final_evaluation_did_not_finish_says_its_value_is_an_older_one(
    tmp_path, monkeypatch, capsys
):
    """A budget stop's final evaluation cut (the local backend's grace, Ray's evaluator not stopping in
    time): the run says so in a warning line and summary.json, and the trial's value is marked older."""
    optuna = require_extra("optuna", "tune")
    from a3c.backends.serial import SerialBackend
    from tests.support.run_files import read_json

    evaluate_after_the_first_update(monkeypatch)
    monkeypatch.setattr(SerialBackend, "final_evaluation", lambda self: [])  # as if cut at the stop
    study = optuna.create_study(direction="maximize")
    run = TrialSpec("CartPole-v1", trial_seconds=0.5, seed=0, serial=True)
    outcome = run_trial(study, {"lr": Param("lr", 1e-3, 1e-3)}, run, tmp_path)
    summary = read_json(tmp_path / "trial-000" / "summary.json")
    assert summary["exit_reason"] == "max_seconds" and summary["final_evaluation_missing"] is True
    out, err = capsys.readouterr()
    assert "warning: the final evaluation did not finish before the run stopped" in err
    (trial,) = study.trials
    assert trial.user_attrs["final_evaluation_missing"] is True
    assert outcome.state == "COMPLETE" and trial.value == summary["last_mean_return"]  # the older one's
    assert "(from an older evaluation: the final one did not finish)" in out
    assert trials_table(study).splitlines()[1].split()[2].endswith("~")


def test_storage_supplied_strings_cannot_break_the_preset(tmp_path):
    """The best trial's parameter names and values and its run dir come from the storage: however hostile,
    the preset reads back as exactly the env's preset and those values, and its comments stay comments."""
    optuna = require_extra("optuna", "tune")
    from a3c_envs import load_preset

    study = optuna.create_study(direction="maximize")
    dist = {HOSTILE: optuna.distributions.CategoricalDistribution([HOSTILE, "b"])}
    attrs = {"run_dir": HOSTILE}
    study.add_trial(
        optuna.trial.create_trial(params={HOSTILE: HOSTILE}, distributions=dist, value=1.0, user_attrs=attrs)
    )
    run = TrialSpec("CartPole-v1", trial_seconds=5.0, seed=0, serial=True)
    path = write_best_preset(study, run, f"sqlite:///{tmp_path}/a\nevil = 1/s.db?password=pw", tmp_path)
    assert tomllib.loads(path.read_text()) == {**load_preset("CartPole-v1"), HOSTILE: HOSTILE}
    assert len(trials_table(study).splitlines()) == 2 and "\x1b" not in trials_table(
        study
    )  # shown, not obeyed
    assert "?password=***" in path.read_text() and "pw" not in path.read_text().replace("password", "")


def test_best_preset_is_the_env_preset_with_the_best_values(tmp_path, monkeypatch):
    optuna = require_extra("optuna", "tune")
    from a3c.training.resolve import read_config_file, resolve_config
    from a3c_envs import inspect_env, load_preset

    study = optuna.create_study(direction="maximize")
    dist = {"lr": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)}
    for number, (lr, value) in enumerate([(1e-3, 100.0), (2.5e-3, 300.0), (5e-4, 200.0)]):
        attrs = {"run_dir": f"trial-{number:03d}"}
        study.add_trial(
            optuna.trial.create_trial(params={"lr": lr}, distributions=dist, value=value, user_attrs=attrs)
        )
    run = TrialSpec("CartPole-v1", trial_seconds=5.0, seed=0, serial=True)
    path = write_best_preset(study, run, "postgresql://ann:hunter2@db/optuna", tmp_path)
    text = path.read_text()
    assert path == tmp_path / "best-preset.toml"
    assert text.startswith("# CartPole-v1 preset written by `a3c tune`") and "value 300.00" in text
    assert "Trial 1 (trial-001) did not reach the target" in text and "postgresql://ann:***@db/optuna" in text
    assert "hunter2" not in text  # the storage's password
    assert "envs/presets/CartPole-v1.toml" in text
    assert tomllib.loads(text) == {**load_preset("CartPole-v1"), "lr": 2.5e-3}
    assert f"a3c train --env CartPole-v1 --config {path}" in text
    # As a --config file, as is:
    assert resolve_config(inspect_env("CartPole-v1"), {}, {}, from_file=read_config_file(path)).lr == 2.5e-3
    # Where a3c train looks for presets, it is the env's preset.
    (tmp_path / "presets").mkdir()
    path.rename(tmp_path / "presets" / "CartPole-v1.toml")
    monkeypatch.setattr("a3c_envs.presets.PRESET_DIR", tmp_path / "presets")
    assert resolve_config(inspect_env("CartPole-v1"), {}, {}).lr == 2.5e-3


def test_no_preset_without_a_complete_trial(tmp_path):
    optuna = require_extra("optuna", "tune")
    study = optuna.create_study(direction="maximize")
    study.tell(study.ask(), state=optuna.trial.TrialState.PRUNED)
    assert write_best_preset(study, TrialSpec("CartPole-v1", 1.0, 0, True), "s", tmp_path) is None


def test_the_best_trial_solved_soonest_else_has_the_highest_value():
    optuna = require_extra("optuna", "tune")
    study = optuna.create_study(direction="maximize")
    dist = {"lr": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)}

    def add(lr: float, value: float, solve_s: float | None) -> None:
        attrs = {"time_to_solve_s": solve_s}
        study.add_trial(
            optuna.trial.create_trial(params={"lr": lr}, distributions=dist, value=value, user_attrs=attrs)
        )

    add(1e-3, 400.0, None)
    add(2e-3, 450.0, None)
    add(3e-3, 420.0, None)
    assert best_trial(study).number == 1  # none solved: the highest value
    add(4e-3, 500.0, 6.0)
    add(5e-3, 499.5, 3.5)
    study.tell(study.ask(), state=optuna.trial.TrialState.FAIL)
    assert best_trial(study).number == 4  # the soonest to the target, though 0.5 below trial 3's value
    lines = trials_table(study).splitlines()
    assert lines[0].split() == ["trial", "state", "value", "solved_s", "params"]
    assert lines[2].split() == ["1", "COMPLETE", "450.00", "-", "lr=0.002"]
    assert lines[5].split() == ["4*", "COMPLETE", "499.50", "3.5", "lr=0.005"]
    assert lines[6].split() == ["5", "FAIL", "-", "-"]


def test_a_second_tune_on_a_live_study_is_one_line_naming_the_holder(tmp_path, capsys):
    require_extra("optuna", "tune")
    from a3c.tools.tune import lock_study

    study = tmp_path / "study"
    fd = lock_study(study)  # the first a3c tune, still running
    try:
        args = ["--env", "CartPole-v1", "--trials", "1", "--trial-seconds", "1", "--study-dir", str(study)]
        line = bad(capsys, "tune", *args, "--serial")
    finally:
        os.close(fd)
    assert line == f"error: --study-dir: {str(study)!r} is in use by a running a3c (PID {os.getpid()}); " + (
        "wait for it to end or stop it, then run this again"
    )
    assert sorted(p.name for p in study.iterdir()) == [".a3c.lock"]  # no study.db: nothing touched


def test_a_sigterm_between_two_trials_ends_the_study_with_143_and_starts_no_other(monkeypatch, capsys):
    """Outside a trial's run (asking optuna, setting a trial up, telling it) the study handles SIGINT and
    SIGTERM itself: the signal is not the default action's death (-15) and no further trial starts."""
    import os
    import signal

    from a3c.tools import tune

    started = []

    def trial_then_signal(*_args):
        started.append(1)
        os.kill(os.getpid(), signal.SIGTERM)  # as if it came while the trial was told its value
        return tune.Outcome("COMPLETE", 1.0, 0)

    monkeypatch.setattr(tune, "run_trial", trial_then_signal)
    monkeypatch.setattr(tune, "finished", lambda study: len(started))
    before = signal.getsignal(signal.SIGTERM)
    assert tune.run_study(None, {}, None, None, trials=5) == 143
    assert started == [1] and signal.getsignal(signal.SIGTERM) is before  # the handler given back
    assert "interrupted: re-run the same command" in capsys.readouterr().err
