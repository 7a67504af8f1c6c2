"""The Makefile installs what a target needs and no more: `make train ENV=<id>` the core, `analysis` and
the one extra of the env's family (the same as envs/presets.py's env_extra says), test/lint/bench the dev
set, each set under its own stamp; it needs Python >= 3.11 and makes a venv of an older one again; torch of
the CPU build on Linux x86_64 unless an NVIDIA driver is found or TORCH=cuda says so. Dry runs only
(``make -n``, a venv folder under tmp_path, this test's own python unless a fake one is named): nothing is
installed."""

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
MAKE_VARIABLES = {"ENV", "EXTRA", "RUN", "PYTHON", "VENV", "TORCH", "MAKEFLAGS", "MAKELEVEL", "MFLAGS"}
PIP_LINE = re.compile(r"-m pip install --quiet -e '([^']*)' -c constraints\.txt$")


def make_dry(venv: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess:
    """``make -n`` in the repo with VENV=``venv`` and PYTHON= this test's python unless ``args`` name one (a
    pyenv shim's python3 costs 0.4 s a call); ``path``: the PATH make gets, if not this process's."""
    env = {k: v for k, v in os.environ.items() if k not in MAKE_VARIABLES}
    if path is not None:
        env["PATH"] = path
    python = [] if any(a.startswith("PYTHON=") for a in args) else [f"PYTHON={sys.executable}"]
    return subprocess.run(
        ["make", "-n", f"VENV={venv}", *python, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


def dry_run(venv: Path, *args: str, path: str | None = None) -> list[str]:
    """The commands ``make -n`` would run (``make_dry``), one per line."""
    done = make_dry(venv, *args, path=path)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def installs(venv: Path, *args: str) -> list[str]:
    """What the dry run pip-installs: e.g. ``["."]`` or ``[".[atari]"]``; ``[]`` when nothing."""
    return pip_installs(dry_run(venv, *args))


def pip_installs(lines: list[str]) -> list[str]:
    """What the dry run's ``lines`` pip-install (``installs``)."""
    return [m.group(1) for line in lines if (m := PIP_LINE.search(line))]


@pytest.mark.parametrize(
    ("env_id", "expected"),
    [
        ("CartPole-v1", ".[analysis]"),
        ("ALE/Pong-v5", ".[analysis,atari]"),
        ("PongNoFrameskip-v4", ".[analysis,atari]"),
        (
            "BreakoutDeterministic-v4",
            ".[analysis,atari]",
        ),  # the Makefile's own rule: env_extra has no such ids
        ("HalfCheetah-v5", ".[analysis,mujoco]"),
        ("Humanoid-v4", ".[analysis,mujoco]"),
        ("LunarLander-v3", ".[analysis,box2d]"),
        ("CarRacing-v3", ".[analysis,box2d]"),
        ("Pendulum-v1", ".[analysis]"),  # not InvertedPendulum
    ],
)
def test_train_installs_the_core_analysis_and_the_envs_extra_only(tmp_path, env_id, expected):
    venv = tmp_path / "venv"
    lines = dry_run(venv, "train", f"ENV={env_id}")
    assert f"{sys.executable} -m venv --clear {venv}" in lines  # a missing venv is created
    assert pip_installs(lines) == [expected]


def test_every_preset_gets_the_extra_env_extra_names(tmp_path):
    # The Makefile's env_extra of every preset, from one make call: the install line that follows from
    # env_extra is the parametrized test's above, an id of each extra through the train target.
    presets = list_presets()
    assert presets
    got = makefile_extras(tmp_path / "venv", [p.env_id for p in presets])
    assert {p.env_id: got[p.env_id] or None for p in presets} == {p.env_id: p.extra for p in presets}


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
    """A venv folder with a python (this test's) and fresh stamps (newer than setup.cfg and the other
    inputs)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    for name in stamps:
        (venv / f".installed-{name}").touch()
    return venv


def test_a_fresh_stamp_installs_nothing_until_setup_cfg_changes(tmp_path):
    venv = make_venv(tmp_path, "analysis", "analysis,atari")
    assert installs(venv, "train", "ENV=CartPole-v1") == []
    assert installs(venv, "train", "ENV=ALE/Pong-v5") == []
    assert installs(venv, "train", "ENV=HalfCheetah-v5") == [".[analysis,mujoco]"]
    assert installs(venv, "-W", "setup.cfg", "train", "ENV=ALE/Pong-v5") == [".[analysis,atari]"]
    old = time.time() - 10 * 365 * 86400
    os.utime(venv / ".installed-analysis", (old, old))  # older than setup.cfg: as after a change to it
    assert installs(venv, "train", "ENV=CartPole-v1") == [".[analysis]"]


def test_a_fresh_dev_install_stands_for_every_extra(tmp_path):
    venv = make_venv(tmp_path, "dev")
    for env_id in ("CartPole-v1", "ALE/Pong-v5", "HalfCheetah-v5", "LunarLander-v3"):
        assert installs(venv, "train", f"ENV={env_id}") == []
    assert installs(venv, "test") == []
    old = time.time() - 10 * 365 * 86400
    os.utime(venv / ".installed-dev", (old, old))  # stale: train installs its own set, not dev
    assert installs(venv, "train", "ENV=ALE/Pong-v5") == [".[analysis,atari]"]


def test_evaluate_installs_the_extra_of_the_runs_env(tmp_path):
    run = tmp_path / "runs" / "ALE-Pong-v5" / "r"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"env_id": "ALE/Pong-v5", "seed": 0}))
    venv = tmp_path / "venv"
    python = f"PYTHON={sys.executable}"  # reads config.json as python3 would, without a pyenv shim's 0.4 s
    assert installs(venv, "evaluate", python, f"RUN={run}") == [".[analysis,atari]"]
    assert installs(venv, "evaluate", python, f"RUN={run / 'checkpoints' / 'best.pt'}") == [
        ".[analysis,atari]"
    ]
    assert installs(venv, "evaluate", python, f"RUN={run}", "ENV=HalfCheetah-v5") == [".[analysis,mujoco]"]
    assert installs(venv, "evaluate", python, f"RUN={tmp_path / 'elsewhere'}") == [".[analysis]"]


def fake_python(path: Path, version: str) -> Path:
    """An executable at ``path`` that answers the Makefile's version check as Python ``version`` would."""
    path.parent.mkdir(parents=True, exist_ok=True)
    new_enough = tuple(map(int, version.split(".")[:2])) >= (3, 11)
    path.write_text(f"#!/bin/sh\necho {new_enough} {version}\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("target", ["train", "test", "evaluate"])
def test_an_old_python_stops_make_with_one_line_naming_the_fix(tmp_path, target):
    old = fake_python(tmp_path / "python3.10", "3.10.12")
    done = make_dry(tmp_path / "venv", target, f"PYTHON={old}", f"RUN={tmp_path}")
    assert done.returncode == 2 and done.stdout == ""
    assert (
        done.stderr.count("\n") == 1
        and f"{old} is Python 3.10.12; this project needs Python >= 3.11" in done.stderr
    )
    fix = "run make again with PYTHON=python3.11 (or another python >= 3.11), e.g. make"
    assert f"{fix} {target} PYTHON=python3.11" in done.stderr
    missing = make_dry(tmp_path / "venv", target, f"PYTHON={tmp_path / 'none'}", f"RUN={tmp_path}")
    assert (
        missing.returncode == 2 and f"{tmp_path / 'none'} does not run; this project needs" in missing.stderr
    )
    assert not (tmp_path / "venv").exists()


def test_clean_needs_no_python(tmp_path):
    assert make_dry(tmp_path / "venv", "clean", f"PYTHON={tmp_path / 'none'}").returncode == 0


def test_a_good_venv_is_used_whatever_python_is(tmp_path):
    venv = make_venv(tmp_path, "analysis")
    old = fake_python(tmp_path / "python3.10", "3.10.12")
    assert dry_run(venv, "train", f"PYTHON={old}") == [f"{venv}/bin/a3c train --env CartPole-v1 --seed 0  "]


def test_a_venv_of_an_older_python_is_made_again_with_every_set(tmp_path):
    venv = make_venv(tmp_path, "analysis", "dev")  # as after a first try whose pip refused python 3.10
    (venv / "bin" / "python").unlink()
    fake_python(venv / "bin" / "python", "3.10.12")
    lines = dry_run(venv, "train", f"PYTHON={sys.executable}")
    assert lines[0] == f"{sys.executable} -m venv --clear {venv}"
    assert installs(venv, "train", f"PYTHON={sys.executable}") == [".[analysis]"]  # its stamps go with it
    assert installs(venv, "test", f"PYTHON={sys.executable}") == [".[dev]"]
    (venv / "bin" / "python").unlink()
    (venv / "bin" / "python").symlink_to(tmp_path / "gone")  # a venv whose python was removed
    assert dry_run(venv, "train")[0] == f"{sys.executable} -m venv --clear {venv}"


# The torch step of an install: the line it prints and what it pip-installs, by build. The version is
# constraints.txt's pin (the Makefile reads it there).
TORCH_PIN = re.search(r"^torch==(\S+)$", (ROOT / "constraints.txt").read_text(), re.MULTILINE).group(1)
CPU_BUILD = f"'torch=={TORCH_PIN}+cpu' --retries 1 --extra-index-url https://download.pytorch.org/whl/cpu"
CUDA_BUILD = f"'torch=={TORCH_PIN},!={TORCH_PIN}+cpu'"
LINUX = "UNAME=Linux x86_64"  # the platform where make chooses a build, whichever this one is
TORCH_LINE = re.compile(r'^echo "(torch: .*)"$')
TORCH_PIP = re.compile(r"-m pip install --quiet --no-deps (.*)$")


def torch_step(venv: Path, *args: str, path: str | None = None) -> tuple[str, str] | None:
    """The torch step of ``make -n`` (``dry_run``): the line it prints and the pip arguments after
    ``--no-deps`` ("" when it pip-installs no torch of its own); None when nothing is installed."""
    lines = dry_run(venv, *args, path=path)
    said = [m.group(1) for line in lines if (m := TORCH_LINE.match(line))]
    pip = [m.group(1) for line in lines if (m := TORCH_PIP.search(line))]
    assert len(said) <= 1 and len(pip) <= len(said), lines
    return (said[0], pip[0] if pip else "") if said else None


def driver_markers(tmp_path: Path, found: bool) -> str:
    """NVIDIA_DRIVER_MARKERS= a file standing for /proc/driver/nvidia/version, there when ``found``."""
    marker = tmp_path / "nvidia-version"
    if found:
        marker.touch()
    return f"NVIDIA_DRIVER_MARKERS={marker}"


@pytest.mark.slow
def test_a_new_venv_gets_the_cuda_build_where_an_nvidia_driver_is_found_else_the_cpu_build(tmp_path):
    venv = tmp_path / "venv"
    no_driver = driver_markers(tmp_path, found=False)
    assert torch_step(venv, "train", LINUX, no_driver) == (
        "torch: CPU build (no NVIDIA driver found; TORCH=cuda for the CUDA build)",
        CPU_BUILD,
    )
    driver = driver_markers(tmp_path, found=True)
    assert torch_step(venv, "test", LINUX, driver) == (
        f"torch: CUDA build (NVIDIA driver found: {tmp_path / 'nvidia-version'}; TORCH=cpu for the CPU "
        "build)",
        CUDA_BUILD,
    )
    # torch before the project, whose install brings torch's dependencies (the torch step has --no-deps)
    pips = [line for line in dry_run(venv, "train", LINUX, driver) if "-m pip install" in line]
    assert len(pips) == 2 and TORCH_PIP.search(pips[0]) and PIP_LINE.search(pips[1])


@pytest.mark.slow
def test_the_driver_is_proc_nvidia_wsls_nvidia_smi_or_one_on_path(tmp_path):
    venv = tmp_path / "venv"
    markers = [Path("/proc/driver/nvidia/version"), Path("/usr/lib/wsl/lib/nvidia-smi")]
    on_this_machine = any(m.exists() for m in markers) or shutil.which("nvidia-smi") is not None
    assert torch_step(venv, "train", LINUX)[1] == (CUDA_BUILD if on_this_machine else CPU_BUILD)
    rule = "markers: ; $(info $(NVIDIA_DRIVER_MARKERS))"
    path_dirs = os.environ["PATH"].split(os.pathsep)
    assert dry_run(venv, "--eval", rule, "markers")[0].split() == [
        *map(str, markers),
        *(f"{d}/nvidia-smi" for d in path_dirs if d),
    ]
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "nvidia-smi").write_text("#!/bin/sh\n")
    (fake_bin / "nvidia-smi").chmod(0o755)
    said, pip = torch_step(venv, "train", LINUX, path=f"{fake_bin}:{os.environ['PATH']}")
    assert pip == CUDA_BUILD and f"NVIDIA driver found: {fake_bin / 'nvidia-smi'};" in said


def test_the_platform_is_unames_read_once(tmp_path):
    # The tests around give UNAME= on the command line; without it make asks uname, at its first use of the
    # value (the second use reads what the first kept).
    rule = "platform: ; $(info $(UNAME)|$(UNAME)|$(linux_x86_64))"
    this = f"{os.uname().sysname} {os.uname().machine}"
    linux_x86_64 = " ".join(w for w in this.split() if w in ("Linux", "x86_64"))
    assert dry_run(tmp_path / "venv", "--eval", rule, "platform")[0] == f"{this}|{this}|{linux_x86_64}"


@pytest.mark.slow
def test_torch_chooses_the_build_whatever_the_driver(tmp_path):
    venv = tmp_path / "venv"
    driver, no_driver = driver_markers(tmp_path, found=True), f"NVIDIA_DRIVER_MARKERS={tmp_path / 'none'}"
    cpu = ("torch: CPU build (TORCH=cpu)", CPU_BUILD)
    assert torch_step(venv, "train", LINUX, driver, "TORCH=cpu") == cpu
    assert torch_step(venv, "train", LINUX, no_driver, "TORCH=cuda") == (
        "torch: CUDA build (TORCH=cuda)",
        CUDA_BUILD,
    )
    done = make_dry(venv, "train", "TORCH=gpu")
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1
    assert "TORCH=gpu: no such torch build; TORCH=cpu (the CPU-only wheel) or TORCH=cuda" in done.stderr


def venv_with_torch(tmp_path: Path, version: str) -> Path:
    """A venv (``make_venv``) with a fresh `analysis` stamp and the dist-info folder of torch ``version``."""
    venv = make_venv(tmp_path, "analysis")
    (venv / "lib" / "python3.11" / "site-packages" / f"torch-{version}.dist-info").mkdir(parents=True)
    return venv


@pytest.mark.slow
def test_a_venv_keeps_its_torch_build_until_torch_names_the_other(tmp_path):
    venv = venv_with_torch(tmp_path, f"{TORCH_PIN}+cpu")
    driver = driver_markers(tmp_path, found=True)
    assert torch_step(venv, "train", LINUX, driver) is None  # nothing to install, the CPU build kept
    assert torch_step(venv, "train", LINUX, driver, "TORCH=cpu") is None
    assert torch_step(venv, "train", LINUX, driver, "-W", "setup.cfg") == (
        f"torch: CPU build, as installed (NVIDIA driver found: {tmp_path / 'nvidia-version'}; TORCH=cuda for "
        "the CUDA build)",
        CPU_BUILD,
    )
    assert torch_step(venv, "train", LINUX, "TORCH=cuda") == ("torch: CUDA build (TORCH=cuda)", CUDA_BUILD)
    assert installs(venv, "train", LINUX, "TORCH=cuda") == [".[analysis]"]  # the set again, after torch


@pytest.mark.slow
@pytest.mark.parametrize("version", [TORCH_PIN, f"{TORCH_PIN}+cu128"])  # PyPI's; PyTorch's cu128 index's
def test_a_cuda_build_is_replaced_by_torch_cpu_only(tmp_path, version):
    venv = venv_with_torch(tmp_path, version)
    no_driver = driver_markers(tmp_path, found=False)
    assert torch_step(venv, "train", LINUX, no_driver) is None
    assert torch_step(venv, "train", LINUX, no_driver, "TORCH=cuda") is None
    assert torch_step(venv, "train", LINUX, no_driver, "TORCH=cpu") == (
        "torch: CPU build (TORCH=cpu)",
        CPU_BUILD,
    )
    assert torch_step(venv, "train", LINUX, no_driver, "-W", "setup.cfg")[0] == (
        "torch: CUDA build, as installed (no NVIDIA driver found; TORCH=cpu for the CPU build)"
    )


@pytest.mark.slow
@pytest.mark.parametrize("torch", ["", "TORCH=cuda"])
def test_elsewhere_than_linux_x86_64_pypis_torch_comes_with_the_project(tmp_path, torch):
    venv = venv_with_torch(tmp_path, TORCH_PIN)
    args = ["-W", "setup.cfg", "UNAME=Darwin arm64", driver_markers(tmp_path, found=True)]
    assert torch_step(venv, "train", *args, *filter(None, [torch])) == (
        "torch: PyPI's build for Darwin arm64 (TORCH= chooses CPU or CUDA on Linux x86_64 only)",
        "",
    )
    assert installs(venv, "train", *args) == [".[analysis]"]
    assert torch_step(venv, "train", "UNAME=Darwin arm64", "TORCH=cpu") is None  # on Linux: the CPU build
