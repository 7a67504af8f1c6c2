"""Fault injection: kill, stop or hang up a training run, a resume or a tune study at a random moment, many
times over, and damage what a scheduler or a cluster damages (a deleted lock file, a full disk, a damaged
last.pt, a kill during --force or during a resume's trim); after each, the run dir must load, resume and
keep its CSVs in order, and nothing may be left running.

    python -m tests.support.fault_injection --rounds 40 --out runs/faults  # make test-faults (.ci/run: 4)
    python -m tests.support.fault_injection --rounds 6 --kinds group-stop,group-hup --seed 1 --out runs/f1
    python -m tests.support.fault_injection --rounds 2 --stages ray --out runs/f2  # node mode, not by default

The moment is an event, not a clock: the fault comes once episodes.csv holds a random number of rows (and,
on a resume, once it has grown past what the resume started with), or at the event it is about (the trim's
rewrite, the claim of --force). The (stage, kind) pairs (PAIRS) come in a random order, each pair once per
cycle. The seed is random unless given, and printed first, so that a failure can be replayed. Each round
checks the exit code the fault must leave, that the run dir loads and resumes with its CSVs continuous
(exactly the rows its checkpoint covers kept, none lost or twice), that nothing is left running, and what
its kind promises beyond that (KIND_CHECKS); it prints one line; the last line counts the rounds whose
checks all held, and the exit code is 0 only when every round passed.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest

from tests.support.commands import end, popen_a3c, run_a3c, wait_until
from tests.support.fault_checks import check_run, csv_problems, one_error_line, snapshot
from tests.support.fault_scenarios import (
    Round,
    damaged_last,
    fill_disk,
    force_killed,
    kill_trim,
    lock_deleted,
    mounted_small_disk,
    ray_round,
    small_disk_refused,
)
from tests.support.processes import left_behind, spawned_children
from tests.support.run_files import data_rows, read_json

TRAIN = "train --env CartPole-v1 --workers 2 --target-return 1e9 --quiet --set checkpoint_interval=0.5"
TUNE = "tune --env CartPole-v1 --trials 2 --trial-seconds 6 --seed 0"
HANG_TIMEOUT = 6  # --hang-timeout of the rounds that hang a child or stop the group
# Every (stage, kind) of the default cycle. Kinds: SIGKILL the trainer, a worker, the evaluator or the
# group; SIGTERM or SIGHUP the group; SIGSTOP the evaluator (killed as hung, restarted) or the whole group
# past the hang timeout (then SIGCONT: nothing may be killed as hung); delete the lock file (no second
# writer may get in); fill the disk (a tmpfs run dir); SIGKILL a resume at its trim; damage last.pt
# before a resume; SIGKILL the trainer of a --force over an earlier run.
PAIRS = (
    *(("train", k) for k in ("trainer", "worker", "group-kill", "group-term")),
    *(("train", k) for k in ("evaluator-kill", "evaluator-stop", "group-stop", "group-hup")),
    ("train", "lock-deleted"),
    ("train", "enospc"),
    *(("resume", k) for k in ("trainer", "worker", "group-kill", "group-term", "trim", "damaged-last")),
    *(("tune", k) for k in ("trainer", "worker", "group-kill", "group-term")),
    ("force", "trainer"),
)
# Node mode (a Ray cluster of the run's own; its start-up alone takes 10-40 s): `--stages ray` only.
OPTIONAL_PAIRS = (("ray", "shard"), ("ray", "group"))
# The exit code each kind of the kill-during-a-run rounds leaves (Popen's: -N for a process killed by signal
# N): the trainer or the group SIGKILLed; where the run goes on (a child killed or hung and restarted, the
# group stopped and continued) a SIGTERM ends it (128 + 15), as a group's does; a SIGHUP is a stop (128 + 1).
EXIT_CODES = {
    "trainer": -9,
    "group-kill": -9,
    "worker": 143,
    "group-term": 143,
    "evaluator-kill": 143,
    "evaluator-stop": 143,
    "group-stop": 143,
    "group-hup": 129,
}
# What each kind promises beyond a run dir that loads and resumes with continuous CSVs.
KIND_CHECKS = {
    "evaluator-kill": "a new evaluator started",
    "evaluator-stop": "the stopped evaluator killed as hung and a new one started",
    "group-stop": "no child killed as hung after the continue (the same children, summary restarts 0)",
    "group-hup": "exit 129 with summary.json and last.pt",
    "lock-deleted": "a second writer refused while the first runs, or the first stops with an error line",
    "enospc": "the run stops on its own, with one error: line and no traceback",
    "trim": "a second resume still gives continuous rows",
    "damaged-last": "the resume falls back to the newest intact step-*.pt with a warning",
    "force": "the old run or the new one complete, never neither",
    "shard": "the run goes on (20 episodes and a checkpoint after the kill); SIGTERM: 143",
    "group": "the run goes on (20 episodes and a checkpoint after the kill); SIGTERM: 143",
}


def kill(proc: subprocess.Popen, kind: str, rng: random.Random) -> str:
    """Signal as ``kind`` says: SIGKILL the trainer, one worker or the evaluator, SIGSTOP the evaluator,
    or signal the whole group."""
    if kind == "trainer":
        os.kill(proc.pid, signal.SIGKILL)
        return "SIGKILL trainer"
    if kind in ("worker", "evaluator-kill", "evaluator-stop"):
        prefix = "a3c-worker" if kind == "worker" else "a3c-evaluator"
        victim = rng.choice(sorted(p for p in spawned_children(proc.pid) if _name(p).startswith(prefix)))
        signum = signal.SIGSTOP if kind == "evaluator-stop" else signal.SIGKILL
        what = f"{signum.name} {_name(victim)}"
        os.kill(victim, signum)
        return what
    signum = {
        "group-kill": signal.SIGKILL,
        "group-term": signal.SIGTERM,
        "group-stop": signal.SIGSTOP,
        "group-hup": signal.SIGHUP,
    }[kind]
    os.killpg(proc.pid, signum)
    return f"{signum.name} group"


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def run_and_fault(r: Round) -> tuple[str, int, list[str]]:
    """Start the stage, wait for ``r.rows`` more episodes (and a checkpoint, and every child), inject the
    fault; what was done, the exit code, and the problems the kind's own check found."""
    run_dir, watched = r.run_dir, r.run_dir
    if r.stage == "tune":
        args, watched = f"{TUNE} --study-dir {run_dir}".split(), run_dir / "trial-000"
    elif r.stage == "resume":
        first = run_a3c(*TRAIN.split(), "--max-steps", "4000", "--run-dir", str(run_dir), token=r.token)
        if first.returncode != 0:
            return "", 0, [f"the run to resume failed: {first.stderr.strip()[-200:]}"]
        args = ["train", "--resume", str(run_dir), "--max-steps", "10000000", "--quiet"]
    else:
        args = [*TRAIN.split(), "--max-steps", "10000000", "--run-dir", str(run_dir)]
    if r.kind in ("evaluator-stop", "group-stop") and r.stage != "tune":
        args += ["--hang-timeout", str(HANG_TIMEOUT)]
    problems: list[str] = []
    start_rows = data_rows(watched / "episodes.csv")
    proc = popen_a3c(*args, token=r.token)
    try:
        wait_until(proc, lambda: data_rows(watched / "episodes.csv") >= start_rows + r.rows, timeout=180)
        if r.stage != "tune":  # a run killed before its first checkpoint has nothing to resume from
            wait_until(proc, lambda: (run_dir / "checkpoints" / "last.pt").exists(), timeout=60)
        wait_until(proc, lambda: len(spawned_children(proc.pid)) >= 3, timeout=60)
        if r.kind == "lock-deleted":
            what, code, problems = lock_deleted(r, proc)
            return what, code, problems
        if r.kind == "enospc":
            what = fill_disk(r.run_dir)
            code = proc.wait(timeout=120)
            stderr = proc.communicate(timeout=10)[1]
            if code <= 0:
                problems.append(f"exit {code}, expected a code of its own (> 0)")
            problems += [p for p in [one_error_line(stderr)] if p]
            return what, code, problems
        before = spawned_children(proc.pid)
        hup_at = time.time()
        what = kill(proc, r.kind, r.rng)
        what += _after_kill(r, proc, before, watched, problems)
        code = proc.wait(timeout=120)
        stderr = proc.communicate(timeout=10)[1]
    finally:
        end(proc)
    if code != EXIT_CODES[r.kind]:
        problems.append(f"exit {code}, expected {EXIT_CODES[r.kind]} (stderr: {stderr.strip()[-300:]!r})")
    summary = run_dir / "summary.json"
    if r.kind == "group-stop" and summary.exists() and read_json(summary).get("restarts") != 0:
        problems.append(f"summary restarts {read_json(summary).get('restarts')}, expected 0")
    if r.kind == "group-hup" and (not summary.exists() or summary.stat().st_mtime < hup_at):
        problems.append("no summary.json written at the SIGHUP")
    return what, code, problems


def _after_kill(
    r: Round, proc: subprocess.Popen, before: set[int], watched: Path, problems: list[str]
) -> str:
    """Where the run goes on after the fault (a child killed or hung and restarted, the group stopped and
    continued), wait for what must follow, then SIGTERM it; what was done beyond the signal."""
    if r.kind in ("worker", "evaluator-kill", "evaluator-stop"):
        # it restarts the child (a hung one after --hang-timeout), then a SIGTERM ends it
        wanted = "a3c-worker" if r.kind == "worker" else "a3c-evaluator"
        wait_until(
            proc,
            lambda: any(_name(p).startswith(wanted) for p in spawned_children(proc.pid) - before),
            timeout=180,
        )
        os.kill(proc.pid, signal.SIGTERM)
    elif r.kind == "group-stop":
        time.sleep(HANG_TIMEOUT + 3)  # the fault itself: the group stopped past the hang timeout
        os.killpg(proc.pid, signal.SIGCONT)
        # The trainer logs 20 episodes after the continue: its supervisor has polled every child since.
        now = data_rows(watched / "episodes.csv")
        wait_until(proc, lambda: data_rows(watched / "episodes.csv") >= now + 20, timeout=120)
        if spawned_children(proc.pid) != before:
            problems.append("a child was replaced after the continue")
        os.kill(proc.pid, signal.SIGTERM)
        return f" {HANG_TIMEOUT + 3} s, SIGCONT"
    return ""


def one_round(
    index: int, stage: str, kind: str, rows: int, out: Path, rng: random.Random
) -> tuple[bool, str]:
    """Run one stage, inject the fault ``kind`` once episodes.csv has ``rows`` more rows (or at the event the
    kind is about), check the result."""
    r = Round(index, stage, kind, rows, out / f"round-{index:02d}", f"a3c-faults-{os.getpid()}-{index}", rng)
    scenario = {"trim": kill_trim, "damaged-last": damaged_last}.get(kind)
    if stage == "force":
        scenario = force_killed
    elif stage == "ray":
        scenario = ray_round
    if scenario is not None:
        what, code, problems = scenario(r)
    elif kind == "enospc":
        with mounted_small_disk(r.run_dir):
            what, code, problems = run_and_fault(r)
            problems += _checks_after(r, what)
    else:
        what, code, problems = run_and_fault(r)
        problems += _checks_after(r, what)
    if left_behind(r.token, timeout=30.0):
        problems.append("left running after the checks")
    outcome = f"{stage:<6} {what or kind:<24} after {rows:>3} rows: exit {code}; " + (
        "ok" if not problems else "; ".join(problems)
    )
    return not problems, outcome


def _checks_after(r: Round, what: str) -> list[str]:
    """Nothing left running; the run dir (a tune study: run again, and its trials) loads and resumes."""
    if not what:
        return []
    left = left_behind(r.token, timeout=30.0)
    problems = [f"left running: {sorted(left)}"] if left else []
    if r.kind == "enospc":
        for filler in r.run_dir.glob(".filler*"):
            filler.unlink()  # the disk has room again: the resume must continue from what was saved
    if r.stage != "tune":
        return problems + check_run(r.run_dir, r.token)
    watched = r.run_dir / "trial-000"
    again = run_a3c(*f"{TUNE} --study-dir {r.run_dir}".split(), timeout=600, token=r.token)
    if again.returncode != 0:
        problems.append(f"tune resume exit {again.returncode}: {again.stderr.strip()[-200:]}")
    for trial in sorted(r.run_dir.glob("trial-*")):
        problems += [f"{trial.name}: {p}" for p in csv_problems(trial)]
    if (watched / "checkpoints" / "last.pt").exists():  # a trial saves at its end (or a SIGTERM)
        problems += [f"{watched.name}: {p}" for p in check_run(watched, r.token, snapshot(watched))]
    return problems


def select(stages: str | None, kinds: str | None) -> list[tuple[str, str]]:
    """The pairs of the cycle: PAIRS (with OPTIONAL_PAIRS when ``stages`` names them), those of the
    comma-separated ``stages`` and ``kinds`` only where given."""
    pairs = [*PAIRS, *OPTIONAL_PAIRS]
    wanted_stages = set(stages.split(",")) if stages else {s for s, _ in PAIRS}
    wanted_kinds = set(kinds.split(",")) if kinds else {k for _, k in pairs}
    unknown = (wanted_stages - {s for s, _ in pairs}) | (wanted_kinds - {k for _, k in pairs})
    if unknown:
        raise ValueError(f"unknown stage or kind {sorted(unknown)}; the pairs: {pairs}")
    chosen = [(s, k) for s, k in pairs if s in wanted_stages and k in wanted_kinds]
    if not chosen:
        raise ValueError(f"no (stage, kind) pair of {pairs} fits --stages {stages} --kinds {kinds}")
    return chosen


def _children_cpu() -> float:
    """CPU seconds of the processes this one started and waited for, theirs included (a trainer killed
    outright leaves its children uncounted: a lower bound)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    """Run ``--rounds`` rounds (stage and kind cycle through every pair, the moment is random); 0 when every
    round's checks held."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, printed")
    parser.add_argument("--out", type=Path, default=Path("runs") / "faults")
    parser.add_argument("--stages", default=None, help="comma-separated (default: all but ray)")
    parser.add_argument("--kinds", default=None, help="comma-separated (default: all)")
    parser.add_argument("--list", action="store_true", help="print the pairs and what each checks, and exit")
    options = parser.parse_args(argv)
    if options.list:
        for stage, kind in [*PAIRS, *OPTIONAL_PAIRS]:
            default = "" if (stage, kind) in PAIRS else "  (--stages ray only)"
            promise = KIND_CHECKS.get("force" if stage == "force" else kind, f"exit {EXIT_CODES.get(kind)}")
            print(f"{stage:<6} {kind:<15} {promise}{default}")
        return 0
    try:
        chosen = select(options.stages, options.kinds)
    except ValueError as exc:
        parser.error(str(exc))  # exit 2
    seed = random.SystemRandom().randrange(10**6) if options.seed is None else options.seed
    picked = "".join(f" --{n} {v}" for n, v in (("stages", options.stages), ("kinds", options.kinds)) if v)
    replay = f"--rounds {options.rounds} --seed {seed}{picked} --out runs/faults/replay-{seed}"
    print(f"seed {seed} (replay: .venv/bin/python -m tests.support.fault_injection {replay})", flush=True)
    rng = random.Random(seed)
    options.out.mkdir(parents=True, exist_ok=False)
    if ("train", "enospc") in chosen and (reason := small_disk_refused(options.out)):
        print(f"enospc left out of the cycle: {reason}", flush=True)
        chosen.remove(("train", "enospc"))
        if not chosen:
            return 1
    pairs: list[tuple[str, str]] = []
    passed = 0
    started = time.monotonic()
    for index in range(options.rounds):
        if not pairs:  # a new cycle: every pair once, in a random order
            pairs = list(chosen)
            rng.shuffle(pairs)
        stage, kind = pairs.pop()
        # A tune trial lasts 6 s: on a loaded machine it may end before 200 episodes, and the kill must come
        # while it runs.
        rows = rng.randint(5, 20 if stage == "tune" else 200)
        began, cpu = time.monotonic(), _children_cpu()
        try:
            ok, line = one_round(index, stage, kind, rows, options.out, rng)
        except (Exception, pytest.fail.Exception) as exc:  # a wait that failed, a worker gone: this round's
            where = traceback.extract_tb(exc.__traceback__)[-1]  # the line that raised it
            at = f"{Path(where.filename).name}:{where.lineno}"
            ok, line = (
                False,
                f"{stage:<6} {kind:<24} after {rows:>3} rows: {type(exc).__name__}: {exc} ({at})",
            )
        passed += ok
        took = f"{time.monotonic() - began:>4.0f} s {_children_cpu() - cpu:>3.0f} cpu-s"
        print(f"{index:>2} {'PASS' if ok else 'FAIL'} {took} {line}", flush=True)
    print(
        f"{passed}/{options.rounds} rounds passed in {time.monotonic() - started:.0f} s "
        f"({_children_cpu():.0f} CPU-s of the processes it waited for: a lower bound)",
        flush=True,
    )
    return 0 if passed == options.rounds else 1


if __name__ == "__main__":
    sys.exit(main())
