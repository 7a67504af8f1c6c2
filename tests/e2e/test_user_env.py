"""An env of the user's own, registered by its module (``envs.catch:Catch-v0``, the suite's), learns on the
defaults derived from it: the spec's target, confirmed on 100 more episodes, with scaled rewards."""

from __future__ import annotations

import csv
import json

import pytest

from tests.conftest import read_json, run_a3c

pytestmark = pytest.mark.slow


def test_a_module_registered_env_learns_on_derived_defaults(run_dir, token):
    # A generous "does it learn at all" budget: a random policy scores about -0.6, the target is 0.9.
    args = ["train", "--env", "envs.catch:Catch-v0", "--seed", "0", "--max-seconds", "240", "--quiet"]
    result = run_a3c(*args, "--run-dir", str(run_dir), timeout=360, token=token)
    assert result.returncode == 0, result.stderr
    config = json.loads((run_dir / "config.json").read_text())
    assert (config["target_return"], config["confirm_episodes"], config["reward_scale"]) == (0.9, 100, True)
    summary = read_json(run_dir / "summary.json")
    assert summary["solved"] is True, summary
    with (run_dir / "eval.csv").open() as f:
        solving = [row for row in csv.DictReader(f) if float(row["mean_return"]) >= 0.9][0]
    assert int(solving["episodes"]) == 110  # 10 episodes, confirmed on 100 more
