"""Learning curves of Box actions: the Pendulum-v1 preset with the local backend (Hogwild: 2 spawned
workers on one shared model), a race against the clock over seeds, and serially within a step
budget: `make test-learning` prints the pass rate. Not in CI: the first depends on the machine's load and
the workers' interleaving, the second is seeded but costs about 30 CPU-s a seed. What `make test` checks
instead is named in each docstring."""

from __future__ import annotations

import pytest

import a3c
from tests.support.commands import run_a3c
from tests.support.run_files import read_json

pytestmark = [pytest.mark.slow, pytest.mark.learning]

SEEDS = pytest.mark.parametrize("seed", [0, 1, 2], ids=lambda s: f"seed{s}")


@SEEDS
def test_pendulum_reaches_its_target_with_two_spawned_workers_within_300_s(run_dir, token, seed):
    """The Pendulum-v1 preset with 2 workers (x 16 envs, target -200, confirmed on 100 more episodes) solved
    in 20.7-29.2 s on 2 cores in 6 runs (2026-12-07); with the preset before (4 envs per worker, γ 0.9),
    about one in six runs had not reached -200 within 300 s, and one CI run stalled at a best of -406.8
    (3.9M steps). In `make test`: a Gaussian policy learning a continuous bandit within a step budget
    (tests/e2e/test_continuous.py)."""
    args = f"train --env Pendulum-v1 --workers 2 --seed {seed} --max-seconds 300 --quiet"
    result = run_a3c(*args.split(), "--run-dir", str(run_dir), timeout=420, token=token)
    assert result.returncode == 0, result.stderr
    summary = read_json(run_dir / "summary.json")
    assert summary["solved"] is True and summary["best_mean_return"] >= -200, summary


@SEEDS
def test_pendulum_learns_serially_within_a_step_budget(tmp_path, seed):
    """The preset (16 envs x t_max 8: 128 steps an update, target confirmed on 100 more episodes), one
    learner, seeded: the run is bit-reproducible on one CPU model, so it solves at the same step on any
    machine of that kind. The bar is -600: well clear of random (about -1200). Measured (eval every 10k steps,
    2026-12-07, AMD EPYC): seeds 0-9 solve at -600 at 270k, 310k, 250k, 240k, 250k, 250k, 270k, 290k, 280k,
    280k steps (median 270k), 20-30 s each on a quiet core; budget 460,800 (3,600 updates), about 1.5x
    the slowest. (The preset before, 4 envs per worker and γ 0.9: 180k-390k, 2026-12-02.) Float kernels differ
    between CPU models: on an AVX-512 Xeon that preset's seed 2 solved at 260k rather than 180k. Moved here
    from `make test` (tests/e2e/test_continuous.py) for its cost; there, a Gaussian policy learns a
    continuous bandit instead."""
    run = a3c.train("Pendulum-v1", run_dir=tmp_path / "run", serial=True, seed=seed, target_return=-600,
                    max_steps=460_800, eval_interval_steps=10_000, max_seconds=300)  # fmt: skip
    summary = run.summary
    assert summary["solved"] is True and summary["steps_to_solve"] <= 460_800, summary
    assert summary["best_mean_return"] >= -600, summary
