"""TensorBoard event files for a run (extra ``tensorboard``), under stable tags.

charts/…  returns, lengths, throughput, learning rate; losses/…  loss terms, gradient norm, explained
variance; async/…  policy lag. The x axis is always global_step.
"""

from __future__ import annotations

from pathlib import Path

from a3c.core.errors import BadInput
from a3c.core.records import EpisodeRecord, EvalRecord, MetricsRecord

METRIC_TAGS = {
    "policy_loss": "losses/policy_loss",
    "value_loss": "losses/value_loss",
    "entropy": "losses/entropy",
    "grad_norm": "losses/grad_norm",
    "explained_variance": "losses/explained_variance",
    "learning_rate": "charts/learning_rate",
    "steps_per_s": "charts/steps_per_s",
    "policy_lag_mean": "async/policy_lag_mean",
    "policy_lag_p50": "async/policy_lag_p50",
    "policy_lag_p95": "async/policy_lag_p95",
    "policy_lag_max": "async/policy_lag_max",
}
EVAL_TAGS = {"mean_return": "charts/eval_mean_return", "std_return": "charts/eval_std_return"}


def check_available() -> None:
    """BadInput (exit 2) when the tensorboard extra is not installed."""
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        raise BadInput(
            "--tensorboard: the tensorboard package is not installed; pip install 'a3c[tensorboard]'"
        ) from None


class TensorBoardLog:
    """Writes the trainer's records to ``run_dir/tensorboard``."""

    def __init__(self, run_dir: Path, purge_step: int | None = None):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"), flush_secs=5, purge_step=purge_step)

    def write(self, record) -> None:
        """Add the scalars of an EpisodeRecord, MetricsRecord or EvalRecord at its global_step; others are
        ignored."""
        if isinstance(record, EpisodeRecord):
            self.writer.add_scalar("charts/episodic_return", record.episode_return, record.global_step)
            self.writer.add_scalar("charts/episodic_length", record.length, record.global_step)
        elif isinstance(record, MetricsRecord):
            for field, tag in METRIC_TAGS.items():
                self.writer.add_scalar(tag, getattr(record, field), record.global_step)
        elif isinstance(record, EvalRecord):
            for field, tag in EVAL_TAGS.items():
                self.writer.add_scalar(tag, getattr(record, field), record.global_step)

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.close()
