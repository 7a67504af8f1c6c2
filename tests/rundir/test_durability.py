"""Files that outlive a power cut (a3c/rundir/durable.py): every atomic rename is followed by an fsync of its
directory, the CSVs are fsynced before the checkpoint that counts their rows, a damaged last.pt falls back
to the newest intact step-*.pt, and the history is pruned in the order it was written."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from a3c.core.errors import BadInput
from a3c.rundir import checkpoints, durable, files
from a3c.rundir.checkpoints import LOG_STD_PARAM, save_last
from a3c.rundir.files import write_json
from a3c.rundir.resume import load_resume_checkpoint


@pytest.fixture
def fsynced(monkeypatch) -> list[str]:
    """The paths fsynced, in order (read from the descriptor: /proc/self/fd)."""
    seen: list[str] = []
    real = os.fsync

    def record(fd):
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    for module in (os, durable.os, files.os):
        monkeypatch.setattr(module, "fsync", record)
    return seen


def test_an_atomic_write_fsyncs_its_directory_after_the_rename(tmp_path, fsynced):
    write_json(tmp_path / "summary.json", {"a": 1})
    assert fsynced[-1] == str(tmp_path)  # the rename is durable only once the directory is
    assert fsynced[0].startswith(str(tmp_path / ".summary.json."))  # the file's contents before it


def payload(step: int) -> dict:
    return {
        "config": {"env_id": "CartPole-v1"},
        "model_state": {},
        "optimizer_state": {},
        "global_step": step,
        "wall_time": step / 100,
        "log_std_param": LOG_STD_PARAM,
    }


def test_the_csvs_are_fsynced_before_the_checkpoint_that_counts_their_rows(tmp_path, fsynced):
    for name in ("eval.csv", "episodes.csv", "metrics.csv"):
        (tmp_path / name).write_text("wall_time,global_step\n")
    (tmp_path / "checkpoints").mkdir()
    save_last(tmp_path / "checkpoints", payload(100), keep=2)
    csvs = [fsynced.index(str(tmp_path / name)) for name in ("eval.csv", "episodes.csv", "metrics.csv")]
    checkpoint = next(i for i, p in enumerate(fsynced) if ".last.pt." in p)
    assert max(csvs) < checkpoint
    assert str(tmp_path / "checkpoints") in fsynced[checkpoint:]  # last.pt's rename, and the history's links


def saves(folder: Path, steps: list[int], keep: int) -> None:
    for step in steps:
        save_last(folder, payload(step), keep)


def test_history_is_pruned_in_the_order_it_was_written(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    saves(folder, [100, 200, 300], keep=1)
    saves(
        folder, [150, 160], keep=1
    )  # a resume from step 100 (a rollback): the newest saves have lower steps
    assert sorted(p.name for p in folder.glob("step-*.pt")) == [
        "step-000000000150.pt",
        "step-000000000160.pt",
    ]
    assert checkpoints.load_checkpoint(folder / "last.pt")["global_step"] == 160


def test_a_damaged_last_pt_falls_back_to_the_newest_intact_checkpoint(tmp_path, capsys):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    saves(folder, [100, 200, 300], keep=3)
    # Damaged in place: step-300.pt is the same file (a hard link), so it is damaged too.
    with (folder / "last.pt").open("r+b") as f:
        f.write(b"\0" * 64)
    data = load_resume_checkpoint(tmp_path)
    assert data["global_step"] == 200
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: --resume: checkpoints/last.pt is damaged (")
    assert err[0].endswith(
        "resuming from checkpoints/step-000000000200.pt, the newest intact checkpoint (step 200)"
    )


def test_a_damaged_last_pt_without_an_intact_history_is_one_error(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    saves(folder, [100], keep=0)
    (folder / "last.pt").write_bytes(b"\0" * 64)
    with pytest.raises(BadInput, match=r"^checkpoint: .*last.pt' cannot be read"):
        load_resume_checkpoint(tmp_path)


def test_history_order_survives_a_clock_that_went_back(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    saves(folder, [100, 200], keep=1)
    ahead = time.time_ns() + 3600 * 10**9  # written while the clock was an hour ahead (then set back)
    for path in folder.glob("step-*.pt"):
        os.utime(path, ns=(ahead, ahead))
    saves(folder, [150], keep=1)
    assert sorted(p.name for p in folder.glob("step-*.pt")) == [
        "step-000000000150.pt",
        "step-000000000200.pt",
    ]
    assert (folder / "step-000000000150.pt").stat().st_mtime_ns > ahead
