"""The numpy loss-and-gradient of the MLP equals torch autograd's for the factorised heads: one categorical
per MultiDiscrete dimension, and one Bernoulli per MultiBinary bit."""

from __future__ import annotations

import numpy as np
import pytest

from a3c.algo.distributions import ActionDist
from a3c.algo.numpy_mlp import MlpGradient
from tests.algo.test_mlp_grad import assert_matches_autograd, model_with_grad
from tests.support.segments import random_segment

DISTS = {
    "multi-discrete-equal": ActionDist(False, 9, nvec=(3, 3, 3)),
    "multi-discrete-mixed": ActionDist(False, 10, nvec=(2, 5, 3)),
    "multi-binary": ActionDist(False, 4, binary=True),
    "one-bit": ActionDist(False, 1, binary=True),
}


@pytest.mark.parametrize("dist_name", list(DISTS))
@pytest.mark.parametrize("shared_body", [False, True], ids=["separate", "shared"])
@pytest.mark.parametrize(
    "steps,num_envs,obs_dim,hidden,entropy_coef",
    [(20, 1, 4, (32, 32), 0.05), (5, 16, 3, (16, 8, 4), 0.0)],
)
def test_gradient_and_terms_match_autograd(
    dist_name, shared_body, steps, num_envs, obs_dim, hidden, entropy_coef
):
    dist = DISTS[dist_name]
    rng = np.random.default_rng(steps * 100 + num_envs)
    seg = random_segment(rng, steps, num_envs, obs_dim, dist)
    # Logits large enough (x4) that the bits and choices are far from uniform.
    args = (0.97, 0.9, 0.5, entropy_coef)
    assert_matches_autograd(seg, args, obs_dim, dist.n, hidden, shared_body, dist, logit_scale=4.0)


def test_box_actions_have_no_closed_form():
    model, _ = model_with_grad(0, 3, 2, (8,), False)
    with pytest.raises(ValueError, match="autograd"):
        MlpGradient(model, ActionDist(True, 2, (-1.0, -1.0), (1.0, 1.0)))
