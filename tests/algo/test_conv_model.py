"""The conv-LSTM model: the loss's unroll of a segment equals the rollout's step-by-step forward."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from a3c.algo.distributions import bound_log_std
from a3c.algo.networks import ConvActorCritic, TorchPolicy

SHAPE = (2, 36, 36)  # the smallest frame the two convs take (36 → 8 → 3)


def test_unroll_equals_the_rollout_step_by_step_with_resets_and_truncation():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    steps, batch = 6, 3
    model = ConvActorCritic(SHAPE, 4, lstm_size=16)
    obs = rng.integers(0, 256, size=(steps, batch, *SHAPE), dtype=np.uint8)
    next_obs = rng.integers(0, 256, size=(batch, *SHAPE), dtype=np.uint8)
    ends = np.zeros((steps, batch), bool)
    ends[2, 0] = ends[4, 1] = ends[3, 2] = True  # (3, 2) is the truncated one
    final_at = (np.array([3]), np.array([2]))
    final_obs = rng.integers(0, 256, size=(1, *SHAPE), dtype=np.uint8)

    # The rollout: one step at a time, carrying the state, resetting it where an episode ended.
    policy = TorchPolicy(model, batch)
    policy._state = tuple(torch.randn(batch, 16) for _ in range(2))  # a state carried from a segment before
    init_state = policy.state()
    outs, values, final_value = [], [], None
    with torch.no_grad():
        for t in range(steps):
            state_before = policy._state
            out, value, state_after = model.step(torch.from_numpy(obs[t]), state_before)
            outs.append(out)
            values.append(value)
            if t == 3:  # the truncated env's bootstrap: its final obs, from the state before the reset
                h, c = state_after
                one = (h[2:3], c[2:3])
                final_value = model.step(torch.from_numpy(final_obs), one)[1]
            policy._state = state_after
            policy.reset(ends[t])
        next_value = model.step(torch.from_numpy(next_obs), policy._state)[1]

    out, all_values = model.unroll(
        torch.from_numpy(obs),
        init_state,
        ends,
        torch.from_numpy(next_obs),
        torch.from_numpy(final_obs),
        final_at,
    )
    torch.testing.assert_close(out, torch.cat(outs), rtol=1e-5, atol=1e-5)
    expected = torch.cat([torch.cat(values), next_value, final_value])
    torch.testing.assert_close(all_values, expected, rtol=1e-5, atol=1e-5)


def test_policy_call_carries_state_and_reset_zeroes_only_ended_envs():
    torch.manual_seed(1)
    model = ConvActorCritic(SHAPE, 3, lstm_size=8)
    policy = TorchPolicy(model, 2)
    frames = np.full((2, *SHAPE), 100, np.uint8)
    first = policy(frames)
    second = policy(frames)
    assert first.shape == (2, 3) and not np.allclose(first, second)  # the state moved on
    policy.reset(np.array([True, False]))
    h, c = policy.state()
    assert torch.count_nonzero(h[0]) == 0 and torch.count_nonzero(c[0]) == 0
    assert torch.count_nonzero(h[1]) > 0


def test_without_lstm_forward_gives_logits_and_values():
    model = ConvActorCritic(SHAPE, 5, lstm_size=0)
    out, values = model(torch.zeros(7, *SHAPE, dtype=torch.uint8))
    assert out.shape == (7, 5) and values.shape == (7,)
    assert not model.recurrent and model.initial_state(3) is None


def test_recurrent_forward_is_refused():
    model = ConvActorCritic(SHAPE, 2, lstm_size=8)
    with pytest.raises(RuntimeError, match="step"):
        model(torch.zeros(1, *SHAPE))


def test_continuous_conv_output_has_mean_and_log_std():
    model = ConvActorCritic(SHAPE, 2, lstm_size=0, continuous=True, init_log_std=-1.0)
    out, _ = model(torch.zeros(3, *SHAPE))
    assert out.shape == (3, 4)
    torch.testing.assert_close(bound_log_std(out[:, 2:]), torch.full((3, 2), -1.0))


def test_unroll_gradient_equals_the_step_by_step_graph():
    """The batched input projection and the no-grad bootstrap change no gradient: a loss over the unroll's
    outputs (its bootstrap values excluded, as GAE detaches them) has the gradient of the same loss over
    model.step called step by step with autograd on, the state reset at episode ends."""
    torch.manual_seed(2)
    rng = np.random.default_rng(2)
    steps, batch = 5, 3
    model = ConvActorCritic(SHAPE, 4, lstm_size=16)
    obs = torch.from_numpy(rng.integers(0, 256, size=(steps, batch, *SHAPE), dtype=np.uint8))
    ends = np.zeros((steps, batch), bool)
    ends[1, 2] = ends[3, 0] = True
    init = tuple(torch.randn(batch, 16) for _ in range(2))
    weights_out, weights_value = torch.randn(steps * batch, 4), torch.randn(steps * batch)

    def grads(loss: torch.Tensor) -> list[torch.Tensor]:
        return [g.clone() for g in torch.autograd.grad(loss, list(model.parameters()))]

    out, values = model.unroll(obs, init, ends, obs[0], obs[0, :0], (np.array([], int), np.array([], int)))
    n = steps * batch
    got = grads((out * weights_out).sum() + (values[:n] * weights_value).sum())

    state, outs, vals = init, [], []
    for t in range(steps):
        step_out, step_value, state = model.step(obs[t], state)
        outs.append(step_out)
        vals.append(step_value)
        keep = torch.from_numpy(~ends[t]).float().unsqueeze(1)
        state = (state[0] * keep, state[1] * keep)
    expected = grads((torch.cat(outs) * weights_out).sum() + (torch.cat(vals) * weights_value).sum())
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-6)
