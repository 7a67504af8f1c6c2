"""A new run dir is claimed atomically: made, locked, then checked again, so two commands that pick the same
run dir at once never share it; ``--force`` replaces an earlier run under its lock (moved aside) and keeps the
lock file."""

from __future__ import annotations

import json

import pytest

from a3c.core.errors import BadInput
from a3c.rundir import files
from a3c.rundir.files import create_run_dir
from a3c.rundir.lock import LOCK_NAME, holder, unlock


def earlier_run(path) -> None:
    """What a finished run leaves (enough for ``--force`` to recognise it)."""
    (path / "checkpoints").mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"env_id": "CartPole-v1", "versions": {"a3c": "0"}}))


def test_a_run_dir_taken_between_the_check_and_the_claim_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "run"
    checks = []
    # The second command checked the dir while it was still free; then the first claimed it and wrote.
    monkeypatch.setattr(files, "check_run_dir", lambda p, force: checks.append(p))
    first, fd = create_run_dir(path, force=False)
    earlier_run(path)
    unlock(fd)
    with pytest.raises(BadInput, match=r"^--run-dir: '.*run' was just taken by another run; choose another"):
        create_run_dir(path, force=False)
    assert (path / "config.json").exists() and len(checks) == 2


def test_the_claim_holds_the_lock_and_force_keeps_the_lock_file(tmp_path):
    path = tmp_path / "run"
    earlier_run(path)
    (path / LOCK_NAME).write_text("")
    inode = (path / LOCK_NAME).stat().st_ino
    claimed, fd = create_run_dir(path, force=True)
    try:
        # The earlier run is moved aside (deleted at the new run's first checkpoint), not deleted yet.
        assert claimed == path and sorted(p.name for p in path.iterdir()) == [
            ".a3c-replaced",
            LOCK_NAME,
            "checkpoints",
        ]
        assert (path / LOCK_NAME).stat().st_ino == inode  # the file others lock is the one we hold
        assert holder(path) is not None
    finally:
        unlock(fd)
    assert holder(path) is None


def test_a_folder_holding_only_a_lock_file_counts_as_empty(tmp_path):
    path = tmp_path / "run"
    path.mkdir()
    (path / LOCK_NAME).write_text("123\n")  # a run killed before it wrote anything
    _, fd = create_run_dir(path, force=False)
    unlock(fd)
