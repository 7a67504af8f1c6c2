"""Policies built in memory around small models, for the tests of ``Policy.predict`` and
``a3c.evaluate_policy``: no run, no checkpoint file."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from a3c.algo.networks import ActorCritic, ConvActorCritic
from a3c.api.policy import Policy
from a3c.core.config import Config
from a3c.core.spaces import Spaces
from a3c.rundir.checkpoints import SavedPolicy


def discrete_policy(p_first: float = 0.8, seed: int | None = None) -> Policy:
    """CartPole-shaped: 2 actions, whatever the observation P(action 0) = ``p_first``."""
    model = ActorCritic(4, 2, hidden_sizes=(8,))
    with torch.no_grad():
        model.policy_head.weight.zero_()
        model.policy_head.bias.copy_(torch.tensor([math.log(p_first), math.log(1 - p_first)]))
    config = Config(env_id="CartPole-v1")
    return Policy(SavedPolicy(Path("cartpole.pt"), config, model.eval(), None, Spaces((4,), 2)), seed)


def box_policy(seed: int) -> Policy:
    spaces = Spaces((3,), 1, True, (-2.0,), (2.0,))
    model = ActorCritic(3, 1, hidden_sizes=(8,), continuous=True)
    saved = SavedPolicy(Path("pendulum.pt"), Config(env_id="Pendulum-v1"), model.eval(), None, spaces)
    return Policy(saved, seed)


def lstm_policy() -> Policy:
    torch.manual_seed(0)
    model = ConvActorCritic((1, 36, 36), 3, lstm_size=8)
    with torch.no_grad():
        model.policy_head.weight.mul_(100.0)  # actions that follow the state, not all the same argmax
    config = Config(env_id="ALE/Pong-v5", model="cnn", lstm_size=8)
    return Policy(SavedPolicy(Path("pong.pt"), config, model.eval(), None, Spaces((1, 36, 36), 3)))


def frozen_lake_policy() -> Policy:
    """FrozenLake-shaped: Discrete(16) observations, trained one-hot (what ``make_env`` gives), 4 actions."""
    model = ActorCritic(16, 4, hidden_sizes=(8,))
    spaces = Spaces((16,), 4, obs_encoding="one_hot")
    return Policy(SavedPolicy(Path("lake.pt"), Config(env_id="FrozenLake-v1"), model.eval(), None, spaces))


def gru_policy() -> Policy:
    """A recurrent network of the user's own (``tests.support.models:Recurrent``, one GRU state tensor)."""
    from a3c.algo.user_model import build_user_model

    torch.manual_seed(0)
    spaces = Spaces((4,), 2)
    model = build_user_model("tests.support.models:Recurrent", spaces)
    config = Config(env_id="CartPole-v1", model="tests.support.models:Recurrent")
    return Policy(SavedPolicy(Path("gru.pt"), config, model.eval(), None, spaces))
