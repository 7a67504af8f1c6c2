"""Every way a resume is refused: a config that changes a field the checkpoint's model or optimizer state
depends on (``SHAPE_FIELDS``), and a checkpoint of another format version. Each is one BadInput line naming
the field, and a refused resume leaves the run dir as it was."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest
import torch

from a3c.core.config import Config
from a3c.core.errors import BadInput
from a3c.rundir.checkpoints import CHECKPOINT_FORMAT, CHECKPOINT_VERSION, load_checkpoint, save_checkpoint
from a3c.rundir.resume import SHAPE_FIELDS, check_compatible, load_resume_checkpoint
from tests.support.commands import run_serial_fixed_length
from tests.test_cli import call

BASE = Config(env_id="CartPole-v1")

# One value per shape field that differs from BASE's. A field added to SHAPE_FIELDS must be added here too
# (test_every_shape_field_has_a_refusal_case), so no field goes untested.
CHANGED = {
    "env_id": "Acrobot-v1",
    "env_kwargs": {"sutton_barto_reward": True},
    "wrappers": ("tests.support.envs:Doubled",),
    "hidden_sizes": (32,),
    "shared_body": True,
    "activation": "relu",
    "optimizer": "rmsprop",
    "model": "cnn",
    "lstm_size": 256,
    "frame_stack": 4,
    "gaussian_std": "state",
    "squash": "tanh",
    "obs_norm": True,
    "reward_scale": True,
}


def checkpoint_of(config: Config) -> dict:
    return {"config": config.to_dict()}


def test_every_shape_field_has_a_refusal_case():
    assert set(CHANGED) == set(SHAPE_FIELDS)
    for name, value in CHANGED.items():
        assert getattr(BASE, name) != value, name


@pytest.mark.parametrize("name", SHAPE_FIELDS)
@pytest.mark.parametrize("direction", ["saved-base", "saved-changed"])
def test_a_changed_shape_field_is_refused_naming_it(tmp_path, name, direction):
    changed = dataclasses.replace(BASE, **{name: CHANGED[name]})
    saved, new = (BASE, changed) if direction == "saved-base" else (changed, BASE)
    with pytest.raises(BadInput) as info:
        check_compatible(checkpoint_of(saved), new, tmp_path)
    message = str(info.value)
    assert len(message.splitlines()) == 1, message
    assert message.startswith(f"--resume: {name} "), message
    assert repr(getattr(new, name)) in message and repr(getattr(saved, name)) in message, message
    assert str(tmp_path) in message


# env_id has no default: a checkpoint always had it.
@pytest.mark.parametrize("name", [n for n in SHAPE_FIELDS if n != "env_id"])
def test_a_checkpoint_from_before_a_field_existed_had_its_default(tmp_path, name):
    """An older checkpoint lacks the field: it means the default, so the default passes and a change does
    not."""
    saved = checkpoint_of(BASE)
    del saved["config"][name]
    check_compatible(saved, BASE, tmp_path)
    with pytest.raises(BadInput, match=f"^--resume: {name} "):
        check_compatible(saved, dataclasses.replace(BASE, **{name: CHANGED[name]}), tmp_path)


def test_fields_outside_the_shape_may_change(tmp_path):
    new = dataclasses.replace(BASE, lr=3e-4, workers=4, t_max=5, entropy_coef=0.0, max_steps=10, seed=3)
    check_compatible(checkpoint_of(BASE), new, tmp_path)


def test_hidden_sizes_saved_as_a_list_match_the_tuple(tmp_path):
    """JSON and older checkpoints hold hidden_sizes as a list: the same sizes are no change."""
    saved = checkpoint_of(BASE)
    saved["config"]["hidden_sizes"] = list(BASE.hidden_sizes)
    check_compatible(saved, BASE, tmp_path)


def write_last(run_dir: Path, **fields) -> Path:
    """A whole training checkpoint in ``run_dir/checkpoints/last.pt``, its header fields overridden."""
    path = run_dir / "checkpoints" / "last.pt"
    path.parent.mkdir(parents=True)
    payload = {
        "config": BASE.to_dict(),
        "model_state": {},
        "optimizer_state": {},
        "global_step": 0,
        "wall_time": 0.0,
    }
    save_checkpoint(path, payload)
    data = torch.load(path, weights_only=True)
    data.update(fields)
    torch.save(data, path)
    return path


@pytest.mark.parametrize(
    "version", [CHECKPOINT_VERSION + 1, 0, "1", None], ids=["newer", "zero", "a-string", "none"]
)
def test_a_checkpoint_of_another_format_version_is_refused(tmp_path, version):
    path = write_last(tmp_path, format_version=version)
    for load in (lambda: load_checkpoint(path), lambda: load_resume_checkpoint(tmp_path)):
        with pytest.raises(BadInput) as info:
            load()
        message = str(info.value)
        assert len(message.splitlines()) == 1, message
        assert "format_version" in message and repr(version) in message and str(path) in message, message


def test_the_current_format_version_loads(tmp_path):
    write_last(tmp_path)
    data = load_resume_checkpoint(tmp_path)
    assert (data["format"], data["format_version"]) == (CHECKPOINT_FORMAT, CHECKPOINT_VERSION)


def digest(run_dir: Path) -> dict[str, str]:
    """Every file under ``run_dir`` (hidden ones too) with a hash of its bytes."""
    return {
        str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file()
    }


@pytest.mark.slow
def test_a_refused_resume_exits_2_with_one_line_and_leaves_the_run_dir_alone(run_dir, token, capsys):
    # The run is a real command; the refusals are the CLI in this process (a command each would only add the
    # imports, seconds apiece on a loaded machine: the refusal comes before anything starts).
    first = run_serial_fixed_length(run_dir, 200, token)
    assert first.returncode == 0, first.stderr

    refusals = [
        (["--set", "hidden_sizes=32"], "--resume: hidden_sizes (32,)"),
        (["--set", "shared_body=true"], "--resume: shared_body True"),
        (["--set", "optimizer=rmsprop"], "--resume: optimizer 'rmsprop'"),
        (["--set", "obs_norm=true"], "--resume: obs_norm True"),
    ]
    before = digest(run_dir)
    for extra, expected in refusals:
        code = call("train", "--resume", str(run_dir), "--quiet", *extra)
        out, err = capsys.readouterr()
        assert code == 2, (extra, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {expected} "), err
        assert digest(run_dir) == before, extra

    last = run_dir / "checkpoints" / "last.pt"
    data = torch.load(last, weights_only=True)
    data["format_version"] = CHECKPOINT_VERSION + 1
    torch.save(data, last)
    before = digest(run_dir)
    code = call("train", "--resume", str(run_dir), "--quiet")
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "format_version" in lines[0] and lines[0].startswith("error: checkpoint:"), (
        lines
    )
    assert digest(run_dir) == before
