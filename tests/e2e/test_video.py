"""``a3c evaluate --video DIR`` and ``a3c train --video``: MP4 files that decode to the reset frame plus one
frame per step, of the env's own rendering; the missing ``video`` extra and a bad folder are one ``error:``
line and exit 2, before any work."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

import a3c
from a3c.cli import main
from tests.support.commands import call_a3c, call_a3c_train, run_a3c
from tests.support.extras import require_extra
from tests.support.run_files import read_json
from tests.tools.test_export import random_checkpoint


def frames_of(path: Path) -> np.ndarray:
    """The decoded frames of an MP4 [n, H, W, 3] (imageio's ffmpeg reader, which moviepy brings)."""
    imageio = require_extra("imageio", "video")
    with imageio.get_reader(path, "ffmpeg") as reader:
        return np.stack(list(reader.iter_data()))  # not list(reader): its length is inf


def in_this_process(call: Callable[..., subprocess.CompletedProcess], *args: str):
    """``call(*args)`` (``call_a3c`` or ``call_a3c_train``: a command with --video, in this process), then the
    environment as it was before it: --video sets headless renderers (MUJOCO_GL, SDL_VIDEODRIVER) for the
    whole process where there is no display (a3c.tools.video)."""
    with mock.patch.dict(os.environ):
        return call(*args)


def train_serial(run_dir: Path, env_id: str, steps: int, *extra: str) -> str:
    """A short ``--serial`` run into ``run_dir``, in this process; its stdout."""
    args = ["--env", env_id, "--serial", "--max-steps", str(steps), "--quiet", "--run-dir"]
    result = in_this_process(call_a3c_train, *args, str(run_dir), *extra)
    assert result.returncode == 0, result.stderr
    return result.stdout


def evaluate_json(target: Path, *extra: str, real_command: bool = False) -> dict:
    """``a3c evaluate TARGET --json EXTRA``'s report: in this process, or as a real command."""
    args = ("evaluate", str(target), "--json", *extra)
    result = run_a3c(*args, timeout=300) if real_command else in_this_process(call_a3c, *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def check_videos(report: dict, folder: Path, shape: tuple[int, int, int]) -> None:
    """Each reported video is in ``folder``, alone (no temp file left), and holds length + 1 frames."""
    paths = [Path(v["path"]) for v in report["videos"]]
    seeds = range(report["seed"], report["seed"] + report["episodes"])
    assert [p.name for p in paths] == [f"best-seed{s}.mp4" for s in seeds]
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in paths)  # no .partial left
    for video in report["videos"]:
        frames = frames_of(Path(video["path"]))
        assert frames.shape == (video["length"] + 1, *shape), video  # the reset frame, then one per step
    returns = [v["return"] for v in report["videos"]]
    assert report["mean_return"] == pytest.approx(np.mean(returns)) and report["episodes"] == len(returns)


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory) -> tuple[Path, str]:
    """A short serial CartPole run with ``--video`` (its dir, its stdout), in this process."""
    require_extra("moviepy", "video")
    run_dir = tmp_path_factory.mktemp("video") / "run"
    return run_dir, train_serial(run_dir, "CartPole-v1", 2000, "--video")


@pytest.mark.slow
def test_train_video_records_the_best_policy_into_the_run_dir(cartpole_run):
    run_dir, stdout = cartpole_run
    (video,) = (run_dir / "videos").iterdir()
    assert video.name == "best-seed12345.mp4"  # best.pt, a3c evaluate's default seed
    length = int(re.search(rf"video: {re.escape(str(video))} \(return \S+, length (\d+)\)", stdout)[1])
    assert frames_of(video).shape == (length + 1, 400, 600, 3)
    # A view of the result, not a hyperparameter: no config field, so a resume neither keeps nor refuses it.
    assert "video" not in read_json(run_dir / "config.json")
    assert read_json(run_dir / "summary.json")["exit_reason"] == "max_steps"
    # videos/ is a run's own: --force replaces the run (in this process: a3c.train's force is the option's)
    a3c.train("CartPole-v1", run_dir=run_dir, force=True, serial=True, max_steps=100)
    assert not (run_dir / "videos").exists() and read_json(run_dir / "summary.json")["total_steps"] == 100


@pytest.mark.slow
def test_evaluate_video_writes_one_mp4_per_episode(cartpole_run, tmp_path):
    run_dir, _ = cartpole_run
    report = evaluate_json(run_dir, "--episodes", "2", "--video", str(tmp_path / "new" / "videos"))
    check_videos(report, tmp_path / "new" / "videos", (400, 600, 3))


@pytest.mark.slow
def test_evaluate_video_of_a_box_env_plays_the_evaluated_episodes(tmp_path):
    # A checkpoint of random weights (no training: the video is the point) of the Pendulum preset's policy
    # (tanh squash, observation statistics), its episodes cut at 50 steps by an env kwarg the run's envs
    # and a3c evaluate's take (Pendulum's own limit is 200).
    require_extra("moviepy", "video")
    checkpoint = tmp_path / "best.pt"
    random_checkpoint(checkpoint, "Pendulum-v1", squash="tanh", obs_norm=True,
                      env_kwargs={"max_episode_steps": 50})  # fmt: skip
    # As a real command (a fresh process imports what --video needs on its own; the others run in this one),
    # whose report this process's evaluation then matches.
    videos = str(tmp_path / "videos")
    report = evaluate_json(checkpoint, "--episodes", "2", "--video", videos, real_command=True)
    check_videos(report, tmp_path / "videos", (500, 500, 3))
    assert [v["length"] for v in report["videos"]] == [50, 50]
    plain = call_a3c("evaluate", str(checkpoint), "--episodes", "2", "--json")  # the same seeds and episodes
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout)["mean_return"] == pytest.approx(report["mean_return"], rel=1e-6)


@pytest.mark.slow
def test_evaluate_video_of_atari_shows_the_raw_game_screen(tmp_path):
    require_extra("ale_py", "atari")
    require_extra("moviepy", "video")
    # A checkpoint of random weights of the preset's CNN-LSTM (no training: the screen is the point), its
    # games cut by ALE at 400 frames (100 agent steps; tests/e2e/test_extras_smoke.py plays whole ones).
    checkpoint = tmp_path / "best.pt"
    random_checkpoint(checkpoint, "ALE/Pong-v5", model="cnn", lstm_size=256,
                      env_kwargs={"max_num_frames_per_episode": 400})  # fmt: skip
    report = evaluate_json(checkpoint, "--episodes", "1", "--video", str(tmp_path / "videos"))
    check_videos(report, tmp_path / "videos", (210, 160, 3))  # the RGB screen, not the 84x84 input
    assert 0 < report["videos"][0]["length"] <= 100  # cut (random no-ops at the reset take a few frames)


def one_error_line(capsys, *args: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --video: "), err
    return lines[0]


def test_missing_moviepy_is_one_line_with_the_install_command_before_any_work(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "moviepy", None)  # what `import moviepy` sees when it is not installed
    missing_run, videos = tmp_path / "no-such-run", tmp_path / "videos"
    line = one_error_line(capsys, "evaluate", str(missing_run), "--video", str(videos))
    assert "moviepy" in line and "pip install -e '.[video]'" in line  # not the missing RUN: checked first
    run_dir = tmp_path / "run"
    train = ["train", "--env", "CartPole-v1", "--serial", "--max-steps", "10", "--quiet", "--video"]
    assert "pip install -e '.[video]'" in one_error_line(capsys, *train, "--run-dir", str(run_dir))
    assert not videos.exists() and not run_dir.exists()


def test_a_video_path_that_is_a_file_is_one_line(tmp_path, capsys):
    require_extra("moviepy", "video")
    a_file = tmp_path / "file.mp4"
    a_file.write_text("")
    for path in (a_file, a_file / "below"):
        line = one_error_line(capsys, "evaluate", str(tmp_path / "no-such-run"), "--video", str(path))
        assert repr(str(path)) in line and "expected a folder" in line
