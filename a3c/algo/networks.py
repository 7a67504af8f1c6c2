"""The actor-critic networks in torch: ``ActorCritic``, an MLP for flat observations (its numpy twin, what
workers act and, with discrete actions, learn with, is ``a3c.algo.numpy_mlp``), and ``ConvActorCritic``, the
A3C paper's conv net for images with an optional LSTM; each gives a policy output (logits, or a Gaussian's
mean and log σ: ``a3c.algo.distributions``) and a state value. ``TorchPolicy`` acts with a torch model and
carries a recurrent one's state between steps."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from a3c.algo.distributions import raw_log_std
from a3c.core.devices import PinnedStage, model_device, to_device

# The MLP's hidden-layer activations by ``Config.activation`` name (``numpy_mlp`` has their twins).
ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


def _mlp(in_dim: int, hidden_sizes: Sequence[int], activation: str = "tanh") -> tuple[nn.Sequential, int]:
    """A body [N, in_dim] → [N, width] (Linear + the activation per hidden size) and its output width."""
    layers: list[nn.Module] = []
    for size in hidden_sizes:
        layers += [orthogonal_init(nn.Linear(in_dim, size), math.sqrt(2)), ACTIVATIONS[activation]()]
        in_dim = size
    return nn.Sequential(*layers), in_dim


def orthogonal_init(layer: nn.Module, gain: float) -> nn.Module:
    """Orthogonal weights and zero bias for a Linear or Conv layer; returns it. The policy heads take a small
    gain (as in SB3 and CleanRL): a near-uniform first policy."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def with_log_std(head: torch.Tensor, log_std: nn.Parameter | None) -> torch.Tensor:
    """The policy output from a policy head's [N, A]: itself, or (mean, a learned state-independent raw log σ)
    as [N, 2A] when the model has ``log_std``."""
    if log_std is None:
        return head
    return torch.cat([head, log_std.expand_as(head)], dim=-1)


class ActorCritic(nn.Module):
    """π(a|s) and V(s) from flat observations, with one shared body or separate policy and value bodies.

    Args:
        obs_dim: length of the flat observation.
        n_actions: number of discrete actions, or of action dimensions when ``continuous``.
        hidden_sizes: widths of the hidden layers of each body.
        shared_body: one body feeds both heads (fewer FLOPs) instead of two separate bodies.
        continuous: a Gaussian policy: the output is (mean [A], log σ [A]) instead of logits [A].
        state_std: Gaussian only: log σ is a second output of the policy head (state-dependent) instead of
            one learned parameter vector (state-independent, as in the A3C paper's continuous variant's
            successors: PPO, SB3, CleanRL).
        init_log_std: Gaussian only: log σ at initialisation (stored raw: ``distributions.raw_log_std``).
        activation: the hidden layers' activation, a key of ``ACTIVATIONS`` (tanh or relu).
    """

    recurrent = False

    def __init__(  # noqa: PLR0913 - one argument per config field the MLP reads
        self,
        obs_dim: int,
        n_actions: int,
        hidden_sizes: Sequence[int] = (64, 64),
        shared_body: bool = False,
        continuous: bool = False,
        state_std: bool = False,
        init_log_std: float = 0.0,
        activation: str = "tanh",
    ):
        super().__init__()
        self.shared_body = shared_body
        self.activation = activation
        self.policy_body, width = _mlp(obs_dim, hidden_sizes, activation)
        self.value_body = self.policy_body if shared_body else _mlp(obs_dim, hidden_sizes, activation)[0]
        head_size = 2 * n_actions if continuous and state_std else n_actions
        self.policy_head = orthogonal_init(nn.Linear(width, head_size), 0.01)
        self.value_head = orthogonal_init(nn.Linear(width, 1), 1.0)
        self.log_std = None
        if continuous:
            if state_std:
                with torch.no_grad():
                    self.policy_head.bias[n_actions:] = raw_log_std(init_log_std)
            else:
                self.log_std = nn.Parameter(torch.full((n_actions,), raw_log_std(init_log_std)))

    def policy_logits(self, obs: torch.Tensor) -> torch.Tensor:
        """[N, obs_dim] → the policy output [N, P] (the rollout needs no value)."""
        return with_log_std(self.policy_head(self.policy_body(obs)), self.log_std)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[N, obs_dim] → (policy output [N, P], values [N])."""
        policy_features = self.policy_body(obs)
        value_features = policy_features if self.shared_body else self.value_body(obs)
        out = with_log_std(self.policy_head(policy_features), self.log_std)
        return out, self.value_head(value_features).squeeze(-1)


LstmState = tuple[torch.Tensor, torch.Tensor]


class ConvActorCritic(nn.Module):
    """π(a|s) and V(s) from uint8 images [N, C, H, W] (scaled to [0, 1] here): the A3C paper's Atari network.

    Conv 16×8×8 stride 4 → conv 32×4×4 stride 2 → fully connected 256 (ReLU), as in Mnih et al. (2016); the
    recurrent variant ("A3C LSTM") feeds that into an LSTMCell. The LSTM's state is carried across rollout
    segments (detached at their boundaries: the loss unrolls each segment from its stored initial state) and
    zeroed per env at episode ends.

    Args:
        obs_shape: (C, H, W) of one observation.
        n_actions: discrete actions, or action dimensions when ``continuous`` (a learned, state-independent
            log σ then follows the mean in the policy output, as in ``ActorCritic``).
        lstm_size: the LSTMCell's width; 0: no LSTM (frame stacking must then give the net motion).
    """

    def __init__(
        self,
        obs_shape: tuple[int, ...],
        n_actions: int,
        lstm_size: int = 256,
        continuous: bool = False,
        init_log_std: float = 0.0,
    ):
        super().__init__()
        channels, height, width = obs_shape
        relu_gain = math.sqrt(2)
        self.encoder = nn.Sequential(
            orthogonal_init(nn.Conv2d(channels, 16, 8, stride=4), relu_gain),
            nn.ReLU(),
            orthogonal_init(nn.Conv2d(16, 32, 4, stride=2), relu_gain),
            nn.ReLU(),
            nn.Flatten(),
        )
        flat = conv_features(self.encoder, channels, height, width)
        self.fc = nn.Sequential(orthogonal_init(nn.Linear(flat, 256), relu_gain), nn.ReLU())
        self.lstm = None
        features = 256
        if lstm_size > 0:
            self.lstm = nn.LSTMCell(256, lstm_size)
            nn.init.zeros_(self.lstm.bias_ih)
            nn.init.zeros_(self.lstm.bias_hh)
            features = lstm_size
        self.policy_head = orthogonal_init(nn.Linear(features, n_actions), 0.01)
        self.value_head = orthogonal_init(nn.Linear(features, 1), 1.0)
        self.log_std = (
            nn.Parameter(torch.full((n_actions,), raw_log_std(init_log_std))) if continuous else None
        )

    @property
    def recurrent(self) -> bool:
        """Whether the net carries an LSTM state between steps."""
        return self.lstm is not None

    def initial_state(self, batch: int) -> LstmState | None:
        """Zero LSTM state for ``batch`` envs ([B, H] each), or None without an LSTM."""
        if self.lstm is None:
            return None
        size, device = self.lstm.hidden_size, self.lstm.weight_hh.device
        return torch.zeros(batch, size, device=device), torch.zeros(batch, size, device=device)

    def encode(self, obs: torch.Tensor) -> torch.Tensor:
        """[N, C, H, W] pixels (any dtype, 0-255) → [N, 256] features."""
        return self.fc(self.encoder(obs.float() / 255.0))

    def heads(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[N, F] → (policy output [N, P], values [N])."""
        return with_log_std(self.policy_head(features), self.log_std), self.value_head(features).squeeze(-1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Without an LSTM: [N, C, H, W] → (policy output [N, P], values [N])."""
        if self.lstm is not None:
            raise RuntimeError("a recurrent model runs with step() or unroll(), which carry its state")
        return self.heads(self.encode(obs))

    def step(
        self, obs: torch.Tensor, state: LstmState | None
    ) -> tuple[torch.Tensor, torch.Tensor, LstmState | None]:
        """One env step of B envs: obs [B, C, H, W] → (policy output [B, P], values [B], next state)."""
        features = self.encode(obs)
        if self.lstm is not None:
            state = self.lstm(features, state)
            features = state[0]
        out, values = self.heads(features)
        return out, values, state

    def unroll(
        self,
        obs: torch.Tensor,
        state: LstmState,
        ends: np.ndarray,
        next_obs: torch.Tensor,
        final_obs: torch.Tensor,
        final_at: tuple[np.ndarray, np.ndarray],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The loss's forward over one segment, the same computation the rollout did step by step.

        Args:
            obs: [T, B, C, H, W]. state: the LSTM state before step 0 ([B, H] each, no gradient).
            ends: [T, B] bool, an episode ended at step t (the state is zeroed after it).
            next_obs: [B, C, H, W] after the last step. final_obs: [M, C, H, W] the last observations of the
                M truncated steps at ``final_at`` = (t indices [M], b indices [M]).

        Returns:
            (policy output [T*B, P], values [T*B + B + M]) in ``segment.segment_batch`` order; the last B + M
            (the bootstrap values) carry no gradient.
        """
        steps, batch = obs.shape[:2]
        lstm = self.lstm
        features = self.encode(obs.reshape(steps * batch, *obs.shape[2:]))
        # The input half of every step's gates in one GEMM over T*B rows (nn.LSTMCell would read W_ih once
        # per step); the recurrent half stays per step. nn.LSTMCell's math, gates in its i, f, g, o order.
        gates_in = torch.addmm(lstm.bias_ih, features, lstm.weight_ih.t()).reshape(steps, batch, -1)
        keep = to_device(~ends, obs.device).float().unsqueeze(-1)  # [T, B, 1]
        h, c = state
        hs, cs = [], []
        for t in range(steps):
            gates = gates_in[t] + torch.addmm(lstm.bias_hh, h, lstm.weight_hh.t())
            i, f, g, o = gates.chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            hs.append(h)
            cs.append(c)
            h, c = h * keep[t], c * keep[t]  # a new episode starts from a zero state
        hidden = torch.stack(hs)  # [T, B, H], before any reset
        out, values = self.heads(hidden.reshape(steps * batch, -1))
        # The bootstrap values reach the loss only through GAE's detached targets: no graph for them (autograd
        # would otherwise run a backward of zeros through the LSTM and encoder for these frames).
        with torch.no_grad():
            next_h, _ = lstm(self.encode(next_obs), (h, c))
            parts = [self.heads(next_h)[1]]
            if len(final_at[0]):
                t_idx, b_idx = torch.from_numpy(final_at[0]), torch.from_numpy(final_at[1])
                h_end, c_end = hidden[t_idx, b_idx], torch.stack(cs)[t_idx, b_idx]
                final_h, _ = lstm(self.encode(final_obs), (h_end, c_end))
                parts.append(self.heads(final_h)[1])
        return out, torch.cat([values, *parts])


def conv_features(encoder: nn.Sequential, channels: int, height: int, width: int) -> int:
    """The width of ``encoder``'s flattened output for one [C, H, W] image, by each Conv2d's size formula
    (no forward: on torch's meta device a forward imports much of torch). ValueError for an image too small
    for the convolutions."""
    for layer in encoder:
        if isinstance(layer, nn.Conv2d):
            sizes = []
            for size, k, s, p, d in zip(
                (height, width), layer.kernel_size, layer.stride, layer.padding, layer.dilation, strict=True
            ):
                sizes.append((size + 2 * p - d * (k - 1) - 1) // s + 1)
            channels, (height, width) = layer.out_channels, sizes
            if height < 1 or width < 1:
                raise ValueError(f"the image is too small for the conv net's {layer}")
    return channels * height * width


class TorchPolicy:
    """Acts with a torch model's ``step``; a recurrent model's state for B envs lives here.

    ``state()`` is a copy of the state before the next call (what a segment stores to unroll from);
    ``reset(ended)`` zeroes the state of the envs whose episode ended (in greedy play: that lost a life, too).
    """

    def __init__(self, model: nn.Module, num_envs: int):
        self.model = model
        self.device = model_device(model)  # observations go there; outputs come back to the host
        self.stage = PinnedStage(self.device)
        self.recurrent = bool(getattr(model, "recurrent", False))
        self.num_envs = num_envs
        self._state = model.initial_state(num_envs) if self.recurrent else None

    @torch.no_grad()
    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Observations [B, ...] → policy outputs [B, P]; a recurrent model's state advances one step."""
        out, _, self._state = self.model.step(self.stage(obs), self._state)
        return out.cpu().numpy()  # waits for the step, so the stage's buffer is free again

    def state(self) -> tuple[torch.Tensor, ...] | None:
        """A copy of the recurrent state ([B, H] tensors) before the next call; None when feed-forward."""
        return None if self._state is None else tuple(x.clone() for x in self._state)

    def reset(self, ended: np.ndarray | None = None) -> None:
        """Zero the state of the envs where ``ended`` [B] is True (all of them when None)."""
        if self._state is None:
            return
        if ended is None:
            self._state = self.model.initial_state(self.num_envs)
            return
        keep = to_device(~ended, self.device).float().unsqueeze(1)
        self._state = tuple(x * keep for x in self._state)

    def keep_rows(self, kept: np.ndarray) -> None:
        """Go on with the envs where ``kept`` [B] is True only (greedy play drops the envs whose episode
        ended): their state rows stay as they are, the others' go, and the next call takes the kept envs'
        observations [B', ...], in the same order."""
        self.num_envs = int(np.count_nonzero(kept))
        if self._state is not None:
            rows = to_device(np.flatnonzero(kept), self.device)
            self._state = tuple(x.index_select(0, rows) for x in self._state)
