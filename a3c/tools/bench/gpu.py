"""``a3c bench --gpu``: the prepared check for a machine with a GPU (``make bench-gpu``; docs/performance.md,
"The GPU check"). On ALE/Pong-v5's preset, in this order, each result written to the JSON as soon as it is
known (a run cut short by the device's time limit keeps what it had):

1. the CUDA tests, ``pytest -m cuda``: passed / failed / skipped counts, the output's tail unless they passed;
2. one run on the GPU (``--device cuda``, 15 workers, ``learn_seconds``): steps/s over the same steady window
   as the CPU runs and over the whole run after start-up, the GPU's memory per process (``nvidia-smi``
   sampled every second, each pid named by its role: trainer, worker, evaluator), the GPU's utilisation,
   and the learning check: the training return by thirds of the run and every evaluation's mean;
3. steps/s on the CPU (``--device cpu``) with 15, 1, 2, 4 and 8 workers;
4. CartPole-v1's MLP with 4 workers on the GPU and on the CPU: does a GPU help the MLP (``auto`` says no)?

Steady window: from ``warmup_s`` after the moment every worker had written its first metrics row (all of
them running; start-up, imports and CUDA contexts left out) for ``seconds`` s, read from metrics.csv. A run
is stopped with SIGINT as soon as its window is complete (no final evaluation, 3 s grace), so start-up time
costs nothing but itself. On a machine without CUDA only the CPU runs are made, and one line says what was
skipped and why (the MLP's part is a comparison with the GPU: skipped too).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a3c.rundir.files import git_state, package_versions, write_json
from a3c.tools.bench.report import fmt

ENV_ID = "ALE/Pong-v5"
MLP_ENV_ID = "CartPole-v1"  # the MLP: does a GPU help it? (auto keeps it on the CPU)
SAMPLE_S = 1.0  # metrics.csv and nvidia-smi are read this often while a run goes
START_ALLOWANCE_S = 60.0  # --max-seconds beyond the plan: a net, the bench stops a run itself
KILL_AFTER_S = 30.0  # past --max-seconds a run is killed (its final evaluation cut short)
TAIL_CHARS = 3000


@dataclass(frozen=True)
class GpuPlan:
    """What ``a3c bench --gpu`` measures; the defaults fit 8 minutes on a 16-core machine with one GPU."""

    worker_counts: tuple[int, ...] = (1, 2, 4, 8, 15)  # CPU runs, made 15 first (beside the GPU run)
    seconds: float = 20.0  # each run's steady window
    warmup_s: float = 3.0  # after every worker's first row
    gpu_workers: int = 15
    learn_seconds: float = 120.0  # the GPU run, by its metrics' wall_time
    mlp_workers: int = 4  # CartPole's MLP on the GPU and on the CPU (with CUDA only)
    mlp_seconds: float = 10.0
    tests_timeout_s: float = 120.0


# -- reading a run -------------------------------------------------------------------------------------------


def read_csv_rows(path: Path, columns: tuple[str, ...]) -> list[tuple[float, ...]]:
    """``columns`` of a CSV a run is still writing, as floats; a line not (yet) whole is left out."""
    if not path.exists():
        return []
    rows = []
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or not set(columns) <= set(header):
            return []
        index = [header.index(c) for c in columns]
        for cells in reader:
            if len(cells) != len(header):
                continue
            try:
                rows.append(tuple(float(cells[i]) for i in index))
            except ValueError:
                continue
    return rows


def steady_window(
    rows: list[tuple[float, ...]], workers: int, warmup_s: float, seconds: float
) -> dict[str, Any] | None:
    """Steps/s over the steady window of metrics rows (wall_time, global_step, worker): from ``warmup_s``
    after every one of ``workers`` wrote its first row, ``seconds`` long. None until that window is over
    (some worker has not written yet, or the rows do not reach its end)."""
    first: dict[int, float] = {}
    for wall, _, worker in sorted(rows):
        first.setdefault(int(worker), wall)
    if len(first) < workers:
        return None
    start = max(first.values()) + warmup_s
    inside = sorted((wall, step) for wall, step, _ in rows if start <= wall <= start + seconds)
    if len(inside) < 2 or max(wall for wall, *_ in rows) < start + seconds:
        return None
    (t0, s0), (t1, s1) = inside[0], inside[-1]
    return {
        "all_started_s": start - warmup_s,  # run time when the last worker wrote its first row
        "from_s": t0,
        "seconds": t1 - t0,
        "steps": int(s1 - s0),
        "steps_per_s": (s1 - s0) / (t1 - t0),
    }


def return_trend(episodes: list[tuple[float, ...]], parts: int = 3) -> list[dict[str, Any]]:
    """The training return by equal parts of the run's time (episodes: wall_time, global_step, return):
    per part its end (s), the global step then, the episodes ended in it and their mean return (None if
    none)."""
    if not episodes:
        return []
    episodes = sorted(episodes)
    end = episodes[-1][0]
    trend = []
    for k in range(parts):
        lo, hi = end * k / parts, end * (k + 1) / parts
        part = [e for e in episodes if lo < e[0] <= hi or (k == 0 and e[0] == lo)]
        trend.append({
            "until_s": hi,
            "until_step": int(part[-1][1]) if part else None,
            "episodes": len(part),
            "mean_return": statistics.mean(e[2] for e in part) if part else None,
        })  # fmt: skip
    return trend


# -- the GPU's processes -------------------------------------------------------------------------------------


def role_of(pid: int, trainer_pid: int, comm: str | None) -> str:
    """What process ``pid`` is: the trainer (the run's own pid), a worker or the evaluator (named by
    a3c.runtime.child.set_process_name, e.g. "a3c-worker-3"), ``other:<name>``, or ``unknown`` when this
    machine cannot see it (gone, or a pid of another pid namespace, as nvidia-smi in a container reports)."""
    if pid == trainer_pid:
        return "trainer"
    if comm is None:
        return "unknown"
    if comm.startswith("a3c-worker"):
        return "worker"
    if comm.startswith("a3c-evaluator"):
        return "evaluator"
    return f"other:{comm}"


def process_name(pid: int) -> str | None:
    """/proc/PID/comm, None when there is no such process here."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def nvidia_smi(*query: str) -> list[list[str]]:
    """The rows of ``nvidia-smi --query-...`` as lists of cells ([] when it fails or is absent)."""
    try:
        command = ["nvidia-smi", *query, "--format=csv,noheader,nounits"]
        out = subprocess.run(command, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    return [[cell.strip() for cell in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


def gpu_sample(trainer_pid: int) -> dict[str, Any]:
    """One sample: each compute process's memory (MiB) with its role, and GPU 0's utilisation and memory."""
    apps, raw = [], nvidia_smi("--query-compute-apps=pid,used_memory")
    for pid, used in (row for row in raw if len(row) == 2):
        if pid.isdigit() and used.isdigit():  # a container's nvidia-smi may say [N/A]: see raw_example
            apps.append((int(pid), role_of(int(pid), trainer_pid, process_name(int(pid))), int(used)))
    gpu = nvidia_smi("--query-gpu=utilization.gpu,memory.used", "-i", "0")
    util, used = (gpu[0] + [None, None])[:2] if gpu else (None, None)
    return {
        "apps": apps,
        "raw": raw,
        "util": int(util) if util and util.isdigit() else None,
        "used_mib": int(used) if used and used.isdigit() else None,
    }


def memory_by_role(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Peak memory (MiB) per process over the samples, summed up by role: per role the processes seen and
    their min / median / max peak; the peak of the samples' total over the compute processes; GPU 0's mean
    utilisation (%) and peak memory used; and nvidia-smi's rows of the sample that had the most."""
    peak: dict[int, tuple[str, int]] = {}
    for sample in samples:
        for pid, role, used in sample["apps"]:
            known = peak.get(pid)
            # A role seen once is kept: a pid that exited reads as unknown in later samples.
            name = role if known is None or known[0] == "unknown" else known[0]
            peak[pid] = (name, max(used, known[1] if known else 0))
    roles: dict[str, list[int]] = {}
    for role, used in peak.values():
        roles.setdefault(role, []).append(used)
    utils = [s["util"] for s in samples if s.get("util") is not None]
    used_total = [s["used_mib"] for s in samples if s.get("used_mib") is not None]
    return {
        "per_role_mib": {
            role: {"processes": len(v), "min": min(v), "median": statistics.median(v), "max": max(v)}
            for role, v in sorted(roles.items())
        },
        "per_pid_peak_mib": {str(pid): {"role": r, "mib": m} for pid, (r, m) in sorted(peak.items())},
        "apps_total_peak_mib": max((sum(u for *_, u in s["apps"]) for s in samples), default=None),
        "gpu_util_mean_pct": statistics.mean(utils) if utils else None,
        "gpu_used_peak_mib": max(used_total, default=None),
        "samples": len(samples),
        "raw_example": max((s.get("raw", []) for s in samples), key=len, default=[]),  # the most rows
    }


# -- running -------------------------------------------------------------------------------------------------


def train_run(
    env_id: str, workers: int, device: str, done: Callable[[Path], bool], budget_s: float, work: Path,
    sample: Callable[[int], dict[str, Any]] | None = None,
) -> tuple[Path, list[dict[str, Any]]]:  # fmt: skip
    """``a3c train`` on ``env_id``'s preset (no target) with ``workers`` on ``device``, stopped with SIGINT
    as soon as ``done(run_dir)``; --max-seconds ``budget_s`` as a net. ``sample(trainer_pid)`` is called
    every SAMPLE_S while it runs; returns the run dir and the samples."""
    run_dir = work / f"{env_id.replace('/', '-')}-{device.replace(':', '')}-{workers}w-{time.time_ns()}"
    command = [
        sys.executable, "-m", "a3c", "train", "--env", env_id, "--workers", str(workers),
        "--device", device, "--set", "target_return=none", "--max-seconds", f"{budget_s:g}",
        "--run-dir", str(run_dir), "--quiet",
    ]  # fmt: skip
    samples: list[dict[str, Any]] = []
    log = work / f"{run_dir.name}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline, interrupted = time.monotonic() + budget_s + KILL_AFTER_S, False
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"a3c train {run_dir.name} did not stop by its deadline")
                if sample is not None:
                    samples.append(sample(proc.pid))
                if not interrupted and done(run_dir):
                    proc.send_signal(signal.SIGINT)  # as Ctrl-C: children stop, no final evaluation
                    interrupted = True
                with contextlib.suppress(subprocess.TimeoutExpired):  # still running: the next sample
                    proc.wait(timeout=SAMPLE_S)
        finally:
            if proc.poll() is None:  # the bench failed or was interrupted: nothing is left running
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
    if proc.returncode not in (0, 130):
        tail = log.read_text()[-TAIL_CHARS:]
        raise RuntimeError(f"a3c train {run_dir.name} exited {proc.returncode}:\n{tail}")
    return run_dir, samples


METRIC_COLUMNS = ("wall_time", "global_step", "worker")


def throughput_run(
    workers: int, device: str, plan: GpuPlan, work: Path, learn: bool = False, env_id: str = ENV_ID
) -> dict[str, Any]:
    """Steps/s of one run over its steady window (``plan.seconds``; CartPole's MLP ``plan.mlp_seconds``);
    with ``learn`` the GPU run: also the whole run's rate, the GPU memory by role and the learning check."""
    metrics = lambda run_dir: read_csv_rows(run_dir / "metrics.csv", METRIC_COLUMNS)  # noqa: E731
    seconds = plan.mlp_seconds if env_id == MLP_ENV_ID else plan.seconds

    def done(run_dir: Path) -> bool:
        rows = metrics(run_dir)
        window = steady_window(rows, workers, plan.warmup_s, seconds)
        return window is not None and (not learn or rows[-1][0] >= plan.learn_seconds)

    budget = START_ALLOWANCE_S + plan.warmup_s + seconds + (plan.learn_seconds if learn else 0.0)
    run_dir, samples = train_run(env_id, workers, device, done, budget, work, gpu_sample if learn else None)
    rows = metrics(run_dir)
    window = steady_window(rows, workers, plan.warmup_s, seconds)
    if window is None:
        raise RuntimeError(f"a3c train {run_dir.name}: its metrics.csv has no complete steady window")
    config = json.loads((run_dir / "config.json").read_text())
    result = {"workers": workers, "device": device, "device_used": config.get("device_used"), **window,
              "per_worker": window["steps_per_s"] / workers}  # fmt: skip
    if learn:  # the same start, to the last row
        whole_s = max(r[0] for r in rows) - window["all_started_s"] - plan.warmup_s
        result["whole_run"] = steady_window(rows, workers, plan.warmup_s, whole_s)
        result["memory"] = memory_by_role(samples)
        result["learning"] = learning_check(run_dir)
    return result


def learning_check(run_dir: Path) -> dict[str, Any]:
    """The training return by thirds of the run and every evaluation (wall_time, global_step, mean)."""
    episodes = read_csv_rows(run_dir / "episodes.csv", ("wall_time", "global_step", "return"))
    evals = read_csv_rows(run_dir / "eval.csv", ("wall_time", "global_step", "mean_return"))
    trend = return_trend(episodes)
    means = [p["mean_return"] for p in trend if p["mean_return"] is not None]
    return {
        "episodes": len(episodes),
        "return_by_thirds": trend,
        "return_change": means[-1] - means[0] if len(means) >= 2 else None,
        "evaluations": [{"wall_time": w, "global_step": int(s), "mean_return": m} for w, s, m in evals],
    }


def pytest_counts(output: str) -> dict[str, int]:
    """The counts of pytest's last summary line ("2 passed, 1 skipped, 9 deselected in 3.1s")."""
    lines = [line for line in output.splitlines() if re.search(r"\bin [0-9.]+s\b", line)]
    if not lines:
        return {}
    found = re.findall(r"(\d+) (passed|failed|skipped|deselected|errors?|xfailed|xpassed)", lines[-1])
    return {("error" if word.startswith("error") else word): int(n) for n, word in found}


REPO_ROOT = Path(__file__).resolve().parents[3]  # where tests/ is, in a checkout (not in an installed a3c)


def cuda_tests(timeout_s: float) -> dict[str, Any]:
    """``pytest -m cuda`` in the checkout: its exit code, counts, wall time and, unless every test passed,
    its tail. Past ``timeout_s`` its whole process group is killed (no test's run is left on the GPU)."""
    if not (REPO_ROOT / "tests" / "conftest.py").is_file():
        return {"exit_code": None, "error": f"no tests/ beside the a3c package in {REPO_ROOT} (installed)"}
    started = time.monotonic()
    command = [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-rfEs", "-p", "no:cacheprovider",
               "--continue-on-collection-errors"]  # fmt: skip
    proc = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate(timeout=30)
        return {"exit_code": None, "timed_out": True, "seconds": timeout_s, "tail": output[-TAIL_CHARS:]}
    result = {"exit_code": proc.returncode, "counts": pytest_counts(output),
              "seconds": time.monotonic() - started}  # fmt: skip
    if proc.returncode != 0:  # 5: none selected; else a failure or collection error to read
        result["tail"] = output[-TAIL_CHARS:]
    return result


# -- the machine ---------------------------------------------------------------------------------------------


def cuda_unavailable() -> str | None:
    """Why no GPU part can run here (one clause), or None when CUDA is there."""
    import torch

    if not torch.cuda.is_available():
        return f"torch.cuda.is_available() is False (torch {torch.__version__}, CUDA {torch.version.cuda})"
    return None


def skip_line(reason: str) -> str:
    """The one line a machine without CUDA prints."""
    return (f"bench --gpu: skipped the CUDA tests, the GPU run, its device memory, the learning check and "
            f"the MLP on GPU and CPU: {reason}; only Pong's CPU runs were made")  # fmt: skip


def machine(commit: str | None) -> dict[str, Any]:
    """CPU count, platform, GPU(s) as nvidia-smi names them, torch and its CUDA, the versions and the commit
    (git's, else ``commit`` as given: a device's copy of the tree has no git)."""
    import torch

    gpus = nvidia_smi("--query-gpu=name,memory.total,driver_version")
    state = git_state()
    if state["git_commit"] is None and commit:
        state = {"git_commit": commit.removesuffix("+dirty"), "git_dirty": commit.endswith("+dirty"),
                 "commit_from": "--commit"}  # fmt: skip
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": str(torch.__version__),
        "torch_cuda": torch.version.cuda,
        "gpus": [{"name": n, "memory_mib": m, "driver": d} for n, m, d in gpus],
        "versions": package_versions(),
        **state,
    }


# -- the whole check -----------------------------------------------------------------------------------------


def run_gpu_bench(
    plan: GpuPlan, out_dir: Path, commit: str | None = None,
    log: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr, flush=True),
) -> dict[str, Any]:  # fmt: skip
    """Run the check, writing ``out_dir/gpu-ALE-Pong-v5-<time>.json`` after every part; return the results
    (with the markdown)."""
    started = time.time()
    skipped = cuda_unavailable()
    results: dict[str, Any] = {
        "env_id": ENV_ID,
        "plan": dataclasses.asdict(plan),
        "machine": machine(commit),
        "skipped": skip_line(skipped) if skipped else None,
        "cuda_tests": None,
        "gpu": None,
        "cpu": [],
        "mlp": [],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"gpu-{ENV_ID.replace('/', '-')}-{time.strftime('%Y%m%d-%H%M%S')}.json"

    def save() -> None:
        results["bench_s"] = time.time() - started
        write_json(path, results)

    save()
    if skipped:
        print(results["skipped"], flush=True)
    else:
        results["cuda_tests"] = cuda_tests(plan.tests_timeout_s)
        log(f"cuda tests: exit {results['cuda_tests']['exit_code']}, {results['cuda_tests'].get('counts')}")
        save()
    with tempfile.TemporaryDirectory(prefix="a3c-bench-gpu-") as tmp:
        work = Path(tmp)
        if not skipped:
            gpu_run = lambda: throughput_run(plan.gpu_workers, "cuda", plan, work, learn=True)  # noqa: E731
            results["gpu"] = {"workers": plan.gpu_workers, "device": "cuda", **_guarded(gpu_run)}
            log(f"gpu {plan.gpu_workers} workers: {_rate(results['gpu'])}")
            save()
        first = [n for n in plan.worker_counts if n == plan.gpu_workers]  # beside the GPU run first
        for workers in first + [n for n in plan.worker_counts if n != plan.gpu_workers]:
            run = _guarded(lambda n=workers: throughput_run(n, "cpu", plan, work))
            results["cpu"].append({"workers": workers, "device": "cpu", **run})
            log(f"cpu {workers} workers: {_rate(run)}")
            save()
        n = plan.mlp_workers
        for device in () if skipped else ("cuda", "cpu"):  # last: the MLP on the GPU, which auto never picks
            run = _guarded(lambda d=device: throughput_run(n, d, plan, work, env_id=MLP_ENV_ID))
            results["mlp"].append({"env_id": MLP_ENV_ID, "workers": n, "device": device, **run})
            log(f"{MLP_ENV_ID} {device} {n} workers: {_rate(run)}")
            save()
    results["markdown"] = markdown(results)
    save()
    results["path"] = str(path)
    return results


def _guarded(measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The measurement, or {"error": ...} when it failed: the other parts still run."""
    try:
        return measure()
    except Exception as exc:  # noqa: BLE001 - recorded, and the check goes on
        return {"error": str(exc)[-TAIL_CHARS:]}


def _rate(run: dict[str, Any] | None) -> str:
    if not run or "error" in run:
        return f"failed: {(run or {}).get('error', '')[:300]}"
    return f"{run['steps_per_s']:,.0f} steps/s ({run['per_worker']:,.0f} per worker)"


def markdown(results: dict[str, Any]) -> str:
    """A table of steps/s per device and worker count, then the GPU run's memory and learning check."""
    m = results["machine"]
    gpus = ", ".join(g["name"] for g in m["gpus"]) or "none"
    lines = [f"{results['env_id']} on {m['cpus']} CPUs, GPU: {gpus}; torch {m['torch']} (CUDA "
             f"{m['torch_cuda']}); commit {m['git_commit']}", ""]  # fmt: skip
    tests = results["cuda_tests"]
    if tests:
        said = tests.get("counts") or tests.get("error") or ("timed out" if tests.get("timed_out") else "")
        lines += [f"CUDA tests: exit {tests['exit_code']}, {said}", ""]
    columns = "| env | device | workers | steps/s | per worker | window (s) |"
    lines += [columns, "|---" * 3 + "|---:" * 3 + "|"]
    runs = ([results["gpu"]] if results["gpu"] else []) + results["cpu"] + results["mlp"]
    for run in runs:
        head = f"| {run.get('env_id', results['env_id'])} | {run['device']} | {run['workers']} |"
        if "error" in run:
            lines.append(f"{head} failed | | |")
            continue
        lines.append(f"{head} {run['steps_per_s']:,.0f} | {run['per_worker']:,.0f} | {run['seconds']:.0f} |")
    gpu = results["gpu"]
    if gpu and "error" not in gpu:
        per_role = gpu["memory"]["per_role_mib"]
        roles = "; ".join(f"{r}: {v['processes']} × {v['median']:g} MiB (max {v['max']})"
                          for r, v in per_role.items())  # fmt: skip
        learning = gpu["learning"]
        thirds = ", ".join("–" if p["mean_return"] is None else f"{p['mean_return']:.1f}"
                           for p in learning["return_by_thirds"])  # fmt: skip
        evals = ", ".join(f"{e['mean_return']:.1f}" for e in learning["evaluations"]) or "none"
        whole = gpu["whole_run"] or gpu
        lines += [
            "",
            f"GPU memory per process (peak): {roles or 'no compute process seen'}; "
            f"GPU utilisation {fmt(gpu['memory']['gpu_util_mean_pct'])}% mean",
            f"GPU run: {whole['steps_per_s']:,.0f} steps/s over {whole['seconds']:.0f} s after start-up; "
            f"training return by thirds: {thirds}; evaluations: {evals}",
        ]
    return "\n".join(lines)
