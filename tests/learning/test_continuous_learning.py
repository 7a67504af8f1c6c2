"""Learning curves of Box actions with the local backend (Hogwild: the preset's 2 spawned workers on one
shared model), a race against the clock over seeds: `make test-learning` prints the pass rate. Not in CI:
the outcome depends on the machine's load and the workers' interleaving. What `make test` checks instead
is named in the docstring."""

from __future__ import annotations

import pytest

from tests.helpers import read_json, run_a3c

pytestmark = [pytest.mark.slow, pytest.mark.learning]

SEEDS = pytest.mark.parametrize("seed", [0, 1, 2], ids=lambda s: f"seed{s}")


@SEEDS
def test_pendulum_reaches_its_target_with_two_spawned_workers_within_300_s(run_dir, token, seed):
    """The Pendulum-v1 preset with 2 workers (x 4 envs, target -200, confirmed on 100 more episodes) usually
    solves in 40-100 s on 2 cores; before this moved here, about one in six runs did not reach -200 within
    300 s, and one CI run stalled at a best of -406.8 (3.9M steps). In `make test`: the seeded serial run's
    solve at -600 within a step budget (tests/e2e/test_continuous.py)."""
    args = f"train --env Pendulum-v1 --workers 2 --seed {seed} --max-seconds 300 --quiet"
    result = run_a3c(*args.split(), "--run-dir", str(run_dir), timeout=420, token=token)
    assert result.returncode == 0, result.stderr
    summary = read_json(run_dir / "summary.json")
    assert summary["solved"] is True and summary["best_mean_return"] >= -200, summary
