"""Checkpoint files: save atomically with our format tag, load with clear errors, and a saved policy
ready to play."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from a3c.algo.evaluation import play_policy
from a3c.algo.learner import build_model
from a3c.algo.normalize import RunningMeanStd
from a3c.core.config import Config
from a3c.core.errors import BadInput
from a3c.core.spaces import Spaces
from a3c.rundir.csvlog import LOG_FILES
from a3c.rundir.durable import fsync_dir, fsync_files
from a3c.rundir.files import atomic_write
from a3c.rundir.replace import ASIDE, discard
from a3c_envs import inspect_env
from a3c_envs.modules import check_code_modules
from a3c_envs.user_envs import code_references, refuse_unknown_script_code


@dataclass(frozen=True)
class SavedPolicy:
    """A checkpoint's policy, ready to play: its path, config, model (eval mode), observation stats and the
    spaces it was built for."""

    path: Path
    config: Config
    model: nn.Module
    obs_stats: RunningMeanStd | None
    spaces: Spaces | None = None

    def play(self, episodes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """``episodes`` greedy episodes on fresh envs seeded from ``seed``: (returns, lengths)."""
        return play_policy(self.model, self.config, episodes, seed, self.obs_stats)


def load_policy(target: Path, trust_env_module: bool = False) -> SavedPolicy:
    """The policy of a checkpoint (a run dir means its best.pt), rebuilt with the config saved in it. A
    checkpoint is data from anywhere: its config is validated like a command line's, and its env made and its
    spaces checked before any model is built; an env id whose module would come from the current directory
    is refused unless ``trust_env_module`` (``a3c_envs.modules``). Bad files are BadInput."""
    path = resolve_checkpoint(target)
    data = load_checkpoint(path)
    config, spaces = saved_config(data, path)
    check_code_modules(
        config.env_id, config.wrappers, config.model, trust_env_module, f"checkpoint {str(path)!r}"
    )
    refuse_unknown_script_code(code_references(config), f"checkpoint {str(path)!r}")
    info = inspect_env(
        config.env_id, frame_stack=config.frame_stack, env_kwargs=config.env_kwargs, wrappers=config.wrappers
    )
    if info.spaces != spaces:
        raise BadInput(
            f"checkpoint: {str(path)!r} was trained for spaces {spaces}; {env_named(config)} has "
            f"{info.spaces}"
        )
    try:
        model = build_model(config, spaces)
        model.load_state_dict(data["model_state"])
        obs_stats = None
        if config.obs_norm:
            obs_stats = RunningMeanStd(spaces.obs_shape)
            obs_stats.load_state_dict(data["obs_norm"])
    except BadInput:  # the user's network cannot be built here (its builder unknown, or it no longer fits)
        raise
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise BadInput(
            f"checkpoint: {str(path)!r} does not match this a3c's model ({str(exc)[:160]})"
        ) from None
    return SavedPolicy(path, config, model.eval(), obs_stats, spaces)


def env_named(config: Config) -> str:
    """The run's env as errors name it: its id, and its wrappers when it has some."""
    wrapped = f" wrapped by {', '.join(config.wrappers)}" if config.wrappers else ""
    return f"{config.env_id}{wrapped}"


# What playing a saved policy needs of its config. The rest (processes, budgets, timeouts, the evaluation
# schedule) belongs to training: a resume validates it once the options given are merged in, so a run saved
# before a bound existed (hang_timeout 2) still evaluates, and resumes with --hang-timeout 30.
PLAY_FIELDS = (
    "env_id",
    "env_kwargs",
    "wrappers",
    "hidden_sizes",
    "shared_body",
    "activation",
    "model",
    "lstm_size",
    "frame_stack",
    "gaussian_std",
    "squash",
    "obs_norm",
    "reward_scale",
    "eval_max_steps",
)


def saved_config(data: dict[str, Any], path: Path) -> tuple[Config, Spaces]:
    """A checkpoint's config, its ``PLAY_FIELDS`` validated like a command line's, and the spaces its model
    was built for; a config this a3c refuses or a missing part is BadInput naming the file."""
    try:
        config = Config.from_dict(data["config"])
        played = {name: getattr(config, name) for name in PLAY_FIELDS}
        dataclasses.replace(Config(env_id=config.env_id), **played).validate()
    except BadInput as exc:
        raise BadInput(f"checkpoint: {str(path)!r} has a config this a3c refuses ({exc})") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BadInput(f"checkpoint: {str(path)!r} has no readable config ({str(exc)[:160]})") from None
    try:
        return config, Spaces.of_checkpoint(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise BadInput(
            f"checkpoint: {str(path)!r} does not say which spaces its model was built for"
        ) from exc


class SavedBest(NamedTuple):
    """What an existing best.pt says of the evaluation that made it."""

    selection_mean: float  # the mean it was chosen by (-inf: there is no best.pt, or it cannot be read)
    mean_return: float | None  # its eval.csv mean_return
    episodes: int  # the games behind mean_return
    solved: bool | None  # its confirmation held; None: a best.pt from before this was recorded
    target: float | None  # the run's target when it was saved


def saved_best(path: Path) -> SavedBest:
    """What an existing best.pt holds: a resumed run or a restarted evaluator may have a best.pt newer than
    the best it was told about. A best.pt from before ``selection_mean`` existed was chosen by its
    ``mean_return``; one from before ``episodes`` existed counts its selection episodes (none confirmed)."""
    if not path.is_file():
        return SavedBest(-float("inf"), None, 0, None, None)
    try:
        data = load_checkpoint(path)
        mean = float(data["mean_return"])
        episodes = int(data.get("episodes", data.get("selection_episodes", 0)))
        solved = data.get("solved")
        selection = float(data.get("selection_mean", mean))
        target = data.get("config", {}).get("target_return")
        return SavedBest(
            selection,
            mean,
            episodes,
            None if solved is None else bool(solved),
            None if target is None else float(target),
        )
    except (BadInput, KeyError, TypeError, ValueError, AttributeError):
        return SavedBest(-float("inf"), None, 0, None, None)


CHECKPOINT_FORMAT = "a3c-checkpoint"


CHECKPOINT_VERSION = 1
# How a Gaussian policy's stored log σ is read: raw, bounded by ``distributions.bound_log_std``. A checkpoint
# without this key stored log σ itself, clamped to [-20, 2] (``rundir.resume`` converts it).
LOG_STD_PARAM = "tanh-bounded[-5,2]"


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Save a checkpoint dict (tensors, numbers, strings) atomically, tagged with our format; every tensor
    as a CPU tensor, so that a GPU run's checkpoint loads on a machine without one."""
    full = {"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION, **on_host(payload)}
    atomic_write(path, lambda f: torch.save(full, f))


def on_host(value: Any) -> Any:
    """``value`` with every tensor in it (through dicts, lists and tuples) on the CPU; the rest as it is."""
    if isinstance(value, torch.Tensor):
        return value if value.device.type == "cpu" else value.detach().cpu()
    if isinstance(value, dict):
        return {k: on_host(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(on_host(v) for v in value)
    return value


def resolve_checkpoint(path: Path) -> Path:
    """A checkpoint file, or a run dir's ``checkpoints/best.pt`` (``last.pt`` when no best was saved)."""
    if path.is_dir():
        for name in ("best.pt", "last.pt"):
            if (path / "checkpoints" / name).is_file():
                return path / "checkpoints" / name
        aside = (
            " (an interrupted --force left the earlier run in .a3c-replaced/: any a3c train on this run dir "
            "puts it back)"
        )
        raise BadInput(
            f"RUN_DIR: {str(path)!r} has no checkpoints/best.pt or checkpoints/last.pt"
            + (aside if (path / ASIDE).is_dir() else "")
        )
    if not path.is_file():
        raise BadInput(f"RUN_DIR|CHECKPOINT: {str(path)!r} does not exist; expected a run dir or a .pt file")
    return path


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load one of our checkpoints; a missing, corrupt or foreign file is BadInput."""
    path = resolve_checkpoint(path)
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a broken file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadInput(f"checkpoint: {str(path)!r} cannot be read ({first[:160]})") from None
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise BadInput(
            f"checkpoint: {str(path)!r} is not an a3c checkpoint (no format {CHECKPOINT_FORMAT!r})"
        )
    if data.get("format_version") != CHECKPOINT_VERSION:
        raise BadInput(
            f"checkpoint: {str(path)!r} has format_version {data.get('format_version')!r}; "
            f"this a3c reads {CHECKPOINT_VERSION}"
        )
    return data


def checkpoint_payload(config: Config, spaces: Spaces, **fields: Any) -> dict[str, Any]:
    """What every checkpoint (last.pt, step-*.pt, best.pt) holds — the config and the spaces its model was
    built for — plus ``fields`` (weights, counters, statistics …). obs_dim and n_actions too: an older a3c
    reads them (flat Discrete envs only)."""
    return {
        "config": config.to_dict(),
        "spaces": spaces.to_dict(),
        "obs_dim": spaces.obs_dim,
        "n_actions": spaces.n_actions,
        "log_std_param": LOG_STD_PARAM,
        **fields,
    }


def save_last(folder: Path, payload: dict[str, Any], keep: int) -> None:
    """Write ``folder/last.pt`` atomically and keep the ``keep`` previous ones beside it as step-*.pt.

    The run's CSVs are fsynced first: the rows this checkpoint counts are on disk before it is. A checkpoint
    holding training (global_step > 0) is the new run's first commit: an earlier run that ``--force`` moved
    aside is deleted then (``a3c.rundir.replace``). The history is pruned in the order it was written, not
    by step number: after a resume from an older checkpoint the newest saves have the lower steps."""
    fsync_files(folder.parent / name for name in LOG_FILES)
    previous = history_newest_first(folder)
    save_checkpoint(folder / "last.pt", payload)
    # Its mtime orders the history: strictly after the newest so far, even within one clock tick (the
    # kernel's file times are coarse) or after the clock went back.
    newest = _written(previous[0])[0] if previous else 0
    stamp = max(time.time_ns(), newest + 1)
    os.utime(folder / "last.pt", ns=(stamp, stamp))
    if keep > 0:
        # A hard link: the history costs no copy, and last.pt's next os.replace leaves this inode alone.
        history = folder / f"step-{payload['global_step']:012d}.pt"
        try:
            history.unlink(missing_ok=True)
            os.link(folder / "last.pt", history)
        except OSError as exc:  # a file system without hard links: last.pt itself is fine
            print(f"warning: no checkpoint history ({exc})", file=sys.stderr)
    # The newest step-*.pt is last.pt itself: ``keep`` earlier ones stay beside it.
    for old in history_newest_first(folder)[keep + 1 :]:
        old.unlink(missing_ok=True)
    fsync_dir(folder)
    if int(payload["global_step"]) > 0:
        discard(folder.parent)


def history_newest_first(folder: Path) -> list[Path]:
    """The step-*.pt files of ``folder``, the last written first (mtime, then step number)."""

    return sorted(folder.glob("step-*.pt"), key=_written, reverse=True)


def _written(path: Path) -> tuple[int, str]:
    """When ``path`` was written (its mtime in ns, set by ``save_last``), then its name."""
    try:
        return path.stat().st_mtime_ns, path.name
    except OSError:
        return 0, path.name
