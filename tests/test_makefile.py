"""The Makefile installs what a target needs and no more: `make train ENV=<id>` the core plus the one extra of
the env's family (the same as envs/presets.py's env_extra says), test/lint/bench the dev set, each set under
its own stamp. Dry runs only (``make -n``, a venv folder under tmp_path): nothing is installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import pytest

from a3c_envs.atari import is_atari, register_atari
from a3c_envs.presets import env_extra, list_presets
from tests.support import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")

# The Makefile's variables an environment could set, and a calling make's flags: the dry run gets neither.
MAKE_VARIABLES = {"ENV", "EXTRA", "RUN", "PYTHON", "VENV", "MAKEFLAGS", "MAKELEVEL", "MFLAGS"}
PIP_LINE = re.compile(r"-m pip install --quiet -e '([^']*)' -c constraints\.txt$")


def dry_run(venv: Path, *args: str) -> list[str]:
    """The commands ``make -n`` would run in the repo with VENV=``venv``, one per line."""
    env = {k: v for k, v in os.environ.items() if k not in MAKE_VARIABLES}
    done = subprocess.run(
        ["make", "-n", f"VENV={venv}", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def installs(venv: Path, *args: str) -> list[str]:
    """What the dry run pip-installs: e.g. ``["."]`` or ``[".[atari]"]``; ``[]`` when nothing."""
    return [m.group(1) for line in dry_run(venv, *args) if (m := PIP_LINE.search(line))]


def spec_of(extra: str | None) -> str:
    return "." if extra is None else f".[{extra}]"


@pytest.mark.parametrize(
    ("env_id", "expected"),
    [
        ("CartPole-v1", "."),
        ("ALE/Pong-v5", ".[atari]"),
        ("PongNoFrameskip-v4", ".[atari]"),
        ("BreakoutDeterministic-v4", ".[atari]"),  # the Makefile's own rule: env_extra has no such ids
        ("HalfCheetah-v5", ".[mujoco]"),
        ("Humanoid-v4", ".[mujoco]"),
        ("LunarLander-v3", ".[box2d]"),
        ("CarRacing-v3", ".[box2d]"),
        ("Pendulum-v1", "."),  # not InvertedPendulum
    ],
)
def test_train_installs_the_core_and_the_envs_extra_only(tmp_path, env_id, expected):
    venv = tmp_path / "venv"
    lines = dry_run(venv, "train", f"ENV={env_id}")
    assert f"python3 -m venv {venv}" in lines  # a missing venv is created
    assert installs(venv, "train", f"ENV={env_id}") == [expected]


def test_every_preset_gets_the_extra_env_extra_names(tmp_path):
    presets = list_presets()
    assert presets
    wrong = {
        p.env_id: (installs(tmp_path / "venv", "train", f"ENV={p.env_id}"), spec_of(p.extra)) for p in presets
    }
    assert {k: v for k, v in wrong.items() if v[0] != [v[1]]} == {}


def makefile_extras(venv: Path, env_ids: list[str]) -> dict[str, str]:
    """The Makefile's own ``env_extra`` of each id ("" for none), from one ``make -n`` (a goal of the test's
    own, given with ``--eval``): the extra that ``make train ENV=<id>`` installs, as the parametrized test
    above checks for ids of each extra through the train target itself."""
    rule = "extras-of-ids: ; $(foreach id,$(IDS),$(info $(id) $(call env_extra,$(id))))"
    lines = dry_run(venv, f"IDS={' '.join(env_ids)}", "--eval", rule, "extras-of-ids")
    extras = dict(line.partition(" ")[::2] for line in lines if line.split(" ", 1)[0] in env_ids)
    assert sorted(extras) == sorted(env_ids), lines
    return extras


def test_every_registered_env_gets_the_extra_env_extra_names(tmp_path):
    # Every id gymnasium knows, ale-py's included whichever test ran before (register_atari: False, and no
    # Atari ids, without the atari extra). ale-py's legacy ids other than <Game>NoFrameskip-v4 are not Atari
    # to a3c_envs.atari.is_atari, so env_extra gives them none; the Makefile installs atari for them anyway.
    register_atari()
    ids = [k for k, spec in gym.registry.items() if "ale_py" not in str(spec.entry_point) or is_atari(k)]
    assert "Walker2d-v5" in ids and "LunarLanderContinuous-v3" in ids
    got = makefile_extras(tmp_path / "venv", ids)
    mismatched = {k: (got[k], env_extra(k) or "") for k in ids if got[k] != (env_extra(k) or "")}
    assert mismatched == {}


@pytest.mark.parametrize("target", ["test", "test-fast", "test-learning", "lint", "bench", "install"])
def test_the_dev_targets_install_dev(tmp_path, target):
    assert installs(tmp_path / "venv", target) == [".[dev]"]


def make_venv(tmp_path: Path, *stamps: str) -> Path:
    """A venv folder with a python and fresh stamps (newer than setup.cfg and the other inputs)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    for name in stamps:
        (venv / f".installed-{name}").touch()
    return venv


def test_a_fresh_stamp_installs_nothing_until_setup_cfg_changes(tmp_path):
    venv = make_venv(tmp_path, "core", "atari")
    assert installs(venv, "train", "ENV=CartPole-v1") == []
    assert installs(venv, "train", "ENV=ALE/Pong-v5") == []
    assert installs(venv, "train", "ENV=HalfCheetah-v5") == [".[mujoco]"]
    assert installs(venv, "-W", "setup.cfg", "train", "ENV=ALE/Pong-v5") == [".[atari]"]
    old = time.time() - 10 * 365 * 86400
    os.utime(venv / ".installed-core", (old, old))  # older than setup.cfg: as after a change to it
    assert installs(venv, "train", "ENV=CartPole-v1") == ["."]


def test_a_fresh_dev_install_stands_for_every_extra(tmp_path):
    venv = make_venv(tmp_path, "dev")
    for env_id in ("CartPole-v1", "ALE/Pong-v5", "HalfCheetah-v5", "LunarLander-v3"):
        assert installs(venv, "train", f"ENV={env_id}") == []
    assert installs(venv, "test") == []
    old = time.time() - 10 * 365 * 86400
    os.utime(venv / ".installed-dev", (old, old))  # stale: train installs its own set, not dev
    assert installs(venv, "train", "ENV=ALE/Pong-v5") == [".[atari]"]


def test_evaluate_installs_the_extra_of_the_runs_env(tmp_path):
    run = tmp_path / "runs" / "ALE-Pong-v5" / "r"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"env_id": "ALE/Pong-v5", "seed": 0}))
    venv = tmp_path / "venv"
    python = f"PYTHON={sys.executable}"  # reads config.json as python3 would, without a pyenv shim's 0.4 s
    assert installs(venv, "evaluate", python, f"RUN={run}") == [".[atari]"]
    assert installs(venv, "evaluate", python, f"RUN={run / 'checkpoints' / 'best.pt'}") == [".[atari]"]
    assert installs(venv, "evaluate", python, f"RUN={run}", "ENV=HalfCheetah-v5") == [".[mujoco]"]
    assert installs(venv, "evaluate", python, f"RUN={tmp_path / 'elsewhere'}") == ["."]
