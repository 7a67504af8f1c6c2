"""The race (``a3c bench --env/--suite``): its summary and table from known numbers, the peer's settings, and
one real race at a small scale."""

from __future__ import annotations

import io
import json
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from a3c.tools.bench.race import RacePlan, race_markdown, run_race, summarize_side
from a3c.tools.bench.sb3_race import settings_for
from tests.support.commands import call_a3c_train
from tests.support.extras import require_extra


def run(t: float | None, steps: int, final: float, rate: float = 1000.0) -> dict:
    return {"solved": t is not None, "time_to_solve_s": t, "steps": steps, "final_return": final,
            "steps_per_s": rate}  # fmt: skip


def test_summary_takes_medians_over_the_solved_seeds_only():
    side = summarize_side([run(10.0, 1000, 500.0), run(None, 9000, 20.0), run(30.0, 3000, 480.0)])
    assert side["solved"] == 2 and side["seeds"] == 3
    assert side["median_time_to_solve_s"] == 20.0 and side["median_steps_to_solve"] == 2000
    assert side["median_final_return"] == 480.0  # every seed's final return counts
    none = summarize_side([run(None, 10, -500.0)])
    assert none["median_time_to_solve_s"] is None and none["median_final_return"] == -500.0


def test_table_has_a_row_per_env_and_side():
    sides = {"ours": {"summary": summarize_side([run(5.0, 100, 500.0)])},
             "sb3": {"summary": summarize_side([run(None, 100, 9.5)])}}  # fmt: skip
    table = race_markdown({"envs": {"CartPole-v1": sides}})
    assert "| CartPole-v1 | ours | 1/1 | 5.0 | 100 | 500.0 | 1,000 |" in table
    assert "| CartPole-v1 | sb3 | 0/1 | - | - | 9.5 | 1,000 |" in table


def test_peer_settings_are_the_zoos_or_the_defaults():
    assert settings_for("CartPole-v1", "zoo") == {"n_envs": 8, "ent_coef": 0.0, "n_timesteps": 500_000}
    assert settings_for("Acrobot-v1", "default") == {"n_envs": 1}
    assert settings_for("ALE/Pong-v5", "zoo")["n_envs"] == 16
    assert settings_for("PongNoFrameskip-v4", "zoo")["rmsprop_tf"] is True
    assert settings_for("Unknown-v0", "zoo") == {"n_envs": 1}  # no zoo entry: the defaults


def test_bench_race_refuses_an_unknown_env_before_running(capsys):
    from a3c.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--env", "NoSuchEnv-v0", "--budget", "5"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.startswith("error: --env: unknown environment"), err


def test_presets_race_the_derived_defaults_as_the_peer(tmp_path, monkeypatch):
    import a3c.tools.bench.race as race

    calls = []

    def fake_ours(env_id, seed, seconds, work, no_preset, side="ours", judged_as=None):
        calls.append((side, no_preset, seed, judged_as and judged_as["seed"]))
        return {**run(5.0 if no_preset else 2.0, 100, 500.0), "seed": seed}

    monkeypatch.setattr(race, "ours_race", fake_ours)
    monkeypatch.setattr(race, "peer_race", lambda *args: pytest.fail("SB3 is not this race's peer"))
    plan = RacePlan(("CartPole-v1",), seeds=2, seconds=1.0, peer_settings="no-preset")
    results = run_race(plan, tmp_path / "out", tmp_path, log=lambda msg: None)
    # Seed by seed, presets first, each side in its own run dir (a run dir is never reused); the defaults
    # are judged as the preset's run of the same seed was (its target, evaluation episodes, confirmation).
    assert calls == [("ours", False, 0, None), ("no-preset", True, 0, 0),
                     ("ours", False, 1, None), ("no-preset", True, 1, 1)]  # fmt: skip
    assert list(results["envs"]["CartPole-v1"]) == ["ours", "no-preset"]
    assert "| CartPole-v1 | no-preset | 2/2 | 5.0 |" in results["markdown"]


def test_the_defaults_take_the_judging_settings_of_the_run_they_race(tmp_path, monkeypatch):
    import a3c.tools.bench.race as race

    def stop(*args, **kwargs):
        raise RuntimeError(" ".join(args))

    monkeypatch.setattr(race, "run_python", stop)
    judged_as = {"target": -200.0, "eval_episodes": 10, "confirm_episodes": 100, "confirm_confidence": 0.9}
    with pytest.raises(RuntimeError) as info:
        race.ours_race("Pendulum-v1", 0, 5.0, tmp_path, True, "no-preset", judged_as)
    command = str(info.value)
    assert (
        "--no-preset --set target_return=-200.0 --set eval_episodes=10 --set confirm_episodes=100 "
        "--set confirm_confidence=0.9" in command
    )
    assert str(tmp_path / "no-preset-Pendulum-v1-0") in command
    with pytest.raises(RuntimeError) as info:
        race.ours_race("Pendulum-v1", 0, 5.0, tmp_path, True, "no-preset", {**judged_as, "target": None})
    assert "--set target_return=none" in str(info.value)
    with pytest.raises(RuntimeError) as info:
        race.ours_race("Pendulum-v1", 0, 5.0, tmp_path, False)
    assert "--set" not in str(info.value) and "--no-preset" not in str(info.value)


@pytest.mark.parametrize(
    "args,wrong",
    [
        (["--env", "CartPole-v1", "--peer", "no-preset", "--no-preset"], "not allowed with --no-preset"),
        (["--suite", "--peer", "no-preset"], "not allowed with --suite"),
        (["--peer", "no-preset"], "not allowed without --env"),
    ],
)
def test_bench_refuses_a_no_preset_peer_that_would_race_nothing(capsys, args, wrong):
    from a3c.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["bench", *args, "--budget", "5"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.startswith("error: --peer: 'no-preset' ") and wrong in err, err


def test_bench_refuses_a_no_preset_peer_for_an_env_without_a_preset(capsys):
    from a3c.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--env", "Acrobot-v1", "--peer", "no-preset", "--budget", "5"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.startswith("error: --env: 'Acrobot-v1' has no preset"), err


def in_this_process(*args: str, timeout: float, env=None) -> subprocess.CompletedProcess:
    """The race's two commands (``python -m MODULE ARGS``) in the pytest process, their output captured:
    ``a3c train`` through ``call_a3c_train`` (its workers forked from the session's forkserver) and the
    peer's click command; the same code without two interpreters, torch and a forkserver to start."""
    assert args[0] == "-m" and env is None, args
    if args[1] == "a3c":
        return call_a3c_train(*args[3:]) if args[2] == "train" else pytest.fail(f"not a race's: {args}")
    assert args[1] == "a3c.tools.bench.sb3_race", args
    from a3c.tools.bench.sb3_race import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        main.main(list(args[2:]), standalone_mode=False)
    return subprocess.CompletedProcess(args, 0, out.getvalue(), err.getvalue())


@pytest.mark.slow
def test_a_small_race_runs_both_sides_and_writes_its_json(tmp_path, monkeypatch):
    require_extra("stable_baselines3", "bench")
    import a3c.tools.bench.race as race

    monkeypatch.setattr(race, "run_python", in_this_process)
    # Where Stable-Baselines3's default logger would put its folder (it makes an SB3-<date> folder in the
    # system temp dir otherwise, on every learn(), and leaves it there): the peer's must make none.
    sb3_logdir = tmp_path / "sb3-logdir"
    monkeypatch.setenv("SB3_LOGDIR", str(sb3_logdir))
    # What a race reaches in its budget depends on the machine's load: tests/learning checks that ours solves;
    # here, that both sides ran, were evaluated and were reported.
    plan = RacePlan(("CartPole-v1",), seeds=1, seconds=4.0, peer_settings="zoo")
    results = run_race(plan, tmp_path / "out", tmp_path, log=lambda msg: None)
    saved = json.loads(Path(results["path"]).read_text())
    for side in ("ours", "sb3"):
        (one,) = saved["envs"]["CartPole-v1"][side]["runs"]
        assert one["steps"] > 0 and one["final_return"] is not None
    assert "| CartPole-v1 | ours |" in results["markdown"] and "| CartPole-v1 | sb3 |" in results["markdown"]
    assert not sb3_logdir.exists()
