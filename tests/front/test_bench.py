"""The bench harness: its targets and table from known numbers, and each kind of real run at a small scale."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from a3c.tools.bench.harness import ours_throughput
from a3c.tools.bench.report import markdown, summarize
from tests.helpers import ROOT, require_extra

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
    # In this process (tests/front/test_cli.py runs bad input as a real command once): one error line, exit 2.
    from a3c.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--seeds", "0"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.startswith("error: --seeds: 0"), err


@pytest.mark.slow
def test_our_throughput_run_reads_its_metrics(tmp_path, monkeypatch):
    # No warm-up: every metrics row counts (rows come about once a second of the 6-s budget, which a slow
    # start-up shortens). What the rate is depends on the machine: the bench's business, not this test's.
    monkeypatch.setattr("a3c.tools.bench.harness.WARMUP_S", 0.0)
    for _ in range(2):  # the bench repeats each setting: the second run must not collide with the first
        run = ours_throughput(1, 2, 5.0, tmp_path)
        assert run["steps"] > 0 and run["seconds"] > 0 and run["steps_per_s"] > 0
        assert run["policy_lag_mean"] == 0.0  # one worker: nobody else's updates land in between


@pytest.mark.slow
def test_peer_throughput_command_prints_one_json_result():
    require_extra("stable_baselines3", "bench")
    out = subprocess.run(
        [sys.executable, "-m", "a3c.tools.bench.sb3_peer", "throughput", "--envs", "4", "--seconds", "1",
         "--warmup", "0.5"],
        cwd=ROOT, capture_output=True, text=True, timeout=180, check=True,
    )  # fmt: skip
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["envs"] == 4 and result["steps"] > 0 and result["steps_per_s"] > 0


@pytest.mark.slow
def test_breakdown_parts_add_up(monkeypatch):
    # The breakdown's "other" is its total minus its parts, so its parts always add up to its total; check
    # both against each update's own wall time, measured here around Learner.update.
    from a3c.algo.learner.learner import Learner
    from a3c.tools.bench.breakdown import breakdown

    warmup, timed, real_update = 5, [], Learner.update

    def update(self):
        start = time.perf_counter()
        result = real_update(self)
        timed.append((time.perf_counter() - start, result.steps))
        return result

    monkeypatch.setattr(Learner, "update", update)
    parts = breakdown(seconds=1.0, warmup_updates=warmup)
    measured = timed[warmup:]
    wall_us = sum(t for t, _ in measured) / sum(steps for _, steps in measured) * 1e6
    assert parts["total_us"] == pytest.approx(wall_us, rel=0.1)
    assert parts["steps_per_s"] == pytest.approx(1e6 / wall_us, rel=0.1)
    named = [k for k in parts if k.endswith("_us") and k not in ("total_us", "other_us")]
    assert all(parts[k] >= 0 for k in named), parts
    # The timed parts cover most of an update and never more than all of it (no part counted twice).
    assert 0.7 * wall_us <= sum(parts[k] for k in named) <= 1.02 * wall_us, (parts, wall_us)
    assert parts["env_step_us"] > 0 and parts["loss_and_gradient_us"] > 0


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
