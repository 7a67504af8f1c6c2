"""Atari from ale-py's C++ vector env (``ale_py.AtariVectorEnv``), with the semantics of the Python path.

``NativeAtariVectorEnv`` gives the learner and the evaluator what ``make_atari`` + ``SerialVectorEnv`` give
them, with less Python per step: ale-py runs the emulator, the frame skip, the max-pooling, the grayscale,
the resize and the frame stack in C++, and the episode logic of ``a3c_envs.atari`` (episodic life, FIRE
after a reset and after a lost life, clipped rewards, whole-game reports) is redone here in a few Python lines
per step. The emulator itself is most of a step's cost on either path, so the gain is modest (see below).
``a3c_envs.make_vector_env`` and ``a3c_envs.make_eval_vector_env`` use it for ``ALE/`` ids when ale-py has
``AtariVectorEnv`` (``native=False`` forces the Python path).

Why not ale-py's own ``episodic_life`` and ``reward_clipping`` (checked on ale-py 0.12.1): its
``episodic_life`` ends the episode at a lost life and then RESETS THE GAME (lives back to full, a new
game), so an agent would never see a game's later stages and no whole-game score exists; its
``reward_clipping`` would leave no raw score for the episode reports. So the C++ envs run with both off
and with ``use_fire_reset=False`` (its FIRE is one frame before the no-ops; ours is a 4-frame agent step
after them, as ``FireReset``), and this class does the rest.

Why one C++ env per sub-env (``num_envs=1`` each, ``num_threads=1``) and not one batch of K: a soft reset
after a lost life steps one env (NOOP, then FIRE) while the others wait, which a lock-step batch cannot do
(and the FIRE after a reset must be an agent step after the no-ops, as on the Python path). The envs are
stepped one after another, so a worker keeps to one core, as with its Python envs. The price is a thread
hand-off per env step. Measured on Pong (4 and 16 envs, 4-frame stack, random actions, a shared 2-core
machine): with the process pinned to one core (``taskset -c 1``) this class steps 1.2-1.3x the Python
path's agent steps/s, and ale-py's own lock-step batch (the ceiling, without this episode logic) 1.3-1.5x;
unpinned, the hand-off between cores eats the gain (0.9-1.1x).

Semantics, per sub-env, the same as the Python path unless said:

=========================  =====================================================================
v5 defaults                sticky actions 0.25 (``repeat_action_probability`` overrides it), frame
                           skip 4 with max-pooling of the last two frames, grayscale 84x84 (INTER_AREA,
                           as ``AtariPreprocessing``), minimal action set, ALE frame limit 108000
                           (``max_num_frames_per_episode``) → ``truncated=True``
no-ops at a real reset     0..29 single-frame NOOPs (ale-py draws ``0..noop_max-1``; the Python path
                           1..30), not counted in the frame limit (the Python path counts them):
                           a game may run up to 29 frames longer here
FIRE after a real reset    games where ``fire_reset_rule`` holds: one FIRE agent step after the no-ops,
                           retried (up to ``MAX_FIRE_RESETS``) if it ends the episode; the learner sees
                           neither its step nor its reward, the game's report counts both
frame stack (k > 1)        oldest first; a real reset zero-fills it; a lost life keeps it (the NOOP and
                           FIRE steps of the soft reset are pushed like any step)
training=True              rewards clipped to their sign; a lost life (lives drop, still > 0) returns
                           ``terminated=True`` without a reset: the final observation goes to
                           ``info["final_obs"]`` and the env steps NOOP, then FIRE (FIRE games), in the
                           same game; ``reports_episodes`` is True: ``info["episode"]`` = {"r": raw score
                           of the whole game, "l": its agent steps, NOOP and FIRE steps included}, masked
                           by ``info["_episode"]``, on the step the game ends. A game that ends inside a
                           soft reset's NOOP or FIRE step is reported on that step (the Python path
                           drops that rare report)
training=False             raw rewards, real episodes; after a lost life (game going on) FIRE games also
                           step FIRE within the same step and add its reward (``FireOnLifeLoss``)
autoreset                  SAME_STEP: ``info["final_obs"]`` / ``info["_final_obs"]`` where an env ended
lives                      ``info["lives"]`` [K]: each game's lives after the step (a new game's after
                           its end), in ``reset``'s info too; ale-py's and gymnasium's Atari envs report
                           it, and greedy play zeroes a recurrent policy's state where it drops
seeding                    ``reset(seed=s)`` seeds env i with ``(s + i) mod 2**31`` (ALE's seed range);
                           the streams differ from the Python path's (ale-py seeds its own generators)
=========================  =====================================================================

The arrays ``step`` and ``reset`` return are this object's buffers, overwritten by the next call: callers
copy what must outlive it.
"""

from __future__ import annotations

import inspect
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from a3c_envs.atari import (
    FIRE,
    FRAME_SKIP,
    MAX_FIRE_RESETS,
    NOOP,
    NOOP_MAX,
    SCREEN_SIZE,
    fire_reset_rule,
    register_atari,
)

# ALE seeds are 31-bit: ale-py treats a negative seed as "do not reseed" and refuses larger ones.
SEED_RANGE = 2**31
# What the native env can take: keyword arguments of the Python path that it supports too.
NATIVE_KWARGS = ("max_num_frames_per_episode", "repeat_action_probability")
# The spec kwargs of an ale-py id that the C++ env implements as the Python path does.
_SPEC_KWARGS = {"game", "obs_type", "repeat_action_probability", "full_action_space", "frameskip"}
_SPEC_KWARGS |= {"max_num_frames_per_episode"}


def native_unsupported(env_id: str, kwargs: dict[str, Any]) -> str | None:
    """Why ``env_id`` (an ``ALE/`` id) with these ``make_env`` keyword arguments cannot run natively, or
    None when it can: ale-py missing or without ``AtariVectorEnv``, an unknown id, an id variant the C++ env
    does not implement, or a keyword it does not take."""
    if not register_atari():
        return "ale_py is not installed"
    try:
        from ale_py import AtariVectorEnv
    except ImportError:
        return "this ale-py has no AtariVectorEnv (ale-py >= 0.11 has)"
    if "autoreset_mode" not in inspect.signature(AtariVectorEnv).parameters:
        return "this ale-py's AtariVectorEnv has no same-step autoreset"
    try:
        spec_kwargs = gym.spec(env_id).kwargs
    except gym.error.Error as exc:
        return f"{env_id!r} is not a registered id ({exc})"
    odd = sorted(set(spec_kwargs) - _SPEC_KWARGS)
    if odd or spec_kwargs.get("obs_type", "rgb") != "rgb" or spec_kwargs.get("full_action_space"):
        return f"{env_id!r} is a variant the C++ env does not implement ({spec_kwargs})"
    other = sorted(set(kwargs) - set(NATIVE_KWARGS))
    if other:
        return f"it takes only {', '.join(NATIVE_KWARGS)} as env arguments, not {', '.join(other)}"
    return None


class NativeAtariVectorEnv(gym.vector.VectorEnv):
    """K Atari games in ale-py's C++ envs, stepped as one batch with same-step autoreset (module docstring).

    ``step`` returns (obs [K, k, 84, 84] uint8, rewards [K] float64, terminated [K] bool, truncated [K]
    bool, info), like ``SerialVectorEnv``; check ``native_unsupported`` before making one.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        training: bool = False,
        *,
        frame_stack: int = 1,
        **kwargs: Any,
    ):
        """Make ``num_envs`` C++ envs of ``env_id``; ``kwargs``: overrides (``NATIVE_KWARGS``) of its spec."""
        from ale_py import AtariVectorEnv

        if frame_stack < 1:
            raise ValueError(f"NativeAtariVectorEnv: frame_stack must be >= 1, not {frame_stack}")
        if set(kwargs) - set(NATIVE_KWARGS):
            raise TypeError(f"NativeAtariVectorEnv takes only {NATIVE_KWARGS} as env arguments, not {kwargs}")
        settings = {**gym.spec(env_id).kwargs, **kwargs}
        self.envs = [
            AtariVectorEnv(
                settings["game"],
                1,
                num_threads=1,
                max_num_frames_per_episode=int(settings["max_num_frames_per_episode"]),
                repeat_action_probability=float(settings["repeat_action_probability"]),
                autoreset_mode=AutoresetMode.SAME_STEP,
                img_height=SCREEN_SIZE,
                img_width=SCREEN_SIZE,
                grayscale=True,
                stack_num=frame_stack,
                frameskip=FRAME_SKIP,
                maxpool=True,
                noop_max=NOOP_MAX,
                episodic_life=False,
                reward_clipping=False,
                use_fire_reset=False,
            )
            for _ in range(num_envs)
        ]
        self.num_envs = num_envs
        self.training = training
        self.spec = gym.spec(env_id)
        self.single_observation_space = self.envs[0].single_observation_space
        self.single_action_space = self.envs[0].single_action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.reports_episodes = training
        self.fire = fire_reset_rule([action.name for action in self.envs[0].ale.get_action_set()])
        self._obs = np.zeros((num_envs, *self.single_observation_space.shape), np.uint8)
        self._final_obs = np.zeros_like(self._obs)
        self._rewards = np.zeros(num_envs, np.float64)
        self._terminated = np.zeros(num_envs, bool)
        self._truncated = np.zeros(num_envs, bool)
        self._action = np.zeros(1, np.int64)
        self._lives = np.zeros(num_envs, np.int64)
        # The running game's raw score and agent steps (every C++ step counts), and this step's reports.
        self._score = np.zeros(num_envs, np.float64)
        self._length = np.zeros(num_envs, np.int64)
        self._games: dict[str, np.ndarray] | None = None
        self._games_ended = np.zeros(num_envs, bool)

    def _act(self, i: int, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One C++ step of env i (ALE resets a game that ends in it, same step); the game's score and
        length count it."""
        self._action[0] = action
        obs, reward, terminated, truncated, info = self.envs[i].step(self._action)
        raw = float(reward[0])
        self._score[i] += raw
        self._length[i] += 1
        return obs[0], raw, bool(terminated[0]), bool(truncated[0]), info

    def _end_game(self, i: int) -> None:
        """Env i's game ended (ALE already started the next): report it (training) and start counting anew."""
        if self.training:
            if self._games is None:
                self._games = {"r": np.zeros(self.num_envs), "l": np.zeros(self.num_envs, np.int64)}
                self._games_ended = np.zeros(self.num_envs, bool)
            self._games["r"][i], self._games["l"][i] = self._score[i], self._length[i]
            self._games_ended[i] = True
        self._score[i] = 0.0
        self._length[i] = 0

    def _restart(self, i: int, obs: np.ndarray, info: dict[str, Any], new_game: bool) -> np.ndarray:
        """What a Python env's reset does after env i ended an episode: ``FireReset.reset`` around
        ``EpisodicLife.reset``. ``new_game``: ALE already started a new game (``obs`` and ``info`` are its
        first); else a life was lost (training) and the same game goes on with one NOOP step. Then, in FIRE
        games, one FIRE step, and all again if that step ended the episode. Returns the new observation."""
        for _ in range(MAX_FIRE_RESETS):
            if not new_game:  # EpisodicLife's soft reset
                obs, _, terminated, truncated, info = self._act(i, NOOP)
                if terminated or truncated:  # the game ended within the NOOP: ALE started a new one
                    self._end_game(i)
            self._lives[i] = info["lives"][0]
            if not self.fire:
                return obs
            obs, _, terminated, truncated, info = self._act(i, FIRE)
            new_game = terminated or truncated
            if new_game:
                self._end_game(i)
            elif not (self.training and 0 < info["lives"][0] < self._lives[i]):
                self._lives[i] = info["lives"][0]
                return obs
        raise RuntimeError(f"FireReset: every FIRE after reset ended the episode ({MAX_FIRE_RESETS} tries)")

    def _step_one(
        self, i: int, action: int, restart: bool = True
    ) -> tuple[np.ndarray, float, bool, bool, np.ndarray | None]:
        """Step env i: (its next obs, the reward for the learner, terminated, truncated, the final obs where
        the episode ended, else None). ``restart=False``: a game that ends is not restarted (no FIRE step;
        ALE itself already began the next): the next obs is then the final one."""
        obs, reward, terminated, truncated, info = self._act(i, action)
        lives = int(info["lives"][0])  # after a game's end: the new game's lives
        ended = terminated or truncated
        if self.training:
            reward = float(np.sign(reward))
            # A lost life that leaves lives (EpisodicLife): the learner's episode ends, the game goes on.
            # (On a truncation ALE reports the next game's lives, so a life lost on that very step is not
            # also flagged terminated, as the Python path would: one step in 27000, on a lost life.)
            if not ended and 0 < lives < self._lives[i]:
                return self._restart(i, obs, info, new_game=False), reward, True, False, obs
        elif not ended and self.fire and lives < self._lives[i]:  # FireOnLifeLoss
            obs, fire_reward, terminated, truncated, info = self._act(i, FIRE)
            reward += fire_reward
            ended = terminated or truncated
        self._lives[i] = lives
        if not ended:
            return obs, reward, False, False, None
        final = info["final_obs"][0]
        self._end_game(i)
        if not restart:
            return final, reward, terminated, truncated, final
        return self._restart(i, obs, info, new_game=True), reward, terminated, truncated, final

    def step(self, actions: np.ndarray):
        """Step env i with ``actions[i]`` ([K] ints), restarting in the same step any env that ends."""
        ended = None
        self._games = None
        for i, action in enumerate(np.asarray(actions).tolist()):
            obs, reward, terminated, truncated, final = self._step_one(i, action)
            self._obs[i] = obs
            self._rewards[i] = reward
            self._terminated[i] = terminated
            self._truncated[i] = truncated
            if final is not None:
                if ended is None:
                    ended = np.zeros(self.num_envs, bool)
                ended[i] = True
                self._final_obs[i] = final
        info: dict[str, Any] = {"lives": self._lives}
        if ended is not None:
            info["final_obs"], info["_final_obs"] = self._final_obs, ended
        if self._games is not None:
            info["episode"], info["_episode"] = self._games, self._games_ended
        return self._obs, self._rewards, self._terminated, self._truncated, info

    def step_some(self, indices: np.ndarray, actions: np.ndarray):
        """Step only env ``indices[j]`` with ``actions[j]`` (indices [n], actions [n] ints), the others not
        at all (each sub-env is its own C++ env, so a subset costs only its own steps); a game that ends here
        is not restarted (greedy play steps each env to its game's end, then no more): step it again only
        after ``reset``. Returns fresh arrays (obs [n, ...], rewards [n] float64, terminated [n] bool,
        truncated [n] bool, {"lives": [n]}), row j env ``indices[j]``'s; an ended game's obs is its last."""
        indices = np.asarray(indices)
        n = len(indices)
        obs = np.empty((n, *self._obs.shape[1:]), self._obs.dtype)
        rewards = np.empty(n, np.float64)
        terminated = np.empty(n, bool)
        truncated = np.empty(n, bool)
        self._games = None
        for j, (i, action) in enumerate(zip(indices.tolist(), np.asarray(actions).tolist(), strict=True)):
            obs[j], rewards[j], terminated[j], truncated[j], _ = self._step_one(i, action, restart=False)
        return obs, rewards, terminated, truncated, {"lives": self._lives[indices]}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start a new game in every env (env i seeded with ``(seed + i) mod 2**31``), FIRE included; return
        (obs [K, ...], {"lives": [K]}). ``options`` are ignored."""
        for i, env in enumerate(self.envs):
            obs, info = env.reset(seed=None if seed is None else int((seed + i) % SEED_RANGE))
            self._score[i] = 0.0
            self._length[i] = 0
            self._obs[i] = self._restart(i, obs[0], info, new_game=True)
        self._games = None
        return self._obs, {"lives": self._lives}

    def close_extras(self, **kwargs: Any) -> None:
        """Close the C++ envs (``VectorEnv.close`` calls this once); dropping them joins their threads."""
        for env in self.envs:
            env.close()
        self.envs = []
