"""The fault-injection rounds that are more than a signal during a run (``tests.support.fault_injection``):
a kill during a resume's trim and during ``--force``, a damaged last.pt, a deleted lock file, a full disk
(a tmpfs run dir), node mode's shard and group killed. Each returns (what was done, the exit code of the
process the fault hit, the problems found)."""

from __future__ import annotations

import contextlib
import errno
import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.commands import end, popen_a3c, run_a3c, wait_until
from tests.support.fault_checks import check_run, checkpoint_bounds, last_step, one_error_line, snapshot
from tests.support.processes import left_behind
from tests.support.run_files import data_rows

TRAIN = "train --env CartPole-v1 --workers 2 --target-return 1e9 --quiet --set checkpoint_interval=0.5"
LOGS = ("eval.csv", "metrics.csv", "episodes.csv")  # what a resume trims (a3c.rundir.resume.LOGS)
DISK_SIZE = "4m"  # the tmpfs of the full-disk round: a CartPole run's files and checkpoints fit, with room


@dataclass
class Round:
    """One round: its index, (stage, kind), the rows to wait for, its run dir, the token its processes
    carry, the random source of its choices."""

    index: int
    stage: str
    kind: str
    rows: int
    run_dir: Path
    token: str
    rng: random.Random


def wait_for(
    proc: subprocess.Popen, condition: Callable[[], object], timeout: float, poll: float = 0.05
) -> bool:
    """Block until ``condition()`` holds (True) or ``proc`` has exited (False); fail when time runs out.
    ``poll``: the seconds between looks (1 ms for an event that lasts milliseconds)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            return False
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout} s")
        time.sleep(poll)
    return True


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


def _first_run(r: Round, steps: int = 4000) -> list[str]:
    first = run_a3c(*TRAIN.split(), "--max-steps", str(steps), "--run-dir", str(r.run_dir), token=r.token)
    return [] if first.returncode == 0 else [f"the first run failed: {first.stderr.strip()[-200:]}"]


def _left(r: Round) -> list[str]:
    left = left_behind(r.token, timeout=30.0)
    return [f"left running: {sorted(left)}"] if left else []


def kill_trim(r: Round) -> tuple[str, int, list[str]]:
    """SIGKILL a run once it has logged rows past its checkpoint, resume it and SIGKILL the resume at its
    trim (one of its CSVs, at random, seen being rewritten: its temp file, or the file renamed over); a
    second resume must keep exactly the rows the checkpoint covers, as if the first had never started."""
    proc = popen_a3c(*TRAIN.split(), "--max-steps", "10000000", "--run-dir", str(r.run_dir), token=r.token)
    try:
        wait_until(proc, lambda: data_rows(r.run_dir / "episodes.csv") >= r.rows, timeout=180)
        wait_until(proc, lambda: (r.run_dir / "checkpoints" / "last.pt").exists(), timeout=60)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        end(proc)
    problems = _left(r)
    before, bounds = snapshot(r.run_dir), checkpoint_bounds(r.run_dir / "checkpoints" / "last.pt")
    inodes = {name: _inode(r.run_dir / name) for name in LOGS}

    # The moment: one CSV of the trim, at random, seen being rewritten (its temp file) or renamed over.
    name = r.rng.choice([n for n in LOGS if inodes[n] is not None])

    def trimming() -> str | None:
        if (r.run_dir / f".{name}.trim").exists():
            return f"{name} being rewritten"
        if _inode(r.run_dir / name) != inodes[name]:
            return f"{name} rewritten"
        return None

    resume = popen_a3c(
        "train", "--resume", str(r.run_dir), "--max-steps", "10000000", "--quiet", token=r.token
    )
    try:
        seen = wait_for(resume, trimming, timeout=180, poll=0.001)
        moment = trimming()
        os.kill(resume.pid, signal.SIGKILL)
        code = resume.wait(timeout=60)
    finally:
        end(resume)
    what = f"SIGKILL resume at its trim ({moment})" if seen else "the resume ended before its trim"
    problems += _left(r)
    if code != -9:
        problems.append(f"resume exit {code}, expected -9")
    if checkpoint_bounds(r.run_dir / "checkpoints" / "last.pt") != bounds:
        problems.append("the killed resume got as far as a checkpoint: the trim's moment was missed")
        return what, code, problems + check_run(r.run_dir, r.token)
    return what, code, problems + check_run(r.run_dir, r.token, before, bounds)


def damaged_last(r: Round) -> tuple[str, int, list[str]]:
    """Damage a finished run's last.pt as a power cut does (truncated in place, which truncates its hard
    link, the newest step-*.pt, too; or a truncated copy renamed over it), then resume: the resume must fall
    back to the newest step-*.pt that loads, with a warning, and keep exactly the rows that one covers."""
    problems = _first_run(r)
    if problems:
        return "", 0, problems
    folder = r.run_dir / "checkpoints"
    last = folder / "last.pt"
    history = sorted(folder.glob("step-*.pt"))
    how = r.rng.choice(["in place", "renamed over"]) if len(history) > 1 else "renamed over"
    data = last.read_bytes()
    cut = r.rng.randint(0, len(data) // 2)
    if how == "in place":
        os.truncate(last, cut)
    else:
        tmp = folder / ".last.pt.damaged"
        tmp.write_bytes(data[:cut])
        os.replace(tmp, last)
    bounds = None
    for path in reversed(history):
        try:
            bounds = checkpoint_bounds(path)
            break
        except Exception:  # noqa: BLE001 - any failure to load is damage: the fallback skips it
            continue
    what = f"last.pt truncated to {cut} of {len(data)} bytes, {how}"
    if bounds is None:
        return what, 0, [f"no intact step-*.pt to fall back on ({len(history)} saved)"]
    return what, 0, check_run(r.run_dir, r.token, snapshot(r.run_dir), bounds, warning="warning")


def force_killed(r: Round) -> tuple[str, int, list[str]]:
    """SIGKILL the trainer of a ``--force`` over a finished run: at the claim (the old run's files moved or
    deleted) or once the new run has logged some rows. Then the run dir must hold a whole run: the old one
    (as it was, restored at the latest by the next resume) or the new one (resumable); never neither."""
    problems = _first_run(r)
    if problems:
        return "", 0, problems
    old, old_bounds = snapshot(r.run_dir), checkpoint_bounds(r.run_dir / "checkpoints" / "last.pt")
    old_inode = _inode(r.run_dir / "episodes.csv")
    moment = r.rng.choice(["claim", "rows"])

    def claimed() -> bool:  # the old run's summary.json stays gone until the new run ends (it never does)
        return (
            not (r.run_dir / "summary.json").exists()
            or not (r.run_dir / "checkpoints" / "last.pt").exists()
            or _inode(r.run_dir / "episodes.csv") != old_inode
        )

    def new_rows() -> bool:
        return claimed() and data_rows(r.run_dir / "episodes.csv") >= r.rows

    args = [*TRAIN.split(), "--max-steps", "10000000", "--run-dir", str(r.run_dir), "--force"]
    proc = popen_a3c(*args, token=r.token)
    try:
        seen = wait_for(proc, claimed if moment == "claim" else new_rows, timeout=180, poll=0.001)
        os.kill(proc.pid, signal.SIGKILL)
        code = proc.wait(timeout=60)
    finally:
        end(proc)
    what = f"SIGKILL --force at {'its claim' if moment == 'claim' else f'{r.rows} new rows'}"
    if not seen:
        return what, code, [f"--force ended before the kill (exit {code})"]
    problems = _left(r)
    if code != -9:
        problems.append(f"exit {code}, expected -9")
    try:
        bounds = checkpoint_bounds(r.run_dir / "checkpoints" / "last.pt")
    except (ValueError, OSError):
        bounds = None
    if bounds is not None and bounds != old_bounds:
        return what + ": the new run", code, problems + check_run(r.run_dir, r.token)
    # The old run, in place or to be restored by the next resume, must come back whole.
    found = check_run(r.run_dir, r.token, old, old_bounds, mended_by_resume=True)
    if found:
        problems.append("neither the old nor the new run is whole: " + "; ".join(found))
    return what + ": the old run", code, problems


def lock_deleted(r: Round, proc: subprocess.Popen) -> tuple[str, int, list[str]]:
    """Delete the running trainer's lock file, let it checkpoint twice (a run that watches its lock has
    noticed by then), then start a second writer (``--resume`` of the same dir). Right either way the lock is
    kept: while the first runs the second must be refused (exit 2, one line); a first that stopped on the
    loss must have ended with an error line. Then a SIGTERM ends the first (143)."""
    (r.run_dir / ".a3c.lock").unlink()
    last = r.run_dir / "checkpoints" / "last.pt"
    problems: list[str] = []
    for _ in range(2):  # last.pt is renamed over at each checkpoint: a new inode
        inode = _inode(last)
        if not wait_for(proc, lambda inode=inode: _inode(last) != inode, timeout=60):
            break
    if proc.poll() is not None:  # it noticed and stopped
        code = proc.returncode
        stderr = proc.communicate(timeout=10)[1]
        if code <= 0:
            problems.append(f"exit {code} after the lock was lost, expected a code of its own (> 0)")
        problems += [p for p in [one_error_line(stderr)] if p]
        return "lock file deleted: the run stopped", code, problems
    target = last_step(r.run_dir) + 500
    second = run_a3c(
        "train", "--resume", str(r.run_dir), "--max-steps", str(target), "--quiet", token=r.token
    )
    if second.returncode != 2:
        problems.append(f"a second writer was let in while the first ran (exit {second.returncode})")
    elif len(second.stderr.strip().splitlines()) != 1:
        problems.append(f"the refusal is not one line: {second.stderr.strip()[-200:]!r}")
    if proc.poll() is not None:
        problems.append(f"the first run ended (exit {proc.returncode}) while the second was refused")
    os.kill(proc.pid, signal.SIGTERM)
    code = proc.wait(timeout=120)
    if code != 143:
        problems.append(f"exit {code}, expected 143")
    return "lock file deleted, second writer", code, problems


def small_disk_refused(folder: Path) -> str | None:
    """Why this machine gives no small file system to fill (None: it does): a tmpfs mount needs root
    (``mount -t tmpfs -o size=4m tmpfs RUN_DIR``; in a container, CAP_SYS_ADMIN too). Tried once, on a
    folder of its own under ``folder``."""
    if os.geteuid() != 0:
        return "a full disk needs a small file system of its own: run as root (mount -t tmpfs)"
    probe = folder / ".mount-probe"
    probe.mkdir(parents=True)
    try:
        with mounted_small_disk(probe, keep=False):
            return None
    except OSError as exc:
        return str(exc)
    finally:
        probe.rmdir()


@contextlib.contextmanager
def mounted_small_disk(run_dir: Path, keep: bool = True) -> Iterator[None]:
    """``run_dir`` on a tmpfs of DISK_SIZE (root only: ``mount -t tmpfs -o size=4m tmpfs RUN_DIR``), so
    that the disk can really fill (ENOSPC from the kernel, not a patched call); OSError when the mount is
    refused. Afterwards (``keep``) its files are copied beside it (RUN_DIR-disk), and it is unmounted."""
    run_dir.mkdir(parents=True, exist_ok=True)
    mount = ["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(run_dir)]
    made = subprocess.run(mount, capture_output=True, text=True, timeout=30)
    if made.returncode != 0:
        raise OSError(f"{' '.join(mount)} failed: {made.stderr.strip()}")
    try:
        yield
    finally:
        if keep:
            with contextlib.suppress(OSError):
                shutil.copytree(run_dir, run_dir.with_name(run_dir.name + "-disk"), symlinks=True)
        subprocess.run(["umount", "--lazy", str(run_dir)], capture_output=True, timeout=30)


def fill_disk(run_dir: Path) -> str:
    """Fill ``run_dir``'s file system to the last block (``.filler`` files); what was written."""
    written = 0
    chunk = b"\0" * 65536
    for index in range(2):  # the second file takes the bytes a partly written last chunk left
        with contextlib.suppress(OSError), open(run_dir / f".filler{index}", "wb", buffering=0) as f:
            while True:
                try:
                    written += f.write(chunk if index == 0 else chunk[:512])
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    return f"disk filled ({written // 1024} KiB)"


def ray_round(r: Round) -> tuple[str, int, list[str]]:
    """Node mode: a run on a Ray cluster of its own (a node group of 2 workers, one parameter shard);
    SIGKILL its parameter shard (``ray::ParamShard``) or its node group (``ray::NodeGroup``) once it has
    logged ``r.rows`` episodes. The run must go on (20 more episodes logged and a checkpoint saved: a group
    replaced, a shard restored from the live groups), then a SIGTERM ends it (143); the run dir resumes as
    any other."""
    from tests.support.ray_head import actor_processes

    actor = {"shard": "ParamShard", "group": "NodeGroup"}[r.kind]
    args = [*TRAIN.split(), "--backend", "ray", "--max-steps", "10000000", "--run-dir", str(r.run_dir)]
    proc = popen_a3c(*args, token=r.token)
    problems: list[str] = []
    try:
        wait_until(proc, lambda: data_rows(r.run_dir / "episodes.csv") >= r.rows, timeout=300)
        wait_until(proc, lambda: (r.run_dir / "checkpoints" / "last.pt").exists(), timeout=120)
        victims = sorted(actor_processes(r.token, actor))
        if not victims:
            return f"no ray::{actor}", 0, [f"no ray::{actor} among the run's processes"]
        os.kill(r.rng.choice(victims), signal.SIGKILL)
        # Going on: 20 more episodes and a checkpoint taken after the kill (it needs every shard's slice).
        now, inode = data_rows(r.run_dir / "episodes.csv"), _inode(r.run_dir / "checkpoints" / "last.pt")
        wait_until(proc, lambda: data_rows(r.run_dir / "episodes.csv") >= now + 20, timeout=300)
        wait_until(proc, lambda: _inode(r.run_dir / "checkpoints" / "last.pt") != inode, timeout=300)
        os.kill(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=180)
        stderr = proc.communicate(timeout=10)[1]
    finally:
        end(proc)
    if code != 143:
        problems.append(f"exit {code}, expected 143 (stderr: {stderr.strip()[-300:]!r})")
    problems += _left(r)
    return f"SIGKILL ray::{actor}", code, problems + check_run(r.run_dir, r.token)
