"""The learning curve of the Ray backend (two workers in one node group, exchanging with a shard), a race
against the clock over seeds: `make test-learning` prints the pass rate. Not in CI: the outcome depends on the
machine's load and the actors' interleaving. The runs join one loopback Ray head of this module's own
(tests/support/ray_head.py), so the budget is spent training, not starting Ray. What `make test` checks
instead is named in the docstring."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.commands import run_a3c
from tests.support.extras import require_extra
from tests.support.ray_head import RayHead, assert_no_ray_left, join_head, start_ray_head
from tests.support.run_files import read_json

pytestmark = [pytest.mark.slow, pytest.mark.learning]

SEEDS = pytest.mark.parametrize("seed", [0, 1, 2], ids=lambda s: f"seed{s}")


@pytest.fixture(scope="module")
def ray_head() -> Iterator[RayHead]:
    require_extra("ray", "ray")  # skips, or fails under A3C_REQUIRE_EXTRAS
    yield from start_ray_head()


@SEEDS
def test_ray_backend_solves_cartpole_with_two_worker_actors_within_240_s(
    tmp_path, token, ray_head, monkeypatch, seed
):
    """The preset with 2 workers solves CartPole (confirmed over the preset's extra episodes) and its
    best.pt scores the target over 100 fresh episodes. Not asserted: that both workers wrote metrics (a run
    has solved before its second worker's first row). In `make test`: two workers train, evaluate and
    checkpoint (tests/backends/test_ray_nodes.py, tests/backends/test_ray_cluster.py), and the same
    Learner's seeded serial solve (tests/e2e/test_deterministic.py)."""
    run_dir, address = tmp_path / "run", join_head(ray_head, monkeypatch, token)
    args = f"train --env CartPole-v1 --backend ray --workers 2 --seed {seed} --max-seconds 240 --quiet"
    result = run_a3c(
        *args.split(), "--ray-address", address, "--run-dir", str(run_dir), timeout=400, token=token
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = read_json(run_dir / "summary.json")
    assert summary["solved"] is True and summary["exit_reason"] == "solved", summary
    assert summary["best_mean_return"] >= 475, summary
    assert read_json(run_dir / "config.json")["backend"] == "ray"
    evaluation = run_a3c("evaluate", str(run_dir / "checkpoints" / "best.pt"), "--episodes", "100", "--json",
                         timeout=300, token=token)  # fmt: skip
    assert evaluation.returncode == 0, evaluation.stderr
    report = json.loads(evaluation.stdout)
    assert report["episodes"] == 100 and report["mean_return"] >= 475, report
    assert_no_ray_left(token)
