"""A checkpoint is data: the module of its env id (``pkg.mod:Name-v0``) is not imported from the current
directory unless the user says so (``--trust-env-module``), in ``a3c evaluate``, ``a3c export`` and
``--resume``; an installed module, or one on PYTHONPATH, is imported as before."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import types
from pathlib import Path

import pytest

from a3c.core import user_code
from a3c.core.errors import BadInput
from a3c_envs import EnvSetupError, modules
from a3c_envs.modules import check_code_modules, check_env_module, from_current_directory
from tests.support import ROOT
from tests.support.commands import a3c_env, call_a3c

EVIL = """
from pathlib import Path

import gymnasium

Path("imported.marker").write_text("imported")
gymnasium.register(
    "Evil-v0", entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv", max_episode_steps=50
)
"""


@pytest.fixture
def in_folder(tmp_path, monkeypatch):
    """The current directory is ``tmp_path`` and first on sys.path, as under ``python -m``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path[1:]])
    return tmp_path


def test_a_module_only_in_the_current_directory_is_refused_unless_trusted(in_folder):
    (in_folder / "evil_envs.py").write_text(EVIL)
    assert from_current_directory("evil_envs.sub")
    with pytest.raises(
        EnvSetupError, match=r"^checkpoint x: its env 'evil_envs:Evil-v0' would import module"
    ):
        check_env_module("evil_envs:Evil-v0", trusted=False, source="checkpoint x")
    check_env_module("evil_envs:Evil-v0", trusted=True, source="checkpoint x")
    check_env_module("CartPole-v1", trusted=False, source="checkpoint x")  # no module: nothing to import
    assert not (in_folder / "imported.marker").exists()


def test_a_file_that_shadows_an_installed_module_is_refused(in_folder):
    (in_folder / "colorsys.py").write_text("")  # the standard library's colorsys, not yet imported here
    sys.modules.pop("colorsys", None)
    assert from_current_directory("colorsys")


def test_an_installed_or_already_imported_module_or_one_on_pythonpath_is_fine(
    in_folder, tmp_path_factory, monkeypatch
):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "pp_mod.py").write_text("")
    monkeypatch.setattr(sys, "path", [str(in_folder), str(elsewhere), *sys.path[1:]])
    assert not from_current_directory("pp_mod")  # found through PYTHONPATH, outside the current directory
    (in_folder / "json.py").write_text("")
    assert not from_current_directory("json")  # already imported: importing it again takes that one
    # A virtual environment inside the current directory is installed code: cd to the standard library's
    # parent folder, and its colorsys (not yet imported here) is still an installed module.
    sys.modules.pop("colorsys", None)
    monkeypatch.chdir(Path(sysconfig.get_paths()["stdlib"]).parent)
    monkeypatch.setattr(sys, "path", ["", *sys.path[1:]])
    assert not from_current_directory("colorsys")


def test_a_project_installed_with_pip_e_is_installed_unless_it_is_the_current_directory_itself(
    in_folder, tmp_path_factory, monkeypatch
):
    site_dir = tmp_path_factory.mktemp("site-packages")
    (site_dir / "__editable__.proj.pth").write_text(f"# a comment\nimport sys\n{in_folder / 'src'}\n\n")
    (site_dir / "flat.pth").write_text("relative\n")
    assert modules.pth_folders([str(site_dir), str(in_folder / "missing")]) == [
        str(in_folder / "src"),
        str(site_dir / "relative"),
    ]
    (in_folder / "src").mkdir()
    (in_folder / "src" / "proj_envs.py").write_text("")
    scripts = tmp_path_factory.mktemp("bin")
    monkeypatch.setattr(sys, "path", [str(scripts), str(in_folder / "src"), *sys.path[1:]])
    installed = modules.installed_folders()
    monkeypatch.setattr(modules, "installed_folders", lambda: [*installed, str(in_folder / "src")])
    assert not from_current_directory("proj_envs")  # pip install -e of a src layout, run from its root
    monkeypatch.setattr(modules, "installed_folders", lambda: [*installed, str(in_folder)])
    assert from_current_directory("proj_envs")  # a flat project: the folder itself installed
    monkeypatch.setattr(modules, "installed_folders", lambda: [*installed, str(in_folder.parent)])
    assert from_current_directory("proj_envs")  # ... or a folder that holds it (run from below its root)


@pytest.mark.parametrize("entry", [".", "{cwd}", "{cwd}/sub", "{link}"])
def test_a_module_in_or_under_the_current_directory_is_refused_through_any_path_entry(
    in_folder, tmp_path_factory, monkeypatch, entry
):
    # The installed console script puts its own folder first on sys.path, and PYTHONPATH=. (or ./sub, or a
    # link to the current directory) puts the current directory after it: the module is still the current
    # directory's.
    (in_folder / "sub").mkdir()
    (in_folder / "mine.py").write_text("")
    (in_folder / "sub" / "mine.py").write_text("")
    link = tmp_path_factory.mktemp("links") / "here"
    link.symlink_to(in_folder)
    scripts = tmp_path_factory.mktemp("bin")  # the console script's folder
    path = entry.format(cwd=in_folder, link=link)
    monkeypatch.setattr(sys, "path", [str(scripts), path, *sys.path[1:]])
    assert from_current_directory("mine")
    with pytest.raises(EnvSetupError, match=r"^checkpoint x: its env 'mine:X-v0' would import module 'mine'"):
        check_env_module("mine:X-v0", trusted=False, source="checkpoint x")
    assert "mine" not in sys.modules


@pytest.mark.slow
def test_evaluate_through_pythonpath_dot_asks_before_importing_a_checkpoints_module(in_folder):
    # The console script `a3c` with PYTHONPATH=. in a folder holding the checkpoint's module: here
    # `python -m a3c` with PYTHONPATH=<repo>:. (the current directory both first and through PYTHONPATH).
    import gymnasium

    import a3c

    (in_folder / "evilmod.py").write_text(EVIL)
    try:
        assert a3c.train("evilmod:Evil-v0", run_dir="run", serial=True, max_steps=200).exit_code == 0
    finally:
        sys.modules.pop("evilmod", None)
        gymnasium.registry.pop("Evil-v0", None)
    (in_folder / "imported.marker").unlink()
    env = {**a3c_env(), "PYTHONPATH": os.pathsep.join([str(ROOT), "."])}
    refused = subprocess.run(
        [sys.executable, "-m", "a3c", "evaluate", "run", "--episodes", "1"],
        cwd=in_folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("error: checkpoint ") and "--trust-env-module" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1 and not (in_folder / "imported.marker").exists()


def test_the_first_folder_counts_after_a_chdir(in_folder, tmp_path_factory, monkeypatch):
    (in_folder / "evil_envs.py").write_text(EVIL)
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))  # a notebook's os.chdir after start-up
    assert from_current_directory("evil_envs")  # sys.path[0] still names the start-up folder


@pytest.mark.slow  # trains, in this process
def test_evaluate_export_and_resume_ask_before_importing_a_checkpoints_module(in_folder):
    # In this process, as under `python -m a3c` in the folder (``in_folder``: the cwd, first on sys.path).
    # Each refusal comes before anything starts, and in this process "not imported" is also read off
    # sys.modules; what importing the module leaves here (itself, its registration) is forgotten after use.
    import gymnasium

    import a3c

    (in_folder / "evil_envs.py").write_text(EVIL)

    def forget() -> None:
        sys.modules.pop("evil_envs", None)
        gymnasium.registry.pop("Evil-v0", None)

    try:
        # Named by the caller (as typed on a command line), the module is the user's choice: it is imported.
        done = a3c.train("evil_envs:Evil-v0", run_dir="run", serial=True, max_steps=300)
        assert done.exit_code == 0 and "evil_envs" in sys.modules
        (in_folder / "imported.marker").unlink()
        forget()
        for command in (
            ["evaluate", "run"],
            ["export", "run", "-o", "p.pt"],
            ["train", "--resume", "run", "--serial"],
        ):
            refused = call_a3c(*command)
            assert refused.returncode == 2, (command, refused.stderr)
            assert refused.stderr.startswith("error: ") and "--trust-env-module" in refused.stderr
            assert len(refused.stderr.splitlines()) == 1 and not (in_folder / "imported.marker").exists()
            assert "evil_envs" not in sys.modules and not (in_folder / "p.pt").exists()
        # A config file from someone else names such an env: the same refusal, before the run dir exists.
        (in_folder / "shared.toml").write_text('env_id = "evil_envs:Evil-v0"\n')
        refused = call_a3c(
            "train", "--config", "shared.toml", "--serial", "--max-steps", "100", "--run-dir", "run2"
        )
        assert refused.returncode == 2 and refused.stderr.startswith("error: --config 'shared.toml': its env")
        assert not (in_folder / "imported.marker").exists() and not (in_folder / "run2").exists()
        assert "evil_envs" not in sys.modules
        trusted = call_a3c("evaluate", "run", "--episodes", "2", "--trust-env-module")
        assert trusted.returncode == 0, trusted.stderr
        assert (in_folder / "imported.marker").exists()
    finally:
        forget()


def test_a_files_model_wrappers_and_env_are_all_checked_and_a_factory_function_needs_trust(in_folder):
    # A config file's or checkpoint's model reference is code from the current directory as much as its env.
    (in_folder / "evil_nets.py").write_text(
        'from pathlib import Path\nPath("imported.marker").write_text("x")\n'
    )
    with pytest.raises(EnvSetupError, match=r"^src: its model 'evil_nets:build' would import module"):
        check_code_modules(None, (), "evil_nets:build", False, "src")
    with pytest.raises(EnvSetupError, match=r"^src: its wrapper 'evil_nets:Wrap' would import module"):
        check_code_modules(None, ["evil_nets:Wrap"], "mlp", False, "src")
    assert not (in_folder / "imported.marker").exists()
    # An installed function named as the env would be called with the file's env_kwargs, one named as a
    # wrapper with an env: only when trusted; an env or wrapper class is what a run names.
    with pytest.raises(EnvSetupError, match=r"^src: its env 'subprocess:run' is not a gymnasium.Env class"):
        check_code_modules("subprocess:run", (), "mlp", False, "src")
    with pytest.raises(EnvSetupError, match=r"^src: its wrapper 'code:interact' is not a gymnasium.Wrapper"):
        check_code_modules(None, ["code:interact"], "mlp", False, "src")
    check_code_modules("subprocess:run", ["code:interact"], "mlp", True, "src")
    cartpole, clip = "gymnasium.envs.classic_control.cartpole:CartPoleEnv", "gymnasium.wrappers:ClipReward"
    check_code_modules(cartpole, [clip], "mlp", False, "src")


def test_a_script_name_resolves_only_to_what_the_running_script_defines(monkeypatch):
    main = types.ModuleType("__main__")
    exec("import os\nclass Mine:\n    pass\ndef mine(path):\n    pass\n", main.__dict__)
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(user_code, "_REGISTRY", {})
    monkeypatch.setattr(user_code, "_FOUND_IN_MAIN", set())
    assert user_code.resolve("__main__:Mine", "env_id") is main.Mine
    assert user_code.by_value(["__main__:Mine"]) == {"__main__:Mine": main.Mine}  # children get it by value
    with pytest.raises(BadInput, match="trust_code=True"):
        user_code.resolve("__main__:os.system", "env_id")  # imported there, not defined there
    # A file naming the script's own function does not make it the user's to call with the file's kwargs.
    with pytest.raises(EnvSetupError, match=r"^src: its env '__main__:mine' is not a gymnasium.Env class"):
        check_code_modules("__main__:mine", (), "mlp", False, "src")
