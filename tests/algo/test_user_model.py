"""Your own network (``a3c.algo.user_model``): the spaces its builder gets, the one-line refusals of outputs
that do not fit and of a builder that raises, the recurrent adapter's unroll against the reference update,
and a pickled copy (what a child process gets) rebuilt around the same tensors."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from a3c.algo.distributions import ActionDist
from a3c.algo.learner import build_model
from a3c.algo.reference import reference_update
from a3c.algo.user_model import UserModel, model_spaces
from a3c.core import user_code
from a3c.core.config import Config, parse_values
from a3c.core.errors import BadInput
from a3c.core.spaces import Spaces
from tests.algo.test_reference import HYPER, assert_terms, autograd_update
from tests.support.segments import random_segment

MODELS = "tests.support.models"
CARTPOLE = Spaces((4,), 2)


def built(model: str, spaces: Spaces = CARTPOLE) -> nn.Module:
    return build_model(Config(env_id="CartPole-v1", model=model).validate(), spaces)


@pytest.mark.parametrize(
    ("spaces", "expected"),
    [
        (Spaces((4,), 2), (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))),
        (
            Spaces((3,), 2, True, (-2.0, 0.0), (2.0, 0.5)),
            (
                gym.spaces.Box(-np.inf, np.inf, (3,), np.float32),
                gym.spaces.Box(np.array([-2, 0], np.float32), np.array([2, 0.5], np.float32)),
            ),
        ),
        (
            Spaces((4, 84, 84), 6, action_nvec=(2, 4)),
            (gym.spaces.Box(0, 255, (4, 84, 84), np.float32), gym.spaces.MultiDiscrete([2, 4])),
        ),
        (
            Spaces((16,), 3, multi_binary=True),
            (gym.spaces.Box(-np.inf, np.inf, (16,)), gym.spaces.MultiBinary(3)),
        ),
    ],
    ids=["discrete", "box", "image-multi-discrete", "multi-binary"],
)
def test_the_builder_gets_the_spaces_the_model_sees(spaces, expected):
    assert model_spaces(spaces) == expected


def test_a_users_network_trains_by_autograd_as_our_models_are_called():
    model = built(f"{MODELS}:build")
    assert isinstance(model, UserModel) and not model.recurrent
    out, values = model(torch.zeros(5, 4))
    assert out.shape == (5, 2) and values.shape == (5,)
    out, values, state = model.step(torch.zeros(3, 4), None)
    assert out.shape == (3, 2) and values.shape == (3,) and state is None
    assert list(model.state_dict()) == [f"net.{k}" for k in model.net.state_dict()]


def test_the_python_object_is_registered_by_its_reference():
    class Local(nn.Module):  # not importable: known in this process by the reference it is registered as
        def __init__(self, observation_space, action_space):
            super().__init__()
            self.linear = nn.Linear(observation_space.shape[0], action_space.n + 1)

        def forward(self, obs):
            y = self.linear(obs)
            return y[:, :-1], y[:, -1:]  # a value [B, 1] is taken as [B]

    ref = parse_values({"model": Local})["model"]
    assert ref.endswith("Local") and user_code.resolve(ref, "model") is Local
    model = built(ref)
    assert isinstance(model.net, Local) and model(torch.zeros(2, 4))[1].shape == (2,)


def test_a_policy_output_that_does_not_fit_the_action_space_is_one_line():
    with pytest.raises(BadInput) as info:
        built(f"{MODELS}:wrong_policy_size")
    line = str(info.value)
    assert "\n" not in line
    assert line.startswith(f"model: '{MODELS}:wrong_policy_size' forward(obs) gave (2, 1) and (2,);"), line
    assert "expected (policy output (2, 2), value (2,))" in line and "Discrete(2)" in line, line


def test_a_builder_that_raises_is_one_line():
    with pytest.raises(BadInput) as info:
        built(f"{MODELS}:raises")
    line = str(info.value)
    assert "\n" not in line
    assert line.startswith(f"model: '{MODELS}:raises' raised ValueError: this builder takes images only"), (
        line
    )


def test_a_name_that_is_neither_mlp_cnn_nor_a_reference_is_refused():
    with pytest.raises(
        BadInput, match="^model: 'lstm' is not allowed; expected mlp, cnn, or pkg.module:name"
    ):
        Config(env_id="CartPole-v1", model="lstm").validate()


@pytest.mark.parametrize("dist", [ActionDist(False, 3), ActionDist(False, 4, binary=True)])
def test_a_recurrent_networks_unroll_gives_the_reference_gradient(dist):
    """The adapter's unroll (step by step, states zeroed at episode ends, truncated steps' final values from
    the state before the reset) against the reference's own unroll of the same ``step``."""
    torch.manual_seed(0)
    spaces = Spaces((4,), dist.n, multi_binary=dist.binary)
    model = built(f"{MODELS}:Recurrent", spaces)
    assert model.recurrent
    rng = np.random.default_rng(3)
    seg = random_segment(rng, 12, 3, 4, dist)
    assert seg.truncated.any() and seg.terminated.any()
    seg.init_state = tuple(torch.randn(3, 16) for _ in model.initial_state(3))
    expected, terms = reference_update(copy.deepcopy(model), seg, **HYPER, max_grad_norm=40.0, dist=dist)
    grad, loss = autograd_update(model, seg, HYPER, 40.0, dist)
    torch.testing.assert_close(grad, expected, rtol=1e-5, atol=1e-6)
    assert_terms(loss, terms)


def test_a_pickled_copy_is_rebuilt_around_the_same_values():
    class Local(nn.Module):  # defined here: a child could not import it, so its builder travels by value
        def __init__(self, observation_space, action_space):
            super().__init__()
            self.linear = nn.Linear(observation_space.shape[0], action_space.n)
            self.register_buffer("calls", torch.zeros(()))

        def forward(self, obs):
            return self.linear(obs), obs.sum(dim=1)

    model = built(parse_values({"model": Local})["model"])
    with torch.no_grad():
        model.net.linear.weight.fill_(0.25)
        model.net.calls.fill_(7.0)
    data = pickle.dumps(model)
    user_code._REGISTRY.pop(model.ref)  # as in a child process, which knows only what the pickle brings
    copied = pickle.loads(data)
    assert type(copied.net).__name__ == "Local" and copied.ref == model.ref
    for (name, a), (_, b) in zip(model.state_dict().items(), copied.state_dict().items(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_a_forward_that_raises_on_the_sample_batch_is_one_line():
    from tests.support.models import TwoHeads

    five = gym.spaces.Box(-1, 1, (5,))
    ref = parse_values({"model": lambda observation_space, action_space: TwoHeads(five, action_space)})[
        "model"
    ]
    with pytest.raises(BadInput) as info:
        built(ref)
    line = str(info.value)
    assert "\n" not in line and line.startswith(
        f"model: {ref!r} forward(obs) on obs [2, 4] raised RuntimeError: "
    )
