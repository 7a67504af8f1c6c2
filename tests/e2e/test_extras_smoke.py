"""Smoke runs of the optional env families on the local backend: Atari (the preset's conv net + LSTM, and A3C
FF: the conv net over a 4-frame stack) and MuJoCo (Gaussian policy, shared observation statistics).

Each trains a few hundred steps in this process (the Pong preset's CNN-LSTM with 2 workers forked from
the session's forkserver; A3C FF and HalfCheetah serially), writes a checkpoint, and ``a3c evaluate``
plays it. The Ray backend runs the same learner in its node groups (tests/backends: its runs cross
backends with Pendulum's observation statistics and reward scaling).
``make test`` installs both extras (they are in ``dev``); without one, its test is skipped and says why (it
fails under CI's A3C_REQUIRE_EXTRAS=1).
"""

from __future__ import annotations

import csv
import functools
import json
from collections.abc import Callable

import pytest
import torch

from a3c.algo.learner import build_model
from a3c.core.config import Config
from a3c.core.spaces import Spaces
from tests.support.commands import call_a3c, call_a3c_train
from tests.support.extras import require_extra
from tests.support.run_files import read_json

pytestmark = pytest.mark.slow


def needs(module: str, extra: str) -> Callable[[Callable], Callable]:
    """Run the test only where ``module`` of ``extra`` imports: skip otherwise, fail in CI (require_extra)."""

    def decorate(test: Callable) -> Callable:
        @functools.wraps(test)  # keeps the signature: pytest still passes the test's fixtures
        def guarded(*args, **kwargs):
            require_extra(module, extra)
            return test(*args, **kwargs)

        return guarded

    return decorate


def train_and_evaluate(
    run_dir, env_id: str, steps: int, *sets: str, serial: bool = False
) -> tuple[dict, dict]:
    """Train ``env_id`` for ``steps`` in this process (``a3c train``'s CLI, in-process) with 2 workers forked
    from the session's forkserver (``serial``: one worker in this process, which starts no process), then
    ``a3c evaluate`` its best.pt."""
    args = ["--env", env_id, "--max-steps", str(steps), "--quiet", "--run-dir", str(run_dir)]
    for item in sets:
        args += ["--set", item]
    result = call_a3c_train(*args, "--serial") if serial else call_a3c_train(*args, "--workers", "2")
    assert result.returncode == 0, result.stderr
    summary = read_json(run_dir / "summary.json")
    assert summary["total_steps"] >= steps and summary["exit_reason"] == "max_steps"
    assert read_json(run_dir / "config.json")["backend"] == "local"
    assert (run_dir / "checkpoints" / "last.pt").is_file() and (run_dir / "checkpoints" / "best.pt").is_file()
    played = call_a3c("evaluate", str(run_dir), "--episodes", "1", "--json")
    assert played.returncode == 0, played.stderr
    return summary, json.loads(played.stdout)


# A Pong game ends when one side has 21 points; each point takes well over 20 agent steps (4 frames each),
# and the v5 frame cap (108,000 frames) is 27,000 agent steps.
PONG_MIN_STEPS_PER_POINT = 20
PONG_FRAME_CAP_STEPS = 27_000


def check_pong_game(played: dict, cap: int | None = None) -> None:
    """``a3c evaluate`` played one whole game (at least 21 points, ended by the game, not the frame cap) and
    reports its raw score: a whole number of points, not 0 (no draw in Pong). ``cap``: the run's
    ``eval_max_steps``, which ends the game after exactly that many steps (a score of 0 is then possible)."""
    score, length = played["mean_return"], played["mean_length"]
    assert played["episodes"] == 1 and score == played["min_return"] == played["max_return"], played
    assert score == int(score) and -21 <= score <= 21, played
    if cap is not None:
        assert length == cap, played
        return
    assert score != 0, played
    assert 21 * PONG_MIN_STEPS_PER_POINT <= length < PONG_FRAME_CAP_STEPS, played


def check_pong_run(run_dir, summary: dict, frames: int, lstm_size: int, cap: int | None = None) -> None:
    """The evaluator's games during training were whole games too (``cap``: games of exactly that many
    steps); last.pt is the run's final state (its counters are the summary's) of the conv net over
    ``frames`` stacked frames with an LSTM of ``lstm_size`` (0: none), and loads into the model it names;
    best.pt is the best evaluation's."""
    with (run_dir / "eval.csv").open() as f:
        evals = list(csv.DictReader(f))
    # Whole points: each row's total over its games (a mean of two games may end in .5).
    assert evals and all((float(r["mean_return"]) * int(r["episodes"])).is_integer() for r in evals), evals
    if cap is None:
        assert all(float(r["mean_length"]) >= 21 * PONG_MIN_STEPS_PER_POINT for r in evals), evals
    else:
        assert all(float(r["mean_length"]) == cap for r in evals), evals
    config = read_json(run_dir / "config.json")
    assert config["model"] == "cnn" and config["lstm_size"] == lstm_size
    state = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert state["global_step"] == summary["total_steps"] == int(state["worker_steps"].sum())
    assert state["updates"] == summary["total_updates"] > 0
    assert state["spaces"] == {
        "obs_shape": [frames, 84, 84], "n_actions": 6, "continuous": False, "action_low": [],
        "action_high": [], "action_nvec": [], "multi_binary": False, "obs_encoding": "none",
    }  # fmt: skip
    saved_config = json.loads(json.dumps(state["config"]))
    assert saved_config == {key: config[key] for key in saved_config}
    model = build_model(Config.from_dict(state["config"]), Spaces.of_checkpoint(state))
    model.load_state_dict(state["model_state"])  # strict: every weight of the conv net (and LSTM), no other
    assert state["model_state"]["encoder.0.weight"].shape[1] == frames  # the first convolution's input
    lstm = [key for key in state["model_state"] if key.startswith("lstm.")]
    assert (state["model_state"]["lstm.weight_ih"].shape[0] == 4 * lstm_size) if lstm_size else not lstm
    (moments,) = state["optimizer_state"]["state"].values()  # the shared Adam over the one flat buffer
    assert float(moments["step"]) > 0 and bool(moments["exp_avg_sq"].gt(0).any())
    best = torch.load(run_dir / "checkpoints" / "best.pt", weights_only=True)
    assert best["mean_return"] == max(float(r["mean_return"]) for r in evals)


@needs("ale_py", "atari")
def test_pong_cnn_lstm_trains_checkpoints_and_evaluates(run_dir):
    """The preset's A3C-LSTM (one frame in, an LSTM of 256), one update per worker (2 envs x t_max 10 steps
    each: not the image envs' default of 8, as each Pong env loads its ROM at its start and again at its
    seeded reset). Its greedy games stop at ``eval_max_steps``: whole games (about 760 steps each, three of
    them: the final evaluation, its selection round and ``a3c evaluate``'s) took half the test's time, and
    are the frame-stack test's below."""
    sets = ("envs_per_worker=2", "eval_episodes=1", "eval_max_steps=200")
    summary, played = train_and_evaluate(run_dir, "ALE/Pong-v5", 40, *sets)
    check_pong_game(played, cap=200)
    check_pong_run(run_dir, summary, frames=1, lstm_size=256, cap=200)


@needs("ale_py", "atari")
def test_pong_frame_stack_trains_checkpoints_and_evaluates(run_dir):
    """A3C FF (the conv net over 4 stacked frames, no LSTM), serially: the learner and the evaluator of
    every backend, in this process; five updates of 2 envs x t_max 10 steps (2 envs: as above)."""
    sets = ("envs_per_worker=2", "eval_episodes=1", "lstm_size=0", "frame_stack=4")
    summary, played = train_and_evaluate(run_dir, "ALE/Pong-v5", 100, *sets, serial=True)
    check_pong_game(played)
    check_pong_run(run_dir, summary, frames=4, lstm_size=0)


@needs("mujoco", "mujoco")
def test_halfcheetah_gaussian_trains_checkpoints_and_evaluates(run_dir):
    """A Gaussian policy with shared observation statistics, serially."""
    sets = ("eval_episodes=1",)
    summary, played = train_and_evaluate(run_dir, "HalfCheetah-v5", 2000, *sets, serial=True)
    assert played["mean_length"] == 1000 and played["env_id"] == "HalfCheetah-v5"
    state = torch.load(run_dir / "checkpoints" / "best.pt", weights_only=False)
    assert state["spaces"]["continuous"] and state["spaces"]["n_actions"] == 6
    assert state["config"]["obs_norm"] and state["obs_norm"]["mean"].shape == (17,)  # evaluate uses these
    last = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=False)
    # The learner's observations and returns reached the checkpoint (through the shared statistics).
    # One observation and one discounted return per env step (counts start at 1e-4, so > 0 would not fail).
    for key in ("obs_norm", "reward_stats"):
        assert last[key]["count"] >= summary["total_steps"], key
