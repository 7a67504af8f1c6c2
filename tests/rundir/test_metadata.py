"""What a run and a bench record of where they ran: every package's version (None when not installed), read
without importing the optional ones, and the git commit and dirty flag of the package's source tree."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from a3c.rundir import files
from a3c.rundir.files import OPTIONAL_PACKAGES, git_state, package_versions, run_metadata

CORE = ("python", "torch", "gymnasium", "numpy", "a3c")


def installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def test_versions_name_every_package_with_its_version_or_none(monkeypatch):
    monkeypatch.setattr(files, "OPTIONAL_PACKAGES", (*OPTIONAL_PACKAGES, "a3c-no-such-distribution"))
    versions = package_versions()
    assert tuple(versions) == (*CORE, *OPTIONAL_PACKAGES, "a3c-no-such-distribution")
    named = ["ale-py", "mujoco", "ray", "onnx", "onnxruntime", "optuna", "stable-baselines3", "click", "tqdm"]
    assert set(named) <= set(versions)
    assert all(isinstance(versions[name], str) and versions[name] for name in CORE)
    for name in OPTIONAL_PACKAGES:
        assert versions[name] == installed(name), name
    assert versions["a3c-no-such-distribution"] is None
    assert versions["click"] == installed("click") is not None  # a dependency: always there


@pytest.mark.slow  # starts a Python process that imports a3c
def test_versions_do_not_import_the_optional_packages():
    modules = (
        "ale_py",
        "mujoco",
        "ray",
        "onnx",
        "onnxruntime",
        "optuna",
        "stable_baselines3",
        "Box2D",
        "cv2",
    )
    code = (
        "import sys; from a3c.rundir.files import run_metadata; run_metadata(); "
        f"print(','.join(m for m in {modules!r} if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", f"imported: {proc.stdout.strip()}"


def test_run_metadata_records_versions_commit_and_dirty_flag_of_this_tree():
    meta = run_metadata()
    assert list(meta) == ["versions", "git_commit", "git_dirty", "command", "started_at"]
    assert meta["versions"] == package_versions()
    json.dumps(meta)  # config.json holds it as it is
    if meta["git_commit"] is None:  # not a git checkout (an installed package)
        assert meta["git_dirty"] is None
    else:
        assert re.fullmatch(r"[0-9a-f]{40}", meta["git_commit"]) and isinstance(meta["git_dirty"], bool)


def git(repo, *args: str) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args]
    return subprocess.run(command, cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A git repo of one commit, holding the 'package' whose tree git_state reads."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # never a repo above tmp_path
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "code.py").write_text("x = 1\n")
    (repo / ".gitignore").write_text("runs/\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "one")
    monkeypatch.setattr(files, "SOURCE_DIR", repo / "pkg")
    return repo


def test_a_clean_tree_is_not_dirty_and_ignored_files_do_not_count(tree):
    (tree / "runs").mkdir()
    (tree / "runs" / "config.json").write_text("{}")  # a run dir in an ignored folder
    assert git_state() == {"git_commit": git(tree, "rev-parse", "HEAD"), "git_dirty": False}


@pytest.mark.parametrize("change", ["modified", "untracked", "staged"])
def test_changes_not_committed_make_the_tree_dirty(tree, change):
    if change == "modified":
        (tree / "pkg" / "code.py").write_text("x = 2\n")
    else:
        (tree / "pkg" / "new.py").write_text("y = 1\n")
        if change == "staged":
            git(tree, "add", "pkg/new.py")
    assert git_state() == {"git_commit": git(tree, "rev-parse", "HEAD"), "git_dirty": True}


def test_outside_a_git_tree_commit_and_dirty_flag_are_none(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.setattr(files, "SOURCE_DIR", tmp_path)
    assert git_state() == {"git_commit": None, "git_dirty": None}


def test_the_bench_json_records_the_versions_and_the_tree(tmp_path, monkeypatch):
    import a3c.tools.bench.race as race

    def fake_ours(env_id, seed, seconds, work, no_preset, side="ours", judged_as=None):
        return {"solved": True, "time_to_solve_s": 1.0, "steps": 10, "final_return": 1.0, "steps_per_s": 1.0}

    monkeypatch.setattr(race, "ours_race", fake_ours)
    plan = race.RacePlan(("CartPole-v1",), seeds=1, seconds=1.0, peer_settings="no-preset")
    results = race.run_race(plan, tmp_path / "out", tmp_path, log=lambda msg: None)
    written = json.loads(Path(results["path"]).read_text())
    assert written["versions"] == package_versions()
    assert {k: written[k] for k in ("git_commit", "git_dirty")} == git_state()
