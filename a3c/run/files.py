"""The files a run leaves (DESIGN.md contract): run dir, config.json, CSV logs, checkpoints, summary.json.

Everything whole-file is written to a temp file and renamed into place, so nothing is ever half written.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from a3c.core.errors import BadInput

CHECKPOINT_FORMAT = "a3c-checkpoint"
CHECKPOINT_VERSION = 1
EVAL_COLUMNS = (
    "wall_time",
    "global_step",
    "updates",
    "mean_return",
    "std_return",
    "min_return",
    "max_return",
    "mean_length",
    "episodes",
)
EPISODE_COLUMNS = ("wall_time", "global_step", "worker", "return", "length")
METRICS_COLUMNS = (
    "wall_time",
    "global_step",
    "worker",
    "updates",
    "policy_loss",
    "value_loss",
    "entropy",
    "grad_norm",
    "explained_variance",
    "learning_rate",
    "policy_lag_mean",
    "policy_lag_p50",
    "policy_lag_p95",
    "policy_lag_max",
    "steps_per_s",
)


def default_run_dir(env_id: str, seed: int, root: Path = Path("runs")) -> Path:
    """``runs/<env-id>/<YYYYmmdd-HHMMSS>-s<seed>``."""
    return root / env_id / f"{time.strftime('%Y%m%d-%H%M%S')}-s{seed}"


RUN_ENTRIES = {
    "config.json",
    "eval.csv",
    "episodes.csv",
    "metrics.csv",
    "summary.json",
    "checkpoints",
    "tensorboard",
}


def _is_earlier_run(path: Path) -> bool:
    """True only for a directory that a3c itself wrote: its config.json names a3c, and it holds nothing else
    than a run's files (so --force can never delete a project that merely has a config.json)."""
    try:
        config = json.loads((path / "config.json").read_text())
        ours = isinstance(config, dict) and "a3c" in config.get("versions", {}) and "env_id" in config
        extra = [p.name for p in path.iterdir() if p.name not in RUN_ENTRIES and not p.name.startswith(".")]
    except (OSError, ValueError, AttributeError):
        return False
    cwd = Path.cwd().resolve()
    return ours and not extra and not path.is_symlink() and path.resolve() not in (cwd, *cwd.parents)


def check_run_dir(path: Path, force: bool) -> None:
    """Refuse a run dir that exists and is not empty, unless ``force`` and it holds an earlier a3c run."""
    if not path.exists() or (path.is_dir() and not any(path.iterdir())):
        return
    if not force:
        raise BadInput(
            f"--run-dir: {str(path)!r} already exists; pass --force to replace it, or choose another"
        )
    if not _is_earlier_run(path):
        raise BadInput(
            f"--run-dir: {str(path)!r} exists and is not an a3c run directory; --force only replaces runs"
        )


def create_run_dir(path: Path, force: bool) -> Path:
    """Make ``path`` and ``path/checkpoints`` (replacing an earlier run there only when ``force``)."""
    check_run_dir(path, force)
    try:
        if force and path.exists():
            shutil.rmtree(path)
        (path / "checkpoints").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--run-dir: {str(path)!r} cannot be created ({exc.strerror or exc})") from None
    return path


def _atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a run's files are meant to be read by others
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    _atomic_write(path, lambda f: f.write((json.dumps(obj, indent=2, default=str) + "\n").encode()))


def run_metadata() -> dict[str, Any]:
    """Versions, git commit (when available) and the command line, for config.json."""
    import gymnasium
    import numpy

    from a3c import __version__

    try:
        commit = (
            subprocess.run(
                ["git", "rev-parse", "HEAD"],
                cwd=Path(__file__).parent,
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {
        "versions": {
            "python": platform.python_version(),
            "torch": str(torch.__version__),
            "gymnasium": gymnasium.__version__,
            "numpy": numpy.__version__,
            "a3c": __version__,
        },
        "git_commit": commit,
        "command": list(sys.argv),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


class CsvLog:
    """Append rows to a CSV file with a fixed header, flushed per row so readers see them live."""

    def __init__(self, path: Path, columns: Sequence[str]):
        new = not path.exists() or path.stat().st_size == 0
        self._file = path.open("a", newline="")
        self._writer = csv.writer(self._file)
        if new:
            self._writer.writerow(columns)
            self._file.flush()

    def write(self, row: Sequence[Any]) -> None:
        self._writer.writerow(row)
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Save a checkpoint dict (tensors, numbers, strings) atomically, tagged with our format."""
    full = {"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION, **payload}
    _atomic_write(path, lambda f: torch.save(full, f))


def resolve_checkpoint(path: Path) -> Path:
    """A checkpoint file, or a run dir's ``checkpoints/best.pt`` (``last.pt`` when no best was saved)."""
    if path.is_dir():
        for name in ("best.pt", "last.pt"):
            if (path / "checkpoints" / name).is_file():
                return path / "checkpoints" / name
        raise BadInput(f"RUN_DIR: {str(path)!r} has no checkpoints/best.pt or checkpoints/last.pt")
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
