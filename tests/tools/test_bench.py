"""The bench harness: its targets and table from known numbers, and each kind of real run at a small scale."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

import a3c.tools.bench.harness as harness
from a3c.tools.bench.harness import ours_throughput
from a3c.tools.bench.report import markdown, summarize
from tests.support.commands import call_a3c_train
from tests.support.extras import require_extra

LAGS = {"ours_2x16": 0.9, "ray_2x16_node": 1.0}


def synthetic(ours_rate: float = 13_000.0) -> dict:
    solve = lambda t, steps, mean: {  # noqa: E731
        "solved": t is not None, "time_to_solve_s": t, "steps": steps, "reeval_mean": mean,
        "total_steps": steps, "evaluator_cpu_s": 0.1,
    }  # fmt: skip
    rates = {"ours_1x1": 7000, "ours_2x1": ours_rate, "ours_1x8": 20_000, "ours_2x8": 36_000}
    rates |= {"ours_1x16": 30_000, "ours_2x16": 54_000, "sb3_16": 9000, "sb3_32": 16_000}
    rates["ray_2x16_node"] = 27_000
    return {
        "plan": {"repeats": 2},
        "solve": {
            "ours": [solve(3.0, 20_000, 500.0), solve(4.0, 30_000, 490.0), solve(5.0, 40_000, 480.0)],
            "sb3": [solve(8.0, 9000, 500.0), solve(10.0, 10_000, 475.0), solve(None, 50_000, 300.0)],
        },
        "throughput": {
            k: {
                "steps_per_s": v,
                "policy_lag_mean": LAGS.get(k),
                "global_lag_mean": 0.0 if "node" in k else None,
            }
            for k, v in rates.items()
        },
        "breakdown": {"total_us": 50.0},
    }


def test_summary_checks_every_target():
    results = synthetic()
    s = summarize(results)
    assert s["ratio_ours_over_sb3"] == pytest.approx(4.0 / 9.0)  # medians of the solved runs: 4.0 and 9.0
    assert s["throughput_2x16_over_sb3_32"] == pytest.approx(54_000 / 16_000)
    assert s["scaling_efficiency"] == pytest.approx({"1": 13_000 / 14_000, "8": 0.9, "16": 0.9})
    ray = "Ray 2 x 16 (node mode) >= 0.9 x local"
    assert all(ok for name, ok in s["checks"].items() if name != ray), s["checks"]
    slow = summarize(synthetic(ours_rate=11_000))
    failed = [name for name, ok in slow["checks"].items() if not ok]
    assert failed == [
        "classic 2 workers x 1 env >= 12,000 steps/s",
        "scaling efficiency 1 -> 2 workers >= 0.85 at every throughput setting",
        ray,
    ]
    results["summary"] = s
    table = markdown(results)
    assert "| a3c train (default preset) | 4.0 | 3.0 | 5.0 | 3/3 |" in table
    assert "| SB3 A2C (zoo) | 9.0 | 8.0 | 10.0 | 2/3 |" in table
    assert "[x] 2 workers x 16 envs >= 2.5 x SB3 with 32 envs" in table
    assert (
        "| | 27,000 | 0.50 of local; policy lag 1.00 (local backend 0.90), global lag 0.00 exchanges |"
        in table
    )
    assert not s["checks"][ray] and s["ray_node_over_local"] == 0.5


def test_bench_needs_sane_arguments(capsys):
    # In this process (tests/test_cli.py runs bad input as a real command once): one error line, exit 2.
    from a3c.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--seeds", "0"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.startswith("error: --seeds: 0"), err


ROW_EVERY, MAX_STEPS = 100, 400  # the CartPole preset's update is 2 envs x t_max 5 = 10 steps


def metrics_rows(run_dir: Path) -> list[tuple[float, int]]:
    """(wall_time, global_step) of each row of a run's metrics.csv."""
    with (run_dir / "metrics.csv").open() as f:
        header = f.readline().strip().split(",")
        wall, step = header.index("wall_time"), header.index("global_step")
        return [(float(cells[wall]), int(cells[step])) for cells in (line.strip().split(",") for line in f)]


@pytest.mark.slow
def test_our_throughput_run_reads_its_metrics(tmp_path, monkeypatch):
    # The harness ends its run by the clock (--max-seconds), which a slow start-up shortens; here the run ends
    # by steps instead, with a metrics row every ROW_EVERY steps of its one worker: the same rows on any
    # machine (--max-seconds stays, as a safety cap). No warm-up: every row counts. What the rate is depends
    # on the machine: the bench's business, not this test's.
    # The command runs in this process (its workers forked from the session's forkserver): the same
    # arguments, without an interpreter, torch and a forkserver of its own to start.
    monkeypatch.setattr(harness, "WARMUP_S", 0.0)
    commands = []

    def by_steps(*args: str, timeout: float, env=None):
        commands.append(args)
        assert args[:3] == ("-m", "a3c", "train") and env is None, args
        cap = args.index("--max-seconds")
        steps = ("--max-steps", str(MAX_STEPS), "--set", f"metrics_interval_steps={ROW_EVERY}")
        return call_a3c_train(*args[3:cap], "--max-seconds", "240", *steps, *args[cap + 2 :])

    monkeypatch.setattr(harness, "run_python", by_steps)
    run = ours_throughput(1, 2, 5.0, tmp_path)
    command = commands[0]
    option = lambda name: command[command.index(name) + 1]  # noqa: E731
    assert (option("--workers"), option("--envs-per-worker"), option("--backend")) == ("1", "2", "local")
    assert option("--max-seconds") == "6.0" and "target_return=none" in command  # 5 s + warm-up + 1 s
    first_dir = Path(option("--run-dir"))
    rows, metrics = metrics_rows(first_dir), (first_dir / "metrics.csv").read_text()
    assert [step for _, step in rows] == list(range(ROW_EVERY, MAX_STEPS + 1, ROW_EVERY))
    seconds = rows[-1][0] - rows[0][0]
    steps = MAX_STEPS - ROW_EVERY
    assert run == {
        "policy_lag_mean": 0.0,  # one worker: nobody else's updates land in between
        "global_lag_mean": None,  # no sync.csv: that is Ray's
        "workers": 1,
        "envs_per_worker": 2,
        "t_max": None,
        "steps": steps,
        "seconds": seconds,
        "steps_per_s": steps / seconds,
    }

    # The bench repeats each setting: the second run must not collide with the first. It gets a run dir of
    # its own, new at its start; there the same metrics (the first run's, replayed) give the same result.
    fresh = []

    def replay(*args: str, timeout: float, env=None):
        commands.append(args)
        run_dir = Path(args[args.index("--run-dir") + 1])
        fresh.append(not run_dir.exists())
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "metrics.csv").write_text(metrics)
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(harness, "run_python", replay)
    assert ours_throughput(1, 2, 5.0, tmp_path) == run
    second_dir = Path(commands[1][commands[1].index("--run-dir") + 1])
    assert fresh == [True] and second_dir.parent == first_dir.parent and second_dir != first_dir


@pytest.mark.slow
def test_peer_throughput_command_prints_one_json_result(capsys):
    # The command's click entry point in this process (torch is imported already), over a short window:
    # what it prints is the point, not the rate.
    require_extra("stable_baselines3", "bench")
    from a3c.tools.bench.sb3_peer import main

    main.main(["throughput", "--envs", "4", "--seconds", "0.2", "--warmup", "0"], standalone_mode=False)
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["envs"] == 4 and result["steps"] > 0 and result["steps_per_s"] > 0


# What each timed collaborator of an update costs on the breakdown's clock, in its seconds; "other" is what
# Learner.update costs beyond them. Whole numbers: every sum and difference of times is exact.
COSTS = {"env": 1, "policy": 2, "rollout": 4, "loss": 8, "clip": 16, "step": 32, "pull": 64, "other": 128}


class BreakdownClock:
    """``perf_counter`` for the breakdown: it stands still but for the collaborators of an update, each of
    which moves it on by its cost in COSTS when it returns. ``calls`` counts them from the breakdown's first
    reading on (its measurement; the warm-up before it does not count), ``steps`` the env steps of the
    updates measured."""

    def __init__(self):
        self.now, self.measuring, self.calls, self.steps = 0.0, False, Counter(), 0

    def perf_counter(self) -> float:
        self.measuring = True
        return self.now

    def costing(self, fn, key: str):
        def call(*args, **kwargs):
            result = fn(*args, **kwargs)
            self.now += COSTS[key]
            self.calls[key] += self.measuring
            if key == "other":
                self.steps += result.steps * self.measuring
            return result

        return call


def test_breakdown_parts_add_up(monkeypatch):
    # On a clock that only its collaborators move, each part of the breakdown is exactly what they cost: each
    # timer wraps what it names, once (a part counted twice, or one left out, changes a figure); the parts and
    # "other" (Learner.update's own cost) add up to the total; and the steps per second are the steps over it.
    import a3c.algo.learner as learner_module
    import a3c.tools.bench.breakdown as breakdown_module
    from a3c.algo.learner import Learner

    clock = BreakdownClock()
    monkeypatch.setattr(breakdown_module, "time", SimpleNamespace(perf_counter=clock.perf_counter))
    real_init = Learner.__init__

    def init(self, *args, **kwargs):  # what the breakdown wraps (the same attributes), made to cost
        real_init(self, *args, **kwargs)
        self.collector.envs.step = clock.costing(self.collector.envs.step, "env")
        self.policy = clock.costing(self.policy, "policy")
        self.collector.collect = clock.costing(self.collector.collect, "rollout")
        self.numpy_grad.loss_and_grad = clock.costing(self.numpy_grad.loss_and_grad, "loss")
        self.optimizer.step = clock.costing(self.optimizer.step, "step")

    monkeypatch.setattr(Learner, "__init__", init)
    monkeypatch.setattr(Learner, "update", clock.costing(Learner.update, "other"))
    for name, key in (("clip_flat_grad", "clip"), ("pull_weights", "pull")):
        monkeypatch.setattr(learner_module, name, clock.costing(getattr(learner_module, name), key))
    parts = breakdown_module.breakdown(seconds=2000.0, warmup_updates=2)  # seconds of this clock

    n, steps = clock.calls, clock.steps
    assert all(n[key] > 0 for key in COSTS), n  # each of them ran in the measurement
    per_step = lambda key: n[key] * COSTS[key] / steps * 1e6  # noqa: E731  µs per step, as the breakdown
    total = sum(n[key] * COSTS[key] for key in COSTS)  # every update, measured whole: nothing else moves it
    expected = {
        "env_step_us": per_step("env"),
        "policy_forward_us": per_step("policy"),
        "sampling_and_buffers_us": per_step("rollout"),  # collect's own cost, without the env's and policy's
        "loss_and_gradient_us": per_step("loss"),
        "clip_us": per_step("clip"),
        "optimizer_step_us": per_step("step"),
        "weight_pull_us": per_step("pull"),
        "total_us": total / steps * 1e6,
        "steps_per_s": steps / total,
    }
    assert {k: parts[k] for k in expected} == expected
    assert parts["other_us"] == pytest.approx(per_step("other"), rel=1e-12)  # total minus the parts, rounded


def test_breakdown_names_the_network_it_timed():
    # A conv net's breakdown lists its LSTM and frame stack, not the MLP's widths it does not have.
    from a3c.core.config import Config
    from a3c.tools.bench.breakdown import config_summary

    conv = config_summary(
        Config(env_id="ALE/Pong-v5", model="cnn", lstm_size=256, envs_per_worker=8, t_max=10)
    )
    assert conv == {"model": "cnn", "envs_per_worker": 8, "t_max": 10, "lstm_size": 256, "frame_stack": 1}
    mlp = config_summary(Config(env_id="CartPole-v1"))
    assert mlp["model"] == "mlp" and "hidden_sizes" in mlp and "lstm_size" not in mlp
