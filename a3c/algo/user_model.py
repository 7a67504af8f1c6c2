"""Your own network (``Config.model`` = ``"pkg.module:name"``): the spaces its builder is called with, the
contract its outputs keep, and ``UserModel``, the adapter that gives it what the learner, the evaluator,
``TorchPolicy`` and ``a3c export`` call (``step``, ``recurrent``, ``initial_state``, ``unroll``).

The builder: ``build(observation_space, action_space) -> torch.nn.Module`` (a class, a function, a lambda),
called with the spaces the model sees, rebuilt from the run's ``Spaces`` (so ``a3c.load`` calls it with the
very same ones):

- ``observation_space``: ``Box(-inf, inf, obs_shape, float32)`` for flat observations (after a3c's encoding:
  a Discrete one-hot, MultiDiscrete/MultiBinary/Tuple/Dict flattened, ``a3c_envs.space_check``; with
  ``obs_norm`` the model sees normalised values, hence no bounds), ``Box(0, 255, (C, H, W), float32)`` for
  images (pixel values, not scaled: divide by 255 yourself).
- ``action_space``: the env's own: ``Discrete(n)``, ``MultiDiscrete(nvec)``, ``MultiBinary(n)`` or
  ``Box(low, high, (A,), float32)``.

The module, feed-forward: ``forward(obs) -> (policy output [B, P], value [B])``, obs float32
[B, *observation_space.shape]; P is ``policy_output_size(action_space)``:

- Discrete(n): logits [B, n]; MultiDiscrete(nvec): logits [B, sum(nvec)], one slice per dimension in order;
  MultiBinary(n): one logit per bit [B, n] (P(bit = 1) = sigmoid(logit));
- Box(A): [B, 2A] = (mean [B, A], raw log σ [B, A]) of a diagonal Gaussian; a3c bounds log σ smoothly into
  (-5, 2) (``distributions.bound_log_std``, about the identity near 0), so a raw 0 is σ ≈ 0.92, and the
  loss pulls a raw log σ outside (-5.99, 2.99) back in (``ActionDist.log_std_penalty``). A
  state-independent σ is an ``nn.Parameter`` [A] expanded to [B, A] and concatenated after the mean (as
  ``networks.with_log_std``). The samples are clipped into the bounds (``squash`` clip) or squashed.

A value of shape [B, 1] is taken as [B]. Recurrent (optional): a module with ``initial_state(batch) ->
tuple of tensors [batch, ...]`` (zeros: an episode's start) and ``step(obs [B, ...], state) -> (policy output
[B, P], value [B], next state)``; a3c carries the state, zeroes it per env at episode ends, and unrolls a
segment by calling ``step`` once per time step (``UserModel.unroll``).
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from a3c.core import user_code
from a3c.core.devices import model_device, to_device
from a3c.core.errors import BadInput
from a3c.core.spaces import Spaces

State = tuple[torch.Tensor, ...]


def model_spaces(spaces: Spaces) -> tuple[gym.spaces.Box, gym.Space]:
    """The (observation_space, action_space) a user's builder is called with (see the module docstring)."""
    if spaces.image:
        obs_space = gym.spaces.Box(0.0, 255.0, spaces.obs_shape, np.float32)
    else:
        obs_space = gym.spaces.Box(-np.inf, np.inf, spaces.obs_shape, np.float32)
    kind = spaces.action_kind
    if kind == "discrete":
        action_space: gym.Space = gym.spaces.Discrete(spaces.n_actions)
    elif kind == "multi_discrete":
        action_space = gym.spaces.MultiDiscrete(list(spaces.action_nvec))
    elif kind == "multi_binary":
        action_space = gym.spaces.MultiBinary(spaces.n_actions)
    else:
        low = np.asarray(spaces.action_low, np.float32)
        action_space = gym.spaces.Box(low, np.asarray(spaces.action_high, np.float32), dtype=np.float32)
    return obs_space, action_space


def policy_output_size(action_space: gym.Space) -> int:
    """P, the policy output's width for ``action_space``: n (Discrete, MultiBinary), sum(nvec)
    (MultiDiscrete), 2A (Box: mean and raw log σ)."""
    if isinstance(action_space, gym.spaces.Discrete):
        return int(action_space.n)
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return int(np.sum(action_space.nvec))
    if isinstance(action_space, gym.spaces.MultiBinary):
        return int(np.prod(action_space.shape))
    return 2 * int(action_space.shape[0])


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class UserModel(nn.Module):
    """The user's module (``net``) as a3c's models are called: ``forward(obs) -> (out [B, P], values [B])``,
    ``step(obs, state) -> (out, values, next state)``, ``recurrent``, ``initial_state``, ``unroll``.

    Observations reach ``net`` as float32 (pixels too, unscaled). Its parameters are what trains and what a
    checkpoint holds (``net.`` before each name). Pickled to a child process as its reference, the builder
    by value where the child cannot import it, and its parameter and buffer tensors (shared memory stays
    shared): the child rebuilds ``net`` and puts those tensors in.

    Args:
        net: what the builder returned.
        ref: the builder's reference (``Config.model``).
        spaces: the spaces it was built for.
    """

    def __init__(self, net: nn.Module, ref: str, spaces: Spaces):
        super().__init__()
        self.net = net
        self.ref = ref
        self.spaces = spaces

    @property
    def recurrent(self) -> bool:
        """Whether ``net`` carries a state between steps (it has ``initial_state`` and ``step``)."""
        return callable(getattr(self.net, "initial_state", None)) and callable(
            getattr(self.net, "step", None)
        )

    def initial_state(self, batch: int) -> State | None:
        """A recurrent net's state at an episode's start for ``batch`` envs (tensors [B, H]); else None."""
        if not self.recurrent:
            return None
        device = model_device(self)  # a net may make its state on the CPU whatever its own device
        return tuple(x.to(device) for x in self.net.initial_state(batch))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Feed-forward: obs [B, *obs_shape] → (policy output [B, P], values [B])."""
        if self.recurrent:
            raise RuntimeError("a recurrent model runs with step() or unroll(), which carry its state")
        out, values = self.net(obs.float())
        return out, values.reshape(values.shape[0])

    def step(self, obs: torch.Tensor, state: State | None) -> tuple[torch.Tensor, torch.Tensor, State | None]:
        """One env step of B envs: obs [B, ...] → (policy output [B, P], values [B], next state)."""
        if not self.recurrent:
            out, values = self(obs)
            return out, values, None
        out, values, state = self.net.step(obs.float(), state)
        return out, values.reshape(values.shape[0]), tuple(state)

    def unroll(
        self,
        obs: torch.Tensor,
        state: State,
        ends: np.ndarray,
        next_obs: torch.Tensor,
        final_obs: torch.Tensor,
        final_at: tuple[np.ndarray, np.ndarray],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A recurrent net's forward over one segment, ``step`` by step, as the rollout ran it (the arguments
        and the result of ``ConvActorCritic.unroll``: obs [T, B, ...], ends [T, B], next_obs [B, ...],
        final_obs [M, ...] at ``final_at``; (policy output [T*B, P], values [T*B + B + M]))."""
        steps = obs.shape[0]
        keep = to_device(~ends, obs.device).float().unsqueeze(-1)  # [T, B, 1]
        outs, values, after = [], [], []
        for t in range(steps):
            out, value, state = self.step(obs[t], state)
            outs.append(out)
            values.append(value)
            after.append(state)  # before the reset: a truncated step's final observation follows it
            state = tuple(x * keep[t] for x in state)  # a new episode starts from a zero state
        parts = [torch.cat(values)]
        with torch.no_grad():  # bootstrap values: constants of the loss
            parts.append(self.step(next_obs, state)[1])
            t_idx, b_idx = (torch.from_numpy(i) for i in final_at)
            if len(t_idx):
                ended = tuple(torch.stack([s[k] for s in after])[t_idx, b_idx] for k in range(len(state)))
                parts.append(self.step(final_obs, ended)[1])
        return torch.cat(outs), torch.cat(parts)

    def __deepcopy__(self, memo: dict[int, Any]) -> UserModel:
        # A plain copy of every attribute (the default would go through __reduce__ and rebuild the net).
        new = self.__class__.__new__(self.__class__)
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            new.__dict__[key] = copy.deepcopy(value, memo)
        return new

    def __reduce__(self) -> tuple[Any, ...]:
        # The net's class may live in __main__ or a notebook, which a child process cannot import: the child
        # gets the builder (by value where needed) and the tensors, and builds the net again around them.
        book = user_code.CodeBook(user_code.by_value([self.ref]))
        params = [p.data for p in self.net.parameters()]
        buffers = [b for m in self.net.modules() for b in m._buffers.values() if b is not None]
        return _rebuild, (self.ref, book, self.spaces, params, buffers, self.training)


def _rebuild(
    ref: str,
    book: user_code.CodeBook,
    spaces: Spaces,
    params: list[torch.Tensor],
    buffers: list[torch.Tensor],
    training: bool,
) -> UserModel:
    """A ``UserModel`` unpickled: its net built again (``book`` registered the builder here), the pickled
    tensors put in place of the new net's parameters and buffers."""
    del book  # unpickling it registered the objects sent by value
    model = build_user_model(ref, spaces, check=False)
    for p, data in zip(model.net.parameters(), params, strict=True):
        p.data = data
    slots = [(m, name) for m in model.net.modules() for name, b in m._buffers.items() if b is not None]
    for (module, name), data in zip(slots, buffers, strict=True):
        module._buffers[name] = data
    return model.train(training)


def build_user_model(ref: str, spaces: Spaces, check: bool = True) -> UserModel:
    """The network the builder ``ref`` names (``Config.model``) for ``spaces``, wrapped in a ``UserModel``;
    with ``check``, one forward of a sample batch proves its outputs fit (``check_outputs``). A builder that
    raises or returns no ``nn.Module`` is BadInput in one line."""
    builder = user_code.resolve(ref, "model")
    obs_space, action_space = model_spaces(spaces)
    try:
        net = builder(obs_space, action_space)
    except Exception as exc:  # the user's code: any error is theirs to read, in one line
        raise BadInput(
            f"model: {ref!r} raised {type(exc).__name__}: {_one_line(exc)[:300]} (called with "
            f"observation_space {_one_line(obs_space)}, action_space {_one_line(action_space)})"
        ) from None
    if not isinstance(net, nn.Module):
        raise BadInput(
            f"model: {ref!r} returned a {type(net).__name__}; expected a torch.nn.Module "
            "(observation_space, action_space) -> torch.nn.Module"
        )
    if not list(net.parameters()):
        raise BadInput(f"model: {ref!r} returned a module without parameters; expected one that can learn")
    model = UserModel(net, ref, spaces)
    if check:
        check_outputs(model, action_space)
    return model


def check_outputs(model: UserModel, action_space: gym.Space, batch: int = 2) -> None:
    """One forward (``step`` from the initial state when recurrent) of ``batch`` sample observations;
    BadInput in one line, naming ``model``, the shapes got and expected, when the outputs do not fit."""
    spaces = model.spaces
    sample = torch.zeros(batch, *spaces.obs_shape, dtype=torch.uint8 if spaces.image else torch.float32)
    expected_out = (batch, policy_output_size(action_space))
    what = "step(obs, initial_state(B))" if model.recurrent else "forward(obs)"
    try:
        with torch.no_grad():
            if model.recurrent:
                got = model.net.step(sample.float(), tuple(model.net.initial_state(batch)))
            else:
                got = model.net(sample.float())
    except Exception as exc:
        raise BadInput(
            f"model: {model.ref!r} {what} on obs [{batch}, {', '.join(map(str, spaces.obs_shape))}] raised "
            f"{type(exc).__name__}: {_one_line(exc)[:300]}"
        ) from None
    size = 3 if model.recurrent else 2
    shapes = (
        [tuple(x.shape) for x in got[:2]]
        if isinstance(got, tuple | list)
        and len(got) == size
        and all(isinstance(x, torch.Tensor) for x in got[:2])
        else None
    )
    ok = shapes is not None and shapes[0] == expected_out and shapes[1] in ((batch,), (batch, 1))
    if ok and model.recurrent:  # the state: tensors [B, H], zeroed per env by multiplying rows
        state = got[2]
        ok = isinstance(state, tuple | list) and all(
            isinstance(x, torch.Tensor) and x.dim() == 2 and x.shape[0] == batch for x in state
        )
        shapes = [*shapes, [tuple(x.shape) for x in state] if ok else type(state).__name__]
    if not ok:
        shown = f"{shapes[0]} and {shapes[1]}" if shapes else f"a {type(got).__name__}"
        expected = f"(policy output {expected_out}, value ({batch},))"
        if model.recurrent:
            expected = expected[:-1] + f", next state: a tuple of tensors [{batch}, H])"
            shown = f"{shown} and state {shapes[2]}" if shapes and len(shapes) == 3 else shown
        raise BadInput(
            f"model: {model.ref!r} {what} gave {shown}; expected {expected} for {_one_line(action_space)} "
            f"(policy output [B, P]: {_policy_kind(action_space)}; docs/api.md, Your network)"
        )


def _policy_kind(action_space: gym.Space) -> str:
    """What the policy output holds for ``action_space``, in words."""
    if isinstance(action_space, gym.spaces.Box):
        return "mean and raw log σ, 2A"
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return "logits of each dimension, sum(nvec)"
    if isinstance(action_space, gym.spaces.MultiBinary):
        return "one logit per bit"
    return "logits"
