"""A run made by the code before the layer packages (commit 6830b48: `a3c train --env CartPole-v1 --serial
--seed 3 --max-steps 2000 --eval-interval 1`, step-*.pt dropped to keep it small) still evaluates and
resumes: checkpoints are a contract that outlives module paths."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT, run_a3c

OLD_RUN = ROOT / "tests" / "fixtures" / "old_run"


def test_the_fixture_is_plain_data_with_no_module_paths():
    # weights_only loading refuses pickled classes: a checkpoint names no module, so moves cannot break it.
    for name in ("last.pt", "best.pt"):
        data = torch.load(OLD_RUN / "checkpoints" / name, weights_only=True)
        assert data["format"] == "a3c-checkpoint" and data["config"]["env_id"] == "CartPole-v1"


@pytest.mark.slow
def test_an_old_best_pt_evaluates(token):
    result = run_a3c("evaluate", str(OLD_RUN), "--episodes", "3", "--json", token=token, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["episodes"] == 3 and report["mean_return"] > 0, report


@pytest.mark.slow
def test_an_old_run_resumes(tmp_path: Path, token):
    run_dir = tmp_path / "old_run"
    shutil.copytree(OLD_RUN, run_dir)
    before = json.loads((run_dir / "summary.json").read_text())["total_steps"]
    result = run_a3c(
        "train",
        "--resume",
        str(run_dir),
        "--max-steps",
        str(before + 600),
        "--quiet",
        token=token,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["total_steps"] >= before + 600, summary
    assert json.loads((run_dir / "config.json").read_text())["resumes"] == 1
