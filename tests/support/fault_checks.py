"""The checks every fault-injection round makes of a run dir (``tests.support.fault_injection``): the CSVs
in order, the run dir loading and resuming with exactly the rows its checkpoint covers kept, and what the
run's last command printed."""

from __future__ import annotations

import csv
from pathlib import Path

from tests.support.commands import run_a3c
from tests.support.run_files import assert_continuous, csv_rows, read_json

CONTINUOUS = ("episodes.csv", "eval.csv")  # ordered by global_step and wall_time (metrics.csv: per worker)
RESUME_STEPS = 2000  # what the check's resume adds to the run


def csv_problems(run_dir: Path) -> list[str]:
    """What is wrong with the run's CSVs: a torn last row (no newline at the end: a write cut short, by a
    full disk), global_step or wall_time going back (episodes, evaluations; a worker's rows in metrics), a
    repeated evaluation or metrics row."""
    problems = []
    for name in ("episodes.csv", "eval.csv", "metrics.csv"):
        path = run_dir / name
        if path.exists() and path.stat().st_size and not path.read_bytes().endswith(b"\n"):
            problems.append(f"{name}: a torn last row")
    for name in ("episodes.csv", "eval.csv"):
        path = run_dir / name
        if not path.exists():
            continue
        keys = [key for row in csv.DictReader(path.open()) if (key := _key(row)) is not None]
        if any(b[0] < a[0] or b[1] < a[1] for a, b in zip(keys, keys[1:], strict=False)):
            problems.append(f"{name}: wall_time or global_step goes back")
        if name == "eval.csv" and len(set(keys)) != len(keys):
            problems.append(f"{name}: a repeated row")
    if (run_dir / "metrics.csv").exists():
        rows = [r for r in list(csv.reader((run_dir / "metrics.csv").open()))[1:] if len(r) > 2]
        if len({tuple(r) for r in rows}) != len(rows):
            problems.append("metrics.csv: a repeated row")
        last: dict[str, int] = {}
        for row in rows:
            if not row[1].isdigit():
                continue  # a torn row, named above
            step = int(row[1])
            if step < last.get(row[2], -1):
                problems.append(f"metrics.csv: worker {row[2]}'s global_step goes back")
                break
            last[row[2]] = step
    return problems


def _key(row: dict[str, str | None]) -> tuple[float, int] | None:
    """(wall_time, global_step) of a CSV row; None for a torn one (named by ``csv_problems``)."""
    try:
        return float(row["wall_time"] or ""), int(row["global_step"] or "")
    except (ValueError, KeyError):
        return None


def snapshot(run_dir: Path) -> dict[str, list[dict[str, str]]]:
    """The rows of the run's continuous CSVs now (those that exist; a torn row left out)."""
    return {
        name: [row for row in csv_rows(run_dir / name) if _key(row) is not None]
        for name in CONTINUOUS
        if (run_dir / name).exists()
    }


def checkpoint_bounds(path: Path) -> tuple[int, float]:
    """(global_step, wall_time) of a checkpoint file; BadInput/OSError when it does not load."""
    from a3c.rundir.resume import load_resume_checkpoint

    if path.name == "last.pt":
        checkpoint = load_resume_checkpoint(path.parent.parent)
    else:
        import torch

        checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    return int(checkpoint["global_step"]), float(checkpoint["wall_time"])


def check_run(
    run_dir: Path,
    token: str,
    before: dict[str, list[dict[str, str]]] | None = None,
    bounds: tuple[int, float] | None = None,
    warning: str | None = None,
    mended_by_resume: bool = False,
) -> list[str]:
    """The run dir loads (a3c evaluate), resumes for RESUME_STEPS more steps, and keeps its CSVs in order:
    exactly the rows the resumed checkpoint covers kept (``assert_continuous``), the rest new.

    ``before``: the rows to hold the CSVs to (default: as they are now); ``bounds``: the (global_step,
    wall_time) of the checkpoint the resume must continue from (default: last.pt's, which must load);
    ``warning``: text the resume must print on stderr (a fallback it makes); ``mended_by_resume``: the run
    dir may need the resume to become whole (a damaged last.pt, an interrupted --force), so a3c evaluate
    runs after it instead of before."""
    mended_by_resume = mended_by_resume or warning is not None
    problems = csv_problems(run_dir)
    if bounds is None:
        if not (run_dir / "checkpoints" / "last.pt").exists():
            return [*problems, "no last.pt"]
        try:
            bounds = checkpoint_bounds(run_dir / "checkpoints" / "last.pt")
        except (ValueError, OSError) as exc:  # BadInput is a ValueError: a damaged last.pt is a finding
            return [*problems, f"last.pt: {exc}"]
    step, wall = bounds
    before = snapshot(run_dir) if before is None else before
    if not mended_by_resume:
        problems += _evaluate(run_dir, token)
    target = max(last_step(run_dir), step) + RESUME_STEPS
    resume = ["train", "--resume", str(run_dir), "--max-steps", str(target), "--max-seconds", "100000"]
    resumed = run_a3c(*resume, "--quiet", token=token)
    if resumed.returncode != 0:
        problems.append(f"resume exit {resumed.returncode}: {resumed.stderr.strip()[-200:]}")
    elif read_json(run_dir / "summary.json")["total_steps"] < target:
        problems.append("resume stopped short of its step budget")
    if warning is not None and warning not in resumed.stderr:
        problems.append(f"the resume printed no {warning!r}: {resumed.stderr.strip()[-200:]!r}")
    if mended_by_resume:
        problems += _evaluate(run_dir, token)
    for name, rows in before.items():
        try:
            assert_continuous(run_dir / name, rows, step, wall)
        except AssertionError as exc:
            problems.append(str(exc).splitlines()[0])
        except FileNotFoundError:
            problems.append(f"{name}: gone")
    return problems + [p for p in csv_problems(run_dir) if p not in problems]


def _evaluate(run_dir: Path, token: str) -> list[str]:
    evaluated = run_a3c("evaluate", str(run_dir), "--episodes", "2", timeout=120, token=token)
    if evaluated.returncode != 0:
        return [f"evaluate exit {evaluated.returncode}: {evaluated.stderr.strip()[-200:]}"]
    return []


def last_step(run_dir: Path) -> int:
    """global_step of episodes.csv's last row (0 without one)."""
    path = run_dir / "episodes.csv"
    rows = list(csv.DictReader(path.open())) if path.exists() else []
    return int(rows[-1]["global_step"]) if rows else 0


def one_error_line(stderr: str) -> str | None:
    """What is wrong with the stderr of a run that stopped on an error: a traceback, or no ``error:`` line."""
    if "Traceback" in stderr:
        return f"a traceback: {stderr.strip()[-300:]!r}"
    if not any(line.startswith("error:") for line in stderr.splitlines()):
        return f"no error: line: {stderr.strip()[-200:]!r}"
    return None
