"""The gradient hand-off from the local to the shared model (a3c/algo/loss.py): every update
applies exactly its own gradient, in sequence (invariant 2), where the popular alias-once loop applies a stale
one."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from a3c.algo.learner import hand_off_gradients, pull_weights
from a3c.algo.loss import compute_gradients
from a3c.algo.optim import SharedAdam, attach_flat_grad, flatten_parameters
from tests.support.small_model import assert_params_close, make_model, random_grads, step_with

# -- (f): the gradient hand-off ------------------------------------------------------------------------------

K = 5


def popular_repo_loop(make_opt, grads) -> nn.Module:
    """The popular pre-2.x worker loop, per parameter: zero_grad (set_to_none, PyTorch 2.x's default),
    backward, alias the local grad into the shared model ONCE, step. It keeps the FIRST gradient forever."""
    shared = make_model()
    shared.share_memory()
    local = copy.deepcopy(shared)
    opt = make_opt(shared.parameters())
    for g_k in grads:
        local.zero_grad(set_to_none=True)
        sum((p * g).sum() for p, g in zip(local.parameters(), g_k, strict=True)).backward()
        for p_local, p_shared in zip(local.parameters(), shared.parameters(), strict=True):
            if p_shared.grad is None:
                p_shared.grad = p_local.grad
        opt.step()
        with torch.no_grad():
            for p_local, p_shared in zip(local.parameters(), shared.parameters(), strict=True):
                p_local.copy_(p_shared)
    return shared


OPTIMIZER_KINDS = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=1.0),
    "shared_adam": lambda ps: SharedAdam(ps, lr=0.01),
}


def flat_pair() -> tuple[nn.Module, torch.Tensor, nn.Module, torch.Tensor, torch.Tensor]:
    """A shared model on one flat shared buffer and its local copy with its own flat buffer and gradient,
    laid out as the trainer and the Learner do: (shared, shared_flat, local, local_flat, local_grad)."""
    shared = make_model()
    shared_flat = flatten_parameters(shared, shared=True)
    local = copy.deepcopy(shared)
    local_flat = flatten_parameters(local)
    return shared, shared_flat, local, local_flat, attach_flat_grad(local, local_flat)


def train_with_hand_off(make_opt, grads) -> tuple[nn.Module, nn.Module]:
    """Our worker loop: gradient into the local flat buffer, hand-off, shared step, weight pull."""
    shared, shared_flat, local, local_flat, local_grad = flat_pair()
    opt = make_opt([shared_flat])
    for g_k in grads:
        loss = sum((p * g).sum() for p, g in zip(local.parameters(), g_k, strict=True))
        compute_gradients(loss, local_grad, max_grad_norm=0.0)  # so local grad == g_k exactly
        for p, g in zip(local.parameters(), g_k, strict=True):
            assert torch.equal(p.grad, g)
        hand_off_gradients(local_grad, shared_flat)
        opt.step()
        pull_weights(local_flat, shared_flat)
    return shared, local


def reference_training(make_opt, grads) -> nn.Module:
    """Apply exactly g_1..g_K in sequence."""
    model = make_model()
    opt = make_opt(model.parameters())
    for g_k in grads:
        step_with(model, opt, g_k)
    return model


@pytest.mark.parametrize("kind", list(OPTIMIZER_KINDS))
def test_hand_off_applies_every_gradient_in_sequence(kind):
    make_opt = OPTIMIZER_KINDS[kind]
    grads = random_grads(make_model(), K, seed=3)
    shared, local = train_with_hand_off(make_opt, grads)
    reference = reference_training(make_opt, grads)
    assert_params_close(shared, reference)
    assert_params_close(local, shared, atol=0)  # pull_weights copied the shared weights
    if kind == "sgd":  # lr = 1: θ_K = θ_0 − Σ g_k
        for i, (p, p0) in enumerate(zip(shared.parameters(), make_model().parameters(), strict=True)):
            torch.testing.assert_close(p, p0 - sum(g[i] for g in grads), rtol=0, atol=1e-5)


@pytest.mark.parametrize("kind", list(OPTIMIZER_KINDS))
def test_popular_alias_once_pattern_is_stale_on_pytorch_2(kind):
    # What the test above guards against: the popular loop steps with the stale g_1 every time.
    make_opt = OPTIMIZER_KINDS[kind]
    grads = random_grads(make_model(), K, seed=3)
    shared = popular_repo_loop(make_opt, grads)
    with pytest.raises(AssertionError):
        assert_params_close(shared, reference_training(make_opt, grads))
    assert_params_close(shared, reference_training(make_opt, [grads[0]] * K))  # exactly g_1, K times


def test_hand_off_shares_the_current_clipped_gradient():
    # compute_gradients (zero in place + backward + clip) then hand-off: the shared flat's grad IS this
    # update's clipped local gradient, on every update, not the first one.
    shared, shared_flat, local, _, local_grad = flat_pair()
    for k, g_k in enumerate(random_grads(shared, 3, seed=4)):
        loss = sum((p * g).sum() for p, g in zip(local.parameters(), g_k, strict=True))
        norm = compute_gradients(loss, local_grad, max_grad_norm=0.5)
        full = torch.sqrt(sum((g**2).sum() for g in g_k))
        assert norm == pytest.approx(float(full), rel=1e-5)
        hand_off_gradients(local_grad, shared_flat)
        assert shared_flat.grad is local_grad, f"update {k}"
        expected = torch.cat([g.reshape(-1) for g in g_k]) * (0.5 / float(full))
        torch.testing.assert_close(shared_flat.grad, expected, rtol=1e-4, atol=1e-6)


def test_hand_off_with_weight_dependent_gradients_uses_pulled_weights():
    # loss_k = ½‖θ − c_k‖² has gradient θ − c_k: evaluated at the local weights, it equals the reference only
    # if pull_weights brought the shared weights back after every step.
    targets = random_grads(make_model(), K, seed=5)
    shared, shared_flat, local, local_flat, local_grad = flat_pair()
    opt = SharedAdam([shared_flat], lr=0.05)
    reference = make_model()
    ref_opt = SharedAdam(reference.parameters(), lr=0.05)
    for c_k in targets:
        loss = sum(0.5 * ((p - c) ** 2).sum() for p, c in zip(local.parameters(), c_k, strict=True))
        compute_gradients(loss, local_grad, max_grad_norm=0.0)
        hand_off_gradients(local_grad, shared_flat)
        opt.step()
        pull_weights(local_flat, shared_flat)
        with torch.no_grad():
            step_with(reference, ref_opt, [p - c for p, c in zip(reference.parameters(), c_k, strict=True)])
    assert_params_close(shared, reference)
    assert_params_close(local, shared, atol=0)
