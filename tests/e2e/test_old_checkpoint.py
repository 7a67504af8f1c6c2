"""A run made by the code before the layer packages (commit 6830b48: `a3c train --env CartPole-v1 --serial
--seed 3 --max-steps 2000 --eval-interval 1`, step-*.pt dropped to keep it small) still evaluates and
resumes: checkpoints are a contract that outlives module paths."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from tests.support import ROOT
from tests.support.commands import call_a3c, call_a3c_train

OLD_RUN = ROOT / "tests" / "fixtures" / "old_run"


def test_the_fixture_is_plain_data_with_no_module_paths():
    # weights_only loading refuses pickled classes: a checkpoint names no module, so moves cannot break it.
    for name in ("last.pt", "best.pt"):
        data = torch.load(OLD_RUN / "checkpoints" / name, weights_only=True)
        assert data["format"] == "a3c-checkpoint" and data["config"]["env_id"] == "CartPole-v1"


@pytest.mark.slow  # plays episodes (in this process: evaluate starts none)
def test_an_old_best_pt_evaluates():
    # `a3c evaluate --seed S` plays the same greedy episodes every time, so the returns are exact. The old
    # best.pt (100.3 over 10 episodes when saved; a random policy scores ~22) measured with --seed 0-9, 3
    # episodes each: means 78.3-114.3, episodes 65-144; --seed 0: 77, 79 and 89.
    result = call_a3c("evaluate", str(OLD_RUN), "--episodes", "3", "--seed", "0", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["episodes"] == 3 and report["seed"] == 0, report
    assert (report["min_return"], report["max_return"]) == (77, 89), report
    assert report["mean_return"] == pytest.approx(245 / 3), report


@pytest.mark.slow  # trains (in this process)
def test_an_old_run_resumes(tmp_path: Path):
    run_dir = tmp_path / "old_run"
    shutil.copytree(OLD_RUN, run_dir)
    before = json.loads((run_dir / "summary.json").read_text())
    assert (before["total_steps"], before["total_updates"]) == (2016, 63)  # 4 envs x t_max 8 = 32 a update
    old_weights = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)["model_state"]
    result = call_a3c_train("--resume", str(run_dir), "--serial", "--max-steps", "2616", "--quiet")
    assert result.returncode == 0, result.stderr
    # It continued the old run (serial, as it was made; a resume is serial only when asked): 19 more updates
    # of 32 steps, the first at or past 2,616, from the old counters and weights.
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["total_steps"], summary["total_updates"]) == (2624, 82), summary
    assert summary["exit_reason"] == "max_steps", summary
    config = json.loads((run_dir / "config.json").read_text())
    assert config["resumes"] == 1 and config["serial"] is True, config
    last = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert (last["global_step"], last["updates"], last["resumes"]) == (2624, 82, 1)
    assert all(not torch.equal(last["model_state"][k], w) for k, w in old_weights.items())  # it trained
