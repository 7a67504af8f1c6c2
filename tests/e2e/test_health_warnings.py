"""The learning-health warnings in real runs: a policy made to collapse, a critic made to fail, and a healthy
run that must stay silent. Each warning is a line in the live output and an entry in summary.json."""

from __future__ import annotations

import pytest

from tests.conftest import read_json, run_a3c

pytestmark = pytest.mark.slow


def train(run_dir, *args: str):
    proc = run_a3c("train", "--env", "CartPole-v1", "--serial", "--run-dir", str(run_dir), *args, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc, read_json(run_dir / "summary.json")["warnings"]


def test_a_collapsed_policy_is_warned_about(tmp_path):
    # lr 0.05 without an entropy bonus: the categorical saturates within the first second, far below 475.
    # A time budget, not a step budget: metrics rows come once a second and the warning needs 5 in a row
    # (60k steps took 3.3 s here on a quiet machine, 4 rows: no warning).
    proc, warnings = train(
        tmp_path / "run", "--max-seconds", "10", "--set", "lr=0.05", "--set", "entropy_coef=0"
    )
    assert [w["kind"] for w in warnings] == ["entropy_collapse"]
    assert "warning: entropy collapsed" in proc.stdout  # the live display's line (plain: not a terminal)


def test_a_critic_that_never_learns_is_warned_about(tmp_path):
    # value_coef 0: the critic keeps its random weights; its explained variance hovers at 0.
    _, warnings = train(
        tmp_path / "run", "--max-steps", "430000", "--set", "value_coef=0", "--set", "target_return=none"
    )
    dead = [w for w in warnings if w["kind"] == "dead_critic"]
    assert len(dead) == 1 and dead[0]["global_step"] >= 400_000, warnings


def test_a_healthy_run_has_no_warnings(tmp_path):
    _, warnings = train(tmp_path / "run", "--max-seconds", "60")  # the preset: solves CartPole
    assert warnings == []
