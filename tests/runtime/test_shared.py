"""Shared optimizers equal torch's, their state is eager and shared, counters, stop signal, and the
gradient hand-off from the local to the shared model (the invariant Hogwild A3C depends on)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from a3c.algo.flat import attach_flat_grad, flat_view, flatten_parameters
from a3c.algo.learner import build_shared
from a3c.algo.optim import SharedAdam, SharedRMSprop, assert_shared, make_optimizer, shared_tensors
from a3c.algo.update import compute_gradients, hand_off_gradients, pull_weights
from a3c.core.config import Config
from a3c.core.spaces import Spaces
from a3c.runtime.shared import Counters, StopReason, StopSignal
from tests.conftest import require_extra

try:  # the spawned child imports its target by module name; this works whether or not tests/ is a package
    from tests import _shared_child
except ImportError:
    import _shared_child


def make_model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))


def random_grads(model: nn.Module, steps: int, seed: int) -> list[list[torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [[torch.randn(p.shape, generator=g) for p in model.parameters()] for _ in range(steps)]


def assert_params_close(a: nn.Module, b: nn.Module, atol: float = 1e-6) -> None:
    for i, (p, q) in enumerate(zip(a.parameters(), b.parameters(), strict=True)):
        torch.testing.assert_close(p, q, rtol=0, atol=atol, msg=lambda m, i=i: f"parameter {i}: {m}")


def step_with(model: nn.Module, optimizer: torch.optim.Optimizer, grads: list[torch.Tensor | None]) -> None:
    for p, g in zip(model.parameters(), grads, strict=True):
        p.grad = None if g is None else g.clone()
    optimizer.step()


def run_both(ours, theirs, steps: int = 12, seed: int = 1) -> tuple[nn.Module, nn.Module]:
    """Step two identical models with the same gradients; at step 5 the first parameter has no gradient."""
    model_a, model_b = make_model(), make_model()
    assert_params_close(model_a, model_b, atol=0)
    opt_a, opt_b = ours(model_a.parameters()), theirs(model_b.parameters())
    for k, grads in enumerate(random_grads(model_a, steps, seed)):
        if k == 5:
            grads = [None, *grads[1:]]
        step_with(model_a, opt_a, grads)
        step_with(model_b, opt_b, grads)
    assert not torch.allclose(next(model_a.parameters()), next(make_model().parameters()))  # it did move
    return model_a, model_b


# -- (a), (b): the same updates as torch.optim ---------------------------------------------------------------

ADAM_SETTINGS = [(1e-3, (0.9, 0.999), 1e-8), (0.05, (0.5, 0.9), 1e-3), (0.3, (0.0, 0.99), 1e-6)]


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


# -- (d), (e): counters and the stop signal ------------------------------------------------------------------


def test_counters_add_and_totals():
    counters = Counters(3)
    assert counters.total_steps == 0 and counters.total_updates == 0
    counters.add(0, 8)
    counters.add(0, 8)
    counters.add(2, 5)
    assert counters.steps.tolist() == [16, 0, 5]
    assert counters.updates.tolist() == [2, 0, 1]
    assert counters.total_steps == 21 and counters.total_updates == 3
    assert isinstance(counters.total_steps, int) and isinstance(counters.total_updates, int)
    assert counters.steps.is_shared() and counters.updates.is_shared()


def test_stop_signal_first_reason_wins():
    stop = StopSignal()
    assert not stop.is_set()
    assert stop.reason is StopReason.RUNNING
    stop.stop(StopReason.MAX_STEPS)
    stop.stop(StopReason.SOLVED)
    stop.stop(StopReason.FAILED)
    assert stop.is_set()
    assert stop.reason is StopReason.MAX_STEPS


def test_stop_reason_budget_kinds():
    assert {r for r in StopReason if r.is_budget} == {
        StopReason.SOLVED,
        StopReason.MAX_STEPS,
        StopReason.MAX_SECONDS,
    }


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


# -- (g): shared state really is shared across processes -----------------------------------------------------


@pytest.mark.slow
def test_child_process_changes_are_seen_by_parent():
    grad_value, fill_value, lr = 0.25, 7.0, 0.01
    model = make_model()
    flat = flatten_parameters(model, shared=True)  # as the trainer lays it out (build_shared)
    opt = SharedAdam([flat], lr=lr)
    assert_shared(model, opt)
    ctx = torch.multiprocessing.get_context("spawn")
    counters = Counters(2)
    stop = StopSignal()
    # Make the parent's per-process numpy views exist: they must not travel to the child as copies.
    assert counters.total_steps == 0 and not stop.is_set()

    # What the parent expects: torch's Adam, one step with the same gradient, then the last parameter filled.
    expected = make_model()
    ref_opt = torch.optim.Adam(expected.parameters(), lr=lr)
    step_with(expected, ref_opt, [torch.full_like(p, grad_value) for p in expected.parameters()])
    with torch.no_grad():
        list(expected.parameters())[-1].fill_(fill_value)
    assert not torch.allclose(next(model.parameters()), next(expected.parameters()))  # not true before

    child = ctx.Process(
        target=_shared_child.mutate_shared_state,
        args=(model, opt, counters, stop, grad_value, fill_value),
        daemon=True,
    )
    child.start()
    try:
        child.join(timeout=60)
        assert not child.is_alive(), "child did not finish within 60 s"
        assert child.exitcode == 0, (
            f"child failed with exit code {child.exitcode} (its stderr has the assertion)"
        )
    finally:
        if child.is_alive():
            child.kill()
            child.join(timeout=10)

    assert_params_close(model, expected)
    torch.testing.assert_close(list(model.parameters())[-1], torch.full((3,), fill_value))
    beta1, beta2 = opt.param_groups[0]["betas"]
    state = opt.state[flat]
    assert float(state["step"]) == 1.0
    torch.testing.assert_close(state["exp_avg"], torch.full_like(flat, (1 - beta1) * grad_value))
    torch.testing.assert_close(state["exp_avg_sq"], torch.full_like(flat, (1 - beta2) * grad_value**2))
    assert counters.steps.tolist() == [0, 8] and counters.total_updates == 1
    assert stop.is_set() and stop.reason is StopReason.SOLVED


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
    import multiprocessing

    from a3c.algo.optim import non_finite_counts
    from tests._shared_child import keep_adding

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(100, 100), nn.Linear(100, 100))  # 20k values: races are common
    flatten_parameters(model, shared=True)
    stop = StopSignal()
    child = multiprocessing.get_context("spawn").Process(target=keep_adding, args=(model, stop))
    child.start()
    try:
        before = flat_view(model).clone()
        polls = 0
        while torch.equal(flat_view(model), before):  # until the writer runs (a condition, polled)
            polls += 1
            assert polls < 10**8, "the writer never changed the weights"
        during = flat_view(model).clone()
        for _ in range(1500):
            assert not any(non_finite_counts(model).values())
        assert not torch.equal(flat_view(model), during), "the writer stopped before the checks ended"
    finally:
        stop.stop(StopReason.SOLVED)
        child.join(timeout=30)
        if child.is_alive():
            child.kill()
            child.join(timeout=10)
    assert child.exitcode == 0


def test_a_counters_snapshot_is_one_read_of_each_slot():
    # A worker adds while the trainer snapshots: the totals must be the sums of the slots the snapshot holds
    # (a checkpoint's global_step == its worker_steps' sum), never a second, later read.
    import sys
    import threading

    counters = Counters(2, base_steps=1000, base_updates=10)
    running = threading.Event()
    running.set()

    def worker() -> None:
        while running.is_set():
            counters.add(0, 32)

    thread = threading.Thread(target=worker)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race shows within a few hundred
    thread.start()
    try:
        torn = []
        for _ in range(1500):
            snap = counters.snapshot()
            if snap["global_step"] != 1000 + int(snap["worker_steps"].sum()):
                torn.append(snap["global_step"])
            if snap["updates"] != 10 + int(snap["worker_updates"].sum()):
                torn.append(snap["updates"])
    finally:
        running.clear()
        thread.join(timeout=10)
        sys.setswitchinterval(interval)
    assert not thread.is_alive()
    assert not torn, f"{len(torn)} of 1500 snapshots summed a different read than they copied"
