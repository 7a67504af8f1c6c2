"""The one-paragraph report at a run's end (``format_summary``): solved, not solved, and a run with no
target, which says so plainly instead of "not solved ... target None"."""

from __future__ import annotations

from pathlib import Path

from a3c.training.monitor import format_summary

SUMMARY = {
    "env_id": "Pendulum-v1",
    "solved": False,
    "time_to_solve_s": None,
    "steps_to_solve": None,
    "best_mean_return": -92.1,
    "total_steps": 1000,
    "wall_s": 10.0,
    "steps_per_s": 100.0,
    "exit_reason": "max_seconds",
}


def test_a_run_without_a_target_says_so_plainly():
    text = format_summary(SUMMARY | {"target_return": None}, Path("run"))
    first = text.splitlines()[0]
    assert first.startswith("Pendulum-v1: trained (no target to solve) (best eval -92.1, no target: set one")
    assert "None" not in first and "not solved" not in first


def test_a_run_with_a_target_says_whether_it_was_solved():
    unsolved = format_summary(SUMMARY | {"target_return": -200.0}, Path("run"))
    assert unsolved.startswith("Pendulum-v1: not solved (best eval -92.1, target -200.0); ")
    solved = SUMMARY | {
        "target_return": -200.0,
        "solved": True,
        "time_to_solve_s": 5.0,
        "steps_to_solve": 900,
    }
    assert format_summary(solved, Path("run")).startswith(
        "Pendulum-v1: solved in 5.0 s, 900 steps (best eval"
    )


def test_the_last_lines_say_what_to_run_next(tmp_path):
    run_dir = tmp_path / "runs" / "Pendulum v1"
    text = format_summary(SUMMARY | {"target_return": None}, run_dir)
    quoted = f"'{run_dir}'"  # a space in the path: quoted for the shell
    assert text.splitlines()[-2:] == [
        f"next: a3c evaluate {quoted}",
        f"      a3c plot {quoted} -o '{run_dir / 'curves.png'}'",
    ]
    (run_dir / "tensorboard").mkdir(parents=True)
    interrupted = format_summary(SUMMARY | {"target_return": None, "exit_reason": "SIGINT"}, run_dir)
    assert interrupted.splitlines()[-2:] == [
        f"      tensorboard --logdir '{run_dir / 'tensorboard'}'",
        f"      a3c train --resume {quoted}",
    ]


def test_a_failed_run_ends_on_its_run_dir():
    text = format_summary(SUMMARY | {"target_return": None, "exit_reason": "failed: worker-0"}, Path("run"))
    assert text.splitlines()[-1] == "run dir: run"
