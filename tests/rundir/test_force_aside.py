"""``--force`` cannot lose a run (a3c/rundir/replace.py): the earlier run is moved aside under the lock, put
back when the new run ends before its first checkpoint (a backend that cannot start), discarded at that
checkpoint, put back by the next claim or resume after a kill at any step, and a folder holding hidden
entries a3c did not write is refused untouched."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from a3c.core.config import Config
from a3c.core.errors import BadInput
from a3c.rundir import replace
from a3c.rundir.checkpoints import resolve_checkpoint
from a3c.rundir.files import check_run_dir, create_run_dir
from a3c.rundir.lock import LOCK_NAME, unlock
from a3c.rundir.resume import load_resume_checkpoint
from a3c.training import train
from a3c.training.train import Trainer
from a3c_envs import inspect_env


def earlier_run(path: Path) -> None:
    """What a finished run leaves, with files whose contents the test can compare."""
    (path / "checkpoints").mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"env_id": "CartPole-v1", "versions": {"a3c": "0"}}))
    (path / "checkpoints" / "best.pt").write_bytes(b"the best weights")
    (path / "checkpoints" / "last.pt").write_bytes(b"the last weights")
    (path / "eval.csv").write_text("wall_time,global_step\n1.0,100\n")
    (path / "summary.json").write_text("{}\n")


def digest(folder: Path) -> dict[str, str]:
    """Every file of ``folder`` but the lock, by relative path: its contents' hash."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != LOCK_NAME
    }


def serial_trainer(run_dir: Path, **overrides) -> Trainer:
    info = inspect_env("tests.support.envs:FixedLength-v0")
    values = {"env_id": info.env_id, "workers": 1, "eval_interval": 0.2, "max_steps": 200, **overrides}
    return Trainer(Config(**values).validate(), info, run_dir, serial=True, force=True, show_progress=False)


def test_a_force_run_whose_backend_cannot_start_puts_the_earlier_run_back(tmp_path, monkeypatch, capsys):
    # As `RAY_AUTH_MODE=disabled a3c train --backend ray --force`: the backend refuses after the claim.
    run_dir = tmp_path / "run"
    earlier_run(run_dir)
    before = digest(run_dir)

    def refuse(*args, **kwargs):
        raise ValueError("the Ray cluster this run started has token authentication off")

    monkeypatch.setattr(train, "start_backend", refuse)
    assert serial_trainer(run_dir).run() == 1
    err = capsys.readouterr().err
    assert "error: trainer failed:" in err and "token authentication off" in err
    assert f"warning: {str(run_dir)!r}: the earlier run was put back" in err
    assert digest(run_dir) == before  # best.pt, last.pt, the CSVs: all there, byte for byte
    assert not any((run_dir / name).exists() for name in (replace.ASIDE, replace.FILLING, replace.TRASH))


@pytest.mark.slow
def test_a_force_run_discards_the_earlier_run_at_its_first_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    earlier_run(run_dir)
    assert serial_trainer(run_dir).run() == 0
    names = {p.name for p in run_dir.iterdir()}
    assert not names & {replace.ASIDE, replace.FILLING, replace.TRASH}
    assert json.loads((run_dir / "config.json").read_text())["env_id"].endswith("FixedLength-v0")
    assert (run_dir / "checkpoints" / "best.pt").read_bytes() != b"the best weights"


def killed_while_filling(run_dir: Path) -> None:
    """A kill in the middle of moving aside: some entries in FILLING, the rest still in place."""
    (run_dir / replace.FILLING).mkdir()
    (run_dir / "eval.csv").rename(run_dir / replace.FILLING / "eval.csv")


def killed_before_the_first_checkpoint(run_dir: Path) -> None:
    """The old run aside, the new run's first files written (no checkpoint of its own yet)."""
    replace.move_aside(run_dir)
    (run_dir / "checkpoints").mkdir()
    (run_dir / "config.json").write_text('{"env_id": "Pendulum-v1"}')
    (run_dir / "metrics.csv").write_text("wall_time\n0.5\n")


def killed_while_putting_back(run_dir: Path) -> None:
    """A kill in the middle of putting back: the new run's entries gone, some old ones back already."""
    killed_before_the_first_checkpoint(run_dir)
    (run_dir / replace.TRASH).mkdir()
    for name in ("checkpoints", "config.json", "metrics.csv"):
        (run_dir / name).rename(run_dir / replace.TRASH / name)
    (run_dir / replace.ASIDE / replace.RESTORING).touch()
    (run_dir / replace.ASIDE / "config.json").rename(run_dir / "config.json")
    (run_dir / replace.ASIDE / "checkpoints").rename(run_dir / "checkpoints")


@pytest.mark.parametrize(
    "killed", [killed_while_filling, killed_before_the_first_checkpoint, killed_while_putting_back]
)
def test_an_earlier_run_left_aside_by_a_kill_is_put_back_by_the_next_claim(tmp_path, killed, capsys):
    run_dir = tmp_path / "run"
    earlier_run(run_dir)
    before = digest(run_dir)
    killed(run_dir)
    with pytest.raises(BadInput, match="already exists; pass --force"):
        check_run_dir(run_dir, force=False)  # a plain claim: the old run is back, and so refused
    assert digest(run_dir) == before
    assert "the earlier run was put back" in capsys.readouterr().err
    assert not any((run_dir / name).exists() for name in (replace.ASIDE, replace.FILLING, replace.TRASH))


def test_a_resume_after_a_killed_force_resumes_the_earlier_run(tmp_path, capsys):
    run_dir = tmp_path / "run"
    earlier_run(run_dir)
    killed_before_the_first_checkpoint(run_dir)
    with pytest.raises(BadInput, match=r"checkpoints/last.pt' cannot be read"):
        load_resume_checkpoint(run_dir)  # the old run's last.pt (fake bytes here), not "no last.pt"
    assert (run_dir / "checkpoints" / "last.pt").read_bytes() == b"the last weights"


@pytest.mark.parametrize("hidden", [".git", ".dvc", ".ipynb_checkpoints"])
def test_force_refuses_hidden_entries_it_did_not_write_and_touches_nothing(tmp_path, hidden):
    run_dir = tmp_path / "run"
    earlier_run(run_dir)
    (run_dir / hidden).mkdir()
    (run_dir / hidden / "HEAD").write_text("ref: refs/heads/main\n")
    (run_dir / ".config.json.a1b2.tmp").write_text("")  # a kill's leftover temp file is ours: no refusal
    before = digest(run_dir)
    expected = (
        f"--force: {str(run_dir)!r} holds {hidden}, which a3c did not write; --force only replaces a run's "
        "own files: move them away, or choose another run dir"
    )
    with pytest.raises(BadInput) as refused:
        check_run_dir(run_dir, force=True)
    assert str(refused.value) == expected
    with pytest.raises(BadInput) as refused:  # the claim checks again under the lock
        create_run_dir(run_dir, force=True)
    assert str(refused.value) == expected
    assert digest(run_dir) == before


def test_the_claim_moves_the_earlier_run_aside_whole(tmp_path):
    run_dir = tmp_path / "run"
    earlier_run(run_dir)
    before = digest(run_dir)
    _, fd = create_run_dir(run_dir, force=True)
    try:
        assert digest(run_dir / replace.ASIDE) == before
        assert sorted(p.name for p in run_dir.iterdir()) == [replace.ASIDE, LOCK_NAME, "checkpoints"]
    finally:
        unlock(fd)


def test_evaluate_of_a_run_dir_left_by_a_killed_force_says_where_the_earlier_run_is(tmp_path):
    run_dir = tmp_path / "run"
    earlier_run(run_dir)
    killed_before_the_first_checkpoint(run_dir)
    with pytest.raises(BadInput, match=r"an interrupted --force left the earlier run in \.a3c-replaced/"):
        resolve_checkpoint(run_dir)
