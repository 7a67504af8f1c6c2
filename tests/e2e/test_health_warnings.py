"""The learning-health warnings in real runs: a policy made to collapse and a critic that cannot learn. Each
warning is a line in the live output and an entry in summary.json. (A healthy run stays silent: the seeded
serial solve of tests/e2e/test_deterministic.py.)

Every run is seeded and serial, in this process, with a step budget, evaluations by steps and a metrics row
every fixed number of steps: the health checks read those rows, so each run warns at the same steps on any
machine."""

from __future__ import annotations

import pytest

from tests.support.commands import call_a3c_train
from tests.support.run_files import csv_rows, read_json

pytestmark = pytest.mark.slow


def train(run_dir, max_steps: int, eval_every: int, row_every: int, *args: str, env: str = "CartPole-v1"):
    """A seeded serial run of ``env`` for ``max_steps`` (unless it solves), an evaluation every ``eval_every``
    steps and a metrics row every ``row_every``; its output and summary.json."""
    args = ("--max-steps", str(max_steps), "--set", f"eval_interval_steps={eval_every}", *args)
    args += ("--set", f"metrics_interval_steps={row_every}", "--max-seconds", "300")  # a safety cap only
    args = ("--env", env, "--serial", "--seed", "0", "--run-dir", str(run_dir), *args)
    proc = call_a3c_train(*args)
    assert proc.returncode == 0, proc.stderr
    summary = read_json(run_dir / "summary.json")
    assert summary["exit_reason"] in ("max_steps", "solved"), summary
    return proc, summary


def test_a_collapsed_policy_is_warned_about(tmp_path):
    # lr 0.05 without an entropy bonus: the categorical saturates within a few thousand steps, far below 475.
    # A row every 500 steps; the warning needs 5 rows in a row below 5% of ln 2. Measured (this command,
    # seeds 0-9, 2026-12-02): each run's only warning is the collapse, at step 2,500-4,000 (seed 0: 3,000);
    # best evaluations 9.3-105.5. Budget 10k steps, 2.5x the latest warning.
    proc, summary = train(tmp_path / "run", 10_000, 5000, 500, "--set", "lr=0.05", "--set", "entropy_coef=0")
    warnings = summary["warnings"]
    assert [w["kind"] for w in warnings] == ["entropy_collapse"], warnings
    assert warnings[0]["global_step"] <= 8000, warnings
    assert not summary["solved"] and summary["total_steps"] == 10_000, summary
    assert "warning: entropy collapsed" in proc.stdout  # the live display's line (plain: not a terminal)


def test_a_critic_that_sees_nothing_is_warned_about(tmp_path, monkeypatch, capsys):
    # Blind-v0 shows one observation at every step and pays uniform noise: the critic outputs one value per
    # segment, so the explained variance is 0 up to rounding on every seed and machine, never near the 0.02
    # bar. (A critic frozen by value_coef=0 on CartPole is not: its random weights track the returns by
    # chance, and whether the median lands above 0.02 changed with the seed and with the CPU's float
    # kernels.) In this process, with the check's step thresholds scaled down tenfold (the thresholds
    # themselves are tests/algo/test_health.py's): it needs 40k steps and a 10k window, and runs
    # first at the row of step 40,000, the last. 16 envs x t_max 5 = 80 steps an update; a row every 10.
    import a3c
    from a3c.algo import health

    monkeypatch.setattr(health, "DEAD_CRITIC_STEPS", 40_000)
    monkeypatch.setattr(health, "DEAD_CRITIC_WINDOW", 10_000)
    run = a3c.train("tests.support.envs:Blind-v0", run_dir=tmp_path / "run", serial=True, seed=0,
                    max_steps=40_000, eval_interval_steps=10_000, metrics_interval_steps=800,
                    envs_per_worker=16, t_max=5)  # fmt: skip
    summary = run.summary
    warnings = [(w["kind"], w["global_step"]) for w in summary["warnings"]]
    assert warnings == [("dead_critic", 40_000)], summary["warnings"]
    assert summary["exit_reason"] == "max_steps" and summary["total_steps"] == 40_000, summary
    rows = csv_rows(tmp_path / "run" / "metrics.csv")
    assert [int(r["global_step"]) for r in rows] == list(range(800, 40_001, 800))
    assert all(abs(float(r["explained_variance"])) < 1e-6 for r in rows), rows  # 0, but for float rounding
