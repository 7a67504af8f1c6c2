"""A seeded ``--serial`` run with evaluations and metrics rows by steps is bit-reproducible: two runs with the
same seed and step budget leave the same weights, optimizer state, evaluations, metrics rows and episodes
(wall-clock columns aside), and another seed leaves other weights. That is what lets every learning check of
`make test` be a seeded serial run with a step budget (an exact outcome, not a race against the clock); the
learning of the preset that the two-worker CartPole run used to check is checked here the same way."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

import a3c
from tests.support.commands import call_a3c, run_a3c
from tests.support.run_files import data_rows, read_json

pytestmark = pytest.mark.slow

# Short runs: 4,000 steps with CartPole's preset (5 steps x 2 envs an update), no target (so each runs the
# whole budget), an evaluation every 1,000 steps and a metrics row every 400 of the learner's steps.
STEPS, EVAL_STEPS, METRICS_STEPS = 4000, 1000, 400
SAME = {"target_return": None, "eval_interval_steps": EVAL_STEPS, "metrics_interval_steps": METRICS_STEPS}
CLOCKS = {"wall_time", "steps_per_s"}  # the only columns that may differ between two such runs


def train_here(run_dir: Path, seed: int) -> Path:
    """A run in this process, through the API (``a3c.train``)."""
    run = a3c.train("CartPole-v1", run_dir=run_dir, serial=True, seed=seed, max_steps=STEPS, **SAME)
    assert run.exit_code == 0, run.summary
    return run_dir


def train_as_a_command(run_dir: Path, seed: int) -> Path:
    """The same run as a real command: another process (its own hash seed, its own first imports)."""
    args = ["train", "--env", "CartPole-v1", "--serial", "--seed", str(seed), "--max-steps", str(STEPS)]
    args += [
        arg for key, value in SAME.items() for arg in ("--set", f"{key}={'none' if value is None else value}")
    ]
    done = run_a3c(*args, "--quiet", "--run-dir", str(run_dir), timeout=300)
    assert done.returncode == 0, done.stderr
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Two runs with seed 0, one as a command and one in this process (so one process's state, such as its
    hash seed or what it imported first, cannot make them equal), and one with seed 1, all else the same."""
    root = tmp_path_factory.mktemp("deterministic")
    return {
        "a": train_as_a_command(root / "a", 0),
        "b": train_here(root / "b", 0),
        "other": train_here(root / "other", 1),
    }


def last_state(run_dir: Path) -> dict:
    return torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)


def tensors(value, path: str = "") -> dict[str, torch.Tensor]:
    """Every tensor in a nested dict/list (an optimizer's state), by its path ("state/0/exp_avg")."""
    if isinstance(value, torch.Tensor):
        return {path: value}
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    found: dict[str, torch.Tensor] = {}
    for key, item in items:
        found.update(tensors(item, f"{path}/{key}" if path else str(key)))
    return found


def different_tensors(a: dict, b: dict) -> list[str]:
    """The paths of the tensors that differ (or exist in one only) between ``a`` and ``b``."""
    ta, tb = tensors(a), tensors(b)
    return sorted(set(ta) ^ set(tb)) + [k for k in sorted(set(ta) & set(tb)) if not torch.equal(ta[k], tb[k])]


def rows(path: Path) -> list[dict[str, str]]:
    """A CSV file's rows without its wall-clock columns."""
    with path.open() as f:
        return [{k: v for k, v in row.items() if k not in CLOCKS} for row in csv.DictReader(f)]


def test_two_serial_runs_with_one_seed_are_identical(runs):
    # Seen failing (2026-12-02) with one generator unseeded: the learner's action sampling
    # (np.random.default_rng() in a3c/algo/rollout.py) made all 12 model tensors differ; the
    # evaluator's (a3c/runtime/evaluator.py) left the weights equal and made eval.csv differ from its first
    # row.
    a, b = last_state(runs["a"]), last_state(runs["b"])
    assert a["global_step"] == b["global_step"] == STEPS and a["updates"] == b["updates"] == STEPS // 10
    # The bodies' and heads' 12 tensors; Adam's step, exp_avg and exp_avg_sq over the one flat parameter.
    assert len(a["model_state"]) == 12 and len(tensors(a["optimizer_state"])) == 3
    assert different_tensors(a["model_state"], b["model_state"]) == []
    assert different_tensors(a["optimizer_state"], b["optimizer_state"]) == []
    assert a["optimizer_state"]["param_groups"] == b["optimizer_state"]["param_groups"]
    # Evaluations at 1,000, 2,000 and 3,000 steps and the final one at 4,000 (the budget's end: once, not
    # also as the scheduled one); a metrics row per 400 steps.
    for name, count in [("eval.csv", 4), ("metrics.csv", 10), ("episodes.csv", None)]:
        first, second = rows(runs["a"] / name), rows(runs["b"] / name)
        assert count is None or len(first) == count, (name, len(first))
        assert first == second, name
    same = ("total_steps", "total_updates", "episodes", "best_mean_return", "last_mean_return", "warnings")
    first, second = (read_json(runs[name] / "summary.json") for name in ("a", "b"))
    assert {k: first[k] for k in same} == {k: second[k] for k in same}


def test_another_seed_gives_other_weights(runs):
    # So that the equality above can fail: the weights do depend on the seed.
    a, other = last_state(runs["a"]), last_state(runs["other"])
    assert sorted(different_tensors(a["model_state"], other["model_state"])) == sorted(a["model_state"])
    assert rows(runs["a"] / "episodes.csv") != rows(runs["other"] / "episodes.csv")


def test_the_cartpole_preset_solves_serially_within_a_step_budget(run_dir):
    # The learning the two-worker CartPole run checked (now tests/learning/test_local_learning.py's, against
    # the clock): the preset, one learner, an evaluation every 5,000 steps; a solve is 10 evaluation episodes
    # at 475, confirmed on 100 more. Measured (this run as `a3c train --serial`, seeds 0-9, 2026-12-02):
    # solved at 20k, 20k, 15k, 15k, 30k, 25k, 25k, 25k, 35k, 25k steps (median 25k); every best.pt then
    # scored 500 on each of 100 fresh episodes (`a3c evaluate --episodes 100`). Budget 70k steps, 2x the
    # slowest; seed 0 solves at 20k. In this process: the command line is not the point (max_seconds: a
    # safety cap only). A healthy run: no learning-health warning in any (measured on the same seeds), and
    # none here, where the checks saw a metrics row every 1,000 steps up to the solve (20 for seed 0: 4x the
    # 5 rows a collapse needs; the warnings themselves are tests/e2e/test_health_warnings.py's).
    config = {
        "max_steps": 70_000,
        "eval_interval_steps": 5000,
        "metrics_interval_steps": 1000,
        "max_seconds": 300,
    }
    run = a3c.train("CartPole-v1", run_dir=run_dir, serial=True, seed=0, **config)
    assert run.exit_code == 0, run.summary
    summary = run.summary
    assert summary["solved"] is True and summary["steps_to_solve"] <= 70_000, summary
    assert summary["warnings"] == [], summary["warnings"]
    assert data_rows(run_dir / "metrics.csv") == summary["total_steps"] // 1000 >= 5
    played = call_a3c("evaluate", str(run_dir), "--episodes", "100", "--seed", "12345", "--json")
    assert played.returncode == 0, played.stderr
    report = json.loads(played.stdout)
    assert report["episodes"] == 100 and report["mean_return"] >= 475, report
