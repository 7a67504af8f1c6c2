"""Run dirs and checkpoints that used to end in a traceback: a path the file system cannot hold, a crafted
last.pt whose parts have the wrong types, a full disk at the start or at the summary. Each is one ``error:``
line.

The full disk is a real one where the machine allows it: a 1 MiB tmpfs mounted for the test (root, and a
kernel that lets this process mount). Elsewhere those tests are skipped, and the config.json case below
runs anyway with an ``fsync`` that raises ENOSPC."""

from __future__ import annotations

import contextlib
import csv
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from a3c.core.config import Config
from a3c.core.errors import BadInput
from a3c.rundir import files
from a3c.rundir.files import check_run_dir, create_run_dir
from a3c.rundir.lock import unlock
from a3c.rundir.resume import load_resume_checkpoint
from a3c.training.train import Trainer
from a3c_envs import inspect_env
from tests.support.commands import call_a3c, train_serial_fixed_length

FIXED = "tests.support.envs:FixedLength-v0"


def test_a_folder_name_over_255_bytes_is_one_line(tmp_path):
    long = tmp_path / ("x" * 300)
    for check in (lambda: check_run_dir(long, force=True), lambda: load_resume_checkpoint(long)):
        with pytest.raises(
            BadInput, match=r"has a folder name of 300 bytes .*; a file system allows at most 255"
        ):
            check()


def test_a_path_too_long_for_the_run_files_is_one_line(tmp_path):
    deep = tmp_path.joinpath(*["y" * 200] * 20)  # each name allowed, the whole over PATH_MAX
    with pytest.raises(
        BadInput, match=r"^--run-dir: .* bytes long; the run's files below it need a path under"
    ):
        create_run_dir(deep, force=False)
    assert not deep.exists()


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A real run's dir (100 steps): the crafted checkpoints below differ from a whole one in one field."""
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    train_serial_fixed_length(run_dir, 100)
    return run_dir


def crafted(finished_run: Path, run_dir: Path, **fields) -> None:
    shutil.copytree(finished_run, run_dir)
    last = run_dir / "checkpoints" / "last.pt"
    data = torch.load(last, weights_only=True)
    data.update(fields)
    torch.save(data, last)
    for history in last.parent.glob("step-*.pt"):  # no intact checkpoint to fall back to
        history.unlink()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"config": ["env_id", "CartPole-v1"]}, "has a config of type list; expected a dict"),
        ({"global_step": "100"}, "has global_step '100'; expected a whole number >= 0"),
        ({"global_step": -5}, "has global_step -5; expected a whole number >= 0"),
        ({"wall_time": float("nan")}, "has wall_time nan; expected a number of seconds >= 0"),
        ({"model_state": 3}, "has a model_state of type int; expected a dict"),
    ],
)
def test_a_crafted_checkpoint_is_one_checkpoint_line_exit_2(finished_run, tmp_path, fields, expected):
    run_dir = tmp_path / "run"
    crafted(finished_run, run_dir, **fields)
    result = call_a3c("train", "--resume", str(run_dir), "--quiet")
    last = str(run_dir / "checkpoints" / "last.pt")
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"error: checkpoint: {last!r} {expected}\n"


@contextlib.contextmanager
def small_disk(where: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs mounted at ``where`` (skip where this process may not mount one), unmounted after."""
    where.mkdir()
    try:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], capture_output=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        pytest.skip("no mount command here")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()[:100]}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=10)


def fill(disk: Path) -> None:
    """Fill ``disk`` to the last byte: a real ENOSPC for the next write."""
    with (disk / "filler").open("wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


@pytest.mark.slow
def test_a_full_disk_at_the_start_is_one_line_and_the_earlier_run_stays(tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        run_dir = disk / "run"
        result = call_a3c(
            "train", "--env", FIXED, "--serial", "--max-steps", "100", "--quiet", "--run-dir", str(run_dir)
        )
        assert result.returncode == 0, result.stderr
        before = {p.name: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != ".a3c.lock"}
        fill(disk)
        args = ("train", "--env", FIXED, "--serial", "--max-steps", "100", "--quiet", "--force")
        result = call_a3c(*args, "--run-dir", str(run_dir))
        assert result.returncode == 2, result.stderr
        # The claim moved the earlier run aside; config.json found the disk full; the earlier run went back.
        assert result.stderr.splitlines() == [
            f"warning: {str(run_dir)!r}: the earlier run was put back (this run ended before its first "
            "checkpoint)",
            f"error: --run-dir: {str(run_dir)!r} cannot be written (No space left on device)",
        ]
        after = {p.name: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != ".a3c.lock"}
        assert after == before


@pytest.mark.slow
def test_a_full_disk_at_the_summary_is_one_line(tmp_path, capsys):
    with small_disk(tmp_path / "disk") as disk:
        run_dir = disk / "run"

        class FillTheDisk:
            def on_end(self, summary):
                fill(disk)

        info = inspect_env(FIXED)
        config = Config(env_id=info.env_id, workers=1, max_steps=100).validate()
        trainer = Trainer(config, info, run_dir, serial=True, show_progress=False, callbacks=[FillTheDisk()])
        assert trainer.run() == 1
        err = capsys.readouterr().err
        assert err.splitlines() == ["error: could not write summary.json: No space left on device"]
        assert not (run_dir / "summary.json").exists()
        assert (run_dir / "checkpoints" / "last.pt").is_file()  # the final checkpoint came before


def test_config_json_on_a_full_disk_is_one_line_and_releases_the_run_dir(tmp_path, monkeypatch):
    real_fsync = os.fsync

    def full_at_config_json(fd):
        if "/.config.json." in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(fd)

    info = inspect_env(FIXED)
    config = Config(env_id=info.env_id, workers=1, max_steps=100).validate()
    monkeypatch.setattr(files.os, "fsync", full_at_config_json)  # atomic_write's fsync: where ENOSPC shows
    run_dir = tmp_path / "run"
    with pytest.raises(BadInput) as refused:
        Trainer(config, info, run_dir, serial=True, show_progress=False)
    assert str(refused.value) == f"--run-dir: {str(run_dir)!r} cannot be written (No space left on device)"
    assert not (run_dir / "config.json").exists() and files.foreign_entries(run_dir) == []
    monkeypatch.undo()
    unlock(Trainer(config, info, run_dir, serial=True, show_progress=False).lock)  # the lock was released


def test_a_row_the_full_disk_refuses_leaves_no_part_of_itself(tmp_path):
    from a3c.rundir.csvlog import EPISODE_COLUMNS, CsvLog

    with small_disk(tmp_path / "disk") as disk:
        path = disk / "episodes.csv"
        log = CsvLog(path, EPISODE_COLUMNS)
        fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
        with contextlib.suppress(OSError):  # to the last page: the CSV's own last page still has room
            while os.write(fd, b"\0" * 4096):
                pass
        os.close(fd)
        written = 0
        with pytest.raises(OSError) as refused:
            for step in range(100_000):
                log.write((1.5, step, 0, 123.25, 500))
                written += 1
        assert refused.value.errno == errno.ENOSPC
        text = path.read_text()
        assert text.endswith("\n") and len(text.splitlines()) == written + 1  # whole rows only
        (disk / "filler").unlink()
        log.write((2.0, written, 0, 1.0, 1))  # room again: the log goes on after its last whole row
        log.close()
        steps = [int(row["global_step"]) for row in csv.DictReader(path.open())]
        assert steps == list(range(written + 1))
