"""What a scheduler, a laptop or an ssh session does to a running group: a suspend past the hang timeout
(Ctrl-Z then fg, a Slurm suspend), a trainer that stops answering (a write stuck on NFS), a hangup (the
terminal closed), a trainer killed while a worker is stuck in an env step."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.commands import end, more_rows, popen_a3c, start_cartpole, wait_until
from tests.support.processes import alive, describe, left_behind, processes_with_token, spawned_children
from tests.support.run_files import read_json

HANG_S = 6  # not less: an idle evaluator (a beat every 50 ms) is never taken for hung on a loaded machine
TRAINER_SILENT = b"the trainer sent no heartbeat"


class Stderr:
    """What the run and its children wrote to stderr so far, read without blocking."""

    def __init__(self, proc):
        self.fd, self.text = proc.stderr.fileno(), b""

    def read(self, until: bytes = b"", count: int = 0, timeout: float = 0.0) -> bytes:
        """Read what is there; with ``until``, read on until it occurs ``count`` times (or ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            if ready:
                chunk = os.read(self.fd, 65536)
                self.text += chunk
                if not chunk:
                    return self.text
            if self.text.count(until) >= count or (not ready and time.monotonic() >= deadline):
                return self.text


@pytest.mark.slow
def test_a_suspended_group_a_silent_trainer_and_a_hangup(run_dir, token):
    proc = start_cartpole(run_dir, token, extra=f"--target-return 1e9 --hang-timeout {HANG_S}")
    stderr = Stderr(proc)
    try:
        children = spawned_children(proc.pid)
        # 1. The whole group stopped for longer than the hang timeout, then continued: no child is hung.
        os.killpg(proc.pid, signal.SIGSTOP)
        time.sleep(HANG_S + 2.0)  # the fault itself: a suspend of a measured length, not a synchronisation
        os.killpg(proc.pid, signal.SIGCONT)
        more_rows(run_dir, proc, 20)
        assert b"crashed" not in stderr.read(), stderr.text.decode()
        assert alive(children) == children
        # 2. The trainer alone stops answering: each child stops itself once the trainer's heartbeat is
        # silent for the hang timeout, and the trainer, back, restarts them.
        os.kill(proc.pid, signal.SIGSTOP)
        stderr.read(until=TRAINER_SILENT, count=3, timeout=60)
        os.kill(proc.pid, signal.SIGCONT)
        assert stderr.text.count(TRAINER_SILENT) == 3, stderr.text.decode()
        wait_until(proc, lambda: len(spawned_children(proc.pid) - children) == 3, timeout=120)
        more_rows(run_dir, proc, 20)
        # 3. A hangup of the group (the terminal closed): a stop, with last.pt and summary.json.
        restarted = spawned_children(proc.pid)
        os.killpg(proc.pid, signal.SIGHUP)
        try:
            assert proc.wait(timeout=60) == 128 + signal.SIGHUP
        except subprocess.TimeoutExpired:  # what the run said and who is left, for a readable failure
            left, said = describe(processes_with_token(token)), stderr.read(timeout=1).decode()[-4000:]
            pytest.fail(f"the run did not end within 60 s of SIGHUP; left: {left}\n{said}")
        err = stderr.read(timeout=10).decode()  # to EOF: the run and every child have exited
    finally:
        end(proc)
    assert not alive(children | restarted) and not left_behind(token)
    summary = read_json(run_dir / "summary.json")
    assert (summary["exit_reason"], summary["restarts"]) == ("SIGHUP", 3), err
    assert (run_dir / "checkpoints" / "last.pt").is_file()


@pytest.mark.slow
def test_a_worker_stuck_in_an_env_step_dies_with_its_trainer(run_dir, token):
    # Hanging-v0 blocks its worker for good in an env step: it never beats or writes again, so only its
    # parent's death can end it. The hang timeout is long: the trainer does not kill it first.
    args = "--env tests.support.envs:Hanging-v0 --workers 1 --eval-interval 600 --hang-timeout 600"
    proc = popen_a3c("train", *args.split(), "--max-seconds", "300", "--run-dir", str(run_dir), token=token)
    try:

        def worker_stuck() -> bool:
            workers = [p for p in spawned_children(proc.pid) if comm(p) == "a3c-worker-0"]
            return bool(workers) and wchan(workers[0]).startswith("futex")

        wait_until(proc, worker_stuck, timeout=120)
        children = spawned_children(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)  # as the OOM killer would
        proc.wait(timeout=10)
    finally:
        end(proc)
    assert not left_behind(token, timeout=30.0), "a child outlived its SIGKILLed trainer"
    assert not alive(children)


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def wchan(pid: int) -> str:
    """The kernel function the process sleeps in ("futex_wait_queue" for a thread waiting on an Event)."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return ""
