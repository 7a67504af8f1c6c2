"""Fault injection: kill the trainer, a worker or a whole process group at a random moment of a training
run, a resume or a tune study, many times over; after each, the run dir must load, resume and keep its CSVs
in order, and nothing may be left running.

    python -m tests.support.fault_injection --rounds 20 --out runs/faults  # make test-faults (.ci/run: 4)

The moment is an event, not a clock: the kill comes once episodes.csv holds a random number of rows (and,
on a resume, once it has grown past what the resume started with). The (stage, kind) pairs come in a random
order, each pair once per cycle. The seed is random unless given, and printed first, so that a failure can
be replayed. Each round checks the killed process's exit code, that the run dir loads and resumes with its
CSVs continuous (exactly the rows its checkpoint covers kept, none lost or twice), and that nothing is left
running; it prints one line; the last line counts the rounds whose checks all held, and the exit code is 0
only when every round passed.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.commands import end, popen_a3c, run_a3c, wait_until
from tests.support.processes import left_behind, spawned_children
from tests.support.run_files import assert_continuous, csv_rows, data_rows, read_json

# A hang timeout of 6 s (not less: an idle evaluator is never taken for hung on a loaded machine), so that a
# suspend of the group longer than it takes seconds, not minutes.
HANG_S = 6
STOP_S = HANG_S + 2.0
TRAIN = (
    "train --env CartPole-v1 --workers 2 --target-return 1e9 --quiet --set checkpoint_interval=0.5 "
    f"--hang-timeout {HANG_S}"
)
TUNE = "tune --env CartPole-v1 --trials 2 --trial-seconds 6 --seed 0"
KINDS = ("trainer", "worker", "group-kill", "group-term", "group-hup", "group-stop")
STAGES = ("train", "resume", "tune")
# The exit code each kind leaves (Popen's: -N for a process killed by signal N): the trainer or the group
# SIGKILLed; after a worker's SIGKILL the run goes on and a SIGTERM ends it (128 + 15), as a group's does; a
# group's SIGHUP (a closed terminal) is a stop too (128 + 1); after the group was stopped for longer than the
# hang timeout and continued, the run goes on with no child restarted, and a SIGTERM ends it.
EXIT_CODES = {
    "trainer": -9,
    "group-kill": -9,
    "worker": 143,
    "group-term": 143,
    "group-hup": 129,
    "group-stop": 143,
}
CONTINUOUS = ("episodes.csv", "eval.csv")  # ordered by global_step and wall_time (metrics.csv: per worker)


def kill(proc: subprocess.Popen, kind: str, rng: random.Random) -> str:
    """Kill as ``kind`` says: SIGKILL the trainer alone, SIGKILL one worker, signal the whole group, or stop
    it for longer than the hang timeout and continue it."""
    if kind == "trainer":
        os.kill(proc.pid, signal.SIGKILL)
        return "SIGKILL trainer"
    if kind == "worker":
        workers = sorted(p for p in spawned_children(proc.pid) if _name(p).startswith("a3c-worker"))
        victim = rng.choice(workers)
        os.kill(victim, signal.SIGKILL)
        return f"SIGKILL {_name(victim)}"
    if kind == "group-stop":
        os.killpg(proc.pid, signal.SIGSTOP)
        time.sleep(STOP_S)  # the fault itself: a suspend of a measured length, not a synchronisation
        os.killpg(proc.pid, signal.SIGCONT)
        return f"SIGSTOP group {STOP_S:g} s"
    signum = {"group-kill": signal.SIGKILL, "group-term": signal.SIGTERM, "group-hup": signal.SIGHUP}[kind]
    os.killpg(proc.pid, signum)
    return f"{signum.name} group"


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def csv_problems(run_dir: Path) -> list[str]:
    """What is wrong with the run's CSVs: global_step or wall_time going back (episodes, evaluations; a
    worker's rows in metrics), a repeated evaluation or metrics row."""
    problems = []
    for name in ("episodes.csv", "eval.csv"):
        path = run_dir / name
        if not path.exists():
            continue
        rows = list(csv.DictReader(path.open()))
        keys = [(float(r["wall_time"]), int(r["global_step"])) for r in rows]
        if any(b[0] < a[0] or b[1] < a[1] for a, b in zip(keys, keys[1:], strict=False)):
            problems.append(f"{name}: wall_time or global_step goes back")
        if name == "eval.csv" and len(set(keys)) != len(keys):
            problems.append(f"{name}: a repeated row")
    if (run_dir / "metrics.csv").exists():
        rows = list(csv.reader((run_dir / "metrics.csv").open()))[1:]
        if len({tuple(r) for r in rows}) != len(rows):
            problems.append("metrics.csv: a repeated row")
        last: dict[str, int] = {}
        for row in rows:
            step = int(row[1])
            if step < last.get(row[2], -1):
                problems.append(f"metrics.csv: worker {row[2]}'s global_step goes back")
                break
            last[row[2]] = step
    return problems


def check_run(run_dir: Path, token: str) -> list[str]:
    """The run dir loads (a3c evaluate), resumes for 2,000 more steps, and keeps its CSVs in order: exactly
    the rows the resumed checkpoint covers kept (``assert_continuous``), the rest new."""
    from a3c.rundir.resume import load_resume_checkpoint

    problems = csv_problems(run_dir)
    if not (run_dir / "checkpoints" / "last.pt").exists():
        return [*problems, "no last.pt"]
    try:
        checkpoint = load_resume_checkpoint(run_dir)
    except (ValueError, OSError) as exc:  # BadInput is a ValueError: a damaged last.pt is a finding
        return [*problems, f"last.pt: {exc}"]
    step, wall = int(checkpoint["global_step"]), float(checkpoint["wall_time"])
    before = {name: csv_rows(run_dir / name) for name in CONTINUOUS if (run_dir / name).exists()}
    evaluated = run_a3c("evaluate", str(run_dir), "--episodes", "2", timeout=120, token=token)
    if evaluated.returncode != 0:
        problems.append(f"evaluate exit {evaluated.returncode}: {evaluated.stderr.strip()[-200:]}")
    target = _last_step(run_dir) + 2000
    resume = ["train", "--resume", str(run_dir), "--max-steps", str(target), "--max-seconds", "100000"]
    resumed = run_a3c(*resume, "--quiet", token=token)
    if resumed.returncode != 0:
        problems.append(f"resume exit {resumed.returncode}: {resumed.stderr.strip()[-200:]}")
    elif read_json(run_dir / "summary.json")["total_steps"] < target:
        problems.append("resume stopped short of its step budget")
    for name, rows in before.items():
        try:
            assert_continuous(run_dir / name, rows, step, wall)
        except AssertionError as exc:
            problems.append(str(exc).splitlines()[0])
    return problems + [p for p in csv_problems(run_dir) if p not in problems]


def _last_step(run_dir: Path) -> int:
    rows = (
        list(csv.DictReader((run_dir / "episodes.csv").open())) if (run_dir / "episodes.csv").exists() else []
    )
    return int(rows[-1]["global_step"]) if rows else 0


def go_on_then_stop(proc: subprocess.Popen, kind: str, watched: Path, before: set[int]) -> None:
    """After a fault the run goes on from (a worker killed: it is restarted; the group suspended: it trains
    on), SIGTERM the trainer once it shows it goes on; after any other fault, nothing."""
    if kind == "worker":
        wait_until(proc, lambda: len(spawned_children(proc.pid) - before) >= 1, timeout=60)
    elif kind == "group-stop":  # rows arrive: the trainer has polled (and judged) its children since
        now = data_rows(watched / "episodes.csv")
        wait_until(proc, lambda: data_rows(watched / "episodes.csv") >= now + 20, timeout=120)
    else:
        return
    os.kill(proc.pid, signal.SIGTERM)


def one_round(
    index: int, stage: str, kind: str, rows: int, out: Path, rng: random.Random
) -> tuple[bool, str]:
    """Run one stage, kill it as ``kind`` says once episodes.csv has ``rows`` more rows, check the result."""
    token = f"a3c-faults-{os.getpid()}-{index}"
    run_dir = out / f"round-{index:02d}"
    watched = run_dir
    if stage == "tune":
        args, watched = f"{TUNE} --study-dir {run_dir}".split(), run_dir / "trial-000"
    elif stage == "resume":
        first = run_a3c(*TRAIN.split(), "--max-steps", "4000", "--run-dir", str(run_dir), token=token)
        if first.returncode != 0:
            return False, f"the run to resume failed: {first.stderr.strip()[-200:]}"
        args = ["train", "--resume", str(run_dir), "--max-steps", "10000000", "--quiet"]
    else:
        args = [*TRAIN.split(), "--max-steps", "10000000", "--run-dir", str(run_dir)]
    start_rows = data_rows(watched / "episodes.csv")
    proc = popen_a3c(*args, token=token)
    try:
        wait_until(proc, lambda: data_rows(watched / "episodes.csv") >= start_rows + rows, timeout=180)
        if stage != "tune":  # a run killed before its first checkpoint has nothing to resume from
            wait_until(proc, lambda: (run_dir / "checkpoints" / "last.pt").exists(), timeout=60)
        wait_until(proc, lambda: len(spawned_children(proc.pid)) >= 3, timeout=60)
        before = spawned_children(proc.pid)
        what = kill(proc, kind, rng)
        go_on_then_stop(proc, kind, watched, before)
        code = proc.wait(timeout=120)
    finally:
        end(proc)
    left = left_behind(token, timeout=30.0)
    problems = [f"left running: {sorted(left)}"] if left else []
    if code != EXIT_CODES[kind]:
        problems.append(f"exit {code}, expected {EXIT_CODES[kind]}")
    if kind == "group-stop" and stage != "tune":  # a tune trial's hang timeout is the default 60 s
        restarts = read_json(run_dir / "summary.json")["restarts"]
        problems += [f"restarts {restarts} after a suspend of the group, expected 0"] if restarts else []
    if stage == "tune":
        again = run_a3c(*args, timeout=600, token=token)
        if again.returncode != 0:
            problems.append(f"tune resume exit {again.returncode}: {again.stderr.strip()[-200:]}")
        for trial in sorted(run_dir.glob("trial-*")):
            problems += [f"{trial.name}: {p}" for p in csv_problems(trial)]
        if (watched / "checkpoints" / "last.pt").exists():  # a trial saves at its end (or a SIGTERM)
            problems += [f"{watched.name}: {p}" for p in check_run(watched, token)]
    else:
        problems += check_run(run_dir, token)
    if left_behind(token, timeout=30.0):
        problems.append("left running after the checks")
    outcome = f"{stage:<6} {what:<24} after {rows:>3} rows: exit {code}; " + (
        "ok" if not problems else "; ".join(problems)
    )
    return not problems, outcome


def main(argv: list[str] | None = None) -> int:
    """Run ``--rounds`` rounds (stage and kind cycle through every pair, the moment is random); 0 when every
    round's checks held."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, printed")
    parser.add_argument("--out", type=Path, default=Path("runs") / "faults")
    options = parser.parse_args(argv)
    seed = random.SystemRandom().randrange(10**6) if options.seed is None else options.seed
    replay = f"--rounds {options.rounds} --seed {seed} --out runs/faults/replay-{seed}"
    print(f"seed {seed} (replay: .venv/bin/python -m tests.support.fault_injection {replay})", flush=True)
    rng = random.Random(seed)
    options.out.mkdir(parents=True, exist_ok=False)
    pairs: list[tuple[str, str]] = []
    passed = 0
    started = time.monotonic()
    for index in range(options.rounds):
        if not pairs:  # a new cycle: every pair once, in a random order
            pairs = [(stage, kind) for stage in STAGES for kind in KINDS]
            rng.shuffle(pairs)
        stage, kind = pairs.pop()
        # A tune trial lasts 6 s: on a loaded machine it may end before 200 episodes, and the kill must come
        # while it runs.
        rows = rng.randint(5, 20 if stage == "tune" else 200)
        try:
            ok, line = one_round(index, stage, kind, rows, options.out, rng)
        except (Exception, pytest.fail.Exception) as exc:  # a wait that failed, a worker gone: this round's
            ok, line = False, f"{stage:<6} {kind:<24} after {rows:>3} rows: {type(exc).__name__}: {exc}"
        passed += ok
        print(f"{index:>2} {'PASS' if ok else 'FAIL'} {line}", flush=True)
    print(f"{passed}/{options.rounds} rounds passed in {time.monotonic() - started:.0f} s", flush=True)
    return 0 if passed == options.rounds else 1


if __name__ == "__main__":
    sys.exit(main())
