"""``a3c.train(progress=None)``: the live progress where it can show (a terminal, a Jupyter notebook), off
elsewhere; in a notebook a bar of fixed width that rewrites its line. The trainer is replaced by one that
records what it was given: nothing trains."""

from __future__ import annotations

import io
import sys
import types

import pytest

import a3c
import a3c.training.train
from a3c.training.progress import NOTEBOOK_COLUMNS, Progress, can_show_live


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class ZMQInteractiveShell:
    """The name of IPython's kernel shell (what a notebook runs)."""


@pytest.fixture
def notebook(monkeypatch):
    """This process as a Jupyter kernel would look: IPython loaded, its shell a ZMQInteractiveShell."""
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = ZMQInteractiveShell
    monkeypatch.setitem(sys.modules, "IPython", ipython)


def test_live_where_it_can_show(monkeypatch):
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    assert can_show_live(Terminal()) and not can_show_live(io.StringIO())
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: None  # IPython imported, but no shell (a plain script)
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    assert not can_show_live(io.StringIO())


def test_a_notebook_gets_a_bar_of_fixed_width_rewriting_its_line(notebook):
    stream = io.StringIO()
    progress = Progress(1000, stream=stream)
    assert can_show_live(stream) and progress.live and progress.bar.ncols == NOTEBOOK_COLUMNS
    progress.update(500, episodes=3, last_eval=None, best_eval=None, elapsed=1.0)
    progress.bar.refresh()
    progress.close()
    lines = stream.getvalue().split("\r")
    assert len(lines) >= 2 and all(len(line.rstrip("\n")) <= NOTEBOOK_COLUMNS for line in lines)
    assert "500/1.00k" in stream.getvalue() and "\n" not in stream.getvalue().rstrip("\n")


class RecordingTrainer:
    given: list[bool] = []

    def __init__(self, *args, show_progress: bool, **kwargs):
        RecordingTrainer.given.append(show_progress)

    def run(self) -> int:
        return 0


@pytest.mark.parametrize(
    ("where", "progress", "shown"),
    [("script", None, False), ("notebook", None, True), ("script", True, True), ("notebook", False, False)],
)
def test_train_shows_progress_by_default_where_it_can_show(
    monkeypatch, tmp_path, request, where, progress, shown
):
    if where == "notebook":
        request.getfixturevalue("notebook")
    else:
        monkeypatch.delitem(sys.modules, "IPython", raising=False)
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # not a terminal
    monkeypatch.setattr(a3c.training.train, "Trainer", RecordingTrainer)
    RecordingTrainer.given = []
    run = a3c.train("CartPole-v1", run_dir=tmp_path / "run", serial=True, progress=progress)
    assert run.exit_code == 0 and RecordingTrainer.given == [shown]
