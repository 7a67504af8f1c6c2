"""The A3C paper's Atari network: a conv net on 84×84 frames, optionally an LSTMCell, policy and value heads.

Conv 16×8×8 stride 4 → conv 32×4×4 stride 2 → fully connected 256 (ReLU), as in Mnih et al. (2016); the
recurrent variant ("A3C LSTM") feeds that into an LSTMCell(256). The LSTM's state is carried across rollout
segments (detached at their boundaries: the loss unrolls each segment from its stored initial state) and
zeroed per env at episode ends.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from a3c.algo.models.distributions import raw_log_std
from a3c.algo.models.mlp_model import orthogonal_init, with_log_std

LstmState = tuple[torch.Tensor, torch.Tensor]


class ConvActorCritic(nn.Module):
    """π(a|s) and V(s) from uint8 images [N, C, H, W] (scaled to [0, 1] here).

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
        with torch.no_grad():
            flat = self.encoder(torch.zeros(1, channels, height, width)).shape[1]
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
        size = self.lstm.hidden_size
        return torch.zeros(batch, size), torch.zeros(batch, size)

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
        keep = torch.from_numpy(~ends).float().unsqueeze(-1)  # [T, B, 1]
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
