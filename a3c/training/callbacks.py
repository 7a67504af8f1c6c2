"""Callbacks: objects a run calls in the trainer process as its rows arrive, and the two that ship.

A callback has any of these methods (``Callback`` is an optional base class with all of them doing
nothing):

- ``on_start(run)``: once, before the learners start; ``run`` is a ``RunContext`` (the run dir, config.json's
  values, the step the run starts from, and ``run.save_checkpoint()``);
- ``on_eval(row)``, ``on_episode(row)``, ``on_metrics(row)``: each row of eval.csv, episodes.csv and
  metrics.csv as a dict keyed by the file's columns (``a3c.rundir.csvlog``), as it is written;
- ``on_end(summary)``: once, with summary.json's values, after last.pt is saved.

A row hook returning a true value stops the run cleanly (exit 0, summary.json's ``exit_reason``
``callback``). A hook that raises stops the run as a failure (exit 1): ``Callbacks`` turns the exception
into one line naming the callback, the hook and the exception, and stops calling that callback (the others
still get their ``on_end``).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a3c.core.errors import BadInput
from a3c.core.records import ErrorRecord
from a3c.runtime.counters import StopReason

ROW_HOOKS = ("on_eval", "on_episode", "on_metrics")
HOOKS = ("on_start", *ROW_HOOKS, "on_end")


@dataclass(frozen=True)
class RunContext:
    """What ``on_start`` gets: the run dir, config.json's values, whether this is a resume and the
    global_step the run (or the resumed segment) starts from.

    ``save_checkpoint(path=None)`` writes a checkpoint of the current shared state with the trainer's own
    machinery (the format of last.pt: ``a3c.load`` and ``a3c evaluate`` read it) to ``path``, by default
    ``RUN_DIR/checkpoints/saved-<global_step>.pt``, and returns its path (None when the weights are not
    finite: nothing is written then)."""

    run_dir: Path
    config: dict[str, Any]
    resumed: bool
    global_step: int
    save: Callable[[Path | None], Path | None]

    def save_checkpoint(self, path: str | Path | None = None) -> Path | None:
        """Write a checkpoint now (see the class); its path, or None when the weights are not finite."""
        return self.save(None if path is None else Path(path))


class Callback:
    """A base class with every hook doing nothing: subclass it and override the hooks you need (any object
    with one of the hooks will do as well)."""

    def on_start(self, run: RunContext) -> None:
        """Once, before the learners start."""

    def on_eval(self, row: dict[str, Any]) -> bool | None:
        """One eval.csv row; true stops the run."""
        return None

    def on_episode(self, row: dict[str, Any]) -> bool | None:
        """One episodes.csv row; true stops the run."""
        return None

    def on_metrics(self, row: dict[str, Any]) -> bool | None:
        """One metrics.csv row; true stops the run."""
        return None

    def on_end(self, summary: dict[str, Any]) -> None:
        """Once, with summary.json's values."""


class CallbackFailed(Exception):
    """A callback's hook raised: ``record`` is the run's error (source ``callback NAME.HOOK``, one line)."""

    def __init__(self, record: ErrorRecord):
        super().__init__(f"{record.source}: {record.traceback}")
        self.record = record


def describe(callback: Any) -> str:
    """A callback's name in messages: its class name (a function's own name)."""
    return getattr(callback, "__name__", None) or type(callback).__name__


def failure(callback: Any, hook: str, exc: BaseException) -> ErrorRecord:
    """The one-line error of ``callback.hook`` raising ``exc``: the exception and where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"{type(exc).__name__}{': ' + message if message else ''}{where}"
    return ErrorRecord(f"callback {describe(callback)}.{hook}", text)


class Callbacks:
    """The run's callbacks, called hook by hook; a callback that raised is called no more, but for its
    ``on_end`` (when its ``on_start`` did not raise).

    A callback may carry ``stop_reason``, a StopReason's name, for the stop its true return asks for: a3c
    tune's reporter stops as "pruned"; any other as "callback"."""

    def __init__(self, callbacks: Iterable[Any] = ()):
        one = any(callable(getattr(callbacks, hook, None)) for hook in HOOKS)
        if one or isinstance(callbacks, str | bytes | dict) or not isinstance(callbacks, Iterable):
            raise BadInput(
                f"callbacks: {callbacks!r} is not allowed; expected a list of callbacks, e.g. callbacks=[...]"
            )
        self.active = list(callbacks)
        self.started: list[Any] = list(self.active)  # on_start's survivors: each gets on_end
        for callback in self.active:
            if isinstance(callback, type) or not any(callable(getattr(callback, h, None)) for h in HOOKS):
                raise BadInput(
                    f"callbacks: {callback!r} is not allowed; expected an object with at least one of the "
                    f"methods {', '.join(HOOKS)}"
                )

    def _call(
        self, hook: str, argument: Any, callbacks: list[Any] | None = None
    ) -> tuple[list[Any], list[ErrorRecord]]:
        """Call ``hook`` of each callback (of ``callbacks``, else the active ones) that has it: (the callbacks
        that returned true, the errors)."""
        stopping, errors = [], []
        for callback in list(self.active if callbacks is None else callbacks):
            method = getattr(callback, hook, None)
            if not callable(method):
                continue
            try:
                if method(dict(argument) if isinstance(argument, dict) else argument):
                    stopping.append(callback)
            except Exception as exc:
                if callback in self.active:
                    self.active.remove(callback)
                if hook == "on_start":  # never started: nothing of it to end either
                    self.started.remove(callback)
                errors.append(failure(callback, hook, exc))
        return stopping, errors

    def start(self, run: RunContext) -> None:
        """``on_start`` of each; CallbackFailed for the first that raised."""
        self.started = list(self.active)
        _, errors = self._call("on_start", run)
        if errors:
            raise CallbackFailed(errors[0])

    def row(self, hook: str, row: dict[str, Any]) -> StopReason | None:
        """``row`` to each callback's ``hook`` (a copy each): the stop asked for (None: go on); CallbackFailed
        for the first that raised."""
        stopping, errors = self._call(hook, row)
        if errors:
            raise CallbackFailed(errors[0])
        if stopping:
            return StopReason[getattr(stopping[0], "stop_reason", "callback").upper()]
        return None

    def end(self, summary: dict[str, Any]) -> list[ErrorRecord]:
        """``on_end`` of each callback that started, also one a row hook of which raised (a tracker then
        still closes its run, as failed); all of them, whatever one raises: the errors."""
        return self._call("on_end", summary, self.started)[1]


class StopOnNoImprovement(Callback):
    """Stop the run when ``evals`` evaluations in a row have not improved on the best mean_return seen,
    counting from the ``min_evals + 1``-th evaluation on (as Stable-Baselines3's
    StopTrainingOnNoModelImprovement, which stops one evaluation later: after ``evals`` + 1).

    The best counts from the run's start (``on_start``): a resumed run, and each run of a seed list, starts
    counting afresh."""

    def __init__(self, evals: int, min_evals: int = 0):
        if not (isinstance(evals, int) and evals >= 1):
            raise BadInput(f"StopOnNoImprovement evals: {evals!r} is not allowed; expected an integer >= 1")
        if not (isinstance(min_evals, int) and min_evals >= 0):
            raise BadInput(
                f"StopOnNoImprovement min_evals: {min_evals!r} is not allowed; expected an integer >= 0"
            )
        self.evals, self.min_evals = evals, min_evals
        self.best: float | None = None
        self.seen = self.without_improvement = 0

    def on_start(self, run: RunContext) -> None:
        """Forget an earlier run's evaluations."""
        self.best, self.seen, self.without_improvement = None, 0, 0

    def on_eval(self, row: dict[str, Any]) -> bool:
        """True at the ``evals``-th evaluation in a row below or at the best."""
        self.seen += 1
        mean = float(row["mean_return"])
        if self.best is None or mean > self.best:
            self.best, self.without_improvement = mean, 0
            return False
        if self.seen > self.min_evals:
            self.without_improvement += 1
        return self.without_improvement >= self.evals


class CheckpointEvery(Callback):
    """Save a checkpoint every ``steps`` env steps (as Stable-Baselines3's CheckpointCallback), to
    ``RUN_DIR/checkpoints/saved-<global_step>.pt`` (``RunContext.save_checkpoint``): at the first row at or
    past each multiple of ``steps``. ``paths``: the files written, in order."""

    def __init__(self, steps: int):
        if not (isinstance(steps, int) and steps >= 1):
            raise BadInput(f"CheckpointEvery steps: {steps!r} is not allowed; expected an integer >= 1")
        self.steps = steps
        self.run: RunContext | None = None
        self.next_step = steps
        self.paths: list[Path] = []

    def on_start(self, run: RunContext) -> None:
        """Start counting from the run's step (a resume's included)."""
        self.run = run
        self.next_step = (run.global_step // self.steps + 1) * self.steps

    def _take(self, row: dict[str, Any]) -> None:
        step = int(row["global_step"])
        if self.run is not None and step >= self.next_step:
            self.next_step = (step // self.steps + 1) * self.steps
            path = self.run.save_checkpoint()
            if path is not None:
                self.paths.append(path)

    def on_episode(self, row: dict[str, Any]) -> None:
        """Save when the row has crossed the next multiple."""
        self._take(row)

    def on_metrics(self, row: dict[str, Any]) -> None:
        """Save when the row has crossed the next multiple."""
        self._take(row)

    def on_eval(self, row: dict[str, Any]) -> None:
        """Save when the row has crossed the next multiple."""
        self._take(row)
