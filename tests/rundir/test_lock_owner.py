"""The lock beyond the kernel's flock (a3c/rundir/lock.py): the file names its owner and lease, so a second
trainer on another host (NFS with local locks, a requeued job) is refused while the lease is fresh; the
holder notices a deleted, replaced or taken-over lock file and stops without writing; a file system without
locks, or a run dir that cannot be written, is one line."""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import time
from pathlib import Path

import pytest

from a3c.core.config import Config
from a3c.core.errors import BadInput
from a3c.rundir import lock
from a3c.rundir.lock import LOCK_NAME, Owner, holder, lock_run_dir, still_held, unlock
from a3c.training.train import Trainer
from a3c_envs import inspect_env


def another_hosts_lock(run_dir: Path, renewed_s_ago: float, lease_s: float = 600) -> None:
    """The lock file a trainer on another host left (its flock invisible here)."""
    run_dir.mkdir(exist_ok=True)
    owner = Owner(4242, "node-elsewhere", "2026-01-01T00:00:00+0000", lease_s)
    (run_dir / LOCK_NAME).write_text(owner.text())
    then = time.time() - renewed_s_ago
    os.utime(run_dir / LOCK_NAME, (then, then))


def test_a_fresh_lease_of_another_host_is_refused_and_an_expired_one_taken(tmp_path):
    run_dir = tmp_path / "run"
    another_hosts_lock(run_dir, renewed_s_ago=30)
    with pytest.raises(
        BadInput, match=r"^--resume: .* is in use by a3c PID 4242 on host node-elsewhere \(its "
    ):
        lock_run_dir(run_dir, "--resume")
    assert holder(run_dir) == 4242
    another_hosts_lock(run_dir, renewed_s_ago=700)  # that trainer is gone: its lease ran out
    assert holder(run_dir) is None
    fd = lock_run_dir(run_dir, "--resume")
    text = (run_dir / LOCK_NAME).read_text()
    assert text.startswith(f"{os.getpid()}\nhost={socket.gethostname()}\nboot=")  # the PID first, as before
    unlock(fd)
    assert Owner.parse((run_dir / LOCK_NAME).read_text()) is None  # released: another host may take it now
    assert holder(run_dir) is None


def test_another_host_is_another_kernel_whatever_its_name(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # A pod of the same name on another node: same host name, another kernel. Its lease holds.
    same_name = Owner(4242, socket.gethostname(), "", 600, boot="another-kernel-boot-id")
    (run_dir / LOCK_NAME).write_text(same_name.text())
    with pytest.raises(BadInput, match=f"is in use by a3c PID 4242 on host {socket.gethostname()} "):
        lock_run_dir(run_dir, "--resume")
    # A container of this machine, another name: same kernel, so the free flock says its holder is gone.
    (run_dir / LOCK_NAME).write_text(Owner(4242, "container-b", "", 600, boot=lock.boot_id()).text())
    unlock(lock_run_dir(run_dir, "--resume"))


@pytest.mark.parametrize("how", ["deleted", "replaced", "taken over"])
def test_the_holder_sees_that_it_lost_its_lock(tmp_path, how):
    fd = lock_run_dir(tmp_path, "--run-dir")
    try:
        assert still_held(tmp_path, fd) is None
        path = tmp_path / LOCK_NAME
        if how == "deleted":
            path.unlink()
        elif how == "replaced":  # deleted, and a second writer made a new one and locked it
            path.unlink()
            unlock(lock_run_dir(tmp_path, "--run-dir"))
        else:  # a second host wrote its owner into the same file (its flock did not see ours)
            os.pwrite(fd, Owner(99, "node-elsewhere").text().encode(), 0)
        lost = still_held(tmp_path, fd)
        assert lost is not None and f"its lock file {str(path)!r} was {how}" in lost
    finally:
        unlock(fd)


@pytest.mark.slow
def test_a_run_whose_lock_file_is_deleted_stops_without_writing(tmp_path, capsys):
    run_dir = tmp_path / "run"

    class DeleteTheLock:
        def on_metrics(self, row):
            (run_dir / LOCK_NAME).unlink(missing_ok=True)

    info = inspect_env("tests.support.envs:FixedLength-v0")
    # A metrics row every 100 steps, not every second: the deletion comes long before the budget on any host.
    values = {"max_steps": 5000, "checkpoint_interval": 1e-6, "metrics_interval_steps": 100}
    config = Config(env_id=info.env_id, workers=1, **values).validate()
    trainer = Trainer(config, info, run_dir, serial=True, show_progress=False, callbacks=[DeleteTheLock()])
    assert trainer.run() == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert lines == [
        f"error: trainer failed: its lock file {str(run_dir / LOCK_NAME)!r} was deleted, so another writer "
        "may have taken the run dir; stopped without writing"
    ]
    assert not (run_dir / "summary.json").exists()
    assert trainer.counters.total_steps < 5000  # stopped at the first checkpoint after the deletion


@pytest.mark.parametrize("code", [errno.ENOSYS, errno.ENOLCK])
def test_a_file_system_without_locks_is_one_line(tmp_path, monkeypatch, code):
    def no_locks(fd, operation):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(BadInput, match=r"^--run-dir: .* cannot be locked for writing: its file system "):
        lock_run_dir(tmp_path, "--run-dir")


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_a_run_dir_that_cannot_be_written_is_one_line(tmp_path, monkeypatch, code):
    real_open = os.open

    def refuse(path, flags, *args):
        if str(path).endswith(LOCK_NAME):
            raise OSError(code, os.strerror(code), str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(lock.os, "open", refuse)
    why = lock.UNLOCKABLE[code]
    with pytest.raises(BadInput) as refused:
        lock_run_dir(tmp_path, "--resume")
    assert str(refused.value) == f"--resume: {str(tmp_path)!r} cannot be locked for writing: {why}"
