"""The Ray backend's node mode on the shared loopback head, in one run: a crashed worker inside a group is
restarted by the group; a group that stops answering is taken for hung, killed and replaced; a killed group
is replaced by the driver and trains on, its counts kept; an evaluator actor that hangs is killed and
restarted, and the evaluations are its restart's; a shard that dies or hangs is rebuilt from the group's copy
of its slice, and past its budget fails the run naming it, with last.pt from the last sync; the failed run
resumes on Ray and ends at its step budget. (A group past its restart budget failing the run is
test_ray_node_groups.py's; two nodes, each exchange reaching every shard once, and losing a node, are
tests/backends/test_ray_cluster.py's; the arithmetic is test_ray_exchange.py's; a checkpoint crossing
backends is test_ray_cluster.py's.)

The test waits for the events it is about (metrics rows of a worker, a restart, an evaluation):
``--max-seconds`` is only a cap, for a run that never gets there. A hang is the test's own: it stops the
actor's process (the evaluator's first incarnation, a group with its forkserver and worker, a shard) with
SIGSTOP, in a run whose ``--hang-timeout`` is HANG_TIMEOUT_S, and lets it go on (SIGCONT) once the driver
has found it hung, or at the test's end. Its envs are paced (tests/support/envs.py ``Paced``): the workers
train on at a fraction of a core while the test waits. The test checks that no process of its runs, their
actors included, is left."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.commands import a3c_env, call_a3c, run_a3c
from tests.support.processes import alive, descendants, processes_with_token
from tests.support.ray_head import (
    METRICS_EVERY,
    WAIT_CAP_S,
    RayHead,
    actor_processes,
    assert_no_ray_left,
    end,
    join_head,
    wait_for,
)
from tests.support.run_files import assert_continuous, csv_rows, data_rows, read_json

__import__("tests.support.extras", fromlist=["*"]).require_extra("ray", "ray")  # skips, or fails in CI
pytestmark = pytest.mark.slow

CAP_S = 600  # --max-seconds: a cap, never reached (each run is ended by the test or fails)
# --hang-timeout of the run whose actors the test stops (SIGSTOP): long beside a healthy actor's answers
# (milliseconds apart: a beat every 50 ms), so that none is taken for hung on a loaded machine, and short, as
# the test waits it out four times. Not less: 6 s is the margin the local backend's hang tests keep too
# (tests/e2e/test_suspend_and_hangup.py, tests/support/fault_injection.py).
HANG_TIMEOUT_S = 6.0
EXIT_CAP_S = 120


def start_run(tmp_path: Path, token: str, address: str, *args: str) -> subprocess.Popen:
    """A paced CartPole run in node mode (one shard: two, each exchange reaching both, are
    test_ray_cluster.py's) that does not end by itself."""
    command = "train --env CartPole-v1 --wrapper tests.support.envs:Paced --backend ray --workers 2"
    command += " --target-return 1e9 --quiet"
    command += f" --max-seconds {CAP_S} --hang-timeout {HANG_TIMEOUT_S:g} --ray-address {address}"
    command += f" --run-dir {tmp_path / 'run'} --set ray_shards=1 --set sync_interval=0.5"
    command += f" --set metrics_interval_steps={METRICS_EVERY}"
    with open(tmp_path / "stdout.txt", "w") as out, open(tmp_path / "stderr.txt", "w") as err:
        argv = [sys.executable, "-m", "a3c", *command.split(), *args]
        return subprocess.Popen(argv, cwd=ROOT, env=a3c_env(token), stdout=out, stderr=err,
                                start_new_session=True)  # fmt: skip


def workers_in_metrics(run_dir: Path) -> list[str]:
    """The worker column of metrics.csv's complete rows so far."""
    try:
        lines = (run_dir / "metrics.csv").read_text().splitlines(keepends=True)[1:]
    except OSError:
        return []
    return [line.split(",")[2] for line in lines if line.endswith("\n")]


def signal_each(pids: set[int], signum: int) -> None:
    """Send ``signum`` to each of ``pids`` that is still alive (one that ends meanwhile is skipped)."""
    for pid in alive(pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def worker_process(token: str, name: str) -> int:
    """The PID of the worker process named ``name`` (e.g. ``a3c-worker-1``) among the test's processes."""
    (pid,) = [p for p in processes_with_token(token) if Path(f"/proc/{p}/comm").read_text().strip() == name]
    return pid


def file_stamp(path: Path) -> tuple[int, int]:
    """Which file is at ``path`` and when it was written: a checkpoint's atomic replace changes both."""
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns


def test_node_mode_outlives_its_faults_until_a_shard_fails_past_its_budget_and_the_run_resumes(
    tmp_path, token, ray_head: RayHead, monkeypatch
):
    """Node mode's failures in one run, each actor kind given two restarts: the evaluator actor's first
    incarnation, stopped (SIGSTOP) after its first evaluation, is found hung, killed and restarted, and its
    restart evaluates; a worker that crashes inside a node group is restarted by the group and trains on; the
    group, stopped with its forkserver and worker, is found hung, killed and replaced, and the replacement,
    killed, is replaced again, each training on with the counts kept; a parameter shard that dies, then its
    successor that stops answering, are rebuilt by the driver from the group's copy of their slice, and the
    group trains on with each; the third, stopped too, is past the budget: the run fails naming it, with
    last.pt from the last sync. It then resumes from that checkpoint on Ray, to its step budget."""
    from a3c.rundir.resume import load_resume_checkpoint

    address = join_head(ray_head, monkeypatch, token)
    run_dir, err = tmp_path / "run", tmp_path / "stderr.txt"
    last = run_dir / "checkpoints" / "last.pt"
    run = start_run(tmp_path, token, address, "--set", "max_restarts=2", "--set", "checkpoint_interval=1")
    stopped: set[int] = set()  # the first evaluator: stopped until the test's end
    frozen: set[int] = set()
    try:
        both = lambda: set(workers_in_metrics(run_dir)) == {"0", "1"}  # noqa: E731
        wait_for(both, WAIT_CAP_S, "both workers train", run, err)
        (group,) = actor_processes(token, "NodeGroup")  # one group for the one node
        (shard,) = actor_processes(token, "ParamShard")
        assert "libtorch" not in Path(f"/proc/{shard}/maps").read_text()  # a shard holds numpy arrays only

        def trains_on(what: str) -> None:
            since = len(workers_in_metrics(run_dir))
            each = lambda: min(workers_in_metrics(run_dir)[since:].count(w) for w in "01") >= 3  # noqa: E731
            wait_for(each, WAIT_CAP_S, what, run, err)

        def rebuilt_and_read(what: str) -> None:
            """The group trains on with a rebuilt shard, and a checkpoint has read it: the driver then holds
            it to --hang-timeout, not the start-up allowance."""
            trains_on(f"the group trains on with {what}")
            seen = file_stamp(last)
            wait_for(lambda: file_stamp(last) != seen, WAIT_CAP_S, f"a checkpoint from {what}", run, err)

        # Stopped once it has answered (an evaluation), the first evaluator is held to --hang-timeout, not
        # the start-up allowance. Its hang, its restart and the evaluation that follows go on meanwhile.
        wait_for(lambda: data_rows(run_dir / "eval.csv") >= 1, WAIT_CAP_S, "a first evaluation", run, err)
        stopped = actor_processes(token, "EvalActor")
        assert len(stopped) == 1, stopped
        signal_each(stopped, signal.SIGSTOP)
        os.kill(worker_process(token, "a3c-worker-1"), signal.SIGKILL)
        crashed = lambda: "warning: worker 1 crashed" in err.read_text()  # noqa: E731
        wait_for(crashed, WAIT_CAP_S, "the group sees its crashed worker", run, err)
        since = len(workers_in_metrics(run_dir))
        trains = lambda: workers_in_metrics(run_dir)[since:].count("1") >= 3  # noqa: E731
        wait_for(trains, WAIT_CAP_S, "worker 1 trains on", run, err)

        wait_for(last.exists, WAIT_CAP_S, "a checkpoint", run, err)
        before = load_resume_checkpoint(run_dir)["global_step"]
        frozen = {group} | descendants(group)  # with its forkserver and workers: nothing runs or answers
        signal_each(frozen, signal.SIGSTOP)
        hung = lambda: "warning: node group 0 did not answer within" in err.read_text()  # noqa: E731
        wait_for(hung, WAIT_CAP_S, "the driver finds the group hung", run, err)
        signal_each(frozen, signal.SIGCONT)  # Ray killed the actor; its forkserver and workers find it gone
        trains_on("the replacement trains")
        (replacement,) = actor_processes(token, "NodeGroup") - {group}
        os.kill(replacement, signal.SIGKILL)
        lost = lambda: re.search(r"warning: node group 0 (died|was restarted)", err.read_text())  # noqa: E731
        wait_for(lost, WAIT_CAP_S, "the driver sees the lost group", run, err)
        trains_on("the restarted group trains")
        assert len(actor_processes(token, "NodeGroup") - {group, replacement}) == 1
        hung = lambda: "the evaluator actor hung" in err.read_text()  # noqa: E731
        wait_for(hung, WAIT_CAP_S, "the evaluator's hang is seen", run, err)
        evaluations = data_rows(run_dir / "eval.csv")  # any later one is played by the restart
        signal_each(stopped, signal.SIGCONT)  # in case Ray's kill waits for it
        restarted = lambda: data_rows(run_dir / "eval.csv") > evaluations  # noqa: E731
        wait_for(restarted, WAIT_CAP_S, "an evaluation by the restarted evaluator", run, err)

        os.kill(shard, signal.SIGKILL)
        rebuilt = lambda: "warning: parameter shard 0 died" in err.read_text()  # noqa: E731
        wait_for(rebuilt, WAIT_CAP_S, "the driver rebuilds the dead shard", run, err)
        rebuilt_and_read("the rebuilt shard")
        frozen = actor_processes(token, "ParamShard")
        assert len(frozen - {shard}) == 1, frozen
        signal_each(frozen, signal.SIGSTOP)
        rebuilt = lambda: "warning: parameter shard 0 no answer within" in err.read_text()  # noqa: E731
        wait_for(rebuilt, WAIT_CAP_S, "the driver rebuilds the hung shard", run, err)
        rebuilt_and_read("the shard rebuilt again")
        frozen |= actor_processes(token, "ParamShard")
        signal_each(frozen, signal.SIGSTOP)
        code = run.wait(timeout=WAIT_CAP_S + EXIT_CAP_S)
    finally:
        signal_each(stopped | frozen, signal.SIGCONT)  # none is left stopped, whatever failed
        end(run)
    stderr = err.read_text()
    assert code == 1, stderr[-3000:]
    evaluator = re.findall(
        r"warning: the evaluator actor hung \(.*\) and was killed; restarting it \((\d)/2\)", stderr
    )
    assert evaluator == ["1"], stderr[-3000:]
    groups = re.findall(r"warning: node group 0 (.*); restarting it \((\d)/2\)", stderr)
    assert [n for _, n in groups] == ["1", "2"], stderr[-3000:]
    assert groups[0][0] == f"did not answer within {HANG_TIMEOUT_S:g} s (hung) and was killed", groups
    assert re.fullmatch(r"died \(\w+\)|was restarted", groups[1][0]), groups
    assert stderr.count("warning: worker") == 1, stderr[-3000:]  # worker 1's crash; the others left alone
    shards = re.findall(r"warning: parameter shard 0 (.*), seen by .*; rebuilt from (.*) \((\d)/2\)", stderr)
    assert [(source, n) for _, source, n in shards] == [
        ("node group 0's last exchange", "1"),
        ("node group 0's last exchange", "2"),
    ], stderr[-3000:]
    assert re.fullmatch(r"died \(\w+\)", shards[0][0]), shards
    assert shards[1][0] == f"no answer within {HANG_TIMEOUT_S:g} s (hung)", shards
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and re.search(r"error: parameter shard 0 failed: .*; past its restart budget",
                                          errors[0]), stderr[-3000:]  # fmt: skip
    summary, config = read_json(run_dir / "summary.json"), read_json(run_dir / "config.json")
    assert summary["exit_reason"] == "failed: parameter shard 0", summary
    # The evaluator, the worker inside the group, the group twice, the shard twice.
    assert summary["restarts"] == 6, summary
    assert config["backend"] == "ray" and config["ray_address"] == address and config["workers"] == 2
    saved = load_resume_checkpoint(run_dir)  # the last sync: weights and counters of one instant
    assert saved["global_step"] == summary["total_steps"] == int(saved["worker_steps"].sum()) > before
    # Both evaluator actors played whole CartPole episodes (a reward of 1 a step: return = length): an
    # evaluation round, and a confirmation round of as many when it was a candidate for best.pt (the first
    # always is; a solve's, 100, is out of reach).
    rounds = (config["eval_episodes"], 2 * config["eval_episodes"])
    rows = csv_rows(run_dir / "eval.csv")
    assert int(rows[0]["episodes"]) == rounds[1], rows[0]
    for row in rows:
        assert int(row["episodes"]) in rounds, row
        assert float(row["mean_return"]) == float(row["mean_length"]) >= 1, row
    evaluated = call_a3c("evaluate", str(run_dir), "--episodes", "3", "--json")
    assert evaluated.returncode == 0, evaluated.stderr
    report = json.loads(evaluated.stdout)
    assert report["checkpoint"] == str(run_dir / "checkpoints" / "best.pt") and report["episodes"] == 3, (
        report
    )
    assert report["min_return"] <= report["mean_return"] <= report["max_return"] <= 500, report
    assert report["mean_return"] == report["mean_length"] >= 1, report
    before_failure = csv_rows(run_dir / "episodes.csv")
    assert_no_ray_left(token)

    # It resumes from the last sync on the same head to its step budget: a node-mode run's usual end (the
    # groups stopped, a final evaluation, exit 0); counters and rows go on from it.
    step, evaluations = saved["global_step"], data_rows(run_dir / "eval.csv")
    # (--trust-env-module: the run's wrapper is the tests package's, which a resume imports from here.)
    result = run_a3c("train", "--resume", str(run_dir), "--max-steps", str(step + 2_000), "--quiet",
                     "--trust-env-module", timeout=WAIT_CAP_S + EXIT_CAP_S, token=token)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    summary = read_json(run_dir / "summary.json")
    assert summary["exit_reason"] == "max_steps" and summary["total_steps"] >= step + 2_000, summary
    resumed = load_resume_checkpoint(run_dir)
    assert resumed["resumes"] == 1 and resumed["config"]["backend"] == "ray"
    assert resumed["global_step"] == summary["total_steps"]
    assert data_rows(run_dir / "eval.csv") > evaluations  # the final evaluation at least
    assert_continuous(run_dir / "episodes.csv", before_failure, step, float(saved["wall_time"]))
    assert_no_ray_left(token)
