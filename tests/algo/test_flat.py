"""One flat parameter buffer and one flat gradient buffer: same values, real views, torch's clipping rule."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from a3c.algo.networks import ActorCritic
from a3c.algo.optim import attach_flat_grad, clip_flat_grad, flat_view, flatten_parameters


def test_flatten_keeps_values_and_makes_views():
    torch.manual_seed(0)
    model = ActorCritic(4, 2)
    before = copy.deepcopy(model.state_dict())
    flat = flatten_parameters(model)
    assert flat.numel() == sum(p.numel() for p in model.parameters())
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, before[name], rtol=0, atol=0)
    flat.add_(1.0)  # a write to the buffer is a write to every parameter
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, before[name] + 1.0, rtol=0, atol=0)
    view = flat_view(model)
    assert view.data_ptr() == flat.data_ptr() and view.shape == flat.shape


def test_flatten_shared_puts_the_buffer_in_shared_memory():
    model = ActorCritic(4, 2)
    flat = flatten_parameters(model, shared=True)
    assert flat.is_shared() and all(p.is_shared() for p in model.parameters())


def test_flat_view_refuses_a_model_that_was_not_flattened():
    with pytest.raises(ValueError, match="flatten_parameters"):
        flat_view(ActorCritic(4, 2))


def test_backward_accumulates_into_the_flat_gradient_in_place():
    model = ActorCritic(3, 2, (8,))
    flat = flatten_parameters(model)
    grad = attach_flat_grad(model, flat)
    pointers = [p.grad.data_ptr() for p in model.parameters()]
    logits, values = model(torch.randn(5, 3))
    (logits.sum() + values.sum()).backward()
    assert [p.grad.data_ptr() for p in model.parameters()] == pointers  # still views, not new tensors
    assert grad.abs().sum() > 0
    offset = 0
    for p in model.parameters():
        torch.testing.assert_close(grad[offset : offset + p.numel()].view_as(p), p.grad)
        offset += p.numel()


@pytest.mark.parametrize("max_norm", [0.3, 5.0, 1e6, 0.0, -1.0])
def test_clip_matches_torch_clip_grad_norm(max_norm):
    torch.manual_seed(1)
    params = [torch.nn.Parameter(torch.zeros(s)) for s in [(3, 4), (4,), (2, 3)]]
    for p in params:
        p.grad = torch.randn_like(p)
    grad = torch.cat([p.grad.reshape(-1) for p in params])
    expected = float(torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm > 0 else float("inf")))
    norm = clip_flat_grad(grad, max_norm)
    assert norm == pytest.approx(expected, rel=1e-6)
    torch.testing.assert_close(grad, torch.cat([p.grad.reshape(-1) for p in params]))


def test_clip_by_hand_and_non_finite_norm_leaves_the_gradient_alone():
    grad = torch.tensor([3.0, 4.0, 12.0])  # norm 13
    assert clip_flat_grad(grad, 1.3) == pytest.approx(13.0)
    torch.testing.assert_close(grad, torch.tensor([0.3, 0.4, 1.2]), rtol=1e-5, atol=1e-6)
    bad = torch.tensor([1.0, float("nan")])
    assert math.isnan(clip_flat_grad(bad, 0.5))
    assert bad[0] == 1.0
    inf = torch.tensor([1.0, float("inf")])
    assert clip_flat_grad(inf, 0.5) == float("inf") and inf[0] == 1.0


def test_per_parameter_optimizer_state_restores_into_the_flat_state():
    # Checkpoints written before the flat layout hold one optimizer state per parameter.
    from a3c.algo.optim import SharedAdam
    from a3c.rundir.resume import restore_optimizer

    torch.manual_seed(2)
    old_model = ActorCritic(4, 2)
    old_opt = SharedAdam(old_model.parameters(), lr=0.01)
    for p in old_model.parameters():
        p.grad = torch.randn_like(p)
    old_opt.step()
    saved = old_opt.state_dict()

    model = ActorCritic(4, 2)
    flat = flatten_parameters(model, shared=True)
    opt = SharedAdam([flat], lr=0.01)
    restore_optimizer(opt, saved, "old.pt")
    state = opt.state[flat]
    assert float(state["step"]) == 1.0 and state["exp_avg"].is_shared()
    for key in ("exp_avg", "exp_avg_sq"):
        expected = torch.cat([old_opt.state[p][key].reshape(-1) for p in old_model.parameters()])
        torch.testing.assert_close(state[key], expected, rtol=0, atol=0)
