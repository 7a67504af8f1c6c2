"""The race of `a3c bench --env`, as `make bench` runs it: ours solves CartPole within a 20-second budget (the
preset, on this machine), over seeds. In `make test`: that a small race runs both sides and reports them
(tests/tools/test_race.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a3c.tools.bench.race import RacePlan, run_race
from tests.support.extras import require_extra

pytestmark = [pytest.mark.slow, pytest.mark.learning]


def test_ours_solves_cartpole_in_a_20_s_race_on_each_of_3_seeds(tmp_path):
    # The race runs its seeds itself (0, 1, 2): one check, all three must solve.
    require_extra("stable_baselines3", "bench")
    plan = RacePlan(("CartPole-v1",), seeds=3, seconds=20.0, peer_settings="zoo")
    results = run_race(plan, tmp_path / "out", tmp_path, log=lambda msg: None)
    saved = json.loads(Path(results["path"]).read_text())
    ours = saved["envs"]["CartPole-v1"]["ours"]["runs"]
    assert len(ours) == 3 and all(run["solved"] for run in ours), ours
