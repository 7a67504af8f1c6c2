"""``a3c tune`` as a user runs it: a short study on CartPole that resumes to more trials, survives a killed
trial, prints its table, and writes a preset that ``a3c train`` trains with. Needs the ``tune`` extra.

The killed study is a real command (spawned workers, as by default); the others run in this process with
serial trials (``--serial``: they start no process), which saves a process and its imports per call."""

from __future__ import annotations

import os
import signal
import tomllib
from pathlib import Path
from typing import Any

import pytest
import torch

import a3c
from tests.support.commands import call_a3c, end, popen_a3c, wait_until
from tests.support.extras import require_extra
from tests.support.run_files import data_rows, read_json

pytestmark = pytest.mark.slow

TRIAL = ["--env", "CartPole-v1", "--seed", "0"]


def tune(study_dir: Path, trials: int, seconds: float = 1.0) -> str:
    """``a3c tune --serial`` in this process; its stdout. The study's lock, which the command holds until its
    process exits, is released when it returns, as at that exit (else the next call here would be refused);
    so is the torch thread count its serial trials set."""
    require_extra("optuna", "tune")
    import a3c.tools.tune as tune_module

    held: list[int] = []
    lock_study = tune_module.lock_study
    threads = torch.get_num_threads()
    args = [
        "--trial-seconds",
        str(seconds),
        "--trials",
        str(trials),
        "--study-dir",
        str(study_dir),
        "--serial",
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tune_module, "lock_study", lambda folder: held.append(lock_study(folder)) or held[-1])
        try:
            result = call_a3c("tune", *TRIAL, *args)
        finally:
            for fd in held:
                os.close(fd)
            torch.set_num_threads(threads)
    assert held, "the study was not locked"
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def table_rows(stdout: str) -> list[list[str]]:
    """The summary table's rows as [trial, state, value, solved_s, params] (the best's * dropped)."""
    lines = stdout[stdout.index(" trial  state") :].splitlines()[1:]
    rows = [line.replace("*", " ", 1).split(maxsplit=4) for line in lines]
    return [row for row in rows if row and row[0].isdigit()]


def poll_to_a_first_episode(monkeypatch: pytest.MonkeyPatch) -> None:
    """Serial trials update until their first episode ends however slow the host: a 1-s budget could
    otherwise end before one does (CartPole's end within 500 steps)."""
    from a3c.backends.serial import SerialBackend

    ordinary_poll = SerialBackend.poll

    def poll(self: SerialBackend, timeout: float) -> list[Any]:
        records = ordinary_poll(self, timeout)
        # Once a trial (each has a backend of its own); a stop (a signal) ends the updates and this loop.
        while not getattr(self, "had_an_episode", False) and not self.shared.stop.is_set():
            if any(isinstance(record, list) for record in records):  # a batch of EpisodeRecords
                self.had_an_episode = True  # type: ignore[attr-defined]
            else:
                records += ordinary_poll(self, timeout)
        return records

    monkeypatch.setattr(SerialBackend, "poll", poll)


def test_a_study_resumes_to_more_trials_and_its_preset_trains(tmp_path, monkeypatch):
    study = tmp_path / "study"
    with monkeypatch.context() as patch:
        poll_to_a_first_episode(patch)
        first = tune(study, 2)
    assert [row[:2] for row in table_rows(first)] == [["0", "COMPLETE"], ["1", "COMPLETE"]]
    assert (study / "study.db").is_file() and (study / "best-preset.toml").is_file()
    for number in (0, 1):  # each trial is an ordinary run dir: a3c runs / plot / the notebook read it
        trial = study / f"trial-{number:03d}"
        assert read_json(trial / "summary.json")["exit_reason"] in ("max_seconds", "solved")
        assert data_rows(trial / "eval.csv") >= 1 and data_rows(trial / "episodes.csv") >= 1

    more = tune(study, 3)
    assert [row[0] for row in table_rows(more)] == ["0", "1", "2"] and "trial 2: complete" in more
    assert (
        len({row[4] for row in table_rows(more)}) == 3
    )  # the resumed sampler drew a new point, not trial 0's

    again = tune(study, 3)
    assert "trial 3" not in again and table_rows(again) == table_rows(more)  # already reached: the table only
    assert not (study / "trial-003").exists()

    # The preset, where a3c train looks for presets: a short run trains with its values.
    preset = tomllib.loads((study / "best-preset.toml").read_text())
    presets = tmp_path / "presets"
    presets.mkdir()
    (presets / "CartPole-v1.toml").write_text((study / "best-preset.toml").read_text())
    monkeypatch.setattr("a3c_envs.presets.PRESET_DIR", presets)
    run = a3c.train("CartPole-v1", run_dir=tmp_path / "run", serial=True, max_steps=2000)
    assert run.exit_code == 0
    config = run.config
    assert {key: config[key] for key in preset} == {
        **preset,
        **({"workers": 1} if "workers" in preset else {}),
    }
    assert config["workers"] == 1  # serial trains one worker, whatever the preset says


def test_a_killed_trial_does_not_block_the_resume(tmp_path, token):
    require_extra("optuna", "tune")
    study = tmp_path / "study"
    # A real command, with spawned workers as by default; the kill ends its trial, not its budget (a cap).
    args = ["tune", *TRIAL, "--trial-seconds", "600", "--trials", "1", "--study-dir", str(study)]
    proc = popen_a3c(*args, token=token)
    try:
        wait_until(proc, lambda: data_rows(study / "trial-000" / "episodes.csv") >= 5, timeout=120)
        os.killpg(
            proc.pid, signal.SIGKILL
        )  # the whole session: no Ctrl-C handler runs, the trial stays RUNNING
        proc.wait(timeout=30)
    finally:
        end(proc)
    resumed = tune(study, 1)
    assert "trial 0: was left running by an interrupted a3c tune; marked failed" in resumed
    assert [row[:2] for row in table_rows(resumed)] == [["0", "FAIL"], ["1", "COMPLETE"]]
    assert read_json(study / "trial-001" / "summary.json")["exit_reason"] in ("max_seconds", "solved")
