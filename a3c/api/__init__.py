"""The Python API: ``train`` a run and read its results (``Run``), ``load`` a saved policy and act with it
(``Policy``). The same runs, processes and files as the ``a3c`` command; ``a3c`` re-exports these names."""

from a3c.api.evaluation import evaluate_policy
from a3c.api.policy import Policy, load
from a3c.api.run import Run, TrainingFailed, resume, train
from a3c.training.callbacks import Callback, CheckpointEvery, RunContext, StopOnNoImprovement

__all__ = ["Policy", "Run", "TrainingFailed", "load", "resume", "train"]
__all__ += ["evaluate_policy"]
__all__ += ["Callback", "CheckpointEvery", "RunContext", "StopOnNoImprovement"]  # callbacks
