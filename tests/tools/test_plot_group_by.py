"""``a3c plot --group-by KEY``: one eval curve per value of a config key; without it, runs of different
configs are kept apart (with a warning line), never averaged into one curve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.commands import call_a3c
from tests.support.extras import require_extra

require_extra("matplotlib", "analysis")
require_extra("pandas", "analysis")


def fake_run(root: Path, name: str, seed: int, lr: float, env_id: str = "CartPole-v1") -> Path:
    """A run dir as docs/runs.md describes it: config.json and a three-row eval.csv."""
    run = root / name
    run.mkdir(parents=True)
    config = {"env_id": env_id, "seed": seed, "lr": lr, "gamma": 0.99, "hidden_sizes": [64, 64],
              "max_seconds": 10.0 * (seed + 1), "versions": {"a3c": "0.1.0"}, "git_commit": f"{seed:040x}",
              "command": ["a3c", "train", "--seed", str(seed)], "started_at": "2026-01-01T00:00"}  # fmt: skip
    (run / "config.json").write_text(json.dumps(config))
    rows = [f"{t:.1f},{step},{step // 10},{ret},0,{ret},{ret},10,10" for t, step, ret in
            [(1.0, 100, 10.0 + seed), (2.0, 200, 20.0 + seed), (3.0, 300, 30.0 + 100 * lr)]]  # fmt: skip
    header = "wall_time,global_step,updates,mean_return,std_return,min_return,max_return,mean_length,episodes"
    (run / "eval.csv").write_text("\n".join([header, *rows]) + "\n")
    return run


def spy_on_savefig(monkeypatch, draw: bool) -> list[list[str]]:
    """The eval panel's legend labels of every figure that `a3c plot` saves; the figure is drawn and written
    only if ``draw`` (about 1 s a figure, its four panels' layout)."""
    from matplotlib.figure import Figure

    saved: list[list[str]] = []
    save = Figure.savefig

    def spy(fig, *args, **kwargs):
        saved.append(fig.axes[0].get_legend_handles_labels()[1])
        return save(fig, *args, **kwargs) if draw else None

    monkeypatch.setattr(Figure, "savefig", spy)
    return saved


@pytest.fixture
def legends(monkeypatch) -> list[list[str]]:
    """The legends of the figures `a3c plot` would save, none of them drawn: what the curves are is decided
    before the draw (test_group_by_draws_one_curve_per_value draws and writes its figure)."""
    return spy_on_savefig(monkeypatch, draw=False)


@pytest.fixture
def drawn_legends(monkeypatch) -> list[list[str]]:
    """The legends of the figures `a3c plot` saves, each drawn and written."""
    return spy_on_savefig(monkeypatch, draw=True)


@pytest.fixture
def two_lrs(tmp_path) -> Path:
    """Two seeds of lr 0.001 and two of lr 0.01, in one folder."""
    for seed in (0, 1):
        fake_run(tmp_path / "runs", f"small-s{seed}", seed, 0.001)
        fake_run(tmp_path / "runs", f"large-s{seed}", seed, 0.01)
    return tmp_path / "runs"


def test_group_by_draws_one_curve_per_value(two_lrs, tmp_path, drawn_legends):
    out = tmp_path / "lr.png"
    result = call_a3c("plot", str(two_lrs), "-o", str(out), "--group-by", "lr")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # the grouping was asked for: no warning
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(drawn_legends[0]) == ["lr=0.001 (n=2)", "lr=0.01 (n=2)"]


def test_group_by_env_id_merges_the_configs_as_asked(two_lrs, tmp_path, legends):
    result = call_a3c("plot", str(two_lrs), "-o", str(tmp_path / "env.png"), "--group-by", "env_id")
    assert result.returncode == 0, result.stderr
    assert legends[0] == ["CartPole-v1 (n=4)"]


def test_without_group_by_different_configs_are_kept_apart_with_a_warning(two_lrs, tmp_path, legends):
    result = call_a3c("plot", str(two_lrs), "-o", str(tmp_path / "default.png"))
    assert result.returncode == 0, result.stderr
    assert sorted(legends[0]) == ["lr=0.001 (n=2)", "lr=0.01 (n=2)"]
    (line,) = result.stderr.splitlines()
    assert line.startswith("warning: the runs differ in lr:") and "--group-by" in line, line


def test_seeds_of_one_config_make_one_curve_without_a_warning(tmp_path, legends):
    for seed in (0, 1, 2):  # seed, max_seconds, git_commit differ: a run's own, not its config's
        fake_run(tmp_path / "runs", f"s{seed}", seed, 0.001)
    fake_run(tmp_path / "runs", "other-env", 0, 0.001, env_id="Acrobot-v1")
    result = call_a3c("plot", str(tmp_path / "runs"), "-o", str(tmp_path / "seeds.png"))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert sorted(legends[0]) == ["Acrobot-v1 (n=1)", "CartPole-v1 (n=3)"]


def test_with_several_envs_each_curve_names_its_env(two_lrs, tmp_path, legends):
    fake_run(two_lrs, "acrobot", 0, 0.01, env_id="Acrobot-v1")
    result = call_a3c("plot", str(two_lrs), "-o", str(tmp_path / "envs.png"), "--group-by", "lr")
    assert result.returncode == 0, result.stderr
    expected = ["Acrobot-v1, lr=0.01 (n=1)", "CartPole-v1, lr=0.001 (n=2)", "CartPole-v1, lr=0.01 (n=2)"]
    assert sorted(legends[0]) == expected


def test_an_unknown_key_is_one_error_line_and_exit_2(two_lrs, tmp_path, legends):
    out = tmp_path / "nope.png"
    result = call_a3c("plot", str(two_lrs), "-o", str(out), "--group-by", "learning_rate")
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: --group-by: 'learning_rate' is not a key of these runs' config"), line
    assert all(key in line for key in ("env_id", "lr", "gamma", "hidden_sizes")), line
    assert not out.exists() and not legends and result.stdout == ""


def test_runs_that_differ_only_in_their_wrappers_are_two_configs(tmp_path):
    from a3c.tools.analysis import load_runs

    for seed in (0, 1):
        fake_run(tmp_path / "plain", f"s{seed}", seed, 1e-3)
        wrapped = fake_run(tmp_path / "wrapped", f"s{seed}", seed, 1e-3)
        config = json.loads((wrapped / "config.json").read_text())
        (wrapped / "config.json").write_text(json.dumps({**config, "wrappers": ["pkg.mod:Clip"]}))
    runs = load_runs(str(tmp_path / "*" / "s*"))
    assert sorted(runs.runs["wrappers"]) == ["", "", "pkg.mod:Clip", "pkg.mod:Clip"]
