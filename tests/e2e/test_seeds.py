"""``a3c train --seeds``: one run dir per seed under one parent, and ``a3c runs`` over the parent prints the
IQM of the group with its interval. Serial and a few hundred steps each: the runs are real, but cheap."""

from __future__ import annotations

import json

import pytest

from tests.support.commands import call_a3c, call_a3c_train
from tests.support.extras import require_extra

pytestmark = pytest.mark.slow  # trains a run per seed


def test_seeds_make_one_run_each_and_runs_prints_their_iqm(tmp_path):
    require_extra("pandas", "analysis")
    parent = tmp_path / "seeds"
    result = call_a3c_train("--env", "CartPole-v1", "--seeds", "0-2", "--serial", "--max-steps", "300",
                            "--eval-episodes", "2", "--run-dir", str(parent), "--quiet")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in parent.iterdir()) == ["s0", "s1", "s2"]
    for seed in range(3):
        config = json.loads((parent / f"s{seed}" / "config.json").read_text())
        summary = json.loads((parent / f"s{seed}" / "summary.json").read_text())
        assert config["seed"] == seed and summary["total_steps"] == 300, summary
    assert "exit codes s0=0 s1=0 s2=0" in result.stderr
    listing = call_a3c("runs", str(parent))
    assert listing.returncode == 0, listing.stderr
    table = listing.stdout.split("seed groups: IQM over runs [stratified bootstrap 95% CI]\n")[1]
    header, row = table.splitlines()
    assert "final eval IQM [95% CI]" in header
    assert row.split()[:3] == ["CartPole-v1", "3", "0/3"]
    assert row.count("[") == 2 and row.rstrip().endswith("-")  # two scores with intervals; none solved


def test_a_bad_seed_list_or_seeds_with_seed_is_refused_before_any_run(tmp_path):
    parent = tmp_path / "seeds"
    for args in (
        ["--seeds", "2-0"],
        ["--seeds", "0-1", "--seed", "3"],
        ["--seeds", "0,1", "--set", "seed=3"],
    ):
        result = call_a3c_train("--env", "CartPole-v1", "--serial", "--run-dir", str(parent), *args)
        assert result.returncode == 2 and result.stderr.startswith("error: --seeds: "), result.stderr
        assert len(result.stderr.splitlines()) == 1
    assert not parent.exists()


def test_the_python_api_trains_a_seed_list_into_one_parent(tmp_path):
    import a3c
    from a3c.core.errors import BadInput

    class Starts:
        def __init__(self):
            self.run_dirs = []

        def on_start(self, run):
            self.run_dirs.append(run.run_dir)

    starts = Starts()
    runs = a3c.train(
        "CartPole-v1", seeds=[4, 1], run_dir=tmp_path, serial=True, max_steps=100, eval_episodes=2,
        callbacks=[starts],
    )  # fmt: skip
    assert [r.run_dir for r in runs] == [tmp_path / "s4", tmp_path / "s1"]
    assert [r.config["seed"] for r in runs] == [4, 1] and [r.exit_code for r in runs] == [0, 0]
    assert starts.run_dirs == [tmp_path / "s4", tmp_path / "s1"]  # the callbacks see every seed's run
    for bad in (5, "0-2", [0.5]):
        with pytest.raises(BadInput, match=r"^seeds: .* is not allowed; expected a list of non-negative"):
            a3c.train("CartPole-v1", seeds=bad, run_dir=tmp_path / "bad", serial=True)
    try:
        a3c.train("CartPole-v1", seeds=[0], seed=3, run_dir=tmp_path / "x", serial=True)
    except BadInput as error:
        assert str(error) == "seeds: not allowed with seed; the list gives every run's seed"
    else:
        raise AssertionError("seeds with seed was not refused")
