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


# A recurrent model's state as ``predict`` takes and returns it: ours (h, c), each [B, H] float32; a network
# of your own its ``initial_state``'s tuple; None for feed-forward models.
RecurrentState = tuple[np.ndarray, ...]


class Policy:
    """The policy of a checkpoint: its model, config and observation statistics.

    ``predict`` takes observations as ``make_env()``'s env returns them (Atari: its preprocessed frames; a
    Discrete observation: one-hot) and applies the run's observation normalisation itself. It plays the
    most likely action (``deterministic=True``, the default) or draws one from the policy with the
    policy's own generator (``a3c.load(path, seed=...)``, ``seed(n)``). A recurrent model (an LSTM) keeps
    its state between ``predict(obs)`` calls, per batch size, until ``reset()``; or the caller carries it:
    ``action, state = predict(obs, state=state, episode_start=starts)``, as Stable-Baselines3's.
    """

    def __init__(self, saved: SavedPolicy, seed: int | None = None):
        self.saved = saved
        self.spaces = saved.spaces
        self._dist = ActionDist.of_spaces(saved.spaces, saved.config.squash)
        self._acting: dict[int, Any] = {}  # batch size → the model's acting function (recurrent state)
        self._rng = np.random.default_rng(seed)

    @property
    def config(self) -> Config:
        """The run's config (``env_id``, ``env_kwargs``, ``squash``, ...)."""
        return self.saved.config

    @property
    def path(self) -> Path:
        """The checkpoint file."""
        return self.saved.path

    @property
    def recurrent(self) -> bool:
        """Whether the model carries a state between steps (an LSTM)."""
        return bool(getattr(self.saved.model, "recurrent", False))

    def seed(self, seed: int | None) -> None:
        """Restart the generator that ``predict(..., deterministic=False)`` draws actions with (None: from
        fresh OS entropy)."""
        self._rng = np.random.default_rng(seed)

    def make_env(self, **kwargs: Any) -> gym.Env:
        """One env as the evaluator makes it (the run's ``env_kwargs`` and frame stacking, no training
        wrappers); ``kwargs`` go to ``gymnasium.make`` too, e.g. ``render_mode="rgb_array"``."""
        from a3c_envs import make_env

        config = self.saved.config
        kwargs = {**config.env_kwargs, **kwargs}
        return make_env(config.env_id, frame_stack=config.frame_stack, wrappers=config.wrappers, **kwargs)

    def predict(
        self,
        obs: Any,
        state: RecurrentState | None = None,
        episode_start: Any = None,
        deterministic: bool = True,
    ) -> Any:
        """The action for one observation (shape ``obs_shape``: one action) or a batch ([B, *obs_shape]: B
        actions), as the env's ``step`` takes it: the most likely one (``deterministic``), else a draw.

        ``predict(obs)`` returns the action(s); an LSTM's state is kept here, per batch size, until
        ``reset()``. Given ``state`` or ``episode_start`` (the explicit form, as Stable-Baselines3's), it
        returns ``(action, state)`` and keeps nothing: ``state`` is what the last call returned (None: a
        zero state), ``episode_start`` [B] bool marks the envs whose episode starts with this observation
        (their state is zeroed first). The state is the model's tuple of arrays (ours: (h, c), [B, H]
        float32 each; a network of your own: its ``initial_state``'s), or None for a model without one.
        """
        x, single = self._batch(obs)
        explicit = state is not None or episode_start is not None
        if explicit and self.recurrent:
            out, next_state = self._recurrent_step(x, state, episode_start)
        else:
            act = self._acting.get(len(x))
            if act is None:
                act = self._acting[len(x)] = make_policy(self.saved.model, len(x))
            out, next_state = act(x), None
        actions = self._dist.greedy(out) if deterministic else self._draw(out)
        action = actions[0] if single else actions
        return (action, next_state) if explicit else action

    def _batch(self, obs: Any) -> tuple[np.ndarray, bool]:
        """``obs`` as a normalised batch [B, *obs_shape], and whether it was one observation."""
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
        return x, single

    def _draw(self, out: np.ndarray) -> np.ndarray:
        """Actions drawn from the policies ``out`` [B, P] with this policy's generator, as the env takes
        them (Box: the Gaussian's sample clipped or squashed into the bounds)."""
        noise = self._dist.noise(self._rng, (len(out),))
        return self._dist.env_action(self._dist.sample(np.array(out, np.float32), noise))

    def _recurrent_step(
        self, x: np.ndarray, state: RecurrentState | None, episode_start: Any
    ) -> tuple[np.ndarray, RecurrentState]:
        """One step of the LSTM for the batch ``x`` [B, ...] from the caller's ``state``: (policy output
        [B, P], the next state)."""
        import torch

        model, batch = self.saved.model, len(x)
        fresh = tuple(model.initial_state(batch))  # its shapes: ours (h, c), a network of your own its own
        parts = fresh if state is None else tuple(torch.as_tensor(np.asarray(s)) for s in state)
        if [tuple(s.shape) for s in parts] != [tuple(s.shape) for s in fresh]:
            got = ", ".join(str(tuple(s.shape)) for s in parts)
            expected = ", ".join(str(tuple(s.shape)) for s in fresh)
            raise BadInput(
                f"state: shapes {got} are not allowed; expected {expected}, as predict returned it (or None)"
            )
        parts = tuple(s.float() for s in parts)
        if episode_start is not None:
            starts = np.asarray(episode_start, dtype=bool).reshape(-1)
            if starts.shape != (batch,):
                raise BadInput(
                    f"episode_start: shape {np.shape(episode_start)} is not allowed; expected [{batch}] bools"
                )
            keep = torch.from_numpy(~starts).float().unsqueeze(1)
            parts = tuple(s * keep.view(-1, *([1] * (s.dim() - 1))) for s in parts)
        with torch.no_grad():
            out, _, next_state = model.step(torch.from_numpy(x), parts)
        return out.numpy(), tuple(s.numpy() for s in next_state)

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


def load(
    path: str | Path, *, seed: int | None = None, trust_env_module: bool = False, trust_code: bool = False
) -> Policy:
    """The policy of a checkpoint, or of a run dir (its checkpoints/best.pt); a missing, broken or foreign
    file is BadInput with the message ``a3c evaluate`` prints. ``seed``: of the generator that
    ``predict(..., deterministic=False)`` draws with (None: fresh OS entropy). ``trust_env_module``: import
    the module of the saved env id even from the current directory (``--trust-env-module``).

    An env factory, wrappers or a network the run was given from a script or notebook are found in this
    session (given again, or defined again under the same name in the running script or notebook); with
    ``trust_code=True`` they are unpickled from the run dir's ``user_code.pkl`` instead (that runs the
    code saved there, and implies ``trust_env_module``: only for runs you trust). Without it a checkpoint
    names no code a3c would call but an env or wrapper class of an installed module."""
    from a3c.rundir.checkpoints import load_policy

    path = Path(path)
    if trust_code:
        load_run_code(path)
    return Policy(load_policy(path, trust_env_module or trust_code), seed)


def load_run_code(path: Path) -> None:
    """Register the objects the run of ``path`` (a run dir, or a checkpoint in its ``checkpoints/``) saved
    in ``user_code.pkl`` (``a3c.core.user_code.CodeBook``)."""
    from a3c.core.user_code import CodeBook

    run_dir = path if path.is_dir() else path.parent.parent if path.parent.name == "checkpoints" else None
    if run_dir is not None:
        CodeBook.load(run_dir)
