"""``a3c evaluate`` (``evaluate_policy``) plays on one torch thread, as the run's evaluator, and gives the
caller its own thread count back."""

from __future__ import annotations

import numpy as np
import torch

from a3c.tools import evaluate


def test_greedy_episodes_play_on_one_torch_thread_and_the_callers_count_comes_back(monkeypatch):
    seen = []

    def play(saved, episodes, seed, folder):
        seen.append(torch.get_num_threads())
        return np.zeros(episodes), np.ones(episodes), []

    monkeypatch.setattr(evaluate, "play_episodes", play)
    saved = type("Saved", (), {"path": "best.pt", "config": type("C", (), {"env_id": "X-v0"})()})()
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        report = evaluate.evaluate_policy(saved, 3, 0)
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert report["episodes"] == 3 and report["mean_length"] == 1.0
