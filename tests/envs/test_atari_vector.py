"""The native Atari vector env (ale-py's C++ envs behind ``NativeAtariVectorEnv``): the Python path's
semantics, checked against the Python path itself (``make_atari`` + ``SerialVectorEnv``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from tests.support.extras import require_extra

ale_py = require_extra("ale_py", "atari")

from a3c_envs import EnvSetupError, atari, atari_vector, make_eval_vector_env, make_vector_env  # noqa: E402
from a3c_envs.atari_vector import NativeAtariVectorEnv  # noqa: E402
from a3c_envs.vector import SerialVectorEnv  # noqa: E402
from tests.envs.test_atari_env import wrapper_types  # noqa: E402


def native(env_id: str, num_envs: int = 1, training: bool = True, **kwargs) -> NativeAtariVectorEnv:
    return NativeAtariVectorEnv(env_id, num_envs, training, **kwargs)


@pytest.mark.slow  # builds both paths (one env each: which class, not how many envs, is the point)
def test_make_vector_env_uses_it_for_atari_when_asked():
    for make in (make_vector_env, make_eval_vector_env):  # the evaluator's: not training
        envs = make("ALE/Pong-v5", 1, native=None)
        try:
            assert isinstance(envs, NativeAtariVectorEnv) and envs.reports_episodes is False
        finally:
            envs.close()
        envs = make("ALE/Pong-v5", 1)  # opt-in: the Python path by default
        try:
            assert isinstance(envs, SerialVectorEnv)
        finally:
            envs.close()
    envs = make_vector_env("ALE/Pong-v5", 1, training=True, native=True)
    try:
        assert isinstance(envs, NativeAtariVectorEnv) and envs.reports_episodes is True
    finally:
        envs.close()


def test_arguments_it_cannot_take_choose_the_python_path_or_are_refused():
    envs = make_vector_env("ALE/Pong-v5", 1, native=None, render_mode="rgb_array")  # Python path takes it
    try:
        assert isinstance(envs, SerialVectorEnv)
    finally:
        envs.close()
    with pytest.raises(EnvSetupError, match="native: True is not allowed for ALE/Pong-v5: .*render_mode"):
        make_vector_env("ALE/Pong-v5", 1, native=True, render_mode="rgb_array")
    with pytest.raises(EnvSetupError, match="did you mean"):  # a bad id: the same message as make_env's
        make_vector_env("ALE/Pongg-v5", 1)


def test_without_atari_vector_env_the_python_path_is_used(monkeypatch):
    monkeypatch.delattr(ale_py, "AtariVectorEnv")  # an ale-py older than 0.11
    envs = make_vector_env("ALE/Pong-v5", 1, native=None)
    try:
        assert isinstance(envs, SerialVectorEnv)
    finally:
        envs.close()
    with pytest.raises(EnvSetupError, match="no AtariVectorEnv"):
        make_vector_env("ALE/Pong-v5", 1, native=True)


def test_it_takes_the_python_paths_random_streams(monkeypatch):
    # What the emulator draws from its seed, the paths' only difference (the step-for-step test turns it
    # off): v5's sticky actions (0.25, or the id's override) and up to NOOP_MAX no-ops at each reset, handed
    # to ale-py's vector env as the Python path hands them to the ALE and to AtariPreprocessing.
    class Built(Exception):
        """ale-py's vector env was asked for, with these arguments (caught before it emulates anything)."""

    def arguments(game, num_envs, **kwargs):
        raise Built(kwargs)

    monkeypatch.setattr(ale_py, "AtariVectorEnv", arguments)
    for kwargs, sticky in (({}, 0.25), ({"repeat_action_probability": 0.5}, 0.5)):
        with pytest.raises(Built) as built:
            native("ALE/Breakout-v5", **kwargs)
        given = built.value.args[0]
        assert (given["repeat_action_probability"], given["noop_max"]) == (sticky, atari.NOOP_MAX), given
        assert (given["frameskip"], given["maxpool"]) == (atari.FRAME_SKIP, True), given
    assert gym.spec("ALE/Breakout-v5").kwargs["repeat_action_probability"] == 0.25


@pytest.mark.slow  # emulation: kept out of the edit-run loop (make test-fast)
@pytest.mark.parametrize("frame_stack", [1, 4])
def test_spaces_shapes_and_dtypes_match_the_python_path(frame_stack):
    ours = native("ALE/Breakout-v5", 3, frame_stack=frame_stack)
    theirs = make_vector_env("ALE/Breakout-v5", 3, training=True, frame_stack=frame_stack, native=False)
    try:
        for name in ("single_observation_space", "single_action_space", "observation_space", "action_space"):
            assert getattr(ours, name) == getattr(theirs, name), name
        assert ours.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
        obs, info = ours.reset(seed=0)
        assert obs.shape == (3, frame_stack, 84, 84) and obs.dtype == np.uint8 and info.keys() == {"lives"}
        obs, rewards, terminated, truncated, _ = ours.step(np.array([0, 1, 2]))
        assert obs.shape == (3, frame_stack, 84, 84) and obs.dtype == np.uint8
        assert rewards.dtype == np.float64 and terminated.dtype == bool and truncated.dtype == bool
        assert ours.step(np.array([0, 1, 2]))[0] is obs  # its own buffer, overwritten: callers copy
    finally:
        ours.close()
        theirs.close()


@pytest.mark.slow  # emulation: kept out of the edit-run loop (make test-fast)
@pytest.mark.parametrize(
    ("game", "fire"), [("ALE/Pong-v5", True), ("ALE/Breakout-v5", True), ("ALE/MsPacman-v5", False)]
)
def test_fire_rule_is_the_python_paths(game, fire):
    envs = native(game)
    python_env = atari.make_atari(game, training=False)
    try:
        assert envs.fire is fire
        assert (atari.FireReset in wrapper_types(python_env)) is fire
    finally:
        envs.close()
        python_env.close()


@pytest.mark.slow  # emulation: kept out of the edit-run loop (make test-fast)
def test_frame_limit_truncates_with_the_final_obs_in_the_same_step():
    # Pong with NOOPs for 400 frames: ALE's limit truncates (not terminates) after ~100 agent steps, and the
    # same step returns the next game's first observation with the real last one in info["final_obs"].
    envs = native("ALE/Pong-v5", 2, frame_stack=4, max_num_frames_per_episode=400)
    try:
        envs.reset(seed=0)
        steps, truncated = 0, np.zeros(2, bool)
        while not truncated.any() and steps < 200:
            obs, _, terminated, truncated, info = envs.step(np.zeros(2, np.int64))
            assert not terminated.any()
            steps += 1
        assert truncated.all() and steps <= 100, steps  # the FIRE step after reset counts 4 frames too
        np.testing.assert_array_equal(info["_final_obs"], [True, True])
        final = info["final_obs"]
        assert final.shape == (2, 4, 84, 84) and all(final[i].all(axis=(1, 2)).any() for i in range(2))
        assert (
            not obs[:, :2].any() and obs[:, 2:].any()
        )  # a new game: zero-filled stack, reset and FIRE frames
        obs, _, _, truncated, info = envs.step(np.zeros(2, np.int64))  # the new game goes on
        assert not truncated.any() and "final_obs" not in info
    finally:
        envs.close()


@pytest.mark.slow  # emulation: kept out of the edit-run loop (make test-fast)
def test_training_clips_rewards_but_reports_the_raw_score():
    # Space Invaders scores 5..30 per alien: the learner sees signs, the game's report its real score.
    envs = native("ALE/SpaceInvaders-v5", training=True)
    try:
        envs.reset(seed=1)
        rng = np.random.default_rng(1)
        rewards = []
        for _ in range(5000):
            _, reward, _, _, info = envs.step(rng.integers(6, size=1))
            rewards.append(float(reward[0]))
            if "episode" in info:
                break
        else:
            pytest.fail("no Space Invaders game ended in 5000 random steps")
    finally:
        envs.close()
    assert set(rewards) <= {0.0, 1.0} and 1.0 in rewards
    assert info["episode"]["r"][0] >= 5 * sum(rewards)


@pytest.mark.slow  # ~1 s of emulation: kept out of the edit-run loop (make test-fast < 30 s)
def test_evaluation_rewards_are_raw():
    envs = native("ALE/SpaceInvaders-v5", training=False)
    try:
        envs.reset(seed=1)
        rng = np.random.default_rng(1)
        seen = {float(envs.step(rng.integers(6, size=1))[1][0]) for _ in range(1000)}
    finally:
        envs.close()
    assert max(seen) >= 5 and envs.reports_episodes is False


@pytest.mark.slow  # emulation: kept out of the edit-run loop (make test-fast)
def test_breakout_lost_lives_end_episodes_but_not_the_game():
    # Training: each lost life is terminated=True with the game going on (no report, no reset); the game's
    # report comes with the 5th, its length counting every step the game took (the FIRE after the reset and
    # the NOOP + FIRE after each of the 4 lost lives too) and its raw score.
    envs = native("ALE/Breakout-v5", training=True)
    try:
        envs.reset(seed=0)
        rng = np.random.default_rng(0)
        ends, steps, score = 0, 0, 0.0
        for _ in range(3000):
            _, reward, terminated, truncated, info = envs.step(rng.integers(4, size=1))
            steps += 1
            score += reward[0]
            assert not truncated[0]
            ends += int(terminated[0])
            if "episode" in info:
                break
            if terminated[0]:
                assert "final_obs" in info and int(envs._lives[0]) == 5 - ends  # the same game, a life less
        else:
            pytest.fail("no Breakout game ended in 3000 random steps")
    finally:
        envs.close()
    assert ends == 5 and terminated[0] and info["_episode"][0]
    assert info["episode"]["l"][0] == steps + 1 + 2 * 4
    assert info["episode"]["r"][0] >= score  # bricks of the upper rows score 4 and 7, clipped to 1


@pytest.mark.slow  # emulation: kept out of the edit-run loop (make test-fast)
@pytest.mark.parametrize("training", [True, False])
def test_fire_after_reset_and_after_a_lost_life(training):
    # NOOPs only: the ball is launched anyway, after the reset and after every lost life, so the game is
    # lost (five lives: five ends in training, one in evaluation) long before ALE's frame limit. Without
    # FIRE the ball would never move and no life would be lost.
    envs = native("ALE/Breakout-v5", training=training)
    try:
        envs.reset(seed=0)
        ends = 0
        for _ in range(3000):
            _, _, terminated, truncated, info = envs.step(np.zeros(1, np.int64))
            assert not truncated[0]
            ends += int(terminated[0])
            if ends == (5 if training else 1):
                break
        else:
            pytest.fail(f"Breakout with NOOPs ended {ends} times in 3000 steps: the ball was not relaunched")
    finally:
        envs.close()
    assert ("episode" in info) is training  # the game's report, in training


def play(envs: gym.vector.VectorEnv, seed: int, steps: int) -> list[np.ndarray]:
    """Reset with ``seed``, step seeded random actions; every returned array, copied."""
    out = [envs.reset(seed=seed)[0].copy()]
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        out.extend(
            np.array(x) for x in envs.step(rng.integers(envs.single_action_space.n, size=envs.num_envs))[:4]
        )
    return out


@pytest.mark.slow  # ~3 s of emulation: kept out of the edit-run loop
def test_seeding_is_reproducible_and_env_i_gets_seed_plus_i():
    a, b, c = native("ALE/Pong-v5", 2), native("ALE/Pong-v5", 2), native("ALE/Pong-v5", 1)
    try:
        run_a, run_b = play(a, 7, 60), play(b, 7, 60)
        for x, y in zip(run_a, run_b, strict=True):
            np.testing.assert_array_equal(x, y)
        other = play(b, 8, 60)
        assert any(not np.array_equal(x, y) for x, y in zip(run_a, other, strict=True))
        # env 1 of a run seeded 7 is the env 0 of a run seeded 8 (with env 1's actions).
        c.reset(seed=8)
        a.reset(seed=7)
        rng = np.random.default_rng(0)
        for _ in range(60):
            actions = rng.integers(6, size=2)
            np.testing.assert_array_equal(a.step(actions)[0][1], c.step(actions[1:])[0][0])
    finally:
        for envs in (a, b, c):
            envs.close()


@pytest.mark.slow  # ~3 s each of emulation on both paths: kept out of the edit-run loop
@pytest.mark.parametrize(("game", "frame_stack"), [("ALE/Breakout-v5", 4), ("ALE/SpaceInvaders-v5", 1)])
@pytest.mark.parametrize("training", [True, False])
def test_it_is_the_python_path_step_for_step_without_randomness(monkeypatch, game, frame_stack, training):
    # The two paths differ only in their random streams (the no-ops at reset, the sticky actions). Without
    # them (no no-ops, no sticky actions) they must agree exactly: every observation (a frame or a stack),
    # reward, end, final observation and game report, through lost lives, soft resets and new games: up to
    # 10 steps into the first new game (a game's end: its report in training, its end in evaluation), which
    # every case reaches within 400 steps.
    monkeypatch.setattr(atari, "NOOP_MAX", 0)
    monkeypatch.setattr(atari_vector, "NOOP_MAX", 0)
    kwargs = {"training": training, "frame_stack": frame_stack, "repeat_action_probability": 0.0}
    ours = make_vector_env(game, 2, native=True, **kwargs)
    theirs = make_vector_env(game, 2, native=False, **kwargs)
    try:
        np.testing.assert_array_equal(ours.reset(seed=0)[0], theirs.reset(seed=0)[0])
        rng = np.random.default_rng(1)
        ends = games = 0
        new_game = None  # the step at which the first game ended
        for step in range(400):
            actions = rng.integers(ours.single_action_space.n, size=2)
            a, b = ours.step(actions), theirs.step(actions)
            for x, y in zip(a[:4], b[:4], strict=True):
                np.testing.assert_array_equal(x, y)
            # Lives: in the native env's info (SerialVectorEnv passes no per-env info on), the Python path's.
            assert a[4].keys() - {"lives"} == b[4].keys()
            np.testing.assert_array_equal(a[4]["lives"], [env.unwrapped.ale.lives() for env in theirs.envs])
            if "final_obs" in b[4]:
                mask = b[4]["_final_obs"]
                np.testing.assert_array_equal(a[4]["_final_obs"], mask)
                np.testing.assert_array_equal(a[4]["final_obs"][mask], b[4]["final_obs"][mask])
                ends += int(mask.sum())
            if "episode" in b[4]:
                mask = b[4]["_episode"]
                np.testing.assert_array_equal(a[4]["_episode"], mask)
                for key in ("r", "l"):
                    np.testing.assert_array_equal(a[4]["episode"][key][mask], b[4]["episode"][key][mask])
                games += int(mask.sum())
            if new_game is None and (games if training else ends):
                new_game = step
            if new_game is not None and step == new_game + 10:
                break
        # Lost lives and a game (training) or a lost game (evaluation), and 10 steps after: not vacuous.
        assert ends > 0 and (games > 0 or not training) and step == new_game + 10, (ends, games, step)
    finally:
        ours.close()
        theirs.close()


@pytest.mark.slow  # ~2 s of emulation
def test_sticky_actions_reach_the_emulator_on_both_paths(monkeypatch):
    # The random streams are the emulator's own on both paths (its sticky actions; the no-ops at reset are
    # off here), so they cannot be compared step for step, except where the stickiness is certain: at
    # probability 1 every action repeats the one before the first, a no-op, on both paths alike (Breakout's
    # paddle never moves), while at 0 the actions move it. (Random play's statistics on both paths agree
    # too: tests/learning/test_atari_statistics.py, under `make test-learning`.)
    monkeypatch.setattr(atari, "NOOP_MAX", 0)
    monkeypatch.setattr(atari_vector, "NOOP_MAX", 0)

    def frames(is_native: bool, sticky: float) -> np.ndarray:
        envs = make_vector_env("ALE/Breakout-v5", 2, native=is_native, training=True,
                               repeat_action_probability=sticky)  # fmt: skip
        try:
            arrays = play(envs, 0, 100)  # the reset's observations, then each step's four arrays
            return np.stack([arrays[0], *arrays[1::4]])
        finally:
            envs.close()

    held, theirs = frames(True, 1.0), frames(False, 1.0)
    np.testing.assert_array_equal(held, theirs)
    assert (held == held[0]).all()  # nothing moved
    assert not np.array_equal(frames(True, 0.0), held)  # the same actions, taken


@pytest.mark.slow  # ~1 s of emulation: kept out of the edit-run loop (make test-fast < 30 s)
def test_the_learners_collector_logs_whole_native_games():
    # What the learner does with it (a3c.algo.rollout): the episodes it logs are the games the env
    # reports (raw score, full length), not the lives it learns on.
    from a3c.algo.rollout import RolloutCollector

    envs = native("ALE/Breakout-v5", 2, training=True, frame_stack=4)
    try:
        collector = RolloutCollector(envs, 50, seed=0)
        assert collector.env_episodes and collector.segment.obs.dtype == np.uint8
        rng = np.random.default_rng(0)
        finished, lives = [], 0
        while not finished:
            seg, finished = collector.collect(lambda o: rng.normal(size=(len(o), 4)).astype(np.float32))
            lives += int(seg.terminated.sum())
            assert set(np.unique(seg.rewards)) <= {0.0, 1.0}
    finally:
        envs.close()
    assert lives >= 5 * len(finished)  # five lives per game
    assert all(game.length > 100 for game in finished)  # ~190 steps of random play, not a life's ~38
