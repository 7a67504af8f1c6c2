"""The run directory (docs/runs.md): its default path, its creation, config.json and summary.json.
(The CSV logs are ``a3c.rundir.csvlog``, the checkpoints ``a3c.rundir.checkpoints``.)

Everything whole-file is written to a temp file and renamed into place, so nothing is ever half written.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from a3c.core.errors import BadInput
from a3c.core.secrets import mask_secrets
from a3c.core.user_code import CODE_FILE
from a3c.rundir.durable import fsync_dir
from a3c.rundir.lock import DEFAULT_LEASE_S, LOCK_NAME, lock_run_dir, refuse_if_held, unlock
from a3c.rundir.replace import ASIDE, FILLING, SPECIAL, TRASH, move_aside, settle


def default_run_dir(env_id: str, seed: int, root: Path = Path("runs")) -> Path:
    """``runs/<env-id>/<YYYYmmdd-HHMMSS>-s<seed>``."""
    return root / env_id / f"{time.strftime('%Y%m%d-%H%M%S')}-s{seed}"


RUN_ENTRIES = {
    "config.json",
    "eval.csv",
    "episodes.csv",
    "metrics.csv",
    "summary.json",
    "sync.csv",
    "checkpoints",
    "tensorboard",
    "videos",
    CODE_FILE,  # the user's objects sent by value (a3c.core.user_code)
    "tracker.json",  # the experiment tracker's run id (a3c.training.trackers)
}


NAME_MAX, PATH_MAX = 255, 4096  # bytes, Linux's; the run writes paths up to PATH_RESERVE bytes below its dir
# The longest: /.a3c-replaced/tensorboard/events.out.tfevents.<time>.<host, up to 64>.<pid>.<n>
PATH_RESERVE = 160


def check_path_length(path: Path, option: str) -> None:
    """BadInput (one line) for a run dir whose path the file system cannot hold: a component over 255
    bytes, or a whole path too long for the files the run writes below it."""
    full = path.absolute()
    for part in full.parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise BadInput(
                f"{option}: {str(path)[:80]!r}… has a folder name of {len(os.fsencode(part))} bytes "
                f"({part[:40]!r}…); a file system allows at most {NAME_MAX}"
            )
    if len(os.fsencode(str(full))) + PATH_RESERVE >= PATH_MAX:
        raise BadInput(
            f"{option}: {str(path)[:80]!r}… is {len(os.fsencode(str(full)))} bytes long; the run's files "
            f"below it need a path under {PATH_MAX - PATH_RESERVE} bytes"
        )


def _ours(name: str) -> bool:
    """A name a3c writes in a run dir: a run file, the lock and --force's folders, or a temp file of an
    atomic write or a CSV trim that a kill left (``.config.json.x1y2.tmp``, ``.eval.csv.trim``)."""
    if name in RUN_ENTRIES or name in SPECIAL:
        return True
    return name.startswith(".") and any(
        name.startswith(f".{entry}.") and name.endswith((".tmp", ".trim")) for entry in RUN_ENTRIES
    )


def foreign_entries(path: Path) -> list[str]:
    """The entries of ``path`` that a3c did not write (sorted): ``--force`` never touches a folder that
    has one (a project, a ``.git/``, a notebook's ``.ipynb_checkpoints/``)."""
    return sorted(p.name for p in path.iterdir() if not _ours(p.name))


def _is_earlier_run(path: Path) -> bool:
    """True only for a directory that a3c itself wrote: its config.json names a3c, and it holds nothing else
    than a run's files (so --force can never delete a project that merely has a config.json)."""
    try:
        config = json.loads((path / "config.json").read_text())
        ours = isinstance(config, dict) and "a3c" in config.get("versions", {}) and "env_id" in config
        extra = foreign_entries(path)
    except (OSError, ValueError, AttributeError):
        return False
    cwd = Path.cwd().resolve()
    return ours and not extra and not path.is_symlink() and path.resolve() not in (cwd, *cwd.parents)


def _refuse_foreign_dot_entries(path: Path) -> None:
    """BadInput naming the hidden entries a3c did not write (they would be lost to a --force unseen)."""
    hidden = [name for name in foreign_entries(path) if name.startswith(".")]
    if hidden:
        raise BadInput(
            f"--force: {str(path)!r} holds {', '.join(hidden)}, which a3c did not write; --force only "
            "replaces a run's own files: move them away, or choose another run dir"
        )


PUT_BACK_WHY = "the --force run that was replacing it ended before its first checkpoint"


def recover_replaced(path: Path, option: str) -> None:
    """Put back an earlier run that a killed ``--force`` left moved aside in ``path``
    (``a3c.rundir.replace``), under the run dir's lock; a run dir in use is BadInput naming ``option``."""
    if not any((path / name).exists() for name in (FILLING, ASIDE, TRASH)):
        return
    fd = lock_run_dir(path, option)
    try:
        settle(path, PUT_BACK_WHY)
    except OSError as exc:
        raise BadInput(
            f"{option}: {str(path)!r} holds an earlier run moved aside by --force that cannot be put back "
            f"({exc.strerror or exc}); it is in {str(path / ASIDE)!r}"
        ) from None
    finally:
        unlock(fd)


def _written_entries(path: Path) -> list[Path]:
    """The entries of ``path`` but the lock file and an empty checkpoints/ (what a run that could not
    start, or was killed before it wrote anything, leaves): a run dir holding only those counts as empty."""
    return [
        p
        for p in path.iterdir()
        if p.name != LOCK_NAME and not (p.name == "checkpoints" and p.is_dir() and not any(p.iterdir()))
    ]


def check_run_dir(path: Path, force: bool) -> None:
    """Refuse a run dir that exists and is not empty, unless ``force`` and it holds an earlier a3c run
    and nothing else. An earlier run a killed ``--force`` moved aside is put back first."""
    check_path_length(path, "--run-dir")
    if path.is_dir():
        recover_replaced(path, "--force" if force else "--run-dir")
    if not path.exists() or (path.is_dir() and not _written_entries(path)):
        return  # nothing there, or only what a run that ended before writing anything left
    if not force:
        raise BadInput(
            f"--run-dir: {str(path)!r} already exists; pass --force to replace it, or choose another"
        )
    if path.is_dir() and not path.is_symlink():
        _refuse_foreign_dot_entries(path)
    if not _is_earlier_run(path):
        raise BadInput(
            f"--run-dir: {str(path)!r} exists and is not an a3c run directory; --force only replaces runs"
        )
    refuse_if_held(path, "--force")  # never touch a run that is still writing


def check_resume_dir(path: Path) -> Path:
    """The ``checkpoints/last.pt`` ``--resume`` would read from run dir ``path``; BadInput when there is
    none. An earlier run a killed ``--force`` moved aside is put back first."""
    check_path_length(path, "--resume")
    if path.is_dir():
        recover_replaced(path, "--resume")
    last = path / "checkpoints" / "last.pt"
    if not last.is_file():
        raise BadInput(f"--resume: {str(path)!r} has no checkpoints/last.pt to resume from")
    return last


def create_run_dir(path: Path, force: bool, lease_s: float = DEFAULT_LEASE_S) -> tuple[Path, int]:
    """Claim ``path`` for a new run and return it with its lock (``a3c.rundir.lock``; ``unlock`` it).

    The claim is atomic: the folder is made (or found empty), locked, and only then checked again, so of
    two commands that pick one run dir at once the second is refused, never sharing it. With ``force`` an
    earlier run there is moved aside under our lock (``a3c.rundir.replace``: deleted once the new run has a
    checkpoint, put back if it ends before); the lock file stays, its inode being the lock. Anything else is
    BadInput; a refused claim changes nothing."""
    check_run_dir(path, force)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--run-dir: {str(path)!r} cannot be created ({exc.strerror or exc})") from None
    fd = lock_run_dir(path, "--force" if force else "--run-dir", lease_s)
    try:
        settle(path, PUT_BACK_WHY)  # a --force killed between our check and our lock
        found = _written_entries(path)
        if found and not force:  # another command claimed it between our check and our lock
            raise BadInput(f"--run-dir: {str(path)!r} was just taken by another run; choose another")
        if found:
            _refuse_foreign_dot_entries(path)
        if found and not _is_earlier_run(path):
            raise BadInput(
                f"--run-dir: {str(path)!r} exists and is not an a3c run directory; --force only replaces runs"
            )
        if found:
            move_aside(path)
        (path / "checkpoints").mkdir(exist_ok=True)
        fsync_dir(path)
    except OSError as exc:
        unlock(fd)
        raise BadInput(f"--run-dir: {str(path)!r} cannot be created ({exc.strerror or exc})") from None
    except BaseException:
        unlock(fd)
        raise
    return path, fd


def current_umask() -> int:
    """This process's umask, read without changing it (/proc/self/status) where Linux says it."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: read by setting it, and put it back at once
    os.umask(mask)
    return mask


def atomic_write(path: Path, write) -> None:
    """Replace ``path`` atomically and durably: ``write(f)`` fills a temporary file beside it (fsynced),
    which is then renamed over ``path`` and the directory fsynced; readers see the old file or the whole new
    one, and so does the run dir after a power cut. Its mode is what
    ``open()`` would give under the user's umask."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600: the user's umask decides, as for open()
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)  # the rename itself survives a power cut only once its directory is fsynced


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    atomic_write(path, lambda f: f.write((json.dumps(obj, indent=2, default=str) + "\n").encode()))


# Recorded beside python, torch, gymnasium, numpy and a3c: the extras that change what a run or a tool does
# (envs, backend, peer, tuner, export) and the command's own dependencies. Distribution names.
OPTIONAL_PACKAGES = (
    "ale-py", "opencv-python-headless", "mujoco", "box2d", "ray", "stable-baselines3", "optuna", "onnx",
    "onnxruntime", "click", "tqdm",
)  # fmt: skip


def package_versions() -> dict[str, str | None]:
    """The versions of python, torch, gymnasium, numpy, a3c and every OPTIONAL_PACKAGES distribution, by
    name; None for one that is not installed, so every record has the same keys. The optional ones are read
    from the installed metadata (importlib.metadata), never imported: ray or onnx take seconds to import."""
    import gymnasium
    import numpy
    import torch  # here, not at the top: a command refused before its run starts imports no torch

    from a3c.core.version import __version__

    versions: dict[str, str | None] = {
        "python": platform.python_version(),
        "torch": str(torch.__version__),
        "gymnasium": gymnasium.__version__,
        "numpy": numpy.__version__,
        "a3c": __version__,
    }
    for name in OPTIONAL_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


SOURCE_DIR = Path(__file__).parent  # where git looks for the tree that holds the package


def _git(*args: str) -> str | None:
    """The output of ``git ARGS`` in the package's source tree; None when git fails (not a git tree, no git,
    over 5 s). ``--no-optional-locks``: never takes the index lock that a user's git command may want."""
    try:
        proc = subprocess.run(
            ["git", "--no-optional-locks", *args],
            cwd=SOURCE_DIR,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def git_state() -> dict[str, Any]:
    """``git_commit``: HEAD of the git tree that holds the package's source; ``git_dirty``: whether that
    tree has changes not committed (``git status --porcelain``: untracked files count, ignored ones do not).
    Both None outside a git tree (an installed wheel)."""
    commit = (_git("rev-parse", "HEAD") or "").strip() or None
    status = _git("status", "--porcelain") if commit else None
    return {"git_commit": commit, "git_dirty": None if status is None else bool(status.strip())}


def run_metadata() -> dict[str, Any]:
    """Versions (``package_versions``), git commit and dirty flag (``git_state``) and the command line, for
    config.json."""
    return {
        "versions": package_versions(),
        **git_state(),
        "command": [mask_secrets(arg) for arg in sys.argv],  # e.g. a3c tune's --storage URL
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
