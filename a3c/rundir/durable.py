"""Writes that survive a power cut: a file renamed into place is durable only once its directory is fsynced
too, and a CSV row a checkpoint counts is durable only once its file is fsynced before that checkpoint."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """Make the renames, creations and deletions in the directory ``path`` durable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):  # some file systems cannot fsync a directory: the rename stands
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_files(paths: Iterable[Path]) -> None:
    """fsync each file that exists (any process's writes to it: fsync is per file, not per descriptor)."""
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
