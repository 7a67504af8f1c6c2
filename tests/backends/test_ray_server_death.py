"""A parameter-server actor that dies (its process killed) fails the Ray run at once: exit 1, an error that
names the server and says how to ``--resume``, last.pt holding the last sync; the resumed run continues
from it. (A hung server is tests/backends/test_ray.py's; issue 16, part 5.)"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import end, left_behind, popen_a3c, processes_with_token, read_json, run_a3c, wait_until

__import__("tests.conftest", fromlist=["*"]).require_extra("ray", "ray")  # skips, or fails in CI
pytestmark = pytest.mark.slow

HANG_TIMEOUT_S = 60.0  # the default: a death must be seen as one, long before a hang could be
RAY_SHUTDOWN_S = 30.0  # Ray's daemons (gcs_server, raylet, ...) exit after the driver's ray.shutdown()


def actor_processes(token: str, actor: str) -> set[int]:
    """PIDs of the command's Ray processes running actor class ``actor`` (Ray titles them ``ray::Class`` or
    ``ray::Class.method``)."""
    found = set()
    for pid in processes_with_token(token):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if title.split(b".")[0] == f"ray::{actor}".encode():
            found.add(pid)
    return found


def metrics_workers(run_dir: Path) -> set[str]:
    """The worker ids with a row in metrics.csv so far."""
    try:
        lines = (run_dir / "metrics.csv").read_text().splitlines()[1:]
    except OSError:
        return set()
    return {line.split(",")[2] for line in lines if line.count(",") >= 2}


def under_way(run_dir: Path) -> bool:
    """Both workers reported metrics and a checkpoint holding pushed steps was written.

    A checkpoint can be written before the first push reaches the server (0 steps): killing the server then
    would test nothing of what a sync keeps.
    """
    from a3c.core.errors import BadInput
    from a3c.run.resume import load_resume_checkpoint

    if metrics_workers(run_dir) != {"0", "1"} or not (run_dir / "checkpoints" / "last.pt").exists():
        return False
    try:
        return load_resume_checkpoint(run_dir)["global_step"] > 0
    except (BadInput, OSError, RuntimeError, EOFError):  # replaced or half-visible while we read it
        return False


def test_a_killed_parameter_server_fails_the_run_at_once_and_the_run_resumes(tmp_path, token):
    from a3c.run.resume import load_resume_checkpoint

    run_dir = tmp_path / "run"
    proc = popen_a3c(
        "train", "--env", "CartPole-v1", "--backend", "ray", "--workers", "2", "--set", "target_return=none",
        "--max-seconds", "600", "--set", "checkpoint_interval=1", "--set", f"hang_timeout={HANG_TIMEOUT_S:g}",
        "--run-dir", str(run_dir), "--quiet", token=token,
    )  # fmt: skip
    try:
        # Ray's start-up alone has taken 40 s on 2 loaded cores.
        wait_until(proc, lambda: under_way(run_dir), timeout=240)
        servers = actor_processes(token, "ParameterServer")
        assert len(servers) == 1, servers
        os.kill(servers.pop(), signal.SIGKILL)
        killed = time.monotonic()
        out, err = proc.communicate(timeout=HANG_TIMEOUT_S + RAY_SHUTDOWN_S)
        exit_s = time.monotonic() - killed
    finally:
        end(proc)
    print(f"the run exited {exit_s:.1f} s after the server was killed")  # pytest -s: the detection time
    assert proc.returncode == 1, err[-3000:]
    assert exit_s < HANG_TIMEOUT_S, exit_s  # seen as a death, not waited out as a hang
    # The server's error is the run's, stated once, not hidden under the workers' failed pushes.
    assert "error: parameter server failed:\nthe parameter server died" in err, err[-3000:]
    assert f"a3c train --resume {run_dir}" in err, err[-3000:]
    assert "error: worker" not in err and "warning: worker" not in err, err[-3000:]
    summary = read_json(run_dir / "summary.json")
    assert summary["exit_reason"] == "failed: parameter server"
    # last.pt holds the last sync: weights and counters of one instant.
    saved = load_resume_checkpoint(run_dir)
    assert 0 < saved["global_step"] == summary["total_steps"] == int(saved["worker_steps"].sum())
    assert 0 < saved["updates"] == int(saved["worker_updates"].sum())
    assert_gone(token)

    # Budgets count the whole run (docs/runs.md): 2000 steps more, and time enough for Ray to start again.
    steps, seconds = saved["global_step"] + 2000, int(saved["wall_time"]) + 240
    resumed = run_a3c(
        "train", "--resume", str(run_dir), "--backend", "ray", "--max-steps", str(steps),
        "--max-seconds", str(seconds), "--quiet", timeout=400, token=token,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = read_json(run_dir / "summary.json")
    after = load_resume_checkpoint(run_dir)
    assert summary["exit_reason"] == "max_steps" and after["resumes"] == 1
    assert after["global_step"] == summary["total_steps"] >= steps
    assert after["updates"] > saved["updates"]
    assert_gone(token)


def assert_gone(token: str) -> None:
    """No process of the command is left (Ray's own included); the ``token`` fixture then checks /dev/shm."""
    assert not left_behind(token, timeout=RAY_SHUTDOWN_S), "Ray processes outlived the command"
