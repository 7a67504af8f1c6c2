"""A ``--force`` run SIGKILLed before its first checkpoint loses nothing: the earlier run it was replacing
stays whole in ``.a3c-replaced/`` and the next ``--resume`` puts it back and continues it."""

from __future__ import annotations

import os
import signal

import pytest

from a3c.rundir import replace
from tests.support.commands import call_a3c, end, popen_a3c, train_serial_fixed_length, wait_until
from tests.support.run_files import csv_rows, data_rows

pytestmark = pytest.mark.slow

FIXED = "tests.support.envs:FixedLength-v0"


def test_a_force_run_killed_before_its_first_checkpoint_leaves_the_earlier_run_resumable(run_dir, token):
    train_serial_fixed_length(run_dir, 200)
    earlier = {name: (run_dir / name).read_bytes() for name in ("config.json", "eval.csv", "episodes.csv")}
    earlier_best = (run_dir / "checkpoints" / "best.pt").read_bytes()
    args = f"train --env {FIXED} --serial --force --checkpoint-interval 3600 --max-steps 1000000000 --quiet"
    proc = popen_a3c(*args.split(), "--run-dir", str(run_dir), token=token)
    try:
        # The new run trains: its own episodes.csv has rows, the earlier run waits aside.
        wait_until(
            proc, lambda: (run_dir / replace.ASIDE).is_dir() and data_rows(run_dir / "episodes.csv") >= 5, 60
        )
        os.killpg(proc.pid, signal.SIGKILL)  # a power cut, an OOM kill: nothing runs after this
        proc.wait(timeout=10)
    finally:
        end(proc)
    assert (run_dir / replace.ASIDE / "checkpoints" / "best.pt").read_bytes() == earlier_best

    result = call_a3c("train", "--resume", str(run_dir), "--max-steps", "400", "--quiet")
    assert result.returncode == 0, result.stderr
    assert f"warning: {str(run_dir)!r}: the earlier run was put back" in result.stderr
    assert not (run_dir / replace.ASIDE).exists() and not (run_dir / replace.TRASH).exists()
    assert (run_dir / "eval.csv").read_bytes().startswith(earlier["eval.csv"])  # its rows, then the resume's
    assert (run_dir / "episodes.csv").read_bytes().startswith(earlier["episodes.csv"])
    assert [int(row["global_step"]) for row in csv_rows(run_dir / "episodes.csv")][-1] <= 400
