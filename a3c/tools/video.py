"""Videos of greedy episodes: ``a3c evaluate RUN --video DIR`` and ``a3c train --video`` (RUN_DIR/videos/).

Each episode is played on its own env, made as the evaluator makes it (``a3c_envs.make_env``, not training:
the same preprocessing and frame stack; the checkpoint's observation statistics normalise what the policy
sees) but rendering ``rgb_array`` frames of the raw game (Atari: the 210x160 RGB screen, not the 84x84
network input), with gymnasium's ``RecordVideo`` outermost. moviepy (the ``video`` extra) encodes the MP4.
A video holds length + 1 frames: the reset frame, then one per agent step. RecordVideo keeps an episode's
frames in memory until it ends (HalfCheetah: 1001 frames of 480x480x3, about 0.7 GB).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import gymnasium as gym
from gymnasium.wrappers import RecordVideo

from a3c.core.errors import BadInput
from a3c.core.extras import install_hint
from a3c_envs import EnvSetupError, make_env
from a3c_envs.atari import FRAME_SKIP, is_atari
from a3c_envs.episodes import eval_step_limit
from a3c_envs.vector import SerialVectorEnv

if TYPE_CHECKING:
    import numpy as np

    from a3c.core.config import Config
    from a3c.rundir.checkpoints import SavedPolicy

INSTALL = install_hint("video")
DEFAULT_SEED = 12345  # `a3c evaluate`'s default --seed: `a3c evaluate RUN --video DIR --episodes 1` replays
ATARI_HZ = 60  # the console's frames/s: a video frame per agent step (FRAME_SKIP frames) plays in real time

video_option = click.option(
    "--video",
    type=click.Path(path_type=Path),
    default=None,
    metavar="DIR",
    show_default="none: no videos",
    help=f"Record the episodes as MP4 files in DIR (made when missing; one at a time, episode i seeded "
    f"SEED + i). Needs the video extra: {INSTALL}",
)
video_flag = click.option(
    "--video",
    is_flag=True,
    help="When the run finishes (solved or budget), record one greedy episode of checkpoints/best.pt into "
    f"RUN_DIR/videos/. Needs the video extra: {INSTALL}",
)


def require_video() -> None:
    """Raise BadInput with the install command when moviepy, the encoder of the ``video`` extra, is missing.

    Cheap (a module lookup, no import), so that ``a3c train`` can ask before it starts anything.
    """
    try:
        found = importlib.util.find_spec("moviepy") is not None
    except (ImportError, ValueError):  # a blocked import, or a module without a spec
        found = False
    if not found:
        raise BadInput(f"--video: needs moviepy, which is not installed; install the extra: {INSTALL}")


def video_dir(path: Path) -> Path:
    """``path`` as the folder for videos (made when missing), after ``require_video``; BadInput when it is
    an existing file or cannot be made or written."""
    require_video()
    if path.exists() and not path.is_dir():
        raise BadInput(f"--video: {str(path)!r} is a file; expected a folder (made when missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--video: {str(path)!r} cannot be made ({exc.strerror}); expected a folder") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise BadInput(f"--video: {str(path)!r} is not writable; expected a folder this user can write")
    return path


def play_episodes(
    saved: SavedPolicy, episodes: int, seed: int, folder: Path | None
) -> tuple[np.ndarray, np.ndarray, list[dict[str, Any]]]:
    """``episodes`` greedy episodes of ``saved``: (returns [episodes], lengths [episodes], videos).

    Without ``folder``: ``saved.play`` (all at once, no videos). With it: one recorded episode at a time,
    episode i seeded ``seed + i`` (the evaluator's serial envs seed env i so too), each written to
    ``folder/<checkpoint stem>-seed<seed + i>.mp4``; ``videos`` holds one {path, return, length} per file.
    """
    import numpy as np

    if folder is None:
        returns, lengths = saved.play(episodes, seed)
        return returns, lengths, []
    videos = [record_episode(saved, folder, seed + i) for i in range(episodes)]
    returns = np.array([v["return"] for v in videos], np.float64)
    return returns, np.array([v["length"] for v in videos], np.int64), videos


def record_episode(saved: SavedPolicy, folder: Path, seed: int) -> dict[str, Any]:
    """Play one greedy episode of ``saved`` seeded ``seed`` and write its video into ``folder``, whole or
    not at all (a hidden temp name, renamed into place); return {path, return, length}.

    Raises:
        BadInput: the env cannot render ``rgb_array`` frames, or a renderer's package is missing.
    """
    from a3c.algo.evaluation import play_greedy

    final = folder / f"{saved.path.stem}-seed{seed}.mp4"
    prefix = f".{final.stem}.partial"
    temp = folder / f"{prefix}-episode-0.mp4"  # RecordVideo's name for its first episode
    config, stats = saved.config, saved.obs_stats
    recorder = _recording_env(config, folder, prefix)
    envs = SerialVectorEnv([lambda: recorder])
    try:
        normalize = None if stats is None else stats.normalize
        limit = eval_step_limit(config.env_id, config.eval_max_steps, config.env_kwargs)
        returns, lengths = play_greedy(
            saved.model, envs, seed, squash=config.squash, normalize=normalize, max_steps=limit
        )
    except BaseException as exc:
        # No half video on an error or Ctrl-C: drop the frames instead of encoding them at close.
        recorder.recording, recorder.recorded_frames = False, []
        envs.close()
        temp.unlink(missing_ok=True)
        if isinstance(exc, gym.error.DependencyNotInstalled):
            raise BadInput(f"--video: {config.env_id} cannot render ({exc}); {INSTALL}") from None
        raise
    envs.close()  # writes the video: RecordVideo stops recording at close (greedy play resets no ended env)
    os.replace(temp, final)
    return {"path": str(final), "return": float(returns[0]), "length": int(lengths[0])}


class WholeRecordVideo(RecordVideo):
    """gymnasium's ``RecordVideo`` that writes each recorded frame once, in order. Its own encoder (moviepy
    2.1.2's ``ImageSequenceClip``, under NumPy 2) drops the last frame where n times 1/fps sums below n/fps
    (201 frames at 30 fps came out as 200), and its float32 frame start times show some frames twice and
    skip their neighbours (frame 71 of 201 at 30 fps twice, 74 never): measured by decoding numbered frames.
    """

    def stop_recording(self) -> None:
        """Encode the recorded frames ([H, W, 3] uint8 each) into ``<video_folder>/<video name>.mp4``, frame i
        at time i / fps (none when there are none), then forget them."""
        from moviepy import VideoClip

        frames, fps = self.recorded_frames, self.frames_per_sec
        if frames:
            last = len(frames) - 1
            clip = VideoClip(lambda t: frames[min(round(t * fps), last)], duration=(last + 1.5) / fps)
            clip.write_videofile(os.path.join(self.video_folder, f"{self._video_name}.mp4"), fps, logger=None)
        self.recorded_frames, self.recording, self._video_name = [], False, None


def _recording_env(config: Config, folder: Path, prefix: str) -> RecordVideo:
    """The evaluator's env for ``config.env_id`` (with its ``env_kwargs``) rendering ``rgb_array`` frames,
    recording its first episode."""
    _headless_rendering()
    env_id = config.env_id
    try:
        env = make_env(
            env_id,
            frame_stack=config.frame_stack,
            wrappers=config.wrappers,
            render_mode="rgb_array",
            **config.env_kwargs,
        )
        fps = ATARI_HZ // FRAME_SKIP if is_atari(env_id) else None  # None: the env's own render_fps
        with warnings.catch_warnings():  # the folder exists (we made it); files are replaced whole
            warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
            trigger = lambda episode: episode == 0  # noqa: E731 - its first episode; the autoreset's is not
            return WholeRecordVideo(env, str(folder), trigger, name_prefix=prefix, fps=fps)
    except (EnvSetupError, ValueError, gym.error.Error) as exc:
        raise BadInput(f"--video: {env_id} cannot render rgb_array frames ({str(exc)[:200]})") from None


def _headless_rendering() -> None:
    """Off-screen renderers where there is no display, unless the user chose: MuJoCo's EGL (its default
    tries GLFW first, which fails without a display and leaves PyOpenGL unusable for the EGL fallback:
    seen with mujoco 4.0), and SDL's dummy driver for pygame (classic control), which otherwise prints an
    ``error: XDG_RUNTIME_DIR ...`` line. rgb_array frames need neither a window nor a display."""
    if not os.environ.get("DISPLAY"):
        os.environ.setdefault("MUJOCO_GL", "egl")
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")


def record_best(run_dir: Path, exit_code: int) -> int:
    """``a3c train --video``'s end: after a run that finished (``exit_code`` 0), record one greedy episode
    of its best.pt (last.pt when no evaluation saved one) into RUN_DIR/videos/; return the exit code (1
    when the video failed, the run's files being complete). After Ctrl-C or a failure, record nothing."""
    if exit_code != 0:
        print(f"video: not recorded (the run ended with exit code {exit_code})", file=sys.stderr)
        return exit_code
    from a3c.rundir.checkpoints import load_policy

    try:
        saved = load_policy(run_dir)
        video = record_episode(saved, video_dir(run_dir / "videos"), DEFAULT_SEED)
    except Exception as exc:  # the run itself is saved: report the video's failure, exit 1
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"error: video not recorded: {first}", file=sys.stderr)
        return 1
    print(f"video: {video['path']} (return {video['return']:.1f}, length {video['length']})", flush=True)
    return 0
