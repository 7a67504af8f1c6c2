"""One writer per run dir (a3c/rundir/lock.py): the lock's holder is found, a second taker is refused in one
line naming the option and the PID, and a released lock (or a leftover lock file) blocks nobody."""

from __future__ import annotations

import os

import pytest

from a3c.core.errors import BadInput
from a3c.rundir.lock import LOCK_NAME, holder, lock_run_dir, refuse_if_held, unlock


def test_a_held_run_dir_is_refused_until_its_lock_is_released(tmp_path):
    assert holder(tmp_path) is None  # no lock file yet
    fd = lock_run_dir(tmp_path, "--run-dir")
    try:
        assert holder(tmp_path) == os.getpid()
        # flock is per open file: a second open, even in this process, is a second writer.
        with pytest.raises(BadInput) as refused:
            lock_run_dir(tmp_path, "--resume")
        assert str(refused.value) == (
            f"--resume: {str(tmp_path)!r} is in use by a running a3c (PID {os.getpid()}); "
            "wait for it to end or stop it, then run this again"
        )
        with pytest.raises(BadInput, match="^--force: .* is in use by a running a3c"):
            refuse_if_held(tmp_path, "--force")
    finally:
        unlock(fd)
    assert (tmp_path / LOCK_NAME).is_file() and holder(tmp_path) is None  # the file stays, the lock does not
    refuse_if_held(tmp_path, "--resume")
    unlock(lock_run_dir(tmp_path, "--resume"))  # taken again
