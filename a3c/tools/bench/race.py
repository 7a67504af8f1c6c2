"""``a3c bench --env ID`` / ``--suite``: ours against Stable-Baselines3 A2C on any env, the same wall-clock
budget per run, seeds side by side (ours, then the peer, per seed: machine drift hits both alike).

Ours is ``python -m a3c train --env ID --seed S --max-seconds T`` (its preset, or none with ``no_preset``);
the peer is ``python -m a3c.tools.bench.sb3_race`` with the zoo's or SB3's default settings, or ours again
with ``--no-preset`` (peer "no-preset": does a preset beat the defaults derived from the env?). Both are timed
from the moment this harness launched them. Per env the table gives the seeds that reached the target, the
median time and steps to it (over the seeds that did), the median final greedy return (the last evaluation of
each run) and the median env steps/s.
"""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from a3c.tools.bench.harness import check_exit, run_python

# The race's suite: every env with presets disabled for ours, SB3's default settings for the peer; the
# last is registered by its own module, as a user's env would be.
SUITE = (
    "CartPole-v1", "Acrobot-v1", "Pendulum-v1", "LunarLander-v3", "HalfCheetah-v5", "Hopper-v5",
    "a3c_envs.catch:Catch-v0",
)  # fmt: skip


def _last_eval(run_dir: Path) -> float | None:
    with (run_dir / "eval.csv").open() as f:
        rows = list(csv.DictReader(f))
    return float(rows[-1]["mean_return"]) if rows else None


def ours_race(
    env_id: str,
    seed: int,
    seconds: float,
    work: Path,
    no_preset: bool,
    side: str = "ours",
    judged_as: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One ``a3c train`` run of ``env_id`` for ``seconds``; its result in the race's terms. ``side`` names
    its run dir under ``work``; ``judged_as``: another run's result whose target, evaluation episodes and
    confirmation this run takes (``--set``), so that both are judged alike."""
    run_dir = work / f"{side}-{env_id.replace('/', '-')}-{seed}"
    judged = []
    if judged_as is not None:
        target = "none" if judged_as["target"] is None else repr(judged_as["target"])
        for key, value in (("target_return", target), ("eval_episodes", judged_as["eval_episodes"]),
                           ("confirm_episodes", judged_as["confirm_episodes"]),
                           ("confirm_confidence", judged_as["confirm_confidence"])):  # fmt: skip
            judged += ["--set", f"{key}={value}"]
    launch = time.time()
    proc = run_python(
        "-m", "a3c", "train", "--env", env_id, "--seed", str(seed), "--max-seconds", str(seconds),
        "--run-dir", str(run_dir), "--quiet", *(["--no-preset"] if no_preset else []), *judged,
        timeout=seconds + 300,
    )  # fmt: skip
    check_exit(proc, f"a3c train {env_id} (seed {seed})")
    summary = json.loads((run_dir / "summary.json").read_text())
    config = json.loads((run_dir / "config.json").read_text())
    solved = bool(summary["solved"])
    return {
        "solved": solved,
        "time_to_solve_s": summary["start_unix"] + summary["time_to_solve_s"] - launch if solved else None,
        "steps": summary["steps_to_solve"] if solved else summary["total_steps"],
        "final_return": _last_eval(run_dir),
        "best_return": summary["best_mean_return"],
        "steps_per_s": summary["steps_per_s"],
        "target": config["target_return"],
        "eval_interval": config["eval_interval"],
        "eval_episodes": config["eval_episodes"],
        "confirm_episodes": config["confirm_episodes"],
        "confirm_confidence": config.get("confirm_confidence", 0.5),  # a run from before the bound: the mean
    }


def peer_race(env_id: str, settings: str, seed: int, seconds: float, ours: dict[str, Any]) -> dict[str, Any]:
    """One ``a3c.tools.bench.sb3_race`` run with ours's budget, target, evaluation size and confirmation."""
    # The peer evaluates in its training loop, at least 10 s of training apart (ours may evaluate every 0.1 s,
    # in its own process): its evaluations' time is given back to it, but a 10-episode LunarLander evaluation
    # every 2 s made one seed's run last over 6 minutes of wall clock.
    every = max(ours["eval_interval"], 10.0)
    target = [] if ours["target"] is None else ["--target", str(ours["target"])]
    launch = time.time()
    proc = run_python(
        "-m", "a3c.tools.bench.sb3_race", "--env", env_id, "--settings", settings, "--seed", str(seed),
        "--seconds", str(seconds), "--launch", repr(launch), "--eval-every-s", str(every),
        "--eval-episodes", str(ours["eval_episodes"]), "--confirm-episodes", str(ours["confirm_episodes"]),
        "--confirm-confidence", str(ours["confirm_confidence"]), *target, timeout=seconds + 600,
    )  # fmt: skip
    check_exit(proc, f"sb3_race {env_id} (seed {seed})")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1])


def _write(path: Path, results: dict[str, Any]) -> None:
    from a3c.rundir.files import atomic_write

    data = (json.dumps(results, indent=2) + "\n").encode()
    atomic_write(path, lambda f: f.write(data))


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarize_side(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Solved seeds, median time/steps to the target (solved runs), median final return and steps/s."""
    solved = [r for r in runs if r["solved"]]
    return {
        "failed": sum("error" in r for r in runs),
        "solved": len(solved),
        "seeds": len(runs),
        "median_time_to_solve_s": _median([r["time_to_solve_s"] for r in solved]),
        "median_steps_to_solve": _median([r["steps"] for r in solved]),
        "median_final_return": _median([r["final_return"] for r in runs]),
        "median_steps_per_s": _median([r["steps_per_s"] for r in runs]),
    }


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def race_markdown(results: dict[str, Any]) -> str:
    """One row per env and side ("ours", then "sb3" or "no-preset")."""
    lines = [
        "| env | side | solved | median time to target (s) | median steps to target | "
        "median final greedy return | median steps/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for env_id, sides in results["envs"].items():
        for side, runs in sides.items():
            s = runs["summary"]
            lines.append(
                f"| {env_id} | {side} | {s['solved']}/{s['seeds']} | {_fmt(s['median_time_to_solve_s'])} | "
                f"{_fmt(s['median_steps_to_solve'], 0)} | {_fmt(s['median_final_return'])} | "
                f"{_fmt(s['median_steps_per_s'], 0)} |"
            )
    return "\n".join(lines)


@dataclass(frozen=True)
class RacePlan:
    """What one race measures: the envs, seeds per side, the budget per run and the peer's settings."""

    env_ids: tuple[str, ...]
    seeds: int = 3
    seconds: float = 300.0
    peer_settings: str = "default"  # "zoo" or "default" (sb3_race), or "no-preset": ours on derived defaults
    no_preset: bool = False  # ours on derived defaults, its presets disabled

    @property
    def peer_side(self) -> str:
        """The peer's name in the results: "sb3", or "no-preset" (presets against the derived defaults)."""
        return "no-preset" if self.peer_settings == "no-preset" else "sb3"

    def peer_run(self, env_id: str, seed: int, work: Path, ours: dict[str, Any]) -> Callable[[], dict]:
        """The peer's run of ``env_id`` and ``seed``, judged as ``ours`` is (budget, target, evaluation
        episodes, confirmation). The derived defaults' other settings, their evaluation interval included,
        are what is raced."""
        if self.peer_side == "no-preset":
            return partial(ours_race, env_id, seed, self.seconds, work, True, "no-preset", ours)
        return partial(peer_race, env_id, self.peer_settings, seed, self.seconds, ours)


def _line(env_id: str, seed: int, side: str, run: dict[str, Any]) -> str:
    if "error" in run:
        return f"{env_id} seed {seed}: {side} FAILED: {run['error'].splitlines()[0]}"
    return f"{env_id} seed {seed}: {side} {_fmt(run['time_to_solve_s'])} s, final {_fmt(run['final_return'])}"


def _attempt(run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """One side's run, or a failed one (kept in the JSON, counted unsolved): the race goes on."""
    try:
        return run()
    except (RuntimeError, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as exc:
        return {"solved": False, "time_to_solve_s": None, "steps": None, "final_return": None,
                "steps_per_s": None, "error": f"{type(exc).__name__}: {exc}"}  # fmt: skip


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_race(
    plan: RacePlan, out_dir: Path, work: Path, log: Callable[[str], None] = _stderr
) -> dict[str, Any]:
    """Race every env of ``plan``; write ``out_dir/race-<time>.json`` as it goes and return the results."""
    from a3c.rundir.files import git_state, package_versions

    results: dict[str, Any] = {**asdict(plan), "versions": package_versions(), **git_state(), "envs": {}}
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"race-{time.strftime('%Y%m%d-%H%M%S')}.json"
    for env_id in plan.env_ids:
        ours, peer = [], []
        for seed in range(plan.seeds):
            o = _attempt(partial(ours_race, env_id, seed, plan.seconds, work, plan.no_preset))
            ours.append(o)
            log(_line(env_id, seed, "ours", o))
            if "error" in o:  # without ours's target and evaluation settings the peer cannot run alike
                continue
            p = _attempt(plan.peer_run(env_id, seed, work, o))
            peer.append(p)
            log(_line(env_id, seed, plan.peer_side.ljust(4), p))
            results["envs"][env_id] = {
                "ours": {"runs": ours, "summary": summarize_side(ours)},
                plan.peer_side: {"runs": peer, "summary": summarize_side(peer)},
            }
            _write(path, results)  # as it goes: a long race keeps its rows
    results["markdown"] = race_markdown(results)
    _write(path, results)
    results["path"] = str(path)
    return results
