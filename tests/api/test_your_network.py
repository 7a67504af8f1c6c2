"""Your own network end to end (docs/api.md, "Your network"): a class passed to ``a3c.train`` trains in a
serial run, is checkpointed and loaded back by ``a3c.load``, whose actions are the network's own; the command
line takes its reference (``--model pkg.module:name``), refuses one that does not fit in one line before any
run dir is made, and ``a3c export`` writes an ONNX file that plays the same actions in onnxruntime."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

import a3c
from tests.support.extras import require_extra
from tests.support.models import TwoHeads
from tests.test_cli import bad, call

pytestmark = pytest.mark.slow  # trains, exports and plays networks for seconds


def observations(batch: int = 64, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(batch, 4)).astype(np.float32)


def test_a_python_class_trains_is_checkpointed_and_loads(tmp_path):
    class MyNet(TwoHeads):  # defined here: known by a registered reference, not importable by name
        pass

    run = a3c.train("CartPole-v1", model=MyNet, run_dir=tmp_path / "run", serial=True, max_steps=2000)
    assert run.exit_code == 0 and run.summary["exit_reason"] == "max_steps"
    assert run.config["model"].endswith("test_a_python_class_trains_is_checkpointed_and_loads.<locals>.MyNet")
    saved = torch.load(tmp_path / "run" / "checkpoints" / "last.pt", weights_only=False)
    # Every update stepped the user's network: one per t_max steps of the envs.
    assert saved["updates"] == 2000 // (run.config["t_max"] * run.config["envs_per_worker"])
    net = MyNet(*a3c.algo.user_model.model_spaces(a3c.core.spaces.Spaces((4,), 2)))
    net.load_state_dict({k.removeprefix("net."): v for k, v in saved["model_state"].items()})
    with torch.no_grad():
        expected = net(torch.from_numpy(observations()))[0].argmax(dim=1).numpy()
    policy = a3c.load(tmp_path / "run" / "checkpoints" / "last.pt")
    assert isinstance(policy.saved.model.net, MyNet)
    np.testing.assert_array_equal(policy.predict(observations()), expected)
    assert 0 < expected.mean() < 1  # both actions: the comparison is not of two constants


def test_the_command_line_takes_a_reference_and_the_export_plays_the_same_actions(tmp_path, capsys):
    ort = require_extra("onnxruntime", "export")
    run_dir = tmp_path / "run"
    args = ["--env", "CartPole-v1", "--serial", "--max-steps", "1000", "--run-dir", str(run_dir)]
    assert call("train", *args, "--model", "tests.support.models:build") == 0
    assert json.loads((run_dir / "config.json").read_text())["model"] == "tests.support.models:build"
    assert call("export", str(run_dir), "-o", str(tmp_path / "policy.onnx")) == 0
    assert "wrote" in capsys.readouterr().out
    session = ort.InferenceSession(str(tmp_path / "policy.onnx"))
    policy = a3c.load(run_dir)
    for batch in (1, 64):
        obs = observations(batch, seed=batch)
        np.testing.assert_array_equal(session.run(["action"], {"obs": obs})[0], policy.predict(obs))


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (
            "tests.support.models:wrong_policy_size",
            "forward(obs) gave (2, 1) and (2,); expected (policy output (2, 2)",
        ),
        ("tests.support.models:raises", "raised ValueError: this builder takes images only"),
    ],
)
def test_a_network_that_does_not_fit_is_one_line_and_no_run_dir(tmp_path, capsys, model, expected):
    run_dir = tmp_path / "run"
    args = ["--env", "CartPole-v1", "--serial", "--max-steps", "100", "--run-dir", str(run_dir)]
    line = bad(capsys, "train", *args, "--model", model)
    assert line.startswith(f"error: model: '{model}' ") and expected in line, line
    assert not run_dir.exists()


def test_an_export_that_would_not_play_the_same_actions_or_fails_is_refused(tmp_path, capsys):
    require_extra("onnxruntime", "export")
    from tests.tools.test_export import random_checkpoint

    checkpoint = random_checkpoint(
        tmp_path / "p.pt", "CartPole-v1", model="tests.support.models:DataDependent"
    )
    line = bad(capsys, "export", str(checkpoint), "-o", str(tmp_path / "p.onnx"))
    assert "model: 'tests.support.models:DataDependent' exported to onnx does not give the actions" in line
    assert not (tmp_path / "p.onnx").exists()
    model = "tests.api.test_your_network:build_not_exportable"
    checkpoint = random_checkpoint(tmp_path / "q.pt", "CartPole-v1", model=model)
    line = bad(capsys, "export", str(checkpoint), "-o", str(tmp_path / "q.onnx"))
    assert line.startswith(f"error: model: '{model}' cannot be exported to onnx ("), line
    assert not (tmp_path / "q.onnx").exists()


class NotExportable(TwoHeads):
    """A policy output the ONNX exporter cannot express: an FFT (complex tensors)."""

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, value = super().forward(obs)
        return out + torch.fft.rfft(obs, dim=1).abs()[:, : out.shape[1]], value


def build_not_exportable(observation_space, action_space) -> nn.Module:
    return NotExportable(observation_space, action_space)


def test_a_recurrent_network_exports_with_its_state_as_h_and_c(tmp_path, capsys):
    ort = require_extra("onnxruntime", "export")
    from tests.tools.test_export import random_checkpoint

    checkpoint = random_checkpoint(tmp_path / "l.pt", "CartPole-v1", model="tests.support.models:Lstm")
    assert call("export", str(checkpoint), "-o", str(tmp_path / "l.onnx")) == 0
    session, policy = ort.InferenceSession(str(tmp_path / "l.onnx")), a3c.load(checkpoint)
    h = c = np.zeros((3, 16), np.float32)
    for step in range(8):  # the client carries the state as predict does
        obs = observations(3, seed=step)
        action, h, c = session.run(None, {"obs": obs, "h": h, "c": c})
        np.testing.assert_array_equal(action, policy.predict(obs))
    gru = random_checkpoint(tmp_path / "g.pt", "CartPole-v1", model="tests.support.models:Recurrent")
    line = bad(capsys, "export", str(gru), "-o", str(tmp_path / "g.onnx"))
    assert "is recurrent with a state of 1 tensors; export takes two (h, c)" in line, line
