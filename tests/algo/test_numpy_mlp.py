"""The one numpy MLP (``a3c.algo.numpy_mlp``): the update's forward-with-cache runs the same code as
the rollout's forward (bit for bit on the rows both see) and gives the values torch's ``forward`` gives."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from a3c.algo.networks import ActorCritic
from a3c.algo.numpy_mlp import NumpyMlp
from a3c.algo.optim import attach_flat_grad, flatten_parameters


def model(shared_body: bool, hidden_sizes=(16, 8), seed: int = 0) -> ActorCritic:
    torch.manual_seed(seed)
    net = ActorCritic(5, 3, hidden_sizes, shared_body)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.5 * torch.randn_like(p))
    return net


@pytest.mark.parametrize("shared_body", [False, True], ids=["separate", "shared"])
@pytest.mark.parametrize("hidden_sizes", [(16, 8), (7,)], ids=["two-layers", "one-layer"])
def test_forward_with_cache_is_the_policy_forward_plus_values(shared_body, hidden_sizes):
    net = model(shared_body, hidden_sizes)
    mlp = NumpyMlp(net)
    x = np.random.default_rng(1).standard_normal((11, 5)).astype(np.float32)
    head_out, values, cache = mlp.forward(x, n=8)
    assert head_out.shape == (8, 3) and values.shape == (11,) and cache.n == 8
    np.testing.assert_array_equal(head_out, mlp.policy_output(x[:8]))  # one forward code, same numbers
    with torch.no_grad():
        logits, torch_values = net(torch.from_numpy(x))
    np.testing.assert_allclose(head_out, logits[:8].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values, torch_values.numpy(), rtol=1e-5, atol=1e-6)
    assert len(cache.policy_acts) == len(cache.value_acts) == len(hidden_sizes) + 1
    assert (cache.policy_acts is cache.value_acts) == shared_body
    assert all(a.dtype == np.float32 for a in cache.policy_acts + cache.value_acts)


def test_backward_needs_grads_and_overwrites_the_flat_buffer():
    net = model(shared_body=False)
    with pytest.raises(ValueError, match="attach_flat_grad"):
        NumpyMlp(net, grads=True)
    grad = attach_flat_grad(net, flatten_parameters(net))
    mlp = NumpyMlp(net, grads=True)
    x = np.random.default_rng(2).standard_normal((6, 5)).astype(np.float32)
    head_out, values, cache = mlp.forward(x, n=4)
    grad.fill_(123.0)
    mlp.backward(cache, np.zeros_like(head_out), np.zeros((4, 1), np.float32))
    assert torch.count_nonzero(grad) == 0  # zero upstream gradient: every slot written, none left at 123
