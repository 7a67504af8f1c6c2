"""TensorBoard event files for a run (extra ``tensorboard``), under stable tags.

charts/…  returns, lengths, throughput, learning rate; losses/…  loss terms, gradient norm, explained
variance; async/…  policy lag. The x axis is always global_step.

The run's config.json goes in as well, into the same event file (no extra run folder, unlike
SummaryWriter.add_hparams): its hyperparameters in the HPARAMS tab (``hparams``; the metric column is
charts/eval_mean_return), and the whole file, versions and command line included, as a table in the TEXT tab
(tag ``config``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from a3c.core.errors import BadInput
from a3c.core.extras import install_hint
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
# config.json's keys that are records of the run, not hyperparameters: in the TEXT tab only.
NOT_HPARAMS = ("versions", "command", "started_at", "resumes")


def hparams(config: dict[str, Any]) -> dict[str, str | int | float]:
    """The HPARAMS tab's values of a config.json: numbers and strings as they are, booleans as true/false,
    lists as comma-separated text (hidden_sizes 64,64), dicts as JSON; None and NOT_HPARAMS left out."""
    values: dict[str, str | int | float] = {}
    for key, value in config.items():
        if key in NOT_HPARAMS or value is None:
            continue
        if isinstance(value, bool):
            value = str(value).lower()
        elif isinstance(value, list | tuple):
            value = ",".join(map(str, value))
        elif isinstance(value, dict):
            value = json.dumps(value, sort_keys=True)
        values[key] = value
    return values


def config_table(config: dict[str, Any]) -> str:
    """config.json as a markdown table for the TEXT tab: key | value (text as is, the rest as JSON)."""
    cells = {key: value if isinstance(value, str) else json.dumps(value) for key, value in config.items()}
    rows = [f"| {key} | {cell.replace('|', '&#124;')} |" for key, cell in cells.items()]
    return "\n".join(["| key | value |", "| --- | --- |", *rows])


def check_available() -> None:
    """BadInput (exit 2) when the tensorboard extra is not installed."""
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        raise BadInput(
            f"--tensorboard: the tensorboard package is not installed; {install_hint('tensorboard')}"
        ) from None


class TensorBoardLog:
    """Writes the trainer's records to ``run_dir/tensorboard``."""

    def __init__(self, run_dir: Path, purge_step: int | None = None):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"), flush_secs=5, purge_step=purge_step)
        self._write_config(run_dir / "config.json")

    def _write_config(self, path: Path) -> None:
        """config.json (the trainer writes it before this log opens) as hparams and as text, if any."""
        from torch.utils.tensorboard.summary import hparams as hparams_summaries

        try:
            config = json.loads(path.read_text())
        except (OSError, ValueError):
            return
        for summary in hparams_summaries(hparams(config), {EVAL_TAGS["mean_return"]: None}):
            self.writer.file_writer.add_summary(summary)
        self.writer.add_text("config", config_table(config))

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
