"""Both gradient paths of a worker's update (the numpy closed form the default MLP takes, and autograd) give
the gradient of the one-function reference update (``a3c.algo.reference``) on the same model and segment."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from a3c.algo.loss import compute_gradients, segment_loss
from a3c.algo.numpy_mlp import MlpGradient
from a3c.algo.optim import attach_flat_grad, clip_flat_grad, flatten_parameters
from a3c.algo.reference import reference_update
from tests.algo.test_mlp_grad import model_with_grad, random_segment

HYPER = {"gamma": 0.97, "gae_lambda": 0.9, "value_coef": 0.5, "entropy_coef": 0.02}


@pytest.mark.parametrize("max_grad_norm", [40.0, 0.05])  # 0.05: the clip scales the gradient
@pytest.mark.parametrize("shared_body", [False, True])
@pytest.mark.parametrize("steps,num_envs", [(5, 16), (20, 1)])
def test_both_gradient_paths_give_the_reference_gradient(steps, num_envs, shared_body, max_grad_norm):
    rng = np.random.default_rng(steps + num_envs)
    seg = random_segment(rng, steps, num_envs, obs_dim=4, n_actions=3)
    assert seg.truncated.any() and seg.terminated.any()  # both kinds of episode end are in the segment
    model, grad = model_with_grad(2, 4, 3, (32, 32), shared_body)
    reference = copy.deepcopy(model)
    expected, terms = reference_update(reference, seg, **HYPER, max_grad_norm=max_grad_norm)
    assert expected.shape == grad.shape

    grad.fill_(123.0)  # the fast path writes the whole buffer
    fast = MlpGradient(model, None).loss_and_grad(seg, *HYPER.values())
    clip_flat_grad(grad, max_grad_norm)
    torch.testing.assert_close(grad, expected, rtol=1e-4, atol=1e-6)
    assert fast.total == pytest.approx(terms["total"], rel=1e-4, abs=1e-6)

    autograd_model = copy.deepcopy(reference)
    autograd_grad = attach_flat_grad(autograd_model, flatten_parameters(autograd_model))
    loss = segment_loss(autograd_model, seg, *HYPER.values())
    compute_gradients(loss.total, autograd_grad, max_grad_norm)
    torch.testing.assert_close(autograd_grad, expected, rtol=1e-4, atol=1e-6)
    for name in ("policy", "value", "entropy"):
        assert getattr(loss, name) == pytest.approx(terms[name], rel=1e-4, abs=1e-6), name
