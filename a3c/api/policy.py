"""``a3c.load``: a saved policy (a checkpoint, or a run dir's best.pt) that acts on observations
(``Policy.predict``) and plays greedy episodes (``Policy.evaluate``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from a3c.algo.distributions import ActionDist
from a3c.algo.numpy_mlp import make_policy
from a3c.core.errors import BadInput

if TYPE_CHECKING:
    import gymnasium as gym

    from a3c.core.config import Config
    from a3c.rundir.checkpoints import SavedPolicy


class Policy:
    """The greedy policy of a checkpoint: its model, config and observation statistics.

    ``predict`` takes observations as ``make_env()``'s env returns them (Atari: its preprocessed frames; a
    Discrete observation: one-hot) and applies the run's observation normalisation itself. A recurrent
    model (an LSTM) keeps its state between ``predict`` calls, per batch size; ``reset()`` forgets it (call
    it at the start of each episode).
    """

    def __init__(self, saved: SavedPolicy):
        self.saved = saved
        self.spaces = saved.spaces
        self._dist = ActionDist.of_spaces(saved.spaces, saved.config.squash)
        self._acting: dict[int, Any] = {}  # batch size → the model's acting function (recurrent state)

    @property
    def config(self) -> Config:
        """The run's config (``env_id``, ``env_kwargs``, ``squash``, ...)."""
        return self.saved.config

    @property
    def path(self) -> Path:
        """The checkpoint file."""
        return self.saved.path

    def make_env(self, **kwargs: Any) -> gym.Env:
        """One env as the evaluator makes it (the run's ``env_kwargs`` and frame stacking, no training
        wrappers); ``kwargs`` go to ``gymnasium.make`` too, e.g. ``render_mode="rgb_array"``."""
        from a3c_envs import make_env

        config = self.saved.config
        kwargs = {**config.env_kwargs, **kwargs}
        return make_env(config.env_id, frame_stack=config.frame_stack, wrappers=config.wrappers, **kwargs)

    def predict(self, obs: Any) -> np.ndarray:
        """The greedy action for one observation (shape ``obs_shape``: one action) or a batch
        ([B, *obs_shape]: B actions), as the env's ``step`` takes it."""
        shape = tuple(self.spaces.obs_shape)
        x = np.asarray(obs, dtype=np.uint8 if self.spaces.image else np.float32)
        single = x.shape == shape
        if single:
            x = x[None]
        if x.shape[1:] != shape:
            raise BadInput(
                f"obs: shape {np.shape(obs)} is not allowed; expected {shape} (one observation) or "
                f"[B, {', '.join(map(str, shape))}] (a batch)"
            )
        if self.saved.obs_stats is not None:
            x = self.saved.obs_stats.normalize(x)
        act = self._acting.get(len(x))
        if act is None:
            act = self._acting[len(x)] = make_policy(self.saved.model, len(x))
        actions = self._dist.greedy(act(x))
        return actions[0] if single else actions

    def reset(self) -> None:
        """Forget a recurrent model's state (a new episode starts)."""
        self._acting.clear()

    def evaluate(self, episodes: int = 10, seed: int = 0) -> dict[str, Any]:
        """Play ``episodes`` greedy episodes on fresh envs seeded ``seed``, ``seed + 1``, ... and return what
        ``a3c evaluate --json`` prints (mean_return, std_return, min_return, max_return, mean_length, ...)."""
        from a3c.tools.evaluate import evaluate_policy

        return evaluate_policy(self.saved, episodes, seed)

    def __repr__(self) -> str:
        return f"Policy({self.saved.config.env_id!r}, {str(self.saved.path)!r})"


def load(path: str | Path, *, trust_env_module: bool = False) -> Policy:
    """The policy of a checkpoint, or of a run dir (its checkpoints/best.pt); a missing, broken or foreign
    file is BadInput with the message ``a3c evaluate`` prints. ``trust_env_module``: import the module of
    the saved env id even from the current directory (``--trust-env-module``). An env factory or wrappers
    the run was given from a script or notebook come back from its run dir (``user_code.pkl``, two levels
    above a checkpoint file; unpickling runs their code, so load only runs you trust)."""
    from a3c.core.user_code import CodeBook
    from a3c.rundir.checkpoints import load_policy

    path = Path(path)
    CodeBook.load(path if path.is_dir() else path.parent.parent)
    return Policy(load_policy(path, trust_env_module))
