"""Atari envs (ale-py's ``ALE/<Game>-v5`` ids) with the standard DeepMind preprocessing.

``make_atari`` stacks gymnasium's own wrappers where they exist (``AtariPreprocessing``, ``TransformReward``,
``ReshapeObservation``, ``FrameStackObservation``) and three small ones written here (``FireReset``,
``FireOnLifeLoss``, ``EpisodicLife``). By default frames are not stacked: the model carries history in its
LSTM, so one uint8 frame ``[1, 84, 84]`` is the observation; ``frame_stack=k`` gives the last k frames
``[k, 84, 84]`` (oldest first) for a feed-forward model.

The legacy ``<Game>NoFrameskip-v4`` ids get the same preprocessing; their one difference is the
literature's setting, no sticky actions (``repeat_action_probability=0``): use them to compare with
published curves (DQN, A3C, baselines). The v5 ids keep their defaults on purpose: sticky actions
(``repeat_action_probability=0.25``, Machado et al. 2018) and ``max_num_frames_per_episode=108000``. The
v5 specs register no ``max_episode_steps``, so no ``TimeLimit`` wrapper is added; the time limit is ALE's
own: after 108000 emulator frames (27000 agent steps at frame skip 4, 30 minutes of play at 60 Hz) a step
returns ``truncated=True``.

``a3c_envs.atari_vector.NativeAtariVectorEnv`` gives the same semantics from ale-py's C++ vector env; what
both share (the FIRE rule, the constants) is here.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import (
    AtariPreprocessing,
    FrameStackObservation,
    RecordEpisodeStatistics,
    ReshapeObservation,
    TransformReward,
)

from a3c.core.extras import install_hint

ATARI_NAMESPACE = "ALE/"
# ale-py's legacy ids, e.g. "PongNoFrameskip-v4": the literature's setting (no sticky actions, as DQN, A3C and
# baselines/SB3 curves were measured), with the same preprocessing and presets as the game's v5 id.
LEGACY_SUFFIX = "NoFrameskip-v4"
SCREEN_SIZE = 84
FRAME_SKIP = 4
NOOP_MAX = 30
NOOP, FIRE = 0, 1  # action indices in every minimal action set with FIRE (see fire_reset_rule)
# FireReset retries a reset at most this often: a game that ends on every FIRE is broken, not unlucky.
MAX_FIRE_RESETS = 10

# Set once ale_py's ids are in gymnasium's registry (importing ale_py registers them).
_registered = False


def is_atari(env_id: str) -> bool:
    """True for ids in ale-py's ``ALE/`` namespace, e.g. ``"ALE/Pong-v5"``, and its legacy no-sticky-actions
    ids, e.g. ``"PongNoFrameskip-v4"``."""
    legacy = env_id.endswith(LEGACY_SUFFIX) and "/" not in env_id and ":" not in env_id  # not module:Id
    return env_id.startswith(ATARI_NAMESPACE) or legacy


def v5_id(env_id: str) -> str:
    """The ``ALE/<Game>-v5`` id of the same game: ``"PongNoFrameskip-v4"`` → ``"ALE/Pong-v5"``; a v5 id
    is itself. Presets are kept once per game, under this id."""
    if is_atari(env_id) and not env_id.startswith(ATARI_NAMESPACE):
        return f"{ATARI_NAMESPACE}{env_id[: -len(LEGACY_SUFFIX)]}-v5"
    return env_id


def register_atari() -> bool:
    """Register ale-py's envs with gymnasium (once); False, without raising, when ale-py is not installed."""
    global _registered
    if _registered:
        return True
    try:
        import ale_py
    except ImportError:
        return False
    # Importing ale_py already registers the ids; register_envs states the intent (and keeps linters from
    # dropping an import that looks unused).
    gym.register_envs(ale_py)
    _registered = True
    return True


class FireReset(gym.Wrapper):
    """Press FIRE after every reset, for games that stay frozen until FIRE is pressed (DeepMind's setup).

    Without it, an agent in Breakout must first learn that FIRE launches the ball, and a greedy policy that
    never fires waits until the time limit. Rewards of the FIRE step are dropped, as a reset has none.
    """

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the inner env, then step FIRE; reset again (unseeded) if that step ended the episode."""
        self.env.reset(seed=seed, options=options)
        for _ in range(MAX_FIRE_RESETS):
            obs, _, terminated, truncated, info = self.env.step(FIRE)
            if not (terminated or truncated):
                return obs, info
            # Not the seed again: a seeded reset would replay the same start and end the same way.
            self.env.reset(options=options)
        raise RuntimeError(f"FireReset: every FIRE after reset ended the episode ({MAX_FIRE_RESETS} tries)")


class FireOnLifeLoss(gym.Wrapper):
    """Press FIRE after a lost life, for evaluation envs of FIRE games (training gets it from EpisodicLife's
    soft reset followed by FireReset, so a trained agent never learned to relaunch the ball itself: without
    this, its greedy evaluation would wait after the first lost life until ALE's frame limit)."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the inner env and note its lives."""
        obs, info = self.env.reset(**kwargs)
        self.lives = self.env.unwrapped.ale.lives()
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the inner env; after a lost life that did not end the episode, also step FIRE and add its
        reward."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self.env.unwrapped.ale.lives()
        if lives < self.lives and not (terminated or truncated):
            obs, fire_reward, terminated, truncated, info = self.env.step(FIRE)
            reward = float(reward) + float(fire_reward)
        self.lives = lives
        return obs, reward, terminated, truncated, info


class EpisodicLife(gym.Wrapper):
    """A lost life ends the learner's episode, but not the game (DeepMind's episodic life, for training).

    ``step`` returns ``terminated=True`` when a life is lost, so the learner stops bootstrapping through the
    death; the following ``reset`` then continues the same game with one no-op step instead of restarting
    it, so the agent still sees the later stages that only long games reach. Only a real end (game over,
    or ALE's frame-limit truncation) makes the next ``reset`` a real one.

    ``info["game_over"]`` is True on the step that ends the real episode (terminated by the game or
    truncated), False otherwise: episode returns for logging must be summed up to it, not to ``terminated``.
    """

    def __init__(self, env: gym.Env):
        """Wrap ``env``, whose unwrapped env must be an ale-py ``AtariEnv`` (``.ale.lives()``)."""
        super().__init__(env)
        self.lives = 0
        # The first reset must be a real one.
        self.real_reset_needed = True

    def _ale_lives(self) -> int:
        return int(self.env.unwrapped.ale.lives())

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step, and also report ``terminated=True`` when the lives count drops."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        game_over = bool(terminated or truncated)
        self.real_reset_needed = game_over
        lives = self._ale_lives()
        # lives > 0: some games decrement lives to 0 a few frames before the real game over; that last life
        # is then reported by the game over itself, not twice.
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        info["game_over"] = game_over
        return obs, reward, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Real reset after a real end or when seeded, else continue the game with one no-op step.

        A seed asks for a reproducible fresh game, so it forces a real reset; an unseeded reset (a vector
        env's autoreset) after a lost life continues the game.
        """
        if self.real_reset_needed or seed is not None:
            obs, info = self.env.reset(seed=seed, options=options)
        else:
            obs, _, terminated, truncated, info = self.env.step(NOOP)
            # The game may end during the no-op (e.g. the last life was lost on the same frames).
            if terminated or truncated:
                obs, info = self.env.reset(options=options)
        self.real_reset_needed = False
        self.lives = self._ale_lives()
        return obs, info


def fire_reset_rule(meanings: list[str]) -> bool:
    """Whether a game with these action meanings needs FIRE to start: FIRE at action 1 and at least 3
    actions (DeepMind's test). Both the Python path and the native vector env decide by this rule."""
    return len(meanings) >= 3 and meanings[FIRE] == "FIRE"


def _has_fire_reset(env: gym.Env) -> bool:
    return fire_reset_rule(env.unwrapped.get_action_meanings())


def make_atari(env_id: str, training: bool, frame_stack: int = 1, **kwargs: Any) -> gym.Env:
    """Make an ``ALE/<Game>-v5`` env with DeepMind preprocessing; observations are uint8 ``[k, 84, 84]``.

    Args:
        env_id: an id in the ``ALE/`` namespace, e.g. ``"ALE/Pong-v5"``, or a ``"<Game>NoFrameskip-v4"`` one.
        training: True for the learner's env: episodic life and rewards clipped to their sign. False for
            evaluation: real episodes and raw scores.
        frame_stack: k, the frames per observation (oldest first); 1 (the default) is one frame.
        **kwargs: passed to ``gym.make`` (e.g. ``max_num_frames_per_episode``, ``render_mode``); not
            ``frameskip``, which ``AtariPreprocessing`` owns.

    Wrapper order, innermost first, and why:
        1. ``gym.make(env_id, frameskip=1, obs_type="grayscale")``: AtariPreprocessing does the skipping (it
           raises on a base env that skips too); sticky actions stay at the v5 default of 0.25.
        2. ``AtariPreprocessing``: random no-ops (1..30) at reset, repeat each action 4 frames and max-pool
           the last two (Atari sprites flicker), grayscale, resize to 84x84. Everything outside works on
           agent steps, so lives and rewards are seen once per 4 frames.
        3. ``FrameStackObservation(k, padding_type="zero")`` (k > 1 only): right outside
           AtariPreprocessing, so it sees every agent-level step, the NOOP and FIRE steps of a soft reset
           too. A real reset (a new game) empties the stack: zeros, then the first frame, as ale-py's C++
           stack does, so both paths agree. A lost life in training does not: EpisodicLife's soft reset
           steps the same game on, and the stack keeps its frames through it. Why keep them: they are the
           same continuous game, the learner stops bootstrapping at the lost life anyway, and the native
           vector env's C++ stack can only be emptied by a real reset, so keeping it is what lets both
           paths agree. (baselines' ``wrap_deepmind`` puts its FrameStack outermost, which refills the
           stack at every reset, a soft one included; this differs from it there.)
        4. ``EpisodicLife`` (training): inside FireReset so that its soft reset after a lost life is
           followed by FIRE too (the ball must be relaunched in Breakout after every life).
        5. ``FireReset`` (games with FIRE): outside EpisodicLife, as in the DeepMind/baselines setup.
        6. ``TransformReward(np.sign)`` (training): outside AtariPreprocessing so the sum over the 4 skipped
           frames is clipped, as DQN does, not each frame.
        7. ``ReshapeObservation((1, 84, 84))`` (k = 1 only): last, so every inner wrapper sees the plain
           84x84 frame; adds the channel axis first (CHW) for the conv encoder. It is a view of a fresh
           array per step. (With k > 1 the stack already is ``[k, 84, 84]``.)

    Raises:
        ModuleNotFoundError: ale_py is not installed (``exc.name == "ale_py"``).
        ValueError: ``env_id`` is not an ``ALE/`` id, ``frameskip`` is passed, or ``frame_stack`` < 1.
    """
    if not is_atari(env_id):
        raise ValueError(
            f"make_atari: {env_id!r} is not an Atari id (expected {ATARI_NAMESPACE}<Game>-v5 or "
            f"<Game>{LEGACY_SUFFIX})"
        )
    if "frameskip" in kwargs:
        raise ValueError("make_atari: do not pass frameskip; AtariPreprocessing skips frames")
    if frame_stack < 1:
        raise ValueError(f"make_atari: frame_stack must be >= 1, not {frame_stack}")
    if not register_atari():
        raise ModuleNotFoundError(
            f"{env_id!r} needs ale_py, which is not installed: {install_hint('atari')}", name="ale_py"
        )
    # The base env's own observation is thrown away (AtariPreprocessing reads the screen itself); grayscale
    # is the cheapest one AtariPreprocessing takes (no RGB frame per emulator frame). Videos render RGB.
    env = gym.make(env_id, frameskip=1, **{"obs_type": "grayscale", **kwargs})
    env = AtariPreprocessing(
        env,
        noop_max=NOOP_MAX,
        frame_skip=FRAME_SKIP,
        screen_size=SCREEN_SIZE,
        grayscale_obs=True,
        scale_obs=False,
        terminal_on_life_loss=False,
    )
    if frame_stack > 1:
        env = FrameStackObservation(env, frame_stack, padding_type="zero")
    if training:
        # The real game's score and length (unclipped, across lives) for episodes.csv: recorded inside the
        # life and reward wrappers, and reported by the vector env (``info["episode"]``).
        env = EpisodicLife(RecordEpisodeStatistics(env))
    if _has_fire_reset(env):
        env = FireReset(env)
        if not training:
            env = FireOnLifeLoss(env)
    if training:
        env = TransformReward(env, np.sign)
    if frame_stack > 1:
        return env
    return ReshapeObservation(env, (1, SCREEN_SIZE, SCREEN_SIZE))
