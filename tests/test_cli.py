"""The command line: help, and every kind of bad input → one ``error:`` line naming the field, exit 2."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

from a3c.cli import cli, main
from tests.conftest import run_a3c


def call(*args: str) -> int:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    return code


def bad(capsys, *args: str) -> str:
    code = call(*args)
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--env", "CartPol-v1"], ["--env", "'CartPol-v1'", "CartPole-v1"]),
        (["--env", "Blackjack-v1"], ["not supported yet", "Tuple("]),
        (["--env", "CartPole-v1", "--workers", "0"], ["workers", "0", ">= 1"]),
        (["--env", "CartPole-v1", "--set", "lr=0"], ["lr", "0", "> 0"]),
        (["--env", "CartPole-v1", "--set", "lr=-1e-3"], ["lr", "-0.001"]),
        (["--env", "CartPole-v1", "--set", "gamma=1.5"], ["gamma", "1.5", "(0, 1]"]),
        (["--env", "CartPole-v1", "--set", "gamma=0"], ["gamma", "0"]),
        (["--env", "CartPole-v1", "--set", "t_max=0"], ["t_max", "0", ">= 1"]),
        (["--env", "CartPole-v1", "--set", "learning_rate=1"], ["unknown key", "'learning_rate'", "lr"]),
        (["--env", "CartPole-v1", "--set", "t_max=abc"], ["t_max", "'abc'", "integer"]),
        (["--env", "CartPole-v1", "--set", "lr"], ["--set", "key=value"]),
        (["--env", "CartPole-v1", "--workers", "abc"], ["--workers", "abc"]),
        (["--env", "CartPole-v1", "--workers", "2", "--serial"], ["--workers", "--serial"]),
        (["--env", "CartPole-v1", "--seed", "-1"], ["seed", "-1"]),
        (["--env", "CartPole-v1", "--eval-interval", "inf"], ["eval_interval", "inf", "finite"]),
        (["--env", "CartPole-v1", "--target-return", "nan"], ["target_return", "nan", "finite"]),
        (["--env", "a:b:c"], ["--env", "'a:b:c'"]),
    ],
)
def test_bad_train_input_is_one_line_and_exit_2(capsys, tmp_path, args, expected):
    run_dir = tmp_path / "run"
    line = bad(capsys, "train", *args, "--run-dir", str(run_dir))
    for part in expected:
        assert part in line, line
    assert not run_dir.exists()  # validated before anything is created


def test_existing_run_dir_is_refused_and_kept(capsys, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text("{}")
    line = bad(capsys, "train", "--env", "CartPole-v1", "--run-dir", str(run_dir))
    assert "--run-dir" in line and "--force" in line
    assert (run_dir / "config.json").read_text() == "{}"


def test_force_does_not_replace_a_directory_that_is_not_a_run(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("keep me")
    line = bad(capsys, "train", "--env", "CartPole-v1", "--run-dir", str(tmp_path), "--force")
    assert "not an a3c run directory" in line
    assert (tmp_path / "notes.txt").read_text() == "keep me"


def test_force_does_not_replace_a_project_that_has_a_config_json(capsys, tmp_path):
    # An a3c-looking config.json next to other files: still not a run, so --force must not delete it.
    (tmp_path / "config.json").write_text('{"env_id": "CartPole-v1", "versions": {"a3c": "0.1.0"}}')
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "important.py").write_text("keep me")
    line = bad(capsys, "train", "--env", "CartPole-v1", "--run-dir", str(tmp_path), "--force")
    assert "not an a3c run directory" in line
    assert (tmp_path / "src" / "important.py").read_text() == "keep me"


def test_run_dir_below_a_file_is_bad_input(capsys, tmp_path):
    (tmp_path / "file").write_text("x")
    line = bad(capsys, "train", "--env", "CartPole-v1", "--run-dir", str(tmp_path / "file" / "run"))
    assert "--run-dir" in line and "cannot be created" in line


def test_evaluate_missing_checkpoint(capsys, tmp_path):
    line = bad(capsys, "evaluate", str(tmp_path / "nope.pt"))
    assert "does not exist" in line


def test_evaluate_corrupt_checkpoint(capsys, tmp_path):
    path = tmp_path / "broken.pt"
    path.write_bytes(b"this is not a checkpoint")
    line = bad(capsys, "evaluate", str(path))
    assert "cannot be read" in line and "broken.pt" in line


def test_evaluate_foreign_checkpoint(capsys, tmp_path):
    path = tmp_path / "foreign.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, path)
    line = bad(capsys, "evaluate", str(path))
    assert "not an a3c checkpoint" in line


def test_evaluate_run_dir_without_checkpoints(capsys, tmp_path):
    line = bad(capsys, "evaluate", str(tmp_path))
    assert "no checkpoints/best.pt" in line


def test_help_documents_every_option_with_its_default(capsys):
    assert call("train", "--help") == 0
    text = capsys.readouterr().out
    for option in (
        "--env",
        "--workers",
        "--envs-per-worker",
        "--seed",
        "--run-dir",
        "--max-steps",
        "--max-seconds",
        "--target-return",
        "--eval-interval",
        "--eval-episodes",
        "--set",
        "--serial",
    ):
        assert option in text
    assert text.count("default") >= 9


def test_bad_input_exits_2_as_a_real_command(tmp_path):
    result = run_a3c("train", "--env", "NoSuchEnv-v0", "--run-dir", str(tmp_path / "r"), timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("error: --env: unknown environment 'NoSuchEnv-v0'")


def test_envs_lists_presets_with_targets_and_extras():
    result = CliRunner().invoke(cli, ["envs", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["env_id"]: row for row in map(json.loads, result.output.splitlines())}
    assert rows["CartPole-v1"]["target_return"] == 475.0 and rows["CartPole-v1"]["extra"] is None
    assert rows["ALE/Pong-v5"]["extra"] == "atari" and rows["HalfCheetah-v5"]["extra"] == "mujoco"
    assert rows["Pendulum-v1"]["installed"] is True
    table = CliRunner().invoke(cli, ["envs"])
    assert table.exit_code == 0 and "ALE/Breakout-v5" in table.output and "installed" in table.output
