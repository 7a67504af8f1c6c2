"""``a3c bench``: time-to-solve, throughput and a per-step cost breakdown, ours against SB3 A2C, in one run.

Every run is a fresh command started by this harness and timed from that start: ``python -m a3c train`` for
ours (default preset) and ``python -m a3c.tools.bench.sb3_peer`` for the peer. Runs alternate, ours then the
peer, so that drift of the machine (other load, thermal state) hits both sides alike.

Time to solve = the moment the run's evaluation first reached the target, minus the moment this harness
launched the command (imports and start-up included). Ours reports its solve on ``start_unix +
time_to_solve_s`` in summary.json; the peer stamps it in its EvalCallback. Throughput = env steps per second
once running (after a warm-up), read from our metrics.csv and from the peer's rollout clock.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from a3c.rundir.files import git_state, package_versions
from a3c.tools.bench.plan import CLASSIC_T_MAX, ENV_ID, RAY_START_S, TARGET, WARMUP_S, BenchPlan
from a3c.tools.bench.report import fmt, markdown, summarize


def run_python(*args: str, timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """This Python running ``args`` (output captured as text), killed after ``timeout`` s."""
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env)


def _last_json(text: str) -> dict[str, Any]:
    lines = [line for line in text.strip().splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"no JSON result in the output:\n{text[-2000:]}")
    return json.loads(lines[-1])


def check_exit(proc: subprocess.CompletedProcess, what: str) -> None:
    """RuntimeError naming ``what`` and the end of its stderr unless ``proc`` exited 0."""
    if proc.returncode != 0:
        raise RuntimeError(f"{what} exited {proc.returncode}:\n{proc.stderr[-3000:]}")


# -- time to solve -------------------------------------------------------------------------------------------


def ours_solve(seed: int, work: Path, reeval_episodes: int) -> dict[str, Any]:
    """``a3c train --env CartPole-v1 --seed S`` (default preset), then its best.pt on fresh episodes."""
    run_dir = work / f"ours-solve-{seed}"
    launch = time.time()
    proc = run_python(
        "-m", "a3c", "train", "--env", ENV_ID, "--seed", str(seed), "--run-dir", str(run_dir), "--quiet",
        "--max-seconds", "120", timeout=300,
    )  # fmt: skip
    command_s = time.time() - launch
    check_exit(proc, f"a3c train (seed {seed})")
    summary = json.loads((run_dir / "summary.json").read_text())
    solved = bool(summary["solved"])
    result = {
        "solved": solved,
        "time_to_solve_s": summary["start_unix"] + summary["time_to_solve_s"] - launch if solved else None,
        "steps": summary["steps_to_solve"] if solved else summary["total_steps"],
        "command_s": command_s,
        "total_steps": summary["total_steps"],
        "evaluator_cpu_s": summary["evaluator_cpu_s"],
    }
    evaluation = run_python(
        "-m", "a3c", "evaluate", str(run_dir), "--episodes", str(reeval_episodes),
        "--seed", str(20_000 + seed), "--json", timeout=300,
    )  # fmt: skip
    check_exit(evaluation, f"a3c evaluate (seed {seed})")
    result["reeval_mean"] = _last_json(evaluation.stdout)["mean_return"]
    return result


def peer_solve(seed: int, work: Path, reeval_episodes: int) -> dict[str, Any]:
    """SB3 A2C, zoo settings, until its 10-episode evaluation (every 2,000 steps) reaches the target."""
    launch = time.time()
    proc = run_python(
        "-m", "a3c.tools.bench.sb3_peer", "solve", "--seed", str(seed), "--launch", repr(launch),
        "--out", str(work / f"sb3-solve-{seed}"), "--reeval-episodes", str(reeval_episodes), timeout=600,
    )  # fmt: skip
    check_exit(proc, f"sb3_peer solve (seed {seed})")
    return _last_json(proc.stdout)


# -- throughput ----------------------------------------------------------------------------------------------


def ours_throughput(
    workers: int | None, envs: int | None, seconds: float, work: Path, backend: str = "local",
    settings: tuple[str, ...] = (), env_id: str = ENV_ID,
) -> dict[str, Any]:  # fmt: skip
    """Env steps/s of ``a3c train`` with no target, from metrics.csv after the warm-up; on Ray in node
    mode also the mean global policy lag from sync.csv. ``workers`` or ``envs`` None: the preset's;
    ``settings``: config fields, e.g. ``("sync_interval=0.5", "ray_shards=2")``."""
    t_max = ["--set", f"t_max={CLASSIC_T_MAX}"] if envs == 1 else []
    shape = [] if workers is None else ["--workers", str(workers)]
    shape += [] if envs is None else ["--envs-per-worker", str(envs)]
    name = "-".join((backend, f"{workers}x{envs}", *settings)).replace("=", "")
    budget = seconds + WARMUP_S + 1.0 + (RAY_START_S if backend == "ray" else 0.0)
    run_dir = work / f"ours-tput-{name}-{time.time_ns()}"  # settings run more than once: a dir each
    proc = run_python(
        "-m", "a3c", "train", "--env", env_id, *shape, "--set", "target_return=none", *t_max,
        "--max-seconds", str(budget), "--backend", backend, *(a for s in settings for a in ("--set", s)),
        "--run-dir", str(run_dir), "--quiet", timeout=seconds + 240,
    )  # fmt: skip
    check_exit(proc, f"a3c train throughput {name}")
    rows = []
    with (run_dir / "metrics.csv").open() as f:
        header = f.readline().strip().split(",")
        columns = [header.index(k) for k in ("wall_time", "global_step", "updates", "policy_lag_mean")]
        for line in f:
            cells = line.strip().split(",")
            wall, step, updates, lag = (cells[i] for i in columns)
            rows.append((float(wall), int(step), int(updates), float(lag)))
    rows.sort()
    counted = (
        [r for r in rows if r[0] >= rows[0][0] + WARMUP_S] if rows else []
    )  # Ray's start-up comes before the first row
    if len(counted) < 2:
        raise RuntimeError(
            f"a3c train throughput {name}: {len(counted)} metrics rows after the {WARMUP_S:g} s warm-up, too "
            "few to time; give it more seconds"
        )
    (t0, s0, *_), (t1, s1, *_) = counted[0], counted[-1]
    updates = sum(r[2] for r in counted)
    return {
        "policy_lag_mean": sum(r[2] * r[3] for r in counted) / updates if updates else None,  # per update
        "global_lag_mean": _global_lag(run_dir),
        "workers": workers,
        "envs_per_worker": envs,
        "t_max": CLASSIC_T_MAX if envs == 1 else None,
        "steps": s1 - s0,
        "seconds": t1 - t0,
        "steps_per_s": (s1 - s0) / (t1 - t0),
    }


def _global_lag(run_dir: Path) -> float | None:
    """The mean of sync.csv's global_lag_mean over its rows (a Ray node-mode run), else None."""
    path = run_dir / "sync.csv"
    if not path.exists():
        return None
    with path.open() as f:
        header = f.readline().strip().split(",")
        lags = [float(line.split(",")[header.index("global_lag_mean")]) for line in f if line.strip()]
    return statistics.mean(lags) if lags else None


def peer_throughput(envs: int, seconds: float) -> dict[str, Any]:
    """Env steps/s of SB3 A2C with ``envs`` envs (``a3c.tools.bench.sb3_peer throughput``), after the
    warm-up."""
    proc = run_python(
        "-m", "a3c.tools.bench.sb3_peer", "throughput", "--envs", str(envs), "--seconds", str(seconds),
        "--warmup", str(WARMUP_S), timeout=seconds + 120,
    )  # fmt: skip
    check_exit(proc, f"sb3_peer throughput {envs} envs")
    return _last_json(proc.stdout)


def breakdown(seconds: float) -> dict[str, Any]:
    """a3c.tools.bench.breakdown in a process of its own, with the one-thread settings a worker has."""
    from a3c.runtime.context import ONE_THREAD

    proc = run_python(
        "-m", "a3c.tools.bench.breakdown", str(seconds), timeout=seconds + 120,
        env={**os.environ, **ONE_THREAD},
    )  # fmt: skip
    check_exit(proc, "a3c.tools.bench.breakdown")
    return _last_json(proc.stdout)


# -- the whole bench -----------------------------------------------------------------------------------------


def run_bench(
    plan: BenchPlan, out_dir: Path, log=lambda msg: print(msg, file=sys.stderr, flush=True)
) -> dict[str, Any]:
    """Run everything, write ``out_dir/bench-<time>.json`` and return the results (with the markdown)."""
    started = time.time()
    results: dict[str, Any] = {
        "env_id": ENV_ID,
        "target": TARGET,
        "plan": plan.__dict__,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "versions": package_versions(),
        **git_state(),  # git_commit, git_dirty: the code that was measured
    }
    with tempfile.TemporaryDirectory(prefix="a3c-bench-") as tmp:
        work = Path(tmp)
        ours, peer = [], []
        for seed in range(plan.seeds):
            ours.append(ours_solve(seed, work, plan.reeval_episodes))
            log(f"solve seed {seed}: ours {fmt(ours[-1]['time_to_solve_s'])} s")
            peer.append(peer_solve(seed, work, plan.reeval_episodes))
            log(f"solve seed {seed}: sb3  {fmt(peer[-1]['time_to_solve_s'])} s")
        results["solve"] = {"ours": ours, "sb3": peer}

        # Alternating: each of ours next to a peer run where there is one; every setting ``repeats`` times
        # (CartPole's rate moves ~10-20% between runs with how long the episodes of the moment are).
        # The Ray backend on this one machine (one node group): right after the local 2 x 16 it is set beside.
        ray_runs = [("ray", 2, 16)] if _ray_installed() else []
        schedule = [
            ("ours", 2, 1), ("sb3", 16, None), ("ours", 2, 8), ("sb3", 32, None), ("ours", 2, 16),
            *ray_runs, ("ours", 1, 1), ("ours", 1, 8), ("ours", 1, 16),
        ]  # fmt: skip
        runs: dict[str, list[dict[str, Any]]] = {}
        for _ in range(plan.repeats):
            for side, a, b in schedule:
                # (The Ray key keeps the "_node" of the results from when the Ray backend had two modes.)
                key = {"ours": f"ours_{a}x{b}", "sb3": f"sb3_{a}", "ray": f"ray_{a}x{b}_node"}[side]
                if side == "ours":
                    run = ours_throughput(a, b, plan.seconds, work)
                elif side == "ray":
                    run = ours_throughput(a, b, plan.seconds, work, backend="ray")
                else:
                    run = peer_throughput(a, plan.seconds)
                runs.setdefault(key, []).append(run)
                log(f"throughput {key}: {run['steps_per_s']:,.0f} steps/s")
        throughput = {
            key: {
                "steps_per_s": statistics.mean(r["steps_per_s"] for r in rs),
                "policy_lag_mean": _mean_or_none([r.get("policy_lag_mean") for r in rs]),
                "global_lag_mean": _mean_or_none([r.get("global_lag_mean") for r in rs]),
                "runs": rs,
            }
            for key, rs in runs.items()
        }
        results["throughput"] = throughput

    parts = breakdown(plan.breakdown_seconds)
    steps = sum(r["total_steps"] for r in ours)
    cpu = sum(r["evaluator_cpu_s"] or 0.0 for r in ours)
    parts["evaluator_share_us"] = cpu / steps * 1e6 if steps else None
    results["breakdown"] = parts
    results["summary"] = summarize(results)
    results["bench_s"] = time.time() - started
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")  # first: the numbers survive a bug below
    results["markdown"] = markdown(results)
    path.write_text(json.dumps(results, indent=2) + "\n")
    results["path"] = str(path)
    return results


def _mean_or_none(values: list[float | None]) -> float | None:
    """The mean of the values that are not None (None if none is)."""
    known = [v for v in values if v is not None]
    return statistics.mean(known) if known else None


def _ray_installed() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True
