"""The shared optimizers (a3c/algo/optim.py) equal torch's, their state is created eagerly in shared
memory, their state_dict has torch's layout, building them does not import torch._dynamo, and the finite check
reads a copy of memory that a worker writes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from a3c.algo.learner import build_shared
from a3c.algo.optim import (
    SharedAdam,
    SharedRMSprop,
    assert_shared,
    flat_view,
    flatten_parameters,
    make_optimizer,
    shared_tensors,
)
from a3c.core.config import Config
from a3c.core.spaces import Spaces
from a3c.runtime.counters import StopReason, StopSignal
from tests.support.extras import require_extra
from tests.support.small_model import assert_params_close, make_model, random_grads, run_both, step_with

# -- (a), (b): the same updates as torch.optim ---------------------------------------------------------------

ADAM_SETTINGS = [(1e-3, (0.9, 0.999), 1e-8), (0.05, (0.5, 0.9), 1e-3), (0.3, (0.0, 0.99), 1e-6)]


@pytest.mark.slow  # torch.optim.Adam imports torch._dynamo: 2 CPU-s, out of the edit-run loop
@pytest.mark.parametrize(("lr", "betas", "eps"), ADAM_SETTINGS)
def test_shared_adam_equals_torch_adam(lr, betas, eps):
    model_a, model_b = run_both(
        lambda ps: SharedAdam(ps, lr=lr, betas=betas, eps=eps),
        lambda ps: torch.optim.Adam(ps, lr=lr, betas=betas, eps=eps),
    )
    assert_params_close(model_a, model_b)


def test_shared_adam_state_matches_torch_adam_state():
    opts = {}

    def ours(ps):
        opts["ours"] = SharedAdam(ps, lr=0.01)
        return opts["ours"]

    def theirs(ps):
        opts["theirs"] = torch.optim.Adam(ps, lr=0.01)
        return opts["theirs"]

    run_both(ours, theirs, steps=10)
    states_a = list(opts["ours"].state.values())
    states_b = list(opts["theirs"].state.values())
    assert len(states_a) == len(states_b) == 6
    for i, (sa, sb) in enumerate(zip(states_a, states_b, strict=True)):
        assert float(sa["step"]) == float(sb["step"]) == (9.0 if i == 0 else 10.0)
        torch.testing.assert_close(sa["exp_avg"], sb["exp_avg"], rtol=0, atol=1e-7)
        torch.testing.assert_close(sa["exp_avg_sq"], sb["exp_avg_sq"], rtol=0, atol=1e-7)


@pytest.mark.parametrize(("lr", "alpha", "eps"), [(7e-4, 0.99, 1e-5), (0.01, 0.9, 1e-8), (0.1, 0.5, 1e-3)])
def test_shared_rmsprop_equals_torch_rmsprop(lr, alpha, eps):
    model_a, model_b = run_both(
        lambda ps: SharedRMSprop(ps, lr=lr, alpha=alpha, eps=eps),
        lambda ps: torch.optim.RMSprop(ps, lr=lr, alpha=alpha, eps=eps),
    )
    assert_params_close(model_a, model_b)


class TfStyleRMSprop(torch.optim.Optimizer):
    """TensorFlow's RMSProp written out for the test: E[g²] starts at 1, eps inside the square root."""

    def __init__(self, params, lr: float, alpha: float, eps: float):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                ms = self.state[p].setdefault("ms", torch.ones_like(p))
                ms.mul_(group["alpha"]).add_((1 - group["alpha"]) * p.grad**2)
                p.sub_(group["lr"] * p.grad / torch.sqrt(ms + group["eps"]))


@pytest.mark.parametrize(("lr", "alpha", "eps"), [(7e-4, 0.99, 1e-5), (0.01, 0.9, 1e-8), (0.1, 0.5, 1e-3)])
def test_rmsprop_tf_equals_tensorflow_form(lr, alpha, eps):
    model_a, model_b = run_both(
        lambda ps: (
            make_optimizer("rmsprop_tf", ps, lr=lr, eps=eps)
            if alpha == 0.99
            else SharedRMSprop(ps, lr=lr, alpha=alpha, eps=eps, tf_style=True)
        ),
        lambda ps: TfStyleRMSprop(ps, lr=lr, alpha=alpha, eps=eps),
    )
    assert_params_close(model_a, model_b)


def test_rmsprop_tf_equals_stable_baselines3s():
    require_extra("stable_baselines3", "bench")  # CI must not pass this by skipping it
    from stable_baselines3.common.sb2_compat import rmsprop_tf_like as sb2_compat

    model_a, model_b = run_both(
        lambda ps: make_optimizer("rmsprop_tf", ps, lr=7e-4),
        lambda ps: sb2_compat.RMSpropTFLike(ps, lr=7e-4, alpha=0.99, eps=1e-5),
    )
    assert_params_close(model_a, model_b)


def test_rmsprop_tf_starts_with_small_steps():
    # torch's form moves every weight by about 10·lr on its first step whatever the gradient's size (what
    # killed Pong's first conv layer); TensorFlow's moves it by about lr·g.
    steps = {}
    for name in ("rmsprop", "rmsprop_tf"):
        p = nn.Parameter(torch.zeros(3))
        opt = make_optimizer(name, [p], lr=1e-3)
        p.grad = torch.tensor([1e-2, 1e-1, 1.0])
        opt.step()
        steps[name] = -p.detach()
    torch.testing.assert_close(steps["rmsprop"], torch.full((3,), 1e-2), rtol=1e-2, atol=0)
    torch.testing.assert_close(steps["rmsprop_tf"], 1e-3 * torch.tensor([1e-2, 1e-1, 1.0]), rtol=1e-2, atol=0)


def test_make_optimizer_names():
    model = make_model()
    adam = make_optimizer("adam", model.parameters(), lr=0.02, eps=1e-4)
    assert isinstance(adam, SharedAdam)
    assert adam.param_groups[0]["lr"] == 0.02 and adam.param_groups[0]["eps"] == 1e-4
    rms = make_optimizer("rmsprop", model.parameters(), lr=0.03, eps=1e-6)
    assert isinstance(rms, SharedRMSprop)
    assert rms.param_groups[0]["lr"] == 0.03 and rms.param_groups[0]["eps"] == 1e-6
    with pytest.raises(ValueError, match="sgd"):
        make_optimizer("sgd", model.parameters(), lr=0.1, eps=1e-8)


@pytest.mark.parametrize("name, eps", [("adam", 1e-8), ("rmsprop", 1e-5), ("rmsprop_tf", 1e-5)])
def test_each_optimizer_keeps_its_own_eps_unless_the_config_sets_one(name, eps):
    # The run's optimizer as the trainer builds it from a config that leaves optimizer_eps alone: RMSprop
    # with Adam's 1e-8 took near sign steps at first (√E[g²] ≈ |g|·0.1 after one step).
    spaces = Spaces((4,), 2)
    _, optimizer = build_shared(Config(env_id="CartPole-v1", optimizer=name), spaces)
    assert optimizer.param_groups[0]["eps"] == eps
    _, optimizer = build_shared(Config(env_id="CartPole-v1", optimizer=name, optimizer_eps=0.1), spaces)
    assert optimizer.param_groups[0]["eps"] == 0.1


# -- (c): state is created eagerly, in shared memory ---------------------------------------------------------

OPTIMIZERS = {
    "SharedAdam": lambda ps: SharedAdam(ps, lr=1e-3),
    "SharedRMSprop": lambda ps: SharedRMSprop(ps, lr=1e-3),
    "make_optimizer(adam)": lambda ps: make_optimizer("adam", ps, lr=1e-3, eps=1e-8),
    "make_optimizer(rmsprop)": lambda ps: make_optimizer("rmsprop", ps, lr=1e-3, eps=1e-8),
    "make_optimizer(rmsprop_tf)": lambda ps: make_optimizer("rmsprop_tf", ps, lr=1e-3),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_state_is_eager_and_shared_before_any_step(name):
    model = make_model()
    model.share_memory()
    opt = OPTIMIZERS[name](model.parameters())
    params = list(model.parameters())
    assert len(opt.state) == len(params)  # one state per parameter, before any step
    expected_keys = (
        {"step", "exp_avg", "exp_avg_sq"} if isinstance(opt, SharedAdam) else {"step", "square_avg"}
    )
    for p in params:
        assert p.is_shared()
        state = opt.state[p]
        assert set(state) == expected_keys
        for value in state.values():
            assert isinstance(value, torch.Tensor) and value.is_shared()
    assert_shared(model, opt)  # does not raise
    assert len(shared_tensors(model, opt)) == len(params) * (1 + len(expected_keys))


@pytest.mark.parametrize("name", ["SharedAdam", "SharedRMSprop"])
def test_step_updates_state_in_place(name):
    # A step must write into the shared tensors, not replace them with private ones.
    model = make_model()
    model.share_memory()
    opt = OPTIMIZERS[name](model.parameters())
    before = {(i, k): (v, v.data_ptr()) for i, s in enumerate(opt.state.values()) for k, v in s.items()}
    step_with(model, opt, random_grads(model, 1, seed=2)[0])
    after = {(i, k): v for i, s in enumerate(opt.state.values()) for k, v in s.items()}
    for key, (tensor, ptr) in before.items():
        assert after[key] is tensor and after[key].data_ptr() == ptr and after[key].is_shared(), key
    assert all(float(s["step"]) == 1.0 for s in opt.state.values())
    assert_shared(model, opt)


def test_assert_shared_catches_private_parameters():
    model = make_model()  # no share_memory()
    opt = SharedAdam(model.parameters())
    with pytest.raises(RuntimeError, match="6 tensors are not in shared memory"):
        assert_shared(model, opt)


def test_state_dict_has_torch_layout():
    model = make_model()
    opt = SharedAdam(model.parameters(), lr=0.02)
    sd = opt.state_dict()
    ref = torch.optim.Adam(make_model().parameters(), lr=0.02).state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [g["params"] for g in ref["param_groups"]]
    assert sd["param_groups"][0]["lr"] == 0.02 and sorted(sd["state"]) == list(
        range(len(list(model.parameters())))
    )
    assert set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}


@pytest.mark.slow  # a fresh interpreter: a subprocess
def test_building_the_shared_state_does_not_import_torch_dynamo():
    # torch.optim.Optimizer.__init__ imports torch._dynamo (2.5 s here): start-up must not pay for it.
    import subprocess
    import sys

    code = (
        "import sys; from a3c.core.config import Config; from a3c.algo.learner import build_shared;"
        "from a3c.core.spaces import Spaces;"
        "build_shared(Config(env_id='CartPole-v1').validate(), Spaces((4,), 2));"
        "print('torch._dynamo' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "False"


@pytest.mark.slow  # spawns the writer
def test_finite_check_sees_no_phantom_nan_while_a_worker_writes():
    # torch.isfinite on memory being written reports phantom NaNs (it reads each value twice); the trainer's
    # check reads a copy. Without the copy about half of these checks failed (measured).
    from a3c.algo.optim import non_finite_counts
    from a3c.runtime.context import child_context
    from tests.support.counters_child import keep_adding

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(100, 100), nn.Linear(100, 100))  # 20k values: races are common
    flatten_parameters(model, shared=True)
    stop = StopSignal()
    # A fork of the session's forkserver (torch imported there once), as a worker is: a spawned child spent
    # seconds importing torch while this process polled for its first write.
    child = child_context().Process(target=keep_adding, args=(model, stop))
    child.start()
    try:
        before = flat_view(model).clone()
        polls = 0
        while torch.equal(flat_view(model), before):  # until the writer runs (a condition, polled)
            polls += 1
            assert polls < 10**8, "the writer never changed the weights"
        # At least 1500 checks, and as many more as it takes for the writer to change the weights 3 times
        # during them (counted, not timed: a loaded machine may not schedule the writer for a while).
        last, checks, changes = flat_view(model).clone(), 0, 0
        while checks < 1500 or changes < 3:
            assert not any(non_finite_counts(model).values())
            checks += 1
            if not torch.equal(flat_view(model), last):
                last, changes = flat_view(model).clone(), changes + 1
    finally:
        stop.stop(StopReason.SOLVED)
        child.join(timeout=30)
        if child.is_alive():
            child.kill()
            child.join(timeout=10)
    assert child.exitcode == 0
