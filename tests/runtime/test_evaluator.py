"""The evaluator's choice of best.pt (issue 12, item 6): like with like across confirmed evaluations."""

from __future__ import annotations

import numpy as np
import torch

from a3c.algo.learner import build_shared
from a3c.core.config import Config
from a3c.core.spaces import Spaces
from a3c.run.checkpoints import load_checkpoint, saved_best
from a3c.runtime.bundle import SharedState
from a3c.runtime.evaluator import Evaluator
from a3c.runtime.shared import Counters, Heartbeats, StopSignal


def test_best_pt_compares_evaluations_over_the_same_episodes(tmp_path, monkeypatch):
    # Evaluation 2 reaches the target on its 10 episodes, then its 100 confirmation episodes average 50:
    # 110 episodes at 60. Evaluation 3 scores 120 on its 10. Comparing 120 (10 episodes) with 60 (110)
    # would let evaluation 3 replace best.pt; over their first 10 episodes each, 160 stays the best.
    config = Config(env_id="CartPole-v1", target_return=150.0, eval_episodes=10, confirm_episodes=100)
    model, optimizer = build_shared(config, Spaces((4,), 2))
    (tmp_path / "checkpoints").mkdir()
    shared = SharedState(
        config, Spaces((4,), 2), tmp_path, 0.0, model, optimizer, Counters(1), StopSignal(), Heartbeats(2)
    )
    evaluator = Evaluator(shared, seed=0)
    rounds = iter([np.full(10, 100.0), np.full(10, 160.0), np.full(100, 50.0), np.full(10, 120.0)])
    monkeypatch.setattr(evaluator, "_play", lambda n, stop: (next(rounds)[:n], np.ones(n)))
    marks = []
    for mark in (1.0, 2.0, 3.0):
        with torch.no_grad():
            next(model.parameters()).fill_(mark)  # which evaluation's weights best.pt holds
        record = evaluator.evaluate()
        marks.append((record.episodes, record.mean_return, record.best_selection_mean))
        assert record.best_mean_return == [100.0, 60.0, 60.0][int(mark) - 1]  # eval.csv's mean of best.pt
    evaluator.close()
    assert marks == [(10, 100.0, 100.0), (110, 60.0, 160.0), (10, 120.0, 160.0)]
    best = load_checkpoint(tmp_path / "checkpoints" / "best.pt")
    assert float(next(iter(best["model_state"].values())).flatten()[0]) == 2.0
    assert best["mean_return"] == marks[1][1] and best["selection_mean"] == 160.0
    assert saved_best(tmp_path / "checkpoints" / "best.pt") == (160.0, 60.0)  # what a restarted one compares
