"""``--force`` that cannot lose a run: the earlier run is moved aside, not deleted, until the new one is known
to have started.

Under the run dir's lock, every entry of the earlier run (all but the lock file) is moved into the hidden
folder ``.a3c-replaced/`` inside the run dir (renames on one file system: nothing is copied). The new run
writes beside it. Once the new run saves a checkpoint holding training (global_step > 0), the old run is
discarded (``discard``). If the new run ends before that — its backend refused to start, an ``on_start``
failed, a signal, a full disk — its files are deleted and the old run put back (``put_back``). A process
killed in between (SIGKILL, a power cut) leaves the folders as they were: the next claim, ``--resume`` or
``--force`` of the run dir puts the old run back first (``settle``), with one warning line, so a moved-aside
run is never silently lost; what the killed run had written (no checkpoint of its own) goes.

Every step is a rename or a delete that is safe to redo, so a kill during any of them is settled the same
way: ``.a3c-replacing/`` (being filled: every entry outside it is still the old run's) → moved back;
``.a3c-replaced/`` (whole) → the new run's entries to ``.a3c-discarded/``, then a marker, then the old ones
back; ``.a3c-discarded/`` → deleted.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from a3c.rundir.durable import fsync_dir
from a3c.rundir.lock import LOCK_NAME

FILLING = ".a3c-replacing"  # being filled with the old run's entries
ASIDE = ".a3c-replaced"  # the whole old run, kept until the new one has a checkpoint
TRASH = ".a3c-discarded"  # being deleted
RESTORING = ".a3c-restoring"  # in ASIDE: the new run's entries are gone, the old ones are going back
SPECIAL = {LOCK_NAME, FILLING, ASIDE, TRASH}


def _run_entries(run_dir: Path) -> list[Path]:
    return [p for p in run_dir.iterdir() if p.name not in SPECIAL]


def _remove(entry: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry)
    else:
        entry.unlink(missing_ok=True)


def _move_into(entries: list[Path], folder: Path) -> None:
    for entry in entries:
        target = folder / entry.name
        if target.exists() or target.is_symlink():
            _remove(target)  # a leftover of an earlier try: the entry being moved is the newer copy
        entry.rename(target)


def move_aside(run_dir: Path) -> bool:
    """Move the earlier run in ``run_dir`` (held locked by the caller, settled) into ``ASIDE``; False
    when there was nothing to move."""
    entries = _run_entries(run_dir)
    if not entries:
        return False
    filling = run_dir / FILLING
    filling.mkdir(exist_ok=True)
    _move_into(entries, filling)
    fsync_dir(filling)
    filling.rename(run_dir / ASIDE)
    fsync_dir(run_dir)
    return True


def has_aside(run_dir: Path) -> bool:
    """Whether ``run_dir`` keeps an earlier run aside."""
    return (run_dir / ASIDE).is_dir()


def discard(run_dir: Path) -> None:
    """The new run has a checkpoint: delete the old run kept aside (nothing when there is none)."""
    aside = run_dir / ASIDE
    if not aside.is_dir():
        return
    trash = run_dir / TRASH
    if trash.exists():
        shutil.rmtree(trash, ignore_errors=True)
    aside.rename(trash)  # one rename decides: from here the old run is gone, whatever kills us
    fsync_dir(run_dir)
    shutil.rmtree(trash, ignore_errors=True)


def put_back(run_dir: Path) -> bool:
    """The old run kept aside (or half moved aside) back in place, the new run's entries deleted; True when
    there was one. The caller holds the lock."""
    filling, aside, trash = run_dir / FILLING, run_dir / ASIDE, run_dir / TRASH
    restored = False
    if filling.is_dir():  # killed while moving aside: every entry outside it is still the old run's
        _move_into(list(filling.iterdir()), run_dir)
        filling.rmdir()
        restored = True
    elif aside.is_dir():
        if not (aside / RESTORING).exists():
            trash.mkdir(exist_ok=True)
            _move_into(_run_entries(run_dir), trash)
            fsync_dir(trash)
            (aside / RESTORING).touch()  # from here every entry outside ASIDE is the old run's
            fsync_dir(aside)
        _move_into([p for p in aside.iterdir() if p.name != RESTORING], run_dir)
        fsync_dir(run_dir)
        trash.mkdir(exist_ok=True)
        aside.rename(trash / ASIDE)  # holds only the marker now
        restored = True
    if trash.exists():
        shutil.rmtree(trash, ignore_errors=True)
    fsync_dir(run_dir)
    return restored


def settle(run_dir: Path, why: str) -> None:
    """Put back an old run a ``--force`` left aside (the caller holds the lock), saying so in one line."""
    if put_back(run_dir):
        print(f"warning: {str(run_dir)!r}: the earlier run was put back ({why})", file=sys.stderr)
