"""``a3c export``: the exported file (ONNX through onnxruntime, TorchScript through torch.jit.load) gives
the actions of the a3c greedy policy on the same observations — normalisation, network and action mapping
(argmax; clip or tanh into a Box's bounds) — at any batch size; bad input is one line and exit 2.

The proof that a client runs with neither torch nor a3c importable, on real episodes and trained runs, is
in tests/e2e/test_export.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from a3c.algo.distributions import action_dist
from a3c.algo.learner import build_model
from a3c.algo.numpy_mlp import make_policy
from a3c.core.config import Config
from a3c.rundir.checkpoints import SavedPolicy, checkpoint_payload, load_policy, save_checkpoint
from a3c_envs import inspect_env, make_vector_env
from tests.support.extras import require_extra
from tests.test_cli import bad, call


def random_checkpoint(path: Path, env_id: str, seed: int = 0, **fields) -> Path:
    """A checkpoint of ``env_id`` whose every weight is drawn at random (the init's zero biases and 0.01-gain
    head would hide a skipped bias and leave a Box mean inside the bounds) and, with obs_norm, statistics
    far from the prior's, so that leaving out a step of the policy changes its actions."""
    config = Config(env_id=env_id, **fields).validate()
    spaces = inspect_env(env_id, frame_stack=config.frame_stack).spaces
    gen = torch.Generator().manual_seed(seed)
    model = build_model(config, spaces)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=gen) * 0.7)
    extra = {}
    if config.obs_norm:
        shape = spaces.obs_shape
        mean = torch.randn(shape, generator=gen, dtype=torch.float64)
        var = torch.rand(shape, generator=gen, dtype=torch.float64) * 0.2 + 0.01
        extra["obs_norm"] = {"mean": mean, "var": var, "count": torch.tensor(1e4, dtype=torch.float64)}
    save_checkpoint(path, checkpoint_payload(config, spaces, model_state=model.state_dict(), **extra))
    return path


def a3c_actions(saved: SavedPolicy, observations: list[np.ndarray]) -> list[np.ndarray]:
    """What ``a3c evaluate`` does with each observation batch [B, ...], in order (a recurrent policy
    carries its state from one batch to the next): ``play_greedy``'s step, without the env."""
    envs = make_vector_env(saved.config.env_id, 1, frame_stack=saved.config.frame_stack)
    dist = action_dist(envs.single_action_space, saved.config.squash)
    envs.close()
    policy = make_policy(saved.model, len(observations[0]))
    actions = []
    for obs in observations:
        x = obs if obs.dtype == np.uint8 else obs.astype(np.float32)
        actions.append(dist.greedy(policy(x if saved.obs_stats is None else saved.obs_stats.normalize(x))))
    return actions


def env_observations(env_id: str, batch: int, steps: int, seed: int = 0) -> list[np.ndarray]:
    """``steps`` observation batches [batch, ...] of ``env_id`` under random actions, and to reach the
    normalisation's clip, a batch scaled far out."""
    envs = make_vector_env(env_id, batch)
    envs.action_space.seed(seed)
    obs, _ = envs.reset(seed=seed)
    found = [obs.copy()]
    for _ in range(steps - 1):
        obs, *_ = envs.step(envs.action_space.sample())
        found.append(obs.copy())
    envs.close()
    return [*found, (found[-1] * 50).astype(np.float32)]


SLOW = pytest.mark.slow
CASES = {
    "cartpole-obs-norm": ("CartPole-v1", {"obs_norm": True, "hidden_sizes": (8,), "shared_body": True}),
    "pendulum-tanh-state-std": ("Pendulum-v1", {"obs_norm": True, "squash": "tanh", "gaussian_std": "state"}),
    "cartpole": ("CartPole-v1", {}),
    "pendulum-clip": ("Pendulum-v1", {"obs_norm": True, "squash": "clip"}),
    "pendulum-raw-obs": ("Pendulum-v1", {"squash": "tanh"}),
    "multi-discrete": ("tests.support.space_envs:MatchChoices-v0", {}),  # argmax per dimension: int64 [N, D]
    "multi-binary": ("tests.support.space_envs:CopyBits-v0", {}),  # the bits whose logit is > 0: int8 [N, n]
    # The user's network (docs/api.md, "Your network"): its mean and raw log σ, squashed into the bounds.
    "user-network-box": (
        "Pendulum-v1",
        {"model": "tests.support.models:build", "obs_norm": True, "squash": "tanh"},
    ),
}
# Two cases cover every step of the graph in make test-fast; the rest run in make test.
FAST_CASES = ("cartpole-obs-norm", "pendulum-tanh-state-std", "multi-discrete", "multi-binary")
ONNX_CASES = [pytest.param(c, marks=() if c in FAST_CASES else SLOW) for c in CASES]


@pytest.fixture(scope="module")
def cartpole_checkpoint(tmp_path_factory) -> Path:
    return random_checkpoint(tmp_path_factory.mktemp("export") / "policy.pt", "CartPole-v1")


def assert_same_actions(expected: list[np.ndarray], got: list[np.ndarray]) -> None:
    for want, have in zip(expected, got, strict=True):
        assert have.shape == want.shape
        if want.dtype.kind == "i":
            assert have.dtype == want.dtype and np.array_equal(have, want), (have, want)
        else:  # float32 math in another order (numpy's MLP twin vs the graph): a few ulps
            assert have.dtype == np.float32
            np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ONNX_CASES)
def test_onnx_gives_the_a3c_greedy_actions(tmp_path, capsys, case):
    ort = require_extra("onnxruntime", "export")
    env_id, fields = CASES[case]
    checkpoint = random_checkpoint(tmp_path / "policy.pt", env_id, **fields)
    assert call("export", str(checkpoint), "-o", str(tmp_path / "policy.onnx")) == 0
    assert "wrote" in capsys.readouterr().out
    saved = load_policy(checkpoint)
    session = ort.InferenceSession(str(tmp_path / "policy.onnx"))
    assert [i.name for i in session.get_inputs()] == ["obs"]
    assert [o.name for o in session.get_outputs()] == ["action"]
    for batch in (1, 7):  # the batch axis is dynamic
        observations = env_observations(env_id, batch, steps=30)
        got = [session.run(["action"], {"obs": obs})[0] for obs in observations]
        assert_same_actions(a3c_actions(saved, observations), got)
    if env_id == "Pendulum-v1":  # Box [-2, 2]: the bounds were reached, so the mapping was not a no-op
        values = np.concatenate([a.ravel() for a in got])
        assert values.min() >= -2.0 and values.max() <= 2.0 and np.abs(values).max() > 1.9


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated")
@SLOW  # the first torch.jit trace in a process costs ~1.5 s
@pytest.mark.parametrize("case", ["pendulum-clip", "cartpole"])
def test_torchscript_loads_with_torch_jit_and_gives_the_same_actions(tmp_path, capsys, case):
    env_id, fields = CASES[case]
    checkpoint = random_checkpoint(tmp_path / "policy.pt", env_id, **fields)
    assert call("export", str(checkpoint), "-o", str(tmp_path / "policy.ts")) == 0  # .ts: torchscript
    assert "(torchscript:" in capsys.readouterr().out
    extra = {"a3c.json": ""}
    module = torch.jit.load(str(tmp_path / "policy.ts"), _extra_files=extra)
    assert json.loads(extra["a3c.json"])["env_id"] == env_id
    saved = load_policy(checkpoint)
    for batch in (1, 5):
        observations = env_observations(env_id, batch, steps=20)
        with torch.no_grad():
            got = [module(torch.from_numpy(obs)).numpy() for obs in observations]
        assert_same_actions(a3c_actions(saved, observations), got)


def test_a_run_dir_means_its_best_checkpoint_and_the_metadata_names_the_env(tmp_path, cartpole_checkpoint):
    onnx = require_extra("onnx", "export")
    run = tmp_path / "run"
    assert call("export", str(run), "-o", str(tmp_path / "p.onnx")) == 2  # no such run
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "best.pt").write_bytes(cartpole_checkpoint.read_bytes())
    assert call("export", str(run), "-o", str(tmp_path / "p.bin"), "--format", "onnx") == 0
    model = onnx.load(str(tmp_path / "p.bin"))
    props = {p.key: p.value for p in model.metadata_props}
    assert props["checkpoint"] == str(run / "checkpoints" / "best.pt")
    assert props["env_id"] == "CartPole-v1" and props["squash"] == "clip" and props["obs_norm"] == "false"
    assert json.loads(props["signature"]) == {"obs": "float32 [N, 4]", "action": "int64 [N]"}


def test_a_missing_onnx_is_one_line_naming_the_extra(tmp_path, capsys, monkeypatch, cartpole_checkpoint):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
    line = bad(capsys, "export", str(cartpole_checkpoint), "-o", str(tmp_path / "policy.onnx"))
    assert "extra `export`" in line and "pip install -e '.[export]'" in line, line
    assert not (tmp_path / "policy.onnx").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-o", "{tmp}/no/such/dir/p.onnx"], ["--output", "does not exist"]),
        (["-o", "{tmp}/p.onnx", "--format", "tflite"], ["--format", "tflite"]),
        ([], ["-o"]),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, cartpole_checkpoint, args, expected):
    line = bad(capsys, "export", str(cartpole_checkpoint), *(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert all(word in line for word in expected), line


def test_the_checkpoint_itself_is_not_overwritten(tmp_path, capsys, cartpole_checkpoint):
    before = cartpole_checkpoint.read_bytes()
    line = bad(capsys, "export", str(cartpole_checkpoint), "-o", str(cartpole_checkpoint))
    assert "--output" in line and "the checkpoint itself" in line, line
    assert cartpole_checkpoint.read_bytes() == before


def test_a_missing_checkpoint_is_bad_input(tmp_path, capsys):
    line = bad(capsys, "export", str(tmp_path / "nothing.pt"), "-o", str(tmp_path / "p.onnx"))
    assert "nothing.pt" in line and "does not exist" in line
