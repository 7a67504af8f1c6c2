"""Seed streams: no two children of a run, across restarts and resumes, share a seed."""

from __future__ import annotations

from a3c.core.seeding import child_seed


def test_every_child_start_of_a_run_has_its_own_seed():
    # Workers 0..3 and the evaluator (slot 4), each at 4 starts, in 3 segments of a resumed run: 60 seeds.
    starts = [(slot, restart, resume) for slot in range(5) for restart in range(4) for resume in range(3)]
    seeds = [child_seed(7, *start) for start in starts]
    assert len(set(seeds)) == len(seeds) == 60


def test_the_evaluators_seed_is_no_workers_and_changes_with_the_runs_seed():
    workers = 8
    evaluator = child_seed(0, workers)
    assert evaluator not in {child_seed(0, i, restart) for i in range(workers) for restart in range(10)}
    assert child_seed(1, workers) != evaluator and child_seed(0, workers) == evaluator  # seeded, not random
