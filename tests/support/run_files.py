"""Reading what a run wrote: JSON files, CSV rows, and the continuity of a CSV across a kill and a resume."""

from __future__ import annotations

import csv
import json
from pathlib import Path


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def csv_rows(path: Path) -> list[dict[str, str]]:
    """A CSV file's rows, as dicts keyed by its header."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def data_rows(path: Path) -> int:
    """Rows after the header of a CSV file (0 when it does not exist yet)."""
    try:
        return max(0, len(path.read_text().splitlines()) - 1)
    except OSError:
        return 0


def assert_continuous(path: Path, before_kill: list[dict[str, str]], step: int, wall: float) -> None:
    """global_step and wall_time never go back; the rows the checkpoint covers (global_step <= its step and
    wall_time <= its wall time) are exactly those logged before the kill (none lost, none twice), and every
    later row is new. Both bounds: an evaluation that pulled weights before the checkpoint may have finished
    after it, and its row is then dropped with the rest of what the killed process did later."""
    table = csv_rows(path)
    steps = [int(r["global_step"]) for r in table]
    walls = [float(r["wall_time"]) for r in table]
    assert steps == sorted(steps), f"{path.name}: global_step goes back"
    assert walls == sorted(walls), f"{path.name}: wall_time goes back"
    covered = [r for r in before_kill if int(r["global_step"]) <= step and float(r["wall_time"]) <= wall]
    assert table[: len(covered)] == covered, f"{path.name}: rows lost or doubled"
    assert all(float(r["wall_time"]) >= wall for r in table[len(covered) :]), f"{path.name}: an old row twice"
