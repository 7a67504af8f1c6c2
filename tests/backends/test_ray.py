"""The Ray backend on a real Ray cluster: the session's loopback head (``ray_head``, in
tests/backends/conftest.py), which every run joins with ``--ray-address`` (the one run that starts its own
cluster is test_ray_cluster.py's). Two workers (one node group) train and evaluate while a hung
evaluator actor is killed and restarted; a checkpoint resumes on the local backend and the other way round.
(A killed group and a hung shard: test_ray_nodes.py.)

Each test waits for the events it is about (metrics rows of a worker, a restart, an evaluation), then ends
the run with SIGINT: ``--max-seconds`` is only a cap, for a run that never gets there. Hangs are injected with
``A3C_TEST_HANG`` (ray/remote.py) into the named actor alone, which the driver holds to the injected hang's
own short timeout; every healthy actor has ``--hang-timeout`` = the cap, so none is taken for hung however
loaded the machine. The learning itself (solving CartPole in time) is tests/learning/test_ray_learning.py's.
Each test checks that no process of its runs, their actors included, is left."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, a3c_env, call_a3c, csv_rows, data_rows, read_json, run_a3c
from tests.ray_head import (
    WAIT_CAP_S,
    RayHead,
    assert_no_ray_left,
    end,
    join_head,
    wait_for,
)

__import__("tests.helpers", fromlist=["*"]).require_extra("ray", "ray")  # skips, or fails in CI
pytestmark = pytest.mark.slow

CAP_S = 600  # --max-seconds and --hang-timeout of a run the test ends itself: caps, never reached
EXIT_CAP_S = 120  # a run's exit after SIGINT or its failure (its actors are killed, its last sync saved)


def start_run(tmp_path: Path, token: str, address: str, *args: str) -> subprocess.Popen:
    """A two-worker CartPole run on the head at ``address`` that does not end by itself (its target is out of
    reach); stdout and stderr to files, read while it runs."""
    command = "train --env CartPole-v1 --backend ray --workers 2 --target-return 1e9 --quiet --max-seconds "
    command += f"{CAP_S} --hang-timeout {CAP_S} --ray-address {address} --run-dir {tmp_path / 'run'}"
    command = [sys.executable, "-m", "a3c", *command.split(), *args]
    with open(tmp_path / "stdout.txt", "w") as out, open(tmp_path / "stderr.txt", "w") as err:
        return subprocess.Popen(command, cwd=ROOT, env=a3c_env(token), stdout=out, stderr=err,
                                start_new_session=True)  # fmt: skip


def interrupt(run: subprocess.Popen, err_path: Path) -> None:
    """SIGINT, as Ctrl-C in a terminal: the run stops its actors, saves and exits with 130."""
    run.send_signal(signal.SIGINT)
    assert run.wait(timeout=EXIT_CAP_S) == 130, err_path.read_text()[-3000:]


def metrics_workers(run_dir: Path) -> list[str]:
    """The worker id of each complete row of metrics.csv so far, in the order the driver wrote them."""
    try:
        text = (run_dir / "metrics.csv").read_text()
    except OSError:
        return []
    lines = text.splitlines()[1:] if text.endswith("\n") else text.splitlines()[1:-1]  # not a half row
    return [line.split(",")[2] for line in lines]


def inject_hang(head: RayHead, monkeypatch: pytest.MonkeyPatch, token: str, actor: str) -> str:
    """Runs on ``head`` in which ``actor`` hangs (its actors read A3C_TEST_HANG, and so does the driver, which
    holds that actor alone to INJECTED_HANG_TIMEOUT_S); returns the ``--ray-address``."""
    monkeypatch.setenv("A3C_TEST_HANG", actor)
    return join_head(head, monkeypatch, token, A3C_TEST_HANG=actor)


def test_two_workers_train_and_a_hung_evaluator_actor_is_restarted_until_interrupted(
    tmp_path, token, ray_head, monkeypatch
):
    """Two workers (one node group) train and evaluate; the evaluator actor's first incarnation hangs in its
    first play, is killed and restarted, and every evaluation is its restarted one's; SIGINT ends the run."""
    run_dir, err = tmp_path / "run", tmp_path / "stderr.txt"
    address = inject_hang(ray_head, monkeypatch, token, "evaluator")
    run = start_run(tmp_path, token, address)
    try:
        wait_for(
            lambda: "the evaluator actor hung" in err.read_text(), WAIT_CAP_S, "the hang is seen", run, err
        )
        both = lambda: set(metrics_workers(run_dir)) == {"0", "1"} and data_rows(run_dir / "eval.csv") >= 1  # noqa: E731
        wait_for(both, WAIT_CAP_S, "both workers' metrics and an evaluation", run, err)
        interrupt(run, err)
    finally:
        end(run)
    stderr = err.read_text()
    hung = re.findall(
        r"warning: the evaluator actor hung \(.*\) and was killed; restarting it \((\d)/3\)", stderr
    )
    assert hung == ["1"], stderr[-3000:]
    assert "warning: worker" not in stderr, stderr[-3000:]  # the healthy actors were left alone
    summary, config = read_json(run_dir / "summary.json"), read_json(run_dir / "config.json")
    assert summary["exit_reason"] == "SIGINT" and summary["restarts"] == 1, (summary, stderr[-3000:])
    assert config["backend"] == "ray" and config["ray_address"] == address and config["workers"] == 2
    for name in ("episodes.csv", "metrics.csv", "eval.csv", "checkpoints/last.pt", "checkpoints/best.pt"):
        assert (run_dir / name).exists(), name
    assert set(metrics_workers(run_dir)) == {"0", "1"}
    # The evaluator actor played whole CartPole episodes (a reward of 1 a step: return = length): an
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
    assert_no_ray_left(token)


def train(token: str, run_dir: Path, *args: str) -> dict:
    result = run_a3c("train", *args, "--quiet", timeout=CAP_S, token=token)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "starts afresh" not in result.stderr  # no statistics lost at a resume
    return read_json(run_dir / "summary.json")


def test_a_checkpoint_resumes_on_the_other_backend_both_ways(tmp_path, token, ray_address):
    """One run that changes backend at each resume, local → ray → local: both directions in three segments."""
    from a3c.rundir.resume import load_resume_checkpoint

    run_dir = tmp_path / "run"
    # Step budgets end every segment; the target, --max-seconds and --hang-timeout are out of reach.
    common = ("--target-return", "1e9", "--max-seconds", str(CAP_S), "--hang-timeout", str(CAP_S))
    common += ("--ray-address", ray_address, "--workers", "2")  # one node group of 2 on the head
    # Pendulum's preset: shared observation statistics and reward scaling, which must cross backends too.
    train(token, run_dir, "--env", "Pendulum-v1", "--backend", "local", "--max-steps", "20000",
          "--run-dir", str(run_dir), *common)  # fmt: skip
    before = load_resume_checkpoint(run_dir)
    assert before["config"]["backend"] == "local" and before["global_step"] >= 20_000
    assert before["config"]["obs_norm"] and before["config"]["reward_scale"]
    # Every observation and discounted return of every worker reached the checkpoint.
    assert before["obs_norm"]["count"] >= before["global_step"] and before["reward_stats"]["count"] >= 20_000
    for resumes, backend in enumerate(("ray", "local"), start=1):
        summary = train(token, run_dir, "--resume", str(run_dir), "--backend", backend,
                        "--max-steps", str(before["global_step"] + 20_000), *common)  # fmt: skip
        after = load_resume_checkpoint(run_dir)
        assert after["config"]["backend"] == backend and after["resumes"] == resumes
        assert summary["exit_reason"] == "max_steps"
        assert after["global_step"] == summary["total_steps"] >= before["global_step"] + 20_000
        assert after["updates"] > before["updates"]
        step_before = before["optimizer_state"]["state"][0]["step"]
        assert after["optimizer_state"]["state"][0]["step"] > step_before  # the optimizer state went on, too
        # The statistics went on from the checkpoint's, not afresh: their counts hold every segment.
        for key in ("obs_norm", "reward_stats"):
            assert after[key]["count"] >= before[key]["count"] + 20_000, (backend, key)
        steps = [int(line.split(",")[1]) for line in (run_dir / "episodes.csv").read_text().splitlines()[1:]]
        assert steps == sorted(steps) and steps[-1] > before["global_step"], backend
        before = after
    assert_no_ray_left(token)
